"""Dynamic configs through stock AdminClients, applied live and kept over a restart (issue 8).

One node of this module's own, started with a fast retention check and a short file delete delay
plus two static settings, so DescribeConfigs has something at every level: topic dynamic, broker
dynamic, cluster default, static (the node's config) and default.
"""

from __future__ import annotations

import time

import pytest

from kafkapy.testing import clients
from kafkapy.testing.node import compat_target, node_class_for_target
from kafkapy.testing.recordsets import unique_topic

TARGET = compat_target()
pytestmark = pytest.mark.skipif(TARGET != "kafkapy", reason="checks kafkapy's node settings and restart")

NODE_ID = "1"
STATIC = {
    "log.retention.check.interval.ms": "500",
    "log.segment.delete.delay.ms": "200",
    "log.retention.hours": "100",
    "message.max.bytes": "2000000",
}


class Cluster:
    """The node under test and the few client helpers these tests need (conftest's Cluster is
    not importable from a test module)."""

    def __init__(self, node) -> None:
        self.node = node

    def run(self, client: str, op: str, *, timeout: float = 90.0, **job) -> dict:
        if not self.node.running():
            raise AssertionError(f"the node is not running\n{self.node.log_tail(6000)}")
        return clients.ok(clients.run_driver(client, {"op": op, "bootstrap": self.node.bootstrap, **job},
                                             timeout=timeout))

    def create_topic(self, prefix: str, config: dict | None = None) -> str:
        name = unique_topic(prefix)
        res = self.run("confluent", "create_topics", topics=[{"name": name, "num_partitions": 1,
                                                              "replication_factor": 1, "config": config or {}}])
        assert res["topics"][0]["error"] is None, res
        wait_for(lambda: self._ready(name), f"topic {name} to get a leader")
        return name

    def _ready(self, name: str) -> bool:
        t = self.run("confluent", "describe_topics", topics=[name])["topics"][name]
        return t["error"] is None and len(t["partitions"]) == 1 and t["partitions"][0]["leader"] >= 0

    def produce(self, client: str, topic: str, recs: list[dict], **job) -> None:
        deliveries = self.run(client, "produce", topic=topic, records=recs, **job)["deliveries"]
        assert not [d for d in deliveries if "error" in d], deliveries[:3]

    def consume(self, client: str, topic: str, *, offset: int = 0, end_offset: int) -> list[dict]:
        return self.run(client, "consume", topic=topic, partition=0, offset=offset, end_offset=end_offset)["records"]


@pytest.fixture(scope="module")
def node_cluster(tmp_path_factory):
    node = node_class_for_target()(tmp_path_factory.mktemp("configs-live"), overrides=STATIC)
    try:
        node.start()
        yield Cluster(node)
    finally:
        node.cleanup()


def java_alter(cluster: Cluster, *resources: tuple[str, str, list], validate_only: bool = False) -> list[dict]:
    alter = [{"type": t, "name": n, "ops": [{"op": op, "name": k, "value": v} for op, k, v in ops]}
             for t, n, ops in resources]
    return cluster.run("java", "alter-configs", alter=alter, validate_only=validate_only)["alter"]


def java_describe(cluster: Cluster, *resources: tuple[str, str]) -> dict:
    res = cluster.run("java", "alter-configs", describe=[{"type": t, "name": n} for t, n in resources])
    return res["configs"]


def records(n: int, tag: str, size: int = 300, timestamp: int | None = None) -> list[dict]:
    import base64

    return [{"key": base64.b64encode(f"{tag}-{i}".encode()).decode(),
             "value": base64.b64encode(bytes([65 + i % 26]) * size).decode(),
             "timestamp": timestamp} for i in range(n)]


def produce_old_batches(cluster: Cluster, topic: str, n: int, tag: str) -> None:
    """``n`` records stamped ten minutes ago, one batch each, so small segments roll often and
    every closed segment is old enough for a retention of seconds."""
    ten_minutes_ago = int(time.time() * 1000) - 600_000
    cluster.produce("confluent", topic, records(n, tag, timestamp=ten_minutes_ago), linger_ms=0,
                    config={"batch.num.messages": 1})


