# syntax=docker/dockerfile:1
# The example Spark pipeline (examples/orders_cdc) with the kafkapy PySpark source and sink:
# PySpark needs a Java runtime, nothing from Maven. docker-compose.yml's `spark` service runs it
# against the compose cluster: docker compose --profile spark up -d --build
#
# Debian 12 "bookworm" is pinned because the JRE comes from its archive: openjdk-17-jre-headless
# is bookworm's Java 17 (Debian 13, which an unpinned python:3.11-slim now follows, ships 21
# only). See the Dockerfile at the repo root for pinning a digest.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY ext ./ext
COPY kafkapy ./kafkapy
RUN pip wheel --no-cache-dir --wheel-dir /wheels '.[spark]'

FROM ${PYTHON_IMAGE}
# Slim images drop /usr/share/man, where the JRE's postinst points its update-alternatives links.
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
    && rm -rf /var/lib/apt/lists/*
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links /wheels 'kafkapy[spark]'
RUN groupadd --system --gid 1000 spark \
    && useradd --system --uid 1000 --gid spark --home-dir /var/lib/spark --shell /usr/sbin/nologin spark \
    && mkdir -p /var/lib/spark \
    && chown spark:spark /var/lib/spark
WORKDIR /opt/kafkapy
COPY examples ./examples
COPY docker/spark-pipeline.sh ./docker/spark-pipeline.sh
# Spark's Python workers must use an interpreter that can import kafkapy (docs/spark.md).
ENV PYSPARK_PYTHON=python \
    SPARK_LOCAL_IP=127.0.0.1 \
    HOME=/var/lib/spark
USER spark
VOLUME /var/lib/spark
ENTRYPOINT ["sh", "/opt/kafkapy/docker/spark-pipeline.sh"]
