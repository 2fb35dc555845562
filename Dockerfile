# Dockerfile - emberd on Debian 12 slim, in two stages: the build stage has
# the compiler and the -dev packages (the Makefile's DEB_PKGS without the
# test-only ones) and runs `make install`; the runtime stage has only the
# shared libraries the two binaries load, and runs as a non-root user.
#
#   docker build -t ember .
#   docker run -p 127.0.0.1:8080:8080 -v "$PWD/models:/models:ro" ember
#
# The binaries pick their CPU kernels at start-up, so the image runs on any
# x86-64 host whatever the build host had. Models are never baked in: mount
# them on /models.

FROM debian:12-slim AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      gcc g++ make pkg-config \
      libmicrohttpd-dev libjansson-dev libuv1-dev \
      libxnnpack-dev libpthreadpool-dev libsentencepiece-dev libpcre2-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN make -j"$(nproc)" all \
 && make install DESTDIR=/out PREFIX=/usr \
 && strip /out/usr/bin/emberd /out/usr/bin/ember

FROM debian:12-slim
# One package per shared library that emberd and ember link (ldd); their
# own dependencies (gnutls...) come with them. libc6 is in the
# base image. tests/integration/test_deploy.sh checks this list.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libmicrohttpd12 libjansson4 libuv1 \
      libpthreadpool0 libsentencepiece0 libpcre2-8-0 \
      libstdc++6 libgcc-s1 \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 ember \
 && useradd --system --uid 10001 --gid ember --no-create-home \
      --home-dir /nonexistent --shell /usr/sbin/nologin ember
COPY --from=build /out/usr/bin/emberd /out/usr/bin/ember /usr/bin/
# emberd.conf, once the tree has it (every key commented out: the
# environment below and flags decide).
COPY --from=build /out/etc/ember/ /etc/ember/
COPY docker/entrypoint.sh /usr/local/bin/ember-entrypoint
COPY docker/healthcheck.sh /usr/local/bin/ember-healthcheck

ENV EMBER_HOST=0.0.0.0 \
    EMBER_PORT=8080 \
    EMBER_MODEL=/models/model.gguf
VOLUME /models
EXPOSE 8080
# Numeric, so that Kubernetes' runAsNonRoot can verify it.
USER 10001:10001
# The HTTP probe is bash's /dev/tcp (no curl in the image). /health answers
# 503 while the model loads: the start period covers a large model.
HEALTHCHECK --interval=30s --timeout=5s --start-period=5m --retries=3 \
  CMD ["/usr/local/bin/ember-healthcheck"]
ENTRYPOINT ["/usr/local/bin/ember-entrypoint"]
