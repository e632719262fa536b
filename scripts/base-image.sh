#!/usr/bin/env bash
# base-image.sh REF: make sure the Debian base image REF (default debian:bookworm-slim) exists in
# the local Docker engine. It is used as is when present, pulled when a registry answers, and
# otherwise made from Debian's packages with debootstrap (minbase) and `docker import`, using the
# mirror named in this machine's own apt sources. Needs root for debootstrap.
set -euo pipefail
ref=${1:-debian:bookworm-slim}
suite=${SUITE:-bookworm}

# root_mode REF: the mode of the root directory ("./") in the image's first layer, as docker save
# writes it (drwx------ for a base image made by an earlier version of this script).
root_mode() {
  docker save "$1" | tar -xO --wildcards '*/layer.tar' 2>/dev/null | tar -tv 2>/dev/null | awk '$NF == "./" {print $1; exit}'
}

if docker image inspect "$ref" >/dev/null 2>&1; then
  if [ "$(docker image inspect --format '{{len .RootFS.Layers}}' "$ref")" = 1 ] && [ "$(root_mode "$ref")" = drwx------ ]; then
    # Docker's overlay storage ignores the mode of an image's root, rootless Podman's does not:
    # there the session user could not exec anything. Flatten it again with a 0755 root.
    echo "base image $ref: its root directory has mode 0700; re-importing it with 0755 (rootless Podman needs it)" >&2
    cid=$(docker create "$ref" bash)
    trap 'docker rm -f "$cid" >/dev/null 2>&1 || true' EXIT
    docker export "$cid" | tar --delete -f - .dockerenv | docker import -c 'CMD ["bash"]' - "$ref" >/dev/null
  fi
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
# mktemp -d made the directory 0700, and tar records it as the image's root ("./"): Docker's
# overlay storage ignores that mode, rootless Podman's does not (nothing could be executed).
chmod 0755 "$dir"
tar -C "$dir" -c . | docker import -c 'CMD ["bash"]' - "$ref" >/dev/null
echo "base image $ref: made from Debian's packages" >&2
