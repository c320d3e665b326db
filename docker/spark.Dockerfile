# The example Spark pipeline (examples/orders_cdc) with the kafkapy PySpark source and sink:
# PySpark needs a Java runtime, nothing from Maven. docker-compose.yml's `spark` service runs it
# against the compose cluster: docker compose --profile spark up -d --build
FROM python:3.11-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc openjdk-17-jre-headless procps \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/kafkapy
COPY pyproject.toml setup.py README.md ./
COPY ext ./ext
COPY kafkapy ./kafkapy
RUN pip install --no-cache-dir cython && pip install --no-cache-dir '.[spark]'
COPY examples ./examples
COPY docker/spark-pipeline.sh ./docker/spark-pipeline.sh
# Spark's Python workers must use this interpreter (the one with kafkapy installed).
ENV PYSPARK_PYTHON=python
VOLUME /var/lib/spark
ENTRYPOINT ["sh", "/opt/kafkapy/docker/spark-pipeline.sh"]
