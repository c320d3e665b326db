"""The kafkapy PySpark source and sink against a kafkapy node, checked with kafka-python."""

from __future__ import annotations

import json
import time

import pytest
from pyspark.sql import functions as F

from conftest import wait_for

NOW = int(time.time() * 1000)


def fill(kafka, topic: str, per_partition: int = 20, partitions: int = 3, *, start_ts: int = NOW - 60_000,
         headers: bool = False, batch_size: int = 16384) -> list:
    recs = [(p, b"k%d-%d" % (p, i), b"v%d-%d" % (p, i), start_ts + i * 1000,
             [("h", b"%d" % i)] if headers else [])
            for p in range(partitions) for i in range(per_partition)]
    kafka.produce(topic, recs, batch_size=batch_size)
    return recs


def read(spark, bootstrap: str, **options):
    reader = spark.read.format("kafkapy").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def test_batch_read_has_the_built_in_schema_and_every_record(spark, node, kafka) -> None:
    topic = kafka.topic("all")
    fill(kafka, topic)
    df = read(spark, node.bootstrap, subscribe=topic)
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    rows = df.collect()
    assert sorted((r.partition, r.offset, bytes(r.key), bytes(r.value)) for r in rows) == [
        (p, i, b"k%d-%d" % (p, i), b"v%d-%d" % (p, i)) for p in range(3) for i in range(20)]
    assert {r.topic for r in rows} == {topic} and {r.timestampType for r in rows} == {0}
    first = min(rows, key=lambda r: (r.partition, r.offset))
    assert int(first.timestamp.timestamp() * 1000) == NOW - 60_000


def test_explicit_offset_ranges_return_exactly_those_records(spark, node, kafka) -> None:
    topic = kafka.topic("ranges")
    fill(kafka, topic)
    df = read(spark, node.bootstrap, subscribe=topic,
              startingOffsets=json.dumps({topic: {"0": 5, "1": -2, "2": 10}}),
              endingOffsets=json.dumps({topic: {"0": 15, "1": 3, "2": -1}}))
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert got == [(0, o) for o in range(5, 15)] + [(1, o) for o in range(0, 3)] + \
        [(2, o) for o in range(10, 20)]
    # minPartitions splits the ranges over more tasks; the rows are the same.
    split = read(spark, node.bootstrap, subscribe=topic, minPartitions="7",
                 startingOffsets=json.dumps({topic: {"0": 5, "1": -2, "2": 10}}),
                 endingOffsets=json.dumps({topic: {"0": 15, "1": 3, "2": -1}}))
    assert split.rdd.getNumPartitions() >= 7
    assert sorted((r.partition, r.offset) for r in split.select("partition", "offset").collect()) == got


def test_starting_timestamp_and_assign(spark, node, kafka) -> None:
    topic = kafka.topic("ts")
    fill(kafka, topic)  # record i of each partition at NOW - 60 s + i s
    df = read(spark, node.bootstrap, subscribe=topic, startingTimestamp=str(NOW - 60_000 + 12_500))
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert got == [(p, o) for p in range(3) for o in range(13, 20)]
    with pytest.raises(Exception, match="No offset matched the timestamp"):
        read(spark, node.bootstrap, subscribe=topic, startingTimestamp=str(NOW + 3_600_000)).collect()
    late = read(spark, node.bootstrap, assign=json.dumps({topic: [1]}),
                startingTimestamp=str(NOW + 3_600_000), startingOffsetsByTimestampStrategy="latest")
    assert late.count() == 0
    one = read(spark, node.bootstrap, assign=json.dumps({topic: [1]}))
    assert {r.partition for r in one.select("partition").collect()} == {1} and one.count() == 20


def test_headers_and_pattern_subscription(spark, node, kafka) -> None:
    topic = kafka.topic("hdrpat")
    fill(kafka, topic, per_partition=2, headers=True)
    df = read(spark, node.bootstrap, subscribePattern=topic.replace("hdrpat", "hdr.at"), includeHeaders="true")
    assert df.columns[-1] == "headers"
    rows = df.collect()
    assert len(rows) == 6
    assert all([(h.key, bytes(h.value)) for h in r.headers] == [("h", b"%d" % r.offset)] for r in rows)


