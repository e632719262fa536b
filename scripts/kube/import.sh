#!/bin/bash
# Import Docker images into the local cluster's containerd (namespace k8s.io, where the kubelet looks), so that
# pods find them with imagePullPolicy IfNotPresent: there is no registry to pull from. Usage: import.sh IMAGE...
# An image is imported again only when Docker's image ID differs from the one recorded on the imported image
# (label io.runtimectl.docker-id), so a rebuilt image replaces the stale one and an unchanged one costs nothing.
# A name without a registry gets containerd's docker.io/ prefix; pod specs name it as Docker does (runtimectl/bash:TAG).
set -euo pipefail
SOCK=/run/kube-local/containerd.sock
C="ctr -a $SOCK -n k8s.io"
die() { echo "import.sh: $*" >&2; exit 1; }
[ $# -gt 0 ] || die "usage: import.sh IMAGE..."
[ -S $SOCK ] || die "no cluster: $SOCK missing; run make kube-up"
command -v docker >/dev/null || die "docker not found: images are imported from Docker"
for img in "$@"; do
  id=$(docker image inspect -f '{{.Id}}' "$img" 2>/dev/null) || die "no Docker image $img; build it with \`runtimectl image build\` (or make images)"
  ref=$img; case ${ref##*/} in *:*) ;; *) ref=$ref:latest ;; esac
  case ${ref%%/*} in *.*|*:*|localhost) ;; *) case $ref in */*) ref=docker.io/$ref ;; *) ref=docker.io/library/$ref ;; esac ;; esac
  if $C images ls "name==$ref" 2>/dev/null | grep -q "io.runtimectl.docker-id=$id"; then
    echo "image $img up to date"; continue
  fi
  s=$(date +%s)
  docker save "$img" | $C images import - >/dev/null || die "import of $img failed"
  $C images label "$ref" "io.runtimectl.docker-id=$id" >/dev/null
  echo "image $img imported in $(( $(date +%s) - s ))s"
done
