#!/usr/bin/env bash
# The Python client's tests (clients/python/tests) against a real `runtimectl serve` that they
# start from bin/runtimectl. Finds a python3 with pytest and pip, or installs Debian's
# python3-pytest and python3-pip (as root on Debian, as CI runs), then runs pytest; its exit
# status is this script's.
set -euo pipefail
cd "$(dirname "$0")/.."

has() { "$1" -c 'import pytest, pip' >/dev/null 2>&1; }
py=""
for cand in ${PYTHON:-} python3 /usr/bin/python3; do
  if command -v "$cand" >/dev/null 2>&1 && has "$cand"; then py=$cand; break; fi
done
if [ -z "$py" ]; then
  if [ "$(id -u)" -eq 0 ] && [ -f /etc/debian_version ]; then
    echo "pytest: no python3 with pytest and pip; installing Debian's python3-pytest and python3-pip" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends python3-pytest python3-pip >/dev/null
    py=/usr/bin/python3
  else
    echo "pytest: no python3 with pytest and pip: install python3-pytest and python3-pip (Debian) and run again" >&2
    exit 1
  fi
fi
[ -x bin/runtimectl ] || { echo "pytest: no bin/runtimectl; run \`make build\` first" >&2; exit 1; }
echo "pytest: $($py --version) $($py -m pytest --version 2>&1 | head -1)" >&2
exec "$py" -m pytest -p no:cacheprovider -rfE "$@" clients/python/tests
