#!/usr/bin/env bash
# test-deps.sh: the one place that knows what the tests need on the machine beside Go.
#
#   bash scripts/test-deps.sh            check everything `make test` needs; install what is missing
#   bash scripts/test-deps.sh --check    only check: one line per missing piece, exit 1 if any
#   bash scripts/test-deps.sh docker     only make sure a Docker engine answers (what .ci/run needs first)
#
# As root on Debian or Ubuntu it installs what is missing from the distribution's packages (and
# starts dockerd when no engine answers), saying what it installs; anywhere else it prints one line
# per missing package with the command to run, and fails. `make test` runs it first; `make
# test-short` needs none of it.
#
# Who needs what (add a line to NEEDS when a test needs a new package):
#   the Docker engine            every integration test (docker.io, when no engine answers)
#   the base image               debootstrap, when debian:bookworm-slim is neither present nor pullable
#   internal/podmantest          podman, its init catatonit, newuidmap/newgidmap (uidmap)
#   ./kube (scripts/kube)        containerd, runc, the CNI plugins, openssl, curl, ip, ps
#   make test-python             python3 with pytest and pip
#   the Jupyter tests            jupyter_client, nbclient, nbconvert, ipykernel (the reference kernel),
#                                pandas and matplotlib for ipykernel's runs, jupyter-kernelspec
set -euo pipefail

# NEEDS: "package|how to tell it is there" — a command name, an absolute path, or py:MODULE
# (importable by /usr/bin/python3).
NEEDS=(
  "debootstrap|debootstrap"
  "podman|podman"
  "catatonit|/usr/libexec/podman/catatonit"
  "uidmap|newuidmap"
  "containerd|containerd"
  "runc|runc"
  "containernetworking-plugins|/usr/lib/cni/bridge"
  "openssl|openssl"
  "curl|curl"
  "iproute2|ip"
  "procps|ps"
  "python3-pytest|py:pytest"
  "python3-pip|py:pip"
  "python3-jupyter-client|py:jupyter_client"
  "python3-nbclient|py:nbclient"
  "jupyter-nbconvert|py:nbconvert"
  "python3-ipykernel|py:ipykernel"
  "python3-pandas|py:pandas"
  "python3-matplotlib|py:matplotlib"
  "jupyter-client|jupyter-kernelspec"
)

can_install() { [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; }

present() { # how: is it there?
  case "$1" in
    py:*) [ -x /usr/bin/python3 ] && /usr/bin/python3 -c "import ${1#py:}" >/dev/null 2>&1 ;;
    /*) [ -e "$1" ] ;;
    *) command -v "$1" >/dev/null 2>&1 ;;
  esac
}

apt_updated=
apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  if [ -z "$apt_updated" ]; then apt-get update -qq >/dev/null; apt_updated=1; fi
  apt-get install -y -qq "$@" >/dev/null
}

docker_engine() {
  docker info >/dev/null 2>&1 && return 0
  if ! can_install; then
    echo "test-deps: no Docker engine answers: install and start one (Debian: apt-get install docker.io; dockerd)" >&2
    return 1
  fi
  if ! command -v dockerd >/dev/null 2>&1; then
    echo "test-deps: no Docker engine answers; installing docker.io" >&2
    apt_install docker.io
  fi
  echo "test-deps: starting dockerd (its log: /tmp/dockerd.log)" >&2
  (dockerd >/tmp/dockerd.log 2>&1 &)
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && return 0; sleep 1; done
  echo "test-deps: dockerd did not answer within 60 s; see /tmp/dockerd.log" >&2
  return 1
}

packages() { # check: 1 to only check
  local missing=() entry
  for entry in "${NEEDS[@]}"; do
    present "${entry#*|}" || missing+=("${entry%%|*}")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$1" = 1 ] || ! can_install; then
    for p in "${missing[@]}"; do
      echo "test-deps: missing $p: apt-get install -y $p (as root), or \`make test-short\` for the tests that need nothing" >&2
    done
    return 1
  fi
  echo "test-deps: installing ${missing[*]}" >&2
  apt_install "${missing[@]}"
  local still=()
  for entry in "${NEEDS[@]}"; do
    present "${entry#*|}" || still+=("${entry%%|*}")
  done
  if [ ${#still[@]} -gt 0 ]; then
    echo "test-deps: still missing after apt-get install: ${still[*]}" >&2
    return 1
  fi
}

case "${1:-}" in
  docker) docker_engine ;;
  --check)
    rc=0
    docker info >/dev/null 2>&1 || { echo "test-deps: no Docker engine answers" >&2; rc=1; }
    packages 1 || rc=1
    exit $rc ;;
  "") docker_engine; packages 0; echo "test-deps: everything the tests need is here" >&2 ;;
  *) echo "test-deps: unknown argument $1: use no argument, --check or docker" >&2; exit 2 ;;
esac
