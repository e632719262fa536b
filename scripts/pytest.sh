#!/usr/bin/env bash
# The Python client's tests (clients/python/tests) against a real `runtimectl serve` that they
# start from bin/runtimectl. Finds a python3 with pytest and pip, else has scripts/test-deps.sh
# install Debian's (as root on Debian) or say what to install, then runs pytest; its exit status
# is this script's.
set -euo pipefail
cd "$(dirname "$0")/.."

has() { "$1" -c 'import pytest, pip' >/dev/null 2>&1; }
py=""
for cand in ${PYTHON:-} python3 /usr/bin/python3; do
  if command -v "$cand" >/dev/null 2>&1 && has "$cand"; then py=$cand; break; fi
done
if [ -z "$py" ]; then
  # The one place that knows the tests' packages installs them (or says what to run).
  bash scripts/test-deps.sh
  py=/usr/bin/python3
fi
[ -x bin/runtimectl ] || { echo "pytest: no bin/runtimectl; run \`make build\` first" >&2; exit 1; }
echo "pytest: $($py --version) $($py -m pytest --version 2>&1 | head -1)" >&2
exec "$py" -m pytest -p no:cacheprovider -rfE "$@" clients/python/tests
