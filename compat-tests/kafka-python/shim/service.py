"""kafkapy glue: stands in for kafka-python's test/service.py, which the 3.0.12 sdist does not ship.

run.sh copies this file to <tree>/test/service.py. The integration fixtures only need
ExternalService (the broker is given by KAFKA_URI); spawning a Kafka JVM is not supported here.
"""
import logging

__all__ = ["ExternalService", "SpawnedService"]

log = logging.getLogger(__name__)


class ExternalService:
    def __init__(self, host, port):
        log.info("Using external broker at %s:%d", host, port)
        self.host = host
        self.port = port

    def open(self):
        pass

    def close(self):
        pass

    def dump_logs(self):
        pass


class SpawnedService:
    def __init__(self, args=None, env=None):
        raise RuntimeError(
            "kafkapy compat run: spawning a Kafka broker (%r) is not supported; "
            "the suite runs against the broker given by KAFKA_URI" % (args,))
