# syntax=docker/dockerfile:1
# The metricsched operator image: the package and its dependencies as wheels on a slim
# Python, run as a non-root user (uid 65532) with `metricsched run` as the default command.
#
#   docker build -t <registry>/metricsched:0.1.0 .    (or: make docker-build IMG=...)
#   docker push <registry>/metricsched:0.1.0
#
# The Helm chart runs it with a read-only root filesystem and a writable /tmp.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# --- builder: the project's wheel and a wheel of every dependency ------------------------
FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
WORKDIR /src
# setup.cfg reads the version from the package and the long description from README.md.
COPY pyproject.toml setup.cfg README.md ./
COPY operator/ operator/
RUN pip wheel --wheel-dir /wheels .

# --- runtime ------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="metricsched" \
      org.opencontainers.image.description="A metrics-aware Kubernetes scheduler (kopf operator)" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HOME=/tmp
# Install from the builder's wheels only (no index, no compiler, no wheel left behind).
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links=/wheels /wheels/metricsched-*.whl \
    && groupadd --system --gid 65532 nonroot \
    && useradd --system --uid 65532 --gid 65532 --no-create-home \
       --home-dir /nonexistent --shell /usr/sbin/nologin nonroot
USER 65532:65532
WORKDIR /tmp
# /metrics and /healthz + /readyz (METRICSCHED_METRICS_PORT, METRICSCHED_HEALTH_PORT).
EXPOSE 8080 8081
ENTRYPOINT ["metricsched"]
CMD ["run"]
