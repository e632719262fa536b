#!/usr/bin/env bash
# base-image.sh REF: make sure the Debian base image REF (default debian:bookworm-slim) exists in
# the local Docker engine. It is used as is when present, pulled when a registry answers, and
# otherwise made from Debian's packages with debootstrap (minbase) and `docker import`, using the
# mirror named in this machine's own apt sources. Needs root for debootstrap.
set -euo pipefail
ref=${1:-debian:bookworm-slim}
suite=${SUITE:-bookworm}

if docker image inspect "$ref" >/dev/null 2>&1; then
  echo "base image $ref: present" >&2
  exit 0
fi
if timeout 60 docker pull "$ref" >/dev/null 2>&1; then
  echo "base image $ref: pulled" >&2
  exit 0
fi
echo "base image $ref: not found and cannot be pulled; making it from Debian's packages (debootstrap)" >&2

mirror=${MIRROR:-}
if [ -z "$mirror" ]; then
  # deb822 sources (URIs: ...) first, then one-line sources (deb URL suite ...); skip security.
  mirror=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '/^URIs:/ {print $2}' | grep -v security | head -n1 || true)
fi
if [ -z "$mirror" ]; then
  mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | awk '$1 == "deb" {for (i = 2; i <= NF; i++) if ($i ~ /^(https?|file):/) {print $i; break}}' | grep -v security | head -n1 || true)
fi
mirror=${mirror:-http://deb.debian.org/debian}
echo "base image $ref: mirror $mirror" >&2

if ! command -v debootstrap >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "base-image: debootstrap is missing; install it (apt-get install debootstrap) or provide $ref" >&2
    exit 1
  fi
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi

dir=$(mktemp -d /tmp/runtimectl-base.XXXXXX)
trap 'rm -rf "$dir"' EXIT
debootstrap --variant=minbase "$suite" "$dir" "$mirror" >&2
# Keep the image small, as the slim images are.
rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/* "$dir"/usr/share/doc/* "$dir"/usr/share/man/*
tar -C "$dir" -c . | docker import -c 'CMD ["bash"]' - "$ref" >/dev/null
echo "base image $ref: made from Debian's packages" >&2