def segment_files(cluster: Cluster, topic: str) -> list[str]:
    return sorted(p.name for p in (cluster.node.data_dir / f"{topic}-0").glob("*.log"))


def earliest(cluster: Cluster, topic: str) -> int:
    return cluster.run("confluent", "list_offsets", topic=topic)["earliest"]


def wait_for(predicate, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.3)


@pytest.mark.parametrize("client", ["java", "confluent"])
def test_log_append_time_applies_to_the_next_batch(node_cluster, client) -> None:
    topic = node_cluster.create_topic(f"lat-{client}")
    node_cluster.produce(client, topic, records(3, "before", 10))
    if client == "java":
        (res,) = java_alter(node_cluster, ("topic", topic, [("SET", "message.timestamp.type", "LogAppendTime")]))
        assert res["error"] is None, res
    else:
        (res,) = node_cluster.run("confluent", "alter_configs",
                                  topics={topic: {"set": {"message.timestamp.type": "LogAppendTime"}}})["topics"]
        assert res["error"] is None, res
    node_cluster.produce(client, topic, records(3, "after", 10))
    got = node_cluster.consume(client, topic, end_offset=6)
    assert [r["timestamp_type"] for r in got] == ["create"] * 3 + ["log_append"] * 3


@pytest.mark.parametrize("client", ["java", "confluent"])
def test_lowering_retention_deletes_old_segments(node_cluster, client) -> None:
    topic = node_cluster.create_topic(f"ret-{client}", config={"segment.bytes": "1024", "file.delete.delay.ms": "100"})
    produce_old_batches(node_cluster, topic, 20, "old")
    assert earliest(node_cluster, topic) == 0
    before = segment_files(node_cluster, topic)
    assert len(before) >= 4, before
    if client == "java":
        (res,) = java_alter(node_cluster, ("topic", topic, [("SET", "retention.ms", "1000")]))
    else:
        (res,) = node_cluster.run("confluent", "alter_configs",
                                  topics={topic: {"set": {"retention.ms": "1000"}}})["topics"]
    assert res["error"] is None, res
    wait_for(lambda: earliest(node_cluster, topic) > 0, "retention to advance the log start")
    start = earliest(node_cluster, topic)
    got = node_cluster.consume("confluent", topic, offset=start, end_offset=20)
    assert [r["offset"] for r in got] == list(range(start, 20))
    # Only the active segment is left; the deleted ones' files go after file.delete.delay.ms.
    wait_for(lambda: len(segment_files(node_cluster, topic)) == 1, "the deleted segments' files to go")


def stored_codecs(cluster: Cluster, topic: str) -> list[str]:
    """The codec of every batch on disk, read from the segment files as Kafka's DumpLogSegments
    would show them."""
    from kafkapy.records import format as fmt
    from kafkapy.records.reader import iter_batches

    out = []
    for name in segment_files(cluster, topic):
        data = (cluster.node.data_dir / f"{topic}-0" / name).read_bytes()
        out += [fmt.CODEC_NAMES[h.compression] for h, _ in iter_batches(data)]
    return out


def set_topic_config(cluster: Cluster, client: str, topic: str, name: str, value: str) -> None:
    if client == "java":
        (res,) = java_alter(cluster, ("topic", topic, [("SET", name, value)]))
    else:
        (res,) = cluster.run("confluent", "alter_configs", topics={topic: {"set": {name: value}}})["topics"]
    assert res["error"] is None, res


@pytest.mark.parametrize("client", ["java", "confluent"])
def test_topic_compression_type_recompresses_what_producers_send(node_cluster, client) -> None:
    topic = node_cluster.create_topic(f"codec-{client}")
    sent = records(4, "plain", 200) + records(4, "lz4", 200)
    node_cluster.produce(client, topic, sent[:4], compression="none")
    set_topic_config(node_cluster, client, topic, "compression.type", "zstd")
    node_cluster.produce(client, topic, sent[4:], compression="lz4")
    codecs = stored_codecs(node_cluster, topic)
    assert codecs and set(codecs[-1:]) == {"zstd"} and "lz4" not in codecs, codecs
    assert codecs[0] == "none", codecs
    got = node_cluster.consume(client, topic, end_offset=8)
    assert [(r["key"], r["value"]) for r in got] == [(r["key"], r["value"]) for r in sent]


