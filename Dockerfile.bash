# The bash session image: one persistent bash under the runtimectl agent.
# `runtimectl image build bash` sends this file with the agent binary and kernels/ as context.
ARG BASE=debian:bookworm-slim
FROM ${BASE}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      bash coreutils procps ca-certificates \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb
RUN useradd --uid 1000 --user-group --create-home --home-dir /home/user --shell /bin/bash user \
 && mkdir -p /var/lib/runtimectl /workspace/outputs \
 && chown 1000:1000 /workspace /workspace/outputs \
 && chmod 0700 /var/lib/runtimectl
COPY runtime-agent /usr/local/bin/runtime-agent
COPY runtime-egress /usr/local/bin/runtime-egress
COPY kernels/bash/ /opt/runtimectl/kernels/bash/
ENV PAGER=cat GIT_TERMINAL_PROMPT=0 DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8
LABEL io.runtimectl.agent="1" io.runtimectl.lang="bash"
WORKDIR /workspace
ENTRYPOINT ["/usr/local/bin/runtime-agent", "serve", "--lang", "bash"]
