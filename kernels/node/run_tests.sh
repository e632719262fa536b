#!/bin/sh
# Runs test_kernel.js in a container with Debian's nodejs, as the node session image has it.
# The image's first layer is the same package list as Dockerfile.node; keep them in step.
# Needs the local debian:bookworm-slim image (nothing is pulled).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
docker build -q -t runtimectl-nodetest -f - "$here" >/dev/null <<'DOCKERFILE'
ARG BASE=debian:bookworm-slim
FROM ${BASE}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      nodejs node-acorn ca-certificates procps \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb
ENV LANG=C.UTF-8
DOCKERFILE
exec docker run --rm -v "$here":/k:ro -w /k --user 1000 -e HOME=/tmp runtimectl-nodetest node --test test_kernel.js