@pytest.mark.parametrize("client", ["java", "confluent"])
def test_timestamp_bounds_refuse_records_from_too_long_ago(node_cluster, client) -> None:
    topic = node_cluster.create_topic(f"tsb-{client}", config={"message.timestamp.before.max.ms": "3600000"})
    two_hours_ago = int(time.time() * 1000) - 7_200_000
    deliveries = node_cluster.run(client, "produce", topic=topic,
                                  records=records(1, "old", 10, two_hours_ago))["deliveries"]
    assert deliveries[0].get("error", {}).get("name") in ("INVALID_TIMESTAMP", "_INVALID_TIMESTAMP"), deliveries
    # A fresh record goes in; the old one never did.
    node_cluster.produce(client, topic, records(1, "new", 10))
    assert [r["key"] for r in node_cluster.consume(client, topic, end_offset=1)] == [records(1, "new", 10)[0]["key"]]
    assert earliest(node_cluster, topic) == 0
    assert node_cluster.run("confluent", "list_offsets", topic=topic)["latest"] == 1


def test_cluster_default_retention_and_topic_override(node_cluster) -> None:
    plain = node_cluster.create_topic("cd-plain", config={"segment.bytes": "1024", "file.delete.delay.ms": "100"})
    kept = node_cluster.create_topic("cd-kept", config={"segment.bytes": "1024", "file.delete.delay.ms": "100",
                                                        "retention.ms": "3600000"})
    for topic in (plain, kept):
        produce_old_batches(node_cluster, topic, 12, "x")
    (res,) = java_alter(node_cluster, ("broker", "", [("SET", "log.retention.ms", "1000")]))
    try:
        assert res["error"] is None, res
        described = node_cluster.run("confluent", "describe_configs", topics=[plain, kept])["configs"]
        assert {t: (described[t]["retention.ms"]["value"], described[t]["retention.ms"]["source"])
                for t in (plain, kept)} == {plain: ("1000", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
                                            kept: ("3600000", "DYNAMIC_TOPIC_CONFIG")}
        wait_for(lambda: earliest(node_cluster, plain) > 0, "the cluster default to delete old segments")
        # Every retention pass looks at both topics; the override kept this one whole.
        assert earliest(node_cluster, kept) == 0
    finally:
        java_alter(node_cluster, ("broker", "", [("DELETE", "log.retention.ms", None)]))


def test_describe_sources_at_every_level_and_after_restart(node_cluster) -> None:
    topic = node_cluster.create_topic("levels")
    (a, b, c) = java_alter(
        node_cluster,
        ("topic", topic, [("SET", "segment.ms", "3600000")]),
        ("broker", NODE_ID, [("SET", "log.index.interval.bytes", "8192"), ("SET", "log.cleaner.backoff.ms", "20000")]),
        ("broker", "", [("SET", "log.retention.ms", "7200000")]),
    )
    assert a["error"] is None and b["error"] is None and c["error"] is None, (a, b, c)

    def check() -> None:
        configs = java_describe(node_cluster, ("topic", topic), ("broker", NODE_ID), ("broker", ""))
        t, br, default = configs[f"topic:{topic}"], configs[f"broker:{NODE_ID}"], configs["broker:"]
        assert (t["segment.ms"]["value"], t["segment.ms"]["source"]) == ("3600000", "DYNAMIC_TOPIC_CONFIG")
        # log.roll.hours ranks above nothing named log.roll.ms, so Kafka leaves it out.
        assert t["segment.ms"]["synonyms"] == [["segment.ms", "3600000", "DYNAMIC_TOPIC_CONFIG"]]
        assert (t["index.interval.bytes"]["value"], t["index.interval.bytes"]["source"]) == (
            "8192", "DYNAMIC_BROKER_CONFIG")
        assert (t["retention.ms"]["value"], t["retention.ms"]["source"]) == ("7200000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
        assert t["retention.ms"]["synonyms"] == [
            ["log.retention.ms", "7200000", "DYNAMIC_DEFAULT_BROKER_CONFIG"],
            ["log.retention.hours", "100", "STATIC_BROKER_CONFIG"],
            ["log.retention.hours", "168", "DEFAULT_CONFIG"]]
        assert (t["max.message.bytes"]["value"], t["max.message.bytes"]["source"]) == ("2000000", "STATIC_BROKER_CONFIG")
        assert (t["cleanup.policy"]["value"], t["cleanup.policy"]["source"]) == ("delete", "DEFAULT_CONFIG")
        assert t["cleanup.policy"]["synonyms"] == [["log.cleanup.policy", "delete", "DEFAULT_CONFIG"]]
        assert t["cleanup.policy"]["documentation"]

        backoff = br["log.cleaner.backoff.ms"]
        assert (backoff["value"], backoff["source"], backoff["read_only"]) == ("20000", "DYNAMIC_BROKER_CONFIG", False)
        assert backoff["synonyms"] == [["log.cleaner.backoff.ms", "20000", "DYNAMIC_BROKER_CONFIG"],
                                       ["log.cleaner.backoff.ms", "15000", "DEFAULT_CONFIG"]]
        assert (br["log.retention.ms"]["value"], br["log.retention.ms"]["source"]) == (
            "7200000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
        hours = br["log.retention.hours"]
        assert (hours["value"], hours["source"], hours["read_only"]) == ("100", "STATIC_BROKER_CONFIG", True)
        assert br["log.dirs"]["read_only"] is True

        # A new cluster formatted with ELR (metadata.version 4.1) also holds the cluster-level
        # min.insync.replicas its bootstrap writes, as Kafka 4.x's does (KAFKA-16540).
        assert set(default) == {"log.retention.ms", "min.insync.replicas"}
        assert (default["log.retention.ms"]["value"], default["log.retention.ms"]["source"]) == (
            "7200000", "DYNAMIC_DEFAULT_BROKER_CONFIG")

    try:
        check()
        node_cluster.node.restart()
        check()
    finally:
        java_alter(node_cluster, ("broker", "", [("DELETE", "log.retention.ms", None)]),
                   ("broker", NODE_ID, [("DELETE", "log.index.interval.bytes", None),
                                        ("DELETE", "log.cleaner.backoff.ms", None)]))


def test_invalid_changes_are_refused_with_kafkas_errors(node_cluster) -> None:
    topic = node_cluster.create_topic("invalid")
    results = java_alter(
        node_cluster,
        ("topic", topic, [("SET", "retention.ms", "soon")]),
        ("broker", "", [("SET", "log.dirs", "/elsewhere")]),
        ("broker", NODE_ID, [("SET", "log.retention.ms", "-")]),
    )
    by_name = {r["name"]: r["error"] for r in results}
    assert (by_name[topic]["name"], by_name[topic]["message"]) == (
        "INVALID_CONFIG", "Invalid value soon for configuration retention.ms: Not a number of type LONG")
    assert (by_name[""]["name"], by_name[""]["message"]) == (
        "INVALID_REQUEST", "Cannot update these configs dynamically: Set(log.dirs)")
    assert (by_name[NODE_ID]["name"], by_name[NODE_ID]["message"]) == (
        "INVALID_REQUEST", "Invalid value - for configuration log.retention.ms: Not a number of type LONG")
    (res,) = java_alter(node_cluster, ("topic", topic, [("SET", "retention.hours", "1")]))
    assert (res["error"]["name"], res["error"]["message"]) == ("INVALID_CONFIG", "Unknown topic config name: retention.hours")
    (res,) = java_alter(node_cluster, ("topic", topic, [("SET", "retention.ms", "5")]), validate_only=True)
    assert res["error"] is None
    assert java_describe(node_cluster, ("topic", topic))[f"topic:{topic}"]["retention.ms"]["source"] != \
        "DYNAMIC_TOPIC_CONFIG"
