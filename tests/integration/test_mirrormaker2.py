"""MirrorMaker 2 (Apache Kafka's connect-mirror, from Maven) with kafkapy as source and as target:
issue 23's compatibility baseline for cluster links.

One kafkapy node and one Apache Kafka 4.4 node each hold a topic of a few thousand records (keys,
null keys and values, repeated and null headers, explicit timestamps, four partitions, compressed)
and a consumer group that consumed part of it. One MirrorMaker 2 in dedicated mode runs both
flows, kafkapy->kafka and kafka->kafkapy, so each broker is at once a source (consumed, its
offset-syncs topic written and read) and a target (remote topics created, Connect's compacted
config/offset/status topics, heartbeats, checkpoints, group offsets written by the checkpoint
task). The tests check what a user of MM2 relies on: every record arrives, a group can move to
the target without skipping a record, topic configs follow, a restarted MM2 resumes where it
stopped, and MM2's own topics look the same on both brokers.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest

pytest.importorskip("confluent_kafka")

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # noqa: E402

from kafkapy.testing.apache_kafka import ApacheKafkaNode, kafka_home  # noqa: E402
from kafkapy.testing.mirrormaker import (  # noqa: E402
    MirrorMaker2,
    checkpoints_topic,
    end_offsets,
    mirrormaker_installed,
    read_checkpoints,
    remote_topic,
)
from kafkapy.testing.node import KafkaNode  # noqa: E402

pytestmark = [
    pytest.mark.skipif(not (kafka_home() / "VERSION").exists(),
                       reason="Apache Kafka is not installed (run `make tools`)"),
    pytest.mark.skipif(not mirrormaker_installed(), reason="MirrorMaker 2 is not installed (run `make tools`)"),
]

SIDES = ("kafkapy", "kafka")
FLOWS = [("kafkapy", "kafka"), ("kafka", "kafkapy")]
TOPIC = "orders"
GROUP = "billing"
PARTITIONS = 4
RECORDS = 3000
#: How far the group got on each source partition, as a share of the partition's records: all of
#: one partition (a caught-up consumer), part of two, one record of the last.
CONSUMED_SHARE = {0: 1.0, 1: 0.5, 2: 0.8, 3: None}
BROKER_OVERRIDES = {"offsets.topic.num.partitions": "3", "group.initial.rebalance.delay.ms": "0"}
COMPRESSION = {"kafkapy": "lz4", "kafka": "zstd"}
#: Set on the source topics; MM2 gives the remote topics the same (three days of retention keeps
#: the test's hour-old records).
TOPIC_CONFIGS = {"retention.ms": "259200000", "max.message.bytes": "2000000"}
CALL_TIMEOUT = 30.0

Headers = tuple[tuple[str, bytes | None], ...]
Record = tuple[bytes | None, bytes | None, Headers, int]


@dataclass
class Side:
    """What one broker holds before MirrorMaker starts: its records per partition (in offset
    order) and the offsets its group committed."""

    node: Any
    records: dict[int, list[Record]]
    committed: dict[int, int]


def _records(side: str, first: int, count: int) -> list[tuple[int, Record]]:
    """Records ``first`` to ``first + count - 1`` of ``side``, each with its partition. Their
    timestamps are recent: records older than retention.ms would be deleted under the test."""
    rng = random.Random(f"mm2-{side}-{first}")
    base_ts = int(time.time() * 1000) - 3_600_000
    out = []
    for i in range(first, first + count):
        key = None if i % 97 == 0 else f"{side}-key-{i}".encode()
        value = None if i % 211 == 0 else rng.randbytes(rng.randrange(0, 400))
        headers: list[tuple[str, bytes | None]] = [("seq", str(i).encode()), ("side", side.encode())]
        if i % 13 == 0:
            headers += [("dup", b"1"), ("dup", b"2")]
        if i % 17 == 0:
            headers.append(("nil", None))
        out.append((i % PARTITIONS, (key, value, tuple(headers), base_ts + i)))
    return out


def _as_record(msg: Any) -> Record:
    return (msg.key(), msg.value(), tuple(msg.headers() or ()), msg.timestamp()[1])


def _produce(side: str, bootstrap: str, first: int, count: int) -> dict[int, list[Record]]:
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": COMPRESSION[side],
                         "linger.ms": 20})
    by_partition: dict[int, list[Record]] = {p: [] for p in range(PARTITIONS)}
    for partition, (key, value, headers, ts) in _records(side, first, count):
        producer.produce(TOPIC, key=key, value=value, headers=list(headers), partition=partition,
                         timestamp=ts)
        by_partition[partition].append((key, value, headers, ts))
    assert producer.flush(CALL_TIMEOUT) == 0
    return by_partition


def _seed(side: str, bootstrap: str) -> dict[int, list[Record]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1, config=TOPIC_CONFIGS)])[TOPIC].result(CALL_TIMEOUT)
    return _produce(side, bootstrap, 0, RECORDS)


def _consume_part(bootstrap: str, counts: dict[int, int]) -> dict[int, int]:
    """A member of GROUP (subscribe, rebalance, fetch) reads each partition up to its share of
    CONSUMED_SHARE, then commits those positions and leaves: the group is empty, with offsets."""
    targets = {p: 1 if CONSUMED_SHARE[p] is None else max(1, int(n * CONSUMED_SHARE[p]))
               for p, n in counts.items()}
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([TOPIC])
        reached: set[int] = set()
        for _ in range(300):
            for msg in consumer.consume(500, timeout=0.5):
                assert not msg.error(), msg.error()
                p = msg.partition()
                if msg.offset() + 1 >= targets[p] and p not in reached:
                    reached.add(p)
                    consumer.pause([TopicPartition(TOPIC, p)])
            if reached == set(targets):
                break
        assert reached == set(targets), f"consumed to {reached} of {targets}"
        consumer.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in targets.items()], asynchronous=False)
    finally:
        consumer.close()
    return targets


def _read_all(bootstrap: str, topic: str) -> dict[int, list[tuple[int, Record]]]:
    """Every record of ``topic``, from the beginning to its current end, per partition."""
    ends = end_offsets(bootstrap, topic)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "mm2-test-reader",
                         "enable.auto.commit": False})
    out: dict[int, list[tuple[int, Record]]] = {p: [] for p in ends}
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        positions = dict.fromkeys(ends, 0)
        for _ in range(600):
            if all(positions[p] >= ends[p] for p in ends):
                break
            for msg in consumer.consume(1000, timeout=0.5):
                assert not msg.error(), msg.error()
                out[msg.partition()].append((msg.offset(), _as_record(msg)))
                positions[msg.partition()] = msg.offset() + 1
        assert all(positions[p] >= ends[p] for p in ends), f"{topic}: read to {positions}, end {ends}"
    finally:
        consumer.close()
    return out


@pytest.fixture(scope="module")
def mirrored(tmp_path_factory):
    """Both brokers seeded, then MirrorMaker 2 running both flows until every record is across."""
    base = tmp_path_factory.mktemp("mm2")
    with KafkaNode(base / "kafkapy", overrides=BROKER_OVERRIDES) as ours, \
            ApacheKafkaNode(base / "kafka", overrides=BROKER_OVERRIDES) as theirs:
        nodes = {"kafkapy": ours, "kafka": theirs}
        sides = {}
        for name, node in nodes.items():
            records = _seed(name, node.bootstrap)
            committed = _consume_part(node.bootstrap, {p: len(r) for p, r in records.items()})
            sides[name] = Side(node, records, committed)
        clusters = {name: node.bootstrap for name, node in nodes.items()}
        with MirrorMaker2(clusters, FLOWS, base / "mm2") as mm2:
            for source, target in FLOWS:
                counts = {p: len(r) for p, r in sides[source].records.items()}
                mm2.wait_records(target, remote_topic(source, TOPIC), counts, timeout=90)
            yield mm2, sides


@pytest.mark.parametrize("source,target", FLOWS, ids=[f"{s}-to-{t}" for s, t in FLOWS])
def test_every_record_arrives_with_its_key_value_headers_and_timestamp(mirrored, source, target):
    mm2, sides = mirrored
    got = _read_all(mm2.clusters[target], remote_topic(source, TOPIC))
    assert sorted(got) == list(range(PARTITIONS))
    for p, sent in sides[source].records.items():
        arrived = [record for _, record in got[p]]
        assert set(arrived) <= set(sent), f"partition {p}: records that were never sent"
        missing = Counter(sent) - Counter(arrived)
        assert not missing, f"partition {p}: {sum(missing.values())} of {len(sent)} records missing"
        # Each record once and in order (MM2 is at-least-once: a restart may repeat some, so the
        # order is that of first arrivals; every record is distinct).
        assert list(dict.fromkeys(arrived)) == sent


@pytest.mark.parametrize("source,target", FLOWS, ids=[f"{s}-to-{t}" for s, t in FLOWS])
def test_a_group_moves_to_the_target_without_skipping_a_record(mirrored, source, target):
    mm2, sides = mirrored
    side = sides[source]
    remote = remote_topic(source, TOPIC)
    # The caught-up partition translates exactly: MM2's last offset sync is its last record.
    caught_up = {p: len(side.records[p]) for p, share in CONSUMED_SHARE.items() if share == 1.0}
    committed = mm2.wait_committed(target, GROUP, remote, range(PARTITIONS), timeout=60, at_least=caught_up)
    checkpoints = read_checkpoints(mm2.clusters[target], source)
    for p in range(PARTITIONS):
        cp = checkpoints[(GROUP, remote, p)]
        assert cp.upstream_offset == side.committed[p]
        # The group's offsets come from the checkpoints (which may have moved on since). The
        # remote topic was empty and the source has no gaps, so its offsets are the source's:
        # MM2 translates conservatively, to a record at or before the group's position.
        assert 0 <= committed[p] <= cp.downstream_offset <= side.committed[p]
    assert {p: committed[p] for p in caught_up} == caught_up

    # The group's consumer on the target starts where MM2 put it and sees every record the group
    # had not consumed on the source.
    consumer = Consumer({"bootstrap.servers": mm2.clusters[target], "group.id": GROUP,
                         "enable.auto.commit": False, "auto.offset.reset": "error"})
    ends = end_offsets(mm2.clusters[target], remote)
    read: dict[int, list[Record]] = {p: [] for p in range(PARTITIONS)}
    first: dict[int, int] = {}
    try:
        consumer.subscribe([remote])
        positions = dict(committed)
        for _ in range(300):
            if all(positions[p] >= ends[p] for p in range(PARTITIONS)):
                break
            for msg in consumer.consume(1000, timeout=0.5):
                assert not msg.error(), f"no committed position used: {msg.error()}"
                p = msg.partition()
                first.setdefault(p, msg.offset())
                read[p].append(_as_record(msg))
                positions[p] = msg.offset() + 1
    finally:
        consumer.close()
    assert all(positions[p] >= ends[p] for p in range(PARTITIONS)), (positions, ends)
    for p in range(PARTITIONS):
        if committed[p] < ends[p]:
            # MM2 may have synced a later checkpoint in between.
            assert committed[p] <= first[p] <= side.committed[p]
        unconsumed = side.records[p][side.committed[p]:]
        assert not Counter(unconsumed) - Counter(read[p]), f"partition {p}: records skipped"


def _topics(bootstrap: str) -> dict[str, tuple[int, str]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    meta = admin.list_topics(timeout=CALL_TIMEOUT)
    names = sorted(n for n in meta.topics if not n.startswith("__"))
    described = admin.describe_configs([ConfigResource("topic", n) for n in names])
    return {res.name: (len(meta.topics[res.name].partitions), f.result(CALL_TIMEOUT)["cleanup.policy"].value)
            for res, f in described.items()}


def test_mirrormakers_own_topics_are_the_same_on_kafkapy_and_on_apache_kafka(mirrored):
    """Connect's config/offset/status topics, heartbeats, checkpoints and offset syncs: MM2 made
    them on both brokers, with the same partitions and cleanup policy, and uses them."""
    mm2, _ = mirrored
    found = {}
    for side, other in (("kafkapy", "kafka"), ("kafka", "kafkapy")):
        # Named after the other cluster, so spelled with a placeholder to compare.
        found[side] = {name.replace(other, "OTHER"): shape for name, shape in _topics(mm2.clusters[side]).items()}
    assert found["kafkapy"] == found["kafka"]
    expected = {
        "heartbeats": (1, "compact"),
        "OTHER.heartbeats": (1, "compact"),
        "OTHER.checkpoints.internal": (1, "compact"),
        "mm2-offset-syncs.OTHER.internal": (1, "compact"),
        "mm2-configs.OTHER.internal": (1, "compact"),
        "mm2-offsets.OTHER.internal": (25, "compact"),
        "mm2-status.OTHER.internal": (5, "compact"),
        "OTHER.orders": (PARTITIONS, "delete"),
        "orders": (PARTITIONS, "delete"),
    }
    assert found["kafkapy"] == expected
    for source, target in FLOWS:
        bootstrap = mm2.clusters[target]
        # Heartbeats of the flow's target, and those mirrored from its source, keep coming.
        assert end_offsets(bootstrap, "heartbeats")[0] > 0
        assert end_offsets(bootstrap, remote_topic(source, "heartbeats"))[0] > 0
        assert end_offsets(bootstrap, checkpoints_topic(source))[0] > 0
        assert end_offsets(mm2.clusters[source], f"mm2-offset-syncs.{target}.internal")[0] > 0


@pytest.mark.parametrize("source,target", FLOWS, ids=[f"{s}-to-{t}" for s, t in FLOWS])
def test_the_remote_topic_takes_the_source_topics_configs(mirrored, source, target):
    """MM2 reads the source topic's non-default configs (DescribeConfigs and its config
    sources) and sets them on the remote topic (CreateTopics, IncrementalAlterConfigs)."""
    mm2, _ = mirrored
    admin = AdminClient({"bootstrap.servers": mm2.clusters[target]})
    resource = ConfigResource("topic", remote_topic(source, TOPIC))
    configs = admin.describe_configs([resource])[resource].result(CALL_TIMEOUT)
    assert {name: configs[name].value for name in TOPIC_CONFIGS} == TOPIC_CONFIGS


def test_a_restarted_mirrormaker_resumes_where_it_stopped(mirrored):
    """MM2 keeps its position in Connect's compacted offsets topic on each target (kafkapy's for
    kafka->kafkapy): restarted after more records were written, it copies just those, once.
    Last in the module: it adds records the tests above do not expect."""
    mm2, sides = mirrored
    mm2.stop()
    more = {name: _produce(name, side.node.bootstrap, RECORDS, RECORDS // 4) for name, side in sides.items()}
    mm2.start()
    for source, target in FLOWS:
        expected = {p: sides[source].records[p] + more[source][p] for p in range(PARTITIONS)}
        remote = remote_topic(source, TOPIC)
        mm2.wait_records(target, remote, {p: len(r) for p, r in expected.items()}, timeout=90)
        got = _read_all(mm2.clusters[target], remote)
        for p in range(PARTITIONS):
            assert [r for _, r in got[p]] == expected[p], f"{source}->{target} partition {p}"
