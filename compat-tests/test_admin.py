"""Admin operations as users run them: create topics with configs, describe them, and the errors a
client surfaces for invalid requests."""

from __future__ import annotations

import time

import pytest

from kafkapy.testing.recordsets import record, simple_records, unique_topic

TOPIC_CONFIGS = {
    "retention.ms": "123456789",
    "cleanup.policy": "compact",
    "max.message.bytes": "2097152",
    "segment.bytes": "10485760",
}


def _assert_dynamic_topic_configs(configs: dict) -> None:
    for name, value in TOPIC_CONFIGS.items():
        assert name in configs, f"{name} missing from DescribeConfigs: {sorted(configs)[:40]}"
        entry = configs[name]
        assert entry["value"] == value, (name, entry)
        assert entry["source"] == "DYNAMIC_TOPIC_CONFIG", (name, entry)
        assert entry["is_default"] is False, (name, entry)


def test_confluent_create_topic_with_configs_and_describe_them(cluster):
    topic = unique_topic("cfg-confluent")
    res = cluster.run("confluent", "create_topics",
                      topics=[{"name": topic, "num_partitions": 3, "replication_factor": 1,
                               "config": TOPIC_CONFIGS}])
    assert res["topics"] == [{"name": topic, "error": None}]
    described = cluster.wait_for_topic(topic, 3)
    assert [p["id"] for p in described["partitions"]] == [0, 1, 2]

    configs = cluster.run("confluent", "describe_configs", topics=[topic])["configs"][topic]
    _assert_dynamic_topic_configs(configs)
    # A config the user did not set is still listed, with its default.
    assert configs["compression.type"]["value"] == "producer", configs.get("compression.type")
    assert configs["compression.type"]["source"] == "DEFAULT_CONFIG", configs["compression.type"]


def test_java_admin_create_topic_with_configs_and_describe_them(cluster):
    topic = unique_topic("cfg-java")
    res = cluster.run("java", "admin", create=[{"name": topic, "num_partitions": 2, "config": TOPIC_CONFIGS}],
                      describe_configs=[topic])
    assert res["topics"] == [{"name": topic, "error": None}]
    _assert_dynamic_topic_configs(res["configs"][topic])


@pytest.mark.parametrize("client", ["kafka_python", "aiokafka"])
def test_describe_topics(cluster, client):
    topic = cluster.create_topic("describe", partitions=4)
    res = cluster.run(client, "describe_topics", topics=[topic])["topics"][topic]
    assert res["error"] is None
    assert [p["id"] for p in res["partitions"]] == [0, 1, 2, 3]
    assert all(p["leader"] >= 0 and p["leader"] in p["isr"] for p in res["partitions"]), res


INVALID_NAMES = ["bad/name", "has space", "..", "x" * 250, "colon:name"]


@pytest.mark.parametrize("name", INVALID_NAMES, ids=["slash", "space", "dotdot", "too-long", "colon"])
def test_confluent_invalid_topic_name(cluster, name):
    res = cluster.run("confluent", "create_topics", topics=[{"name": name, "num_partitions": 1}])
    err = res["topics"][0]["error"]
    assert err is not None, f"creating topic {name!r} succeeded"
    # librdkafka calls Kafka's INVALID_TOPIC_EXCEPTION (17) "TOPIC_EXCEPTION".
    assert err["code"] == 17 and err["name"] in ("TOPIC_EXCEPTION", "INVALID_TOPIC_EXCEPTION"), err


@pytest.mark.parametrize("client,expected", [("kafka_python", "InvalidTopicError"),
                                             ("aiokafka", "InvalidTopicError"),
                                             ("java", "INVALID_TOPIC_EXCEPTION")])
def test_invalid_topic_name_other_clients(cluster, client, expected):
    if client == "java":
        res = cluster.run("java", "admin", create=[{"name": "bad/name-java", "num_partitions": 1}])
    else:
        res = cluster.run(client, "create_topics", topics=[{"name": "bad/name-kp", "num_partitions": 1}])
    err = res["topics"][0]["error"]
    assert err is not None and err["name"] == expected and err["code"] == 17, err


@pytest.mark.parametrize("client,expected", [("kafka_python", "InvalidPartitionsError"),
                                             ("aiokafka", "InvalidPartitionsError"),
                                             ("java", "INVALID_PARTITIONS")])
def test_zero_partitions(cluster, client, expected):
    # librdkafka rejects 0 partitions locally; the other clients send it to the broker.
    topic = unique_topic(f"zero-{client}")
    if client == "java":
        res = cluster.run("java", "admin", create=[{"name": topic, "num_partitions": 0}])
    else:
        res = cluster.run(client, "create_topics", topics=[{"name": topic, "num_partitions": 0}])
    err = res["topics"][0]["error"]
    assert err is not None, f"topic {topic} with 0 partitions was created"
    assert err["name"] == expected and err["code"] == 37, err


