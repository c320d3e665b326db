"""Broker behaviour users meet early: LogAppendTime topics, oversized records, acks settings,
auto-created topics, and data and configs surviving a clean restart."""

from __future__ import annotations

import time

import pytest

from kafkapy.testing.clients import kcat_consume, kcat_produce
from kafkapy.testing.recordsets import (
    BASE_TS,
    assert_same_records,
    b64,
    random_bytes,
    record,
    simple_records,
    unique_topic,
)


def test_log_append_time_topic(cluster):
    topic = cluster.create_topic("append-time", config={"message.timestamp.type": "LogAppendTime"})
    records = simple_records(5, prefix="lat")  # they carry CreateTime timestamps from 2023
    before = int(time.time() * 1000) - 1000
    cluster.produce("confluent", topic, records)
    after = int(time.time() * 1000) + 1000
    for consumer in ("java", "kafka_python"):
        got = cluster.consume(consumer, topic, offset=0, end_offset=5)
        assert_same_records(records, got, first_offset=0, with_timestamp=False)
        for r in got:
            assert r["timestamp_type"] == "log_append", r
            assert before <= r["timestamp"] <= after, (before, r["timestamp"], after)
    res = cluster.run("confluent", "list_offsets", topic=topic, timestamps=[BASE_TS, before, after + 60_000])
    assert res["by_timestamp"] == [0, 0, None]


@pytest.mark.parametrize("client,expected", [("confluent", "MSG_SIZE_TOO_LARGE"),
                                             ("java", "MESSAGE_TOO_LARGE")])
def test_record_over_topic_limit_is_rejected(cluster, client, expected):
    # The topic keeps Kafka's default max.message.bytes (1048588); the client allows 3 MB, so the
    # broker is the one to refuse a 1.5 MB record.
    topic = cluster.create_topic(f"too-large-{client}")
    config = {"confluent": {"message.max.bytes": 3_000_000},
              "java": {"max.request.size": 3_000_000, "retries": 0}}[client]
    res = cluster.run(client, "produce", topic=topic, records=[record(b"k", random_bytes(1_500_000))],
                      config=config, compression="none", timeout_s=30)
    (delivery,) = res["deliveries"]
    assert "error" in delivery, f"a 1.5 MB record was accepted by a topic limited to ~1 MB: {delivery}"
    assert delivery["error"]["name"] == expected and delivery["error"]["code"] == 10, delivery["error"]
    # And nothing was written.
    assert cluster.run("confluent", "list_offsets", topic=topic)["latest"] == 0


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_acks_settings(cluster, acks):
    topic = cluster.create_topic(f"acks-{acks}")
    records = simple_records(20, prefix=f"acks{acks}")
    deliveries = cluster.produce("kafka_python", topic, records, acks=acks)
    if acks != 0:
        assert [d["offset"] for d in deliveries] == list(range(20))
    assert_same_records(records, cluster.consume("confluent", topic, offset=0, end_offset=20, timeout_s=15),
                        first_offset=0)


def test_produce_to_missing_topic_auto_creates_it(cluster):
    # auto.create.topics.enable defaults to true: kcat -P to a new topic just works.
    topic = unique_topic("auto-create")
    kcat_produce(cluster.bootstrap, topic, [("a", "1"), ("b", "2")])
    described = cluster.wait_for_topic(topic, 1)
    assert described["partitions"][0]["leader"] >= 0
    got = kcat_consume(cluster.bootstrap, topic, offset="beginning", count=2)
    assert [(r["key"], r["value"]) for r in got] == [(b64(b"a"), b64(b"1")), (b64(b"b"), b64(b"2"))]


@pytest.mark.timeout(120)
def test_clean_restart_keeps_records_offsets_and_configs(fresh_cluster):
    node = fresh_cluster.node
    if not node.durable:
        pytest.skip(f"{node.name} storage does not survive a restart")
    topic = fresh_cluster.create_topic("restart", partitions=2, config={"retention.ms": "86400000"})
    first = simple_records(30, prefix="before")
    fresh_cluster.produce("confluent", topic, first[:10])
    fresh_cluster.produce("java", topic, first[10:], compression="zstd")

    code = node.stop()  # SIGTERM, as an operator stops a broker
    assert code is not None
    node.start()

    fresh_cluster.wait_for_topic(topic, 2)
    assert_same_records(first, fresh_cluster.consume("kafka_python", topic, offset=0, end_offset=30), first_offset=0)
    configs = fresh_cluster.run("confluent", "describe_configs", topics=[topic])["configs"][topic]
    assert (configs["retention.ms"]["value"], configs["retention.ms"]["source"]) == ("86400000", "DYNAMIC_TOPIC_CONFIG")
    more = simple_records(5, prefix="after")
    assert [d["offset"] for d in fresh_cluster.produce("confluent", topic, more)] == list(range(30, 35))
    offsets = fresh_cluster.run("confluent", "list_offsets", topic=topic, partition=0, timestamps=[BASE_TS + 29_000])
    assert (offsets["earliest"], offsets["latest"], offsets["by_timestamp"]) == (0, 35, [29])
