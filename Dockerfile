# syntax=docker/dockerfile:1
# A kafkapy node. Build from the repo root: docker build -t kafkapy .
# `docker run -p 9092:9092 kafkapy` is a single combined-mode node on localhost:9092;
# docker-compose.yml runs three controllers and three brokers from this same image.
#
# The base is pinned to Debian 12 "bookworm" (the apt package names below are checked against
# that release by tests/unit/test_images.py); a plain python:3.11-slim follows Debian's newest
# release. For byte-for-byte rebuilds, pin the digest as well:
#   docker build --build-arg PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:<digest> .
# (`docker buildx imagetools inspect python:3.11-slim-bookworm` prints the current digest).
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---- build: compile the Cython extensions into a wheel, and collect the dependencies' wheels.
FROM ${PYTHON_IMAGE} AS build
# gcc alone (with --no-install-recommends) lacks the C library headers (stdlib.h): libc6-dev.
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY ext ./ext
COPY kafkapy ./kafkapy
# pip builds the project in an isolated environment with its build requirements (setuptools,
# Cython) from pyproject.toml; a failing compile fails the build.
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

# ---- runtime: no compiler, a non-root user owning the data directory.
FROM ${PYTHON_IMAGE}
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links /wheels kafkapy
RUN groupadd --system --gid 1000 kafkapy \
    && useradd --system --uid 1000 --gid kafkapy --home-dir /var/lib/kafkapy --shell /usr/sbin/nologin kafkapy \
    && mkdir -p /var/lib/kafkapy \
    && chown kafkapy:kafkapy /var/lib/kafkapy
COPY docker/entrypoint.sh /opt/kafkapy/docker/entrypoint.sh
USER kafkapy
WORKDIR /var/lib/kafkapy
VOLUME /var/lib/kafkapy
EXPOSE 9092 9093
# Healthy once the broker is registered and unfenced (listed in its own Metadata answer);
# docker-compose.yml gives controllers and brokers on other ports their own checks.
HEALTHCHECK --interval=5s --timeout=5s --start-period=10s --retries=12 \
    CMD ["python", "-m", "kafkapy.testing.healthcheck", "broker", "--bootstrap", "localhost:9092"]
# Formats storage with $KAFKAPY_CLUSTER_ID when set (a cluster's shared id), then runs
# `kafkapy server` with the arguments below or the container's command. Run through sh so the
# script needs no executable bit.
ENTRYPOINT ["sh", "/opt/kafkapy/docker/entrypoint.sh"]
CMD ["--override", "log.dirs=/var/lib/kafkapy", \
     "--override", "listeners=PLAINTEXT://0.0.0.0:9092,CONTROLLER://0.0.0.0:9093", \
     "--override", "advertised.listeners=PLAINTEXT://localhost:9092", \
     "--override", "controller.quorum.voters=1@localhost:9093"]
