# haproxy.Dockerfile - Debian 12's haproxy for docker/compose.yaml, on the
# same debian:12-slim base as the emberd image (no other registry image).
# The configuration is mounted (docker/haproxy.cfg), so editing it needs no
# rebuild, only a restart.
FROM debian:12-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends haproxy \
 && rm -rf /var/lib/apt/lists/*
# Port 8080 needs no privilege: run as the package's own user.
USER haproxy
EXPOSE 8080
# -db: foreground, logs on stdout; -W: master-worker, so SIGUSR2 reloads.
CMD ["haproxy", "-W", "-db", "-f", "/etc/haproxy/haproxy.cfg"]
