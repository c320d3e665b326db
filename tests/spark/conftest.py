"""PySpark against a kafkapy node: one node and one local[2] SparkSession for the whole run.

Spark's JVM takes seconds to start, so the session is shared; each test uses its own topics. The
session carries both the kafkapy source and Spark's built-in Kafka connector (spark.jars.packages).
Records go in and out with kafka-python, a stock client, so what Spark reads and writes is
checked against a second implementation.
"""

from __future__ import annotations

import itertools
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from pyspark.sql import SparkSession

from kafkapy.spark import register
from kafkapy.testing import spark_connector
from kafkapy.testing.node import KafkaNode

sys.path.insert(0, str(Path(__file__).parent))
# Spark starts its Python workers with "python3" from PATH unless told otherwise; they need this
# interpreter's packages (kafkapy, pyarrow).
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

NODE_OVERRIDES = {
    # Retention runs often, so tests can watch early segments go while Spark reads.
    "log.retention.check.interval.ms": "300",
    "log.initial.task.delay.ms": "300",
    "log.segment.delete.delay.ms": "100",
    "num.partitions": "3",
}
_names = itertools.count()


@pytest.fixture(scope="session")
def node(tmp_path_factory):
    with KafkaNode(tmp_path_factory.mktemp("spark-node"), overrides=NODE_OVERRIDES) as n:
        yield n


@pytest.fixture(scope="session")
def spark():
    # Spark's own Kafka connector comes in as users load it, with spark.jars.packages (resolved
    # from the Ivy cache `make tools` fills), next to the kafkapy source: one JVM serves both
    # format("kafka") and format("kafkapy").
    builder = (SparkSession.builder.master("local[2]").appName("kafkapy-tests")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.session.timeZone", "UTC")
               # The connector caches its producers per broker; brokers a module stopped would
               # otherwise be retried every second for the 10 minutes of Spark's default.
               .config("spark.kafka.producer.cache.timeout", "20s")
               .config("spark.kafka.producer.cache.evictorThreadRunInterval", "5s"))
    for key, value in spark_connector.spark_conf().items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    register(session)
    yield session
    session.stop()


class Kafka:
    """Topic set-up and stock-client produce/consume for one test."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)

    def topic(self, prefix: str, partitions: int = 3, config: dict | None = None) -> str:
        name = f"{prefix}-{os.getpid()}-{next(_names)}"
        self.admin.create_topics([NewTopic(name, partitions, 1, topic_configs=config or {})],
                                 timeout_ms=30_000)
        wait_for(lambda: self.latest(name, partitions) is not None, f"topic {name}")
        return name

    def produce(self, topic: str, records: list[tuple[int, bytes | None, bytes, int | None, list]],
                *, batch_size: int = 16384) -> None:
        """(partition, key, value, timestamp_ms, headers) each; acks=all, in order. A small
        ``batch_size`` gives one record per batch (for tiny segments)."""
        producer = KafkaProducer(bootstrap_servers=self.bootstrap, acks="all", linger_ms=2,
                                 batch_size=batch_size)
        try:
            for partition, key, value, ts, headers in records:
                producer.send(topic, key=key, value=value, partition=partition, timestamp_ms=ts,
                              headers=headers)
            producer.flush(timeout=60)
        finally:
            producer.close(timeout=10)

    def latest(self, topic: str, partitions: int) -> dict[int, int] | None:
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False)
        try:
            tps = [TopicPartition(topic, p) for p in range(partitions)]
            ends = consumer.end_offsets(tps)
            return {tp.partition: off for tp, off in ends.items()} if len(ends) == partitions else None
        except Exception:
            return None
        finally:
            consumer.close()

    def earliest(self, topic: str, partitions: int) -> dict[int, int]:
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False)
        try:
            begins = consumer.beginning_offsets([TopicPartition(topic, p) for p in range(partitions)])
            return {tp.partition: off for tp, off in begins.items()}
        finally:
            consumer.close()

    def consume(self, topic: str, partitions: int) -> list:
        """Every record of ``topic`` (all partitions, earliest to latest)."""
        ends = self.latest(topic, partitions) or {}
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False,
                                 auto_offset_reset="earliest")
        try:
            tps = [TopicPartition(topic, p) for p in range(partitions)]
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
            out = []
            deadline = time.monotonic() + 60
            while any(consumer.position(tp) < ends[tp.partition] for tp in tps):
                if time.monotonic() > deadline:
                    raise AssertionError(f"timed out reading {topic}")
                for recs in consumer.poll(timeout_ms=500).values():
                    out.extend(recs)
            return sorted(out, key=lambda r: (r.partition, r.offset))
        finally:
            consumer.close()

    def close(self) -> None:
        self.admin.close()


@pytest.fixture
def kafka(node):
    k = Kafka(node.bootstrap)
    yield k
    k.close()


def wait_for(predicate: Callable[[], object], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)
