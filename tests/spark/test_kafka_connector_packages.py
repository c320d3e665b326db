"""Spark's built-in Kafka connector, loaded with spark.jars.packages, against kafkapy and Apache Kafka.

This is the `format("kafka")` path Spark users take (`--packages
org.apache.spark:spark-sql-kafka-0-10_2.13:<spark version>`): the connector's jars come from Maven
through Spark's Ivy resolver (cached in .tools/spark-ivy by `make tools`), and the connector
talks to the broker with the Java kafka-clients it depends on.

One job (batch reads with JSON offset ranges and headers, a batch write, a streaming query with
availableNow that is restarted from its checkpoint) runs once against the session's kafkapy node
and once against an Apache Kafka node of this module. The kafkapy run is checked against exact
expectations and kafka-python's view of the topics; the Apache Kafka run must then give the same
rows (key, value, topic, partition, offset and, where the test set them, timestamps).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import pytest

from conftest import Kafka, wait_for
from kafkapy.testing import spark_connector
from kafkapy.testing.apache_kafka import ApacheKafkaNode

# The job fixtures run a whole job each (and one starts an Apache Kafka JVM) inside one test.
pytestmark = pytest.mark.timeout(900)
PARTITIONS = 3
PER_PARTITION = 20
MORE_PER_PARTITION = 4
BASE_TS = int(time.time() * 1000) - 3_600_000
SOURCE, SINK = "connector-source", "connector-sink"
RANGE = {"0": [5, 15], "1": [-2, 3], "2": [12, -1]}  # partition: [startingOffsets, endingOffsets]


def produced(first: int, last: int) -> list[tuple[int, bytes, bytes, int, list]]:
    """Records first..last-1 of every partition, as Kafka.produce takes them: (partition, key,
    value, timestamp, headers); record i of a partition lands at offset i."""
    return [(p, b"k%d-%d" % (p, i), b"v%d-%d" % (p, i), BASE_TS + i * 1000, [("n", b"%d" % i)])
            for p in range(PARTITIONS) for i in range(first, last)]


def expected(first: int, last: int) -> list[tuple[int, int, bytes, bytes, int]]:
    """The same records as (partition, offset, key, value, timestamp)."""
    return sorted((p, int(k.split(b"-")[1]), k, v, ts) for p, k, v, ts, _ in produced(first, last))


@dataclass
class Observed:
    """What one run of the job saw, as sorted tuples (comparable across brokers)."""

    every: list[tuple]        # batch read, earliest to latest: (topic, partition, offset, key, value, ts, ts type)
    ranged: list[tuple]       # batch read of the JSON offset ranges: (partition, offset)
    headers: list[tuple]      # includeHeaders: (partition, offset, [(key, value)])
    written: list[tuple]      # Spark's batch write, read back by kafka-python: (partition, offset, key, value, headers)
    stream_first: list[tuple]   # the parquet sink after the first availableNow run: (partition, offset, key, value)
    stream_second: list[tuple]  # ... after the restart from the checkpoint, with more records
    second_run_rows: int      # rows the restarted query read (its progress reports)


def reader(spark, bootstrap: str, **options):
    r = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        r = r.option(key, value)
    return r.load()


def stream_to_parquet(spark, bootstrap: str, out: Path, checkpoint: Path):
    """format("kafka") source -> parquet sink, one availableNow run over at most 25 records a batch."""
    return (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", SOURCE).option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "25").load()
            .selectExpr("partition", "offset", "key", "value")
            .writeStream.format("parquet").option("path", str(out))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True).start())


def parquet_rows(spark, out: Path) -> list[tuple]:
    return sorted((r.partition, r.offset, bytes(r.key), bytes(r.value))
                  for r in spark.read.parquet(str(out)).collect())


def run_job(spark, bootstrap: str, workdir: Path) -> Observed:
    """The same job, whichever broker ``bootstrap`` is: topics made and filled with kafka-python."""
    from pyspark.sql import functions as F

    kafka = Kafka(bootstrap)
    try:
        # Fixed names: each broker gets its own copy, so topic names compare too.
        kafka.admin.create_topics([_new_topic(SOURCE), _new_topic(SINK)], timeout_ms=30_000)
        for name in (SOURCE, SINK):
            wait_for(lambda: kafka.latest(name, PARTITIONS) is not None, f"topic {name}")
        kafka.produce(SOURCE, produced(0, PER_PARTITION))

        every = sorted((r.topic, r.partition, r.offset, bytes(r.key), bytes(r.value),
                        int(r.timestamp.timestamp() * 1000), r.timestampType)
                       for r in reader(spark, bootstrap, subscribe=SOURCE).collect())
        ranged = sorted((r.partition, r.offset) for r in reader(
            spark, bootstrap, subscribe=SOURCE,
            startingOffsets=json.dumps({SOURCE: {p: se[0] for p, se in RANGE.items()}}),
            endingOffsets=json.dumps({SOURCE: {p: se[1] for p, se in RANGE.items()}}),
        ).select("partition", "offset").collect())
        headers = sorted((r.partition, r.offset, [(h.key, bytes(h.value)) for h in r.headers])
                         for r in reader(spark, bootstrap, subscribe=SOURCE, includeHeaders="true")
                         .where("partition = 1").collect())

        # One task writes every row, so the order within each partition (and so the offsets)
        # is the same on both brokers; the keys pick the partitions (the producer's murmur2).
        rows = [(f"key-{i % 7}", f"value-{i}") for i in range(30)]
        (spark.createDataFrame(rows, "key string, value string").coalesce(1)
         .withColumn("headers", F.array(F.struct(F.lit("src").alias("key"),
                                                 F.lit(b"spark").cast("binary").alias("value"))))
         .write.format("kafka").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", SINK).save())
        written = sorted((r.partition, r.offset, r.key, r.value, list(r.headers))
                         for r in kafka.consume(SINK, PARTITIONS))

        out, checkpoint = workdir / "out", workdir / "checkpoint"
        first = stream_to_parquet(spark, bootstrap, out, checkpoint)
        assert first.awaitTermination(300), "the first availableNow run did not finish"
        stream_first = parquet_rows(spark, out)
        kafka.produce(SOURCE, produced(PER_PARTITION, PER_PARTITION + MORE_PER_PARTITION))
        second = stream_to_parquet(spark, bootstrap, out, checkpoint)
        assert second.awaitTermination(300), "the restarted availableNow run did not finish"
        second_run_rows = sum(p["numInputRows"] for p in second.recentProgress)
        stream_second = parquet_rows(spark, out)
        return Observed(every, ranged, headers, written, stream_first, stream_second, second_run_rows)
    finally:
        kafka.close()


def _new_topic(name: str):
    from kafka.admin import NewTopic

    return NewTopic(name, PARTITIONS, 1)


@pytest.fixture(scope="module")
def on_kafkapy(spark, node, tmp_path_factory) -> Observed:
    return run_job(spark, node.bootstrap, tmp_path_factory.mktemp("connector-kafkapy"))


@pytest.fixture(scope="module")
def on_apache_kafka(spark, tmp_path_factory) -> Observed:
    with ApacheKafkaNode(tmp_path_factory.mktemp("connector-apache-kafka")) as apache:
        return run_job(spark, apache.bootstrap, tmp_path_factory.mktemp("connector-apache-job"))


def test_the_connector_comes_from_spark_jars_packages(spark) -> None:
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.jars.packages") == spark_connector.coordinate()
    jars = [Path(urlparse(j).path) for j in conf.get("spark.jars").split(",")]
    # Every jar Spark put on its classpath was retrieved into the Ivy directory.
    assert {j.parent.resolve() for j in jars} == {(spark_connector.ivy_dir() / "jars").resolve()}
    names = {j.name for j in jars}
    assert f"org.apache.spark_spark-sql-kafka-0-10_2.13-{spark_connector.spark_version()}.jar" in names
    # The connector's Java client, resolved as its dependency, is what talks to the broker.
    assert any(n.startswith("org.apache.kafka_kafka-clients-") for n in names)


def test_batch_read_returns_every_record_exactly(on_kafkapy) -> None:
    assert on_kafkapy.every == [(SOURCE, p, o, k, v, ts, 0) for p, o, k, v, ts in expected(0, PER_PARTITION)]


def test_json_offset_ranges_read_exactly_those_offsets(on_kafkapy) -> None:
    assert on_kafkapy.ranged == ([(0, o) for o in range(5, 15)] + [(1, o) for o in range(0, 3)]
                                 + [(2, o) for o in range(12, PER_PARTITION)])


def test_headers_come_through(on_kafkapy) -> None:
    assert on_kafkapy.headers == [(1, i, [("n", b"%d" % i)]) for i in range(PER_PARTITION)]


def test_batch_write_is_read_back_by_a_stock_client(on_kafkapy) -> None:
    written = on_kafkapy.written
    assert len(written) == 30
    assert sorted(v for *_, v, _ in written) == sorted(b"value-%d" % i for i in range(30))
    assert all(h == [("src", b"spark")] for *_, h in written)
    partitions_of: dict[bytes, set[int]] = {}
    for p, _, k, _, _ in written:
        partitions_of.setdefault(k, set()).add(p)
    assert len(partitions_of) == 7 and all(len(ps) == 1 for ps in partitions_of.values())
    # Offsets within each partition are dense from 0: nothing written twice, nothing skipped.
    for p in range(PARTITIONS):
        assert [o for q, o, *_ in written if q == p] == list(range(sum(1 for w in written if w[0] == p)))


def test_streaming_available_now_then_restart_reads_exactly_the_new_records(on_kafkapy) -> None:
    first = [(p, o, k, v) for p, o, k, v, _ in expected(0, PER_PARTITION)]
    more = [(p, o, k, v) for p, o, k, v, _ in expected(PER_PARTITION, PER_PARTITION + MORE_PER_PARTITION)]
    assert on_kafkapy.stream_first == first
    assert on_kafkapy.second_run_rows == len(more)
    assert on_kafkapy.stream_second == sorted(first + more)  # no duplicates, nothing missing


def test_apache_kafka_gives_the_same_rows(on_kafkapy, on_apache_kafka) -> None:
    assert on_apache_kafka.every == on_kafkapy.every
    assert on_apache_kafka.ranged == on_kafkapy.ranged
    assert on_apache_kafka.headers == on_kafkapy.headers
    assert on_apache_kafka.written == on_kafkapy.written
    assert on_apache_kafka.stream_first == on_kafkapy.stream_first
    assert on_apache_kafka.stream_second == on_kafkapy.stream_second
    assert on_apache_kafka.second_run_rows == on_kafkapy.second_run_rows
