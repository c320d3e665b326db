# A kafkapy node. Build from the repo root: docker build -t kafkapy .
# `docker run -p 9092:9092 kafkapy` is a single combined-mode node on localhost:9092;
# docker-compose.yml runs three controllers and three brokers from this same image.
FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends gcc && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/kafkapy
COPY pyproject.toml setup.py README.md ./
COPY ext ./ext
COPY kafkapy ./kafkapy
RUN pip install --no-cache-dir cython && pip install --no-cache-dir .
COPY docker/entrypoint.sh ./docker/entrypoint.sh
VOLUME /var/lib/kafkapy
EXPOSE 9092 9093
# Formats storage with $KAFKAPY_CLUSTER_ID when set (a cluster's shared id), then runs
# `kafkapy server` with the arguments below or the container's command. Run through sh so the
# script needs no executable bit.
ENTRYPOINT ["sh", "/opt/kafkapy/docker/entrypoint.sh"]
CMD ["--override", "log.dirs=/var/lib/kafkapy", \
     "--override", "listeners=PLAINTEXT://0.0.0.0:9092,CONTROLLER://0.0.0.0:9093", \
     "--override", "advertised.listeners=PLAINTEXT://localhost:9092", \
     "--override", "controller.quorum.voters=1@localhost:9093"]
