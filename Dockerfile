# A kafkapy node. Build from the repo root: docker build -t kafkapy .
FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends gcc && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/kafkapy
COPY pyproject.toml setup.py README.md ./
COPY ext ./ext
COPY kafkapy ./kafkapy
RUN pip install --no-cache-dir cython && pip install --no-cache-dir .
VOLUME /var/lib/kafkapy
EXPOSE 9092 9093
ENTRYPOINT ["kafkapy", "server"]
CMD ["--override", "log.dirs=/var/lib/kafkapy", \
     "--override", "listeners=PLAINTEXT://0.0.0.0:9092,CONTROLLER://0.0.0.0:9093", \
     "--override", "advertised.listeners=PLAINTEXT://localhost:9092", \
     "--override", "controller.quorum.voters=1@localhost:9093"]
