#!/bin/sh
# Runs test_kernel.py in a container with the Python session image's packages.
# The image's first layers are the same lines as Dockerfile.python, so the layer cache is shared;
# keep them in step with it. Needs the local debian:bookworm-slim image (nothing is pulled).
# RUNTIMECTL_BENCH=1 ./run_tests.sh also prints snapshot timings (100 MiB ndarray, 1M x 10 DataFrame).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
docker build -q -t runtimectl-pytest -f - "$here/.." >/dev/null <<'DOCKERFILE'
ARG BASE=debian:bookworm-slim
FROM ${BASE}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      python3 python3-dill python3-numpy python3-pandas python3-matplotlib ca-certificates procps \
      python3-ipython python3-matplotlib-inline \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb
ENV MPLBACKEND=Agg MPLCONFIGDIR=/tmp/.matplotlib PYTHONDONTWRITEBYTECODE=1 LANG=C.UTF-8
DOCKERFILE
exec docker run --rm -v "$here":/k:ro -w /k --user 1000 -e RUNTIMECTL_OUTPUTS=/tmp/out \
    -e RUNTIMECTL_BENCH="${RUNTIMECTL_BENCH:-}" runtimectl-pytest python3 -m unittest -v ${RUNTIMECTL_PYTEST:-test_kernel test_ipython}
