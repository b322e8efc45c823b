# syntax=docker/dockerfile:1
# The metricsched operator image: the package and its dependencies in a virtual environment
# on a slim Python, run as a non-root user (uid 65532) with `metricsched run` by default.
#
#   make image            podman, offline: a Debian bookworm base made with mmdebstrap and
#                         wheels fetched on the host (hack/image.py; see the README)
#   docker build -t <registry>/metricsched:0.2.0 .      python:3.11-slim, wheels from PyPI
#
# Both build exactly the versions of constraints.txt (hack/lock.py writes it). The base is
# pinned by digest: a tag moves, a digest does not. To move to a newer base, read the
# tag's digest (`skopeo inspect --format '{{.Digest}}' docker://python:3.11-slim-bookworm`)
# and replace it here.
#
# The Helm chart runs it with a read-only root filesystem and a writable /tmp.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:2e32f7d302adc1c37428355c1e646897c0c53f4fd60b6a551245fb90ee129f91

# --- builder: the package and its dependencies, installed into /opt/metricsched ---------
FROM ${PYTHON_IMAGE} AS builder
# pip's configuration: none by default (PyPI). `make image` passes a file that sends pip to
# the wheels it mounts at /mnt/wheels and forbids any index: that build has no network.
ARG PIP_CONFIG_FILE=/dev/null
# Every pip step (the build backend's isolated environment too) takes the exact versions.
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_CONSTRAINT=/src/constraints.txt
WORKDIR /src
# setup.cfg reads the version from the package and the long description from README.md.
COPY pyproject.toml setup.cfg README.md constraints.txt ./
COPY operator/ operator/
# A virtual environment without pip (the base's pip installs into it), no compiled caches
# (the root filesystem is read-only, so Python compiles in memory either way), no tests of
# dependencies, no kubernetes.aio: the client's asyncio twin (41 MB) nothing imports, and
# none of numpy's parts that `import numpy` does not load and metricsched never uses
# (random, fft, polynomial, ma, f2py, distutils, testing, C headers, type stubs: 6.9 MB;
# tests/image checks the operator starts and schedules with what is left).
RUN pip wheel --no-cache-dir --wheel-dir /wheels . \
    && python3 -m venv --without-pip /opt/metricsched \
    && pip --python /opt/metricsched/bin/python install --no-cache-dir --no-index --no-compile \
       --find-links /wheels /wheels/metricsched-*.whl \
    && find /opt/metricsched -depth \( -name __pycache__ -o -name tests \
       -o -path '*/site-packages/kubernetes/aio' \
       -o -path '*/site-packages/numpy/random' -o -path '*/site-packages/numpy/fft' \
       -o -path '*/site-packages/numpy/polynomial' -o -path '*/site-packages/numpy/ma' \
       -o -path '*/site-packages/numpy/f2py' -o -path '*/site-packages/numpy/distutils' \
       -o -path '*/site-packages/numpy/testing' -o -path '*/site-packages/numpy/_core/include' \
       -o -path '*/site-packages/numpy/*.pyi' \) -exec rm -rf {} +

# --- runtime ------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE}
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    PATH=/opt/metricsched/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# The account the chart runs as: uid and gid 65532, "nonroot" as in distroless images.
RUN groupadd --system --gid 65532 nonroot \
    && useradd --system --uid 65532 --gid 65532 --no-create-home \
       --home-dir /nonexistent --shell /usr/sbin/nologin nonroot
COPY --from=builder /opt/metricsched /opt/metricsched
USER 65532:65532
WORKDIR /tmp
# /metrics (HTTPS) and /healthz + /readyz (METRICSCHED_METRICS_PORT, METRICSCHED_HEALTH_PORT).
EXPOSE 8080 8081
ENTRYPOINT ["metricsched"]
CMD ["run"]
# Last, so that a new commit changes the image's configuration and no layer.
ARG VERSION=0.2.0
ARG REVISION=""
ARG SOURCE=""
LABEL org.opencontainers.image.title="metricsched" \
      org.opencontainers.image.description="A metrics-aware Kubernetes scheduler (kopf operator)" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE}"
