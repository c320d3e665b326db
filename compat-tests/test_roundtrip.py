"""Records survive a round trip between different stock clients byte for byte: keys, null keys,
empty values, headers, explicit timestamps, 1 MB values; and a read can start in the middle of a
batch."""

from __future__ import annotations

import json

import pytest

from kafkapy.testing.clients import run_kcat
from kafkapy.testing.recordsets import (
    assert_same_records,
    b64,
    random_bytes,
    record,
    shaped_records,
    simple_records,
)

# (producer, consumer): every client produces once and consumes once, each pair crosses clients.
PAIRS = [
    ("confluent", "java"),
    ("java", "kafka_python"),
    ("kafka_python", "aiokafka"),
    ("aiokafka", "confluent"),
]


@pytest.mark.parametrize("producer,consumer", PAIRS, ids=[f"{p}-to-{c}" for p, c in PAIRS])
def test_record_shapes_round_trip(cluster, producer, consumer):
    topic = cluster.create_topic(f"shapes-{producer}")
    records = shaped_records(12)
    deliveries = cluster.produce(producer, topic, records)
    assert [d["offset"] for d in deliveries] == list(range(12)), deliveries
    assert {d["partition"] for d in deliveries} == {0}

    consumed = cluster.consume(consumer, topic, offset=0, end_offset=12)
    assert_same_records(records, consumed, first_offset=0)


@pytest.mark.parametrize("producer,consumer", [("confluent", "java"), ("java", "kafka_python")],
                         ids=["confluent-to-java", "java-to-kafka_python"])
def test_one_megabyte_values(cluster, producer, consumer):
    # A user who sends 1 MiB values raises the topic's max.message.bytes and the producer's limit.
    limit = 2 * 1024 * 1024
    topic = cluster.create_topic("big", config={"max.message.bytes": limit})
    big = random_bytes(1024 * 1024)
    records = [record(b"big-1", big), record(b"small", b"s"), record(b"big-2", big[::-1])]
    producer_config = {
        "confluent": {"message.max.bytes": limit},
        "java": {"max.request.size": limit},
    }[producer]
    cluster.produce(producer, topic, records, config=producer_config, compression="none",
                    timeout_s=60)

    consumed = cluster.consume(consumer, topic, offset=0, end_offset=3, timeout_s=40)
    assert_same_records(records, consumed, first_offset=0, with_timestamp=False)


# Start inside a batch of 100 records (one produce call, one linger window), with and without
# compression; the client must hand back exactly the records from the requested offset on.
@pytest.mark.parametrize("consumer", ["confluent", "kafka_python", "aiokafka", "java"])
@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_read_from_middle_of_batch(cluster, consumer, codec):
    topic = cluster.create_topic(f"middle-{codec}")
    records = simple_records(100, prefix="mid")
    cluster.produce("confluent", topic, records, compression=codec, linger_ms=200,
                    config={"batch.num.messages": 1000})

    consumed = cluster.consume(consumer, topic, offset=37, end_offset=100)
    assert consumed and consumed[0]["offset"] == 37, [r["offset"] for r in consumed][:5]
    assert_same_records(records[37:], consumed, first_offset=37)


def test_kcat_reads_from_middle_of_batch(cluster):
    topic = cluster.create_topic("middle-kcat")
    records = simple_records(50, prefix="kc")
    cluster.produce("java", topic, records, compression="lz4", linger_ms=200)
    done = run_kcat(["-b", cluster.bootstrap, "-C", "-t", topic, "-p", "0", "-o", "21", "-e", "-J",
                     "-q"], timeout=30)
    assert done.returncode == 0, done.describe()
    got = [json.loads(line) for line in done.text.splitlines() if line.strip()]
    assert [g["offset"] for g in got] == list(range(21, 50))
    assert [b64(g["key"].encode()) for g in got] == [r["key"] for r in records[21:]]
    assert [b64(g["payload"].encode()) for g in got] == [r["value"] for r in records[21:]]


@pytest.mark.parametrize("producer,consumer", [("confluent", "java"), ("java", "confluent")],
                         ids=["confluent-to-java", "java-to-confluent"])
def test_null_header_value(cluster, producer, consumer):
    # A header with a null value (wire length -1) is distinct from an empty one.
    topic = cluster.create_topic("null-header")
    records = [record(b"k", b"v", headers=[("nil", None), ("empty", b""), ("x", b"1")])]
    records[0]["headers"][0][1] = None
    cluster.produce(producer, topic, records)
    got = cluster.consume(consumer, topic, offset=0, end_offset=1)
    assert got[0]["headers"] == [["nil", None], ["empty", ""], ["x", b64(b"1")]], got[0]["headers"]


@pytest.mark.parametrize("consumer", ["confluent", "java", "kafka_python"])
def test_fetch_limits_smaller_than_a_batch(cluster, consumer):
    # KIP-74: the broker returns at least one whole batch even when it exceeds the fetch limits,
    # so a consumer with tiny limits still makes progress.
    topic = cluster.create_topic(f"tiny-fetch-{consumer}")
    records = simple_records(200, prefix="tf", value_size=500)  # one ~100 KB batch
    cluster.produce("confluent", topic, records, linger_ms=200, config={"batch.size": 1_000_000})
    config = {
        # librdkafka wants fetch.max.bytes >= message.max.bytes (its minimum is 1000).
        "confluent": {"message.max.bytes": 1000, "fetch.max.bytes": 1024, "max.partition.fetch.bytes": 1024},
        "java": {"fetch.max.bytes": 1024, "max.partition.fetch.bytes": 1024},
        "kafka_python": {"fetch_max_bytes": 1024, "max_partition_fetch_bytes": 1024},
    }[consumer]
    got = cluster.consume(consumer, topic, offset=0, end_offset=200, config=config, timeout_s=30)
    assert_same_records(records, got, first_offset=0)
