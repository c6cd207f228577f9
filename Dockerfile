# syntax=docker/dockerfile:1
# ragsift image: one image, every service (`ragsift api`, `ragsift worker <name>`).
#   docker build -t ragsift:dev .
# Stage 1 builds a virtualenv from the locked dependencies; stage 2 copies it
# into a slim runtime that runs as an unprivileged user.

ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
# Same uv as scripts/install. The image installs requirements-runtime.lock:
# ragsift and its reranker extra, at the versions requirements.lock pins for the
# tests, without the test, lint and bench tools (scripts/lock writes both files).
ARG UV_VERSION=0.13.8
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 \
    UV_COMPILE_BYTECODE=1 UV_LINK_MODE=copy UV_PYTHON_DOWNLOADS=never
RUN python -m pip install "uv==${UV_VERSION}"
WORKDIR /src
# Dependencies first: this layer is reused until the lock changes.
COPY requirements-runtime.lock ./
RUN uv venv /opt/venv --python /usr/local/bin/python \
 && uv pip sync --python /opt/venv/bin/python requirements-runtime.lock
COPY pyproject.toml README.md ./
COPY ragsift ./ragsift
RUN uv pip install --python /opt/venv/bin/python --no-deps . \
 && /opt/venv/bin/ragsift --help >/dev/null

FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="ragsift" \
      org.opencontainers.image.description="Streaming retrieval for RAG with calibrated confidence" \
      org.opencontainers.image.licenses="Apache-2.0"
# A fixed numeric uid/gid so Kubernetes' runAsNonRoot can verify it.
ARG RAGSIFT_UID=10001
RUN groupadd --system --gid ${RAGSIFT_UID} ragsift \
 && useradd --system --uid ${RAGSIFT_UID} --gid ragsift --home-dir /var/lib/ragsift \
      --shell /usr/sbin/nologin ragsift \
 && install -d -o ragsift -g ragsift -m 0750 /var/lib/ragsift
COPY --from=build /opt/venv /opt/venv
# The API answers queries on 8080 and serves /healthz, /readyz and /metrics on
# 9464; workers serve theirs on the Faust web port (6066) and set
# HEALTHCHECK_URL accordingly. Outside a container ragsift binds loopback by
# default; inside one the container's network is the boundary, so the image
# binds every interface (the API still refuses to start without credentials).
# The probe bank's vectors are kept under the data dir, which k8s and compose mount
# writable (the root file system is read-only in k8s): not under a HOME that a
# runtime may leave unset.
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    RAGSIFT_DATA_DIR=/var/lib/ragsift \
    RAGSIFT_CALIBRATION_PROBE_VECTORS_DIR=/var/lib/ragsift/cache/probe-vectors \
    RAGSIFT_API_HOST=0.0.0.0 \
    RAGSIFT_API_METRICS_HOST=0.0.0.0 \
    RAGSIFT_WORKER_WEB_HOST=0.0.0.0 \
    HEALTHCHECK_URL=http://127.0.0.1:9464/healthz
USER ${RAGSIFT_UID}:${RAGSIFT_UID}
WORKDIR /var/lib/ragsift
EXPOSE 8080 9464 6066
# No curl in the slim image: the interpreter that is already there does the probe.
HEALTHCHECK --interval=15s --timeout=3s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import os, sys, urllib.request; sys.exit(0 if urllib.request.urlopen(os.environ['HEALTHCHECK_URL'], timeout=2).status == 200 else 1)"]
ENTRYPOINT ["ragsift"]
CMD ["api"]