def test_fail_on_data_loss_when_retention_deleted_the_start(spark, node, kafka) -> None:
    topic = kafka.topic("loss", partitions=1, config={"segment.bytes": "1024", "retention.ms": "600000"})
    # Sixty records from an hour ago, one batch each: retention removes all of them...
    fill(kafka, topic, per_partition=60, partitions=1, start_ts=NOW - 3_600_000, batch_size=1)
    wait_for(lambda: kafka.earliest(topic, 1)[0] == 60, "retention to delete every expired segment")
    # ...and ten fresh ones stay, so the log now starts at 60.
    kafka.produce(topic, [(0, None, b"fresh-%d" % i, None, []) for i in range(10)])
    from_zero = json.dumps({topic: {"0": 0}})
    with pytest.raises(Exception, match="failOnDataLoss"):
        read(spark, node.bootstrap, subscribe=topic, startingOffsets=from_zero).collect()
    df = read(spark, node.bootstrap, subscribe=topic, startingOffsets=from_zero, failOnDataLoss="false")
    got = df.select("offset", "value").orderBy("offset").collect()
    assert [(r.offset, bytes(r.value)) for r in got] == [(60 + i, b"fresh-%d" % i) for i in range(10)]


def test_batch_write_keys_headers_partitions_and_topic_column(spark, node, kafka) -> None:
    topic, other = kafka.topic("sink"), kafka.topic("sink-other", partitions=1)
    rows = [(f"key-{i % 7}", f"value-{i}", None) for i in range(50)] + [(None, "to-p2", 2)]
    df = spark.createDataFrame(rows, "key string, value string, partition int") \
        .withColumn("headers", F.array(F.struct(F.lit("src").alias("key"), F.lit(b"spark").cast("binary").alias("value"))))
    df.write.format("kafkapy").mode("append").option("kafka.bootstrap.servers", node.bootstrap).option("topic", topic).save()
    got = kafka.consume(topic, 3)
    assert sorted(r.value.decode() for r in got) == sorted(v for _, v, _ in rows)
    # Keyed records land where Kafka's default partitioner puts them: same key, same partition.
    by_key: dict = {}
    for r in got:
        if r.key is not None:
            by_key.setdefault(r.key, set()).add(r.partition)
    assert all(len(p) == 1 for p in by_key.values()) and len(by_key) == 7
    assert [r.partition for r in got if r.value == b"to-p2"] == [2]
    assert all(list(r.headers) == [("src", b"spark")] for r in got)
    # A topic column routes rows; the option is only the default.
    spark.createDataFrame([(other, "x")], "topic string, value string").write.format("kafkapy").mode("append") \
        .option("kafka.bootstrap.servers", node.bootstrap).option("topic", topic).save()
    assert [r.value for r in kafka.consume(other, 1)] == [b"x"]
    with pytest.raises(Exception, match="topic option required"):
        spark.createDataFrame([("x",)], "value string").write.format("kafkapy").mode("append") \
            .option("kafka.bootstrap.servers", node.bootstrap).save()


def test_streaming_read_honours_max_offsets_per_trigger_and_available_now(spark, node, kafka, tmp_path) -> None:
    topic, out = kafka.topic("stream"), kafka.topic("stream-out", partitions=1)
    fill(kafka, topic, per_partition=40)
    query = (spark.readStream.format("kafkapy").option("kafka.bootstrap.servers", node.bootstrap)
             .option("subscribe", topic).option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", "25").load()
             .select("value")
             .writeStream.format("kafkapy").option("kafka.bootstrap.servers", node.bootstrap)
             .option("topic", out).option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(180)
    batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
    assert len(batches) >= 120 // 25 and max(p["numInputRows"] for p in batches) <= 25 + 3
    assert sorted(r.value for r in kafka.consume(out, 1)) == sorted(
        b"v%d-%d" % (p, i) for p in range(3) for i in range(40))
    # Restarted from its checkpoint, the query reads only what arrived since.
    fill(kafka, topic, per_partition=2, start_ts=NOW)
    again = (spark.readStream.format("kafkapy").option("kafka.bootstrap.servers", node.bootstrap)
             .option("subscribe", topic).load().select("value")
             .writeStream.format("kafkapy").option("kafka.bootstrap.servers", node.bootstrap)
             .option("topic", out).option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start())
    assert again.awaitTermination(180)
    assert len(kafka.consume(out, 1)) == 120 + 6


def test_bad_options_fail_the_query_with_the_connectors_reason(spark, node) -> None:
    with pytest.raises(Exception, match="can't be latest for batch"):
        read(spark, node.bootstrap, subscribe="x", startingOffsets="latest").collect()
    with pytest.raises(Exception, match="exactly one of"):
        read(spark, node.bootstrap).collect()