@pytest.mark.parametrize("client,expected", [("confluent", "TOPIC_ALREADY_EXISTS"),
                                             ("kafka_python", "TopicAlreadyExistsError"),
                                             ("aiokafka", "TopicAlreadyExistsError"),
                                             ("java", "TOPIC_ALREADY_EXISTS")])
def test_create_existing_topic(cluster, client, expected):
    topic = cluster.create_topic("exists")
    if client == "java":
        res = cluster.run("java", "admin", create=[{"name": topic, "num_partitions": 1}])
    else:
        res = cluster.run(client, "create_topics", topics=[{"name": topic, "num_partitions": 1}])
    err = res["topics"][0]["error"]
    assert err is not None and err["name"] == expected and err["code"] == 36, err


# -- the admin operations users run on live topics (confluent-kafka AdminClient) ---------------------

def test_delete_topic_then_recreate(cluster):
    topic = cluster.create_topic("delete-me")
    cluster.produce("confluent", topic, simple_records(5, prefix="old"))
    res = cluster.run("confluent", "delete_topics", topics=[topic])
    assert res["topics"] == [{"name": topic, "error": None}]
    # (Listing all topics: a Metadata request naming the topic could auto-create it again.)
    _wait(lambda: topic not in cluster.run("confluent", "list_topics")["topics"],
          f"{topic} still in metadata after DeleteTopics")
    # Deleting it again is UNKNOWN_TOPIC_OR_PART (3).
    again = cluster.run("confluent", "delete_topics", topics=[topic])["topics"][0]["error"]
    assert again is not None and again["code"] == 3, again
    # The same name can be created again, empty.
    cluster.create_topic(name=topic)
    offsets = cluster.run("confluent", "list_offsets", topic=topic)
    assert (offsets["earliest"], offsets["latest"]) == (0, 0)


def test_create_partitions(cluster):
    topic = cluster.create_topic("grow", partitions=1)
    res = cluster.run("confluent", "create_partitions", topics={topic: 3})
    assert res["topics"] == [{"name": topic, "error": None}]
    cluster.wait_for_topic(topic, 3)
    deliveries = cluster.produce("confluent", topic, [record(b"k", b"v", partition=2)])
    assert deliveries == [{"partition": 2, "offset": 0}]
    # Shrinking is INVALID_PARTITIONS (37).
    err = cluster.run("confluent", "create_partitions", topics={topic: 2})["topics"][0]["error"]
    assert err is not None and err["code"] == 37, err


def test_incremental_alter_configs(cluster):
    topic = cluster.create_topic("alter", config={"retention.ms": "1000000"})
    res = cluster.run("confluent", "alter_configs",
                      topics={topic: {"set": {"retention.ms": "2000000", "cleanup.policy": "compact"}}})
    assert res["topics"] == [{"name": topic, "error": None}]
    configs = cluster.run("confluent", "describe_configs", topics=[topic])["configs"][topic]
    assert (configs["retention.ms"]["value"], configs["retention.ms"]["source"]) == ("2000000", "DYNAMIC_TOPIC_CONFIG")
    assert (configs["cleanup.policy"]["value"], configs["cleanup.policy"]["source"]) == ("compact", "DYNAMIC_TOPIC_CONFIG")
    # DELETE returns a config to its default.
    cluster.run("confluent", "alter_configs", topics={topic: {"delete": ["retention.ms"]}})
    configs = cluster.run("confluent", "describe_configs", topics=[topic])["configs"][topic]
    assert (configs["retention.ms"]["value"], configs["retention.ms"]["source"]) == ("604800000", "DEFAULT_CONFIG")


def test_delete_records_moves_the_log_start(cluster):
    topic = cluster.create_topic("delete-records")
    records = simple_records(10, prefix="dr")
    cluster.produce("confluent", topic, records[:4])
    cluster.produce("confluent", topic, records[4:])
    res = cluster.run("confluent", "delete_records", topic=topic, partitions={"0": 6})
    assert res["partitions"] == [{"name": 0, "error": None, "low_watermark": 6}], res
    offsets = cluster.run("confluent", "list_offsets", topic=topic)
    assert (offsets["earliest"], offsets["latest"]) == (6, 10)
    # A consumer reset to earliest starts at the new log start offset.
    got = cluster.consume("java", topic, offset=0, auto_offset_reset="earliest", max_records=4, timeout_s=15)
    assert [r["offset"] for r in got] == [6, 7, 8, 9]


def _wait(pred, what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.2)
    raise AssertionError(what)
