"""Retention on a running node, seen through a stock client (confluent-kafka / librdkafka).

The node checks retention every 500 ms and unlinks retired segment files 1 s after renaming them
to ``.deleted`` (Kafka's two-step deletion). Each test makes its own topic with small segments.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from helpers import wait_for  # noqa: E402

from kafkapy.testing.node import KafkaNode  # noqa: E402

NODE_OVERRIDES = {
    "log.retention.check.interval.ms": "500",
    "log.initial.task.delay.ms": "500",
    "log.segment.delete.delay.ms": "1000",
}

SEGMENT_BYTES = 4096
VALUE_PAD = 100


def value_of(i: int) -> bytes:
    return b"%08d" % i + b"x" * VALUE_PAD


def create_topic(node, configs: dict[str, str]) -> str:
    topic = f"retention-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    futures = admin.create_topics([NewTopic(topic, 1, 1, config={
        "segment.bytes": str(SEGMENT_BYTES), **configs})], request_timeout=15)
    futures[topic].result(timeout=20)
    return topic


def produce(node, topic: str, start: int, count: int) -> None:
    """``count`` records, values numbered from ``start`` (= their offsets in a fresh topic),
    in batches of 10 so the partition rolls many segments."""
    producer = Producer({"bootstrap.servers": node.bootstrap, "enable.idempotence": True,
                         "acks": "all", "linger.ms": 5, "batch.num.messages": 10})
    errors: list = []
    for i in range(start, start + count):
        producer.produce(topic, value_of(i), partition=0,
                         on_delivery=lambda err, _msg: err is not None and errors.append(err))
        if i % 10 == 9:
            producer.poll(0)
    assert producer.flush(30) == 0, "records left unacknowledged"
    assert not errors, errors


def watermarks(node, topic: str) -> tuple[int, int]:
    """(earliest, latest) as ListOffsets answers them."""
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "wm-" + uuid.uuid4().hex})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)
    finally:
        c.close()


def settled_watermarks(node, topic: str, *, quiet_s: float = 2.0, timeout: float = 30.0
                       ) -> tuple[int, int]:
    """The watermarks once retention is done with what was produced: the log start has moved
    and stayed put for ``quiet_s`` (several retention passes). A pass may run while the records
    are still arriving, so the first advance seen is not necessarily the last."""
    deadline = time.monotonic() + timeout
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        w = watermarks(node, topic)
        if w != last:
            last, since = w, time.monotonic()
        elif w[0] > 0 and time.monotonic() - since >= quiet_s:
            return w
        time.sleep(0.25)
    raise AssertionError(f"the watermarks of {topic} did not settle in {timeout}s (last {last})")


def partition_dir(node, topic: str) -> Path:
    return Path(node.data_dir) / f"{topic}-0"


def segment_bases(d: Path) -> list[int]:
    return sorted(int(n.split(".")[0]) for n in os.listdir(d) if n.endswith(".log"))


def deleted_files(d: Path) -> set[str]:
    return {n for n in os.listdir(d) if n.endswith(".deleted")}


def consume(node, topic: str, *, reset: str, from_offset: int, until: Callable[[list], bool],
            timeout: float = 20.0, while_waiting: Callable[[], None] | None = None) -> list:
    """(offset, value) pairs a consumer assigned at ``from_offset`` reads until ``until``."""
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "g-" + uuid.uuid4().hex,
                  "auto.offset.reset": reset, "enable.auto.commit": False})
    got: list[tuple[int, bytes]] = []
    try:
        c.assign([TopicPartition(topic, 0, from_offset)])
        deadline = time.monotonic() + timeout
        while not until(got):
            assert time.monotonic() < deadline, f"consumed only {len(got)} records: {got[-3:]}"
            msg = c.poll(0.5)
            if msg is None:
                if while_waiting is not None:
                    while_waiting()
                continue
            assert msg.error() is None, msg.error()
            got.append((msg.offset(), msg.value()))
    finally:
        c.close()
    return got


def test_retention_bytes_two_step_deletion_and_consumer_resets(node):
    topic = create_topic(node, {"retention.bytes": "12000"})
    d = partition_dir(node, topic)
    produce(node, topic, 0, 300)
    wait_for("the log start to advance", lambda: watermarks(node, topic)[0] > 0)
    wait_for("a quiet log dir", lambda: not deleted_files(d), timeout=10)
    before = segment_bases(d)
    produce(node, topic, 300, 100)  # pushes the oldest segments over retention.bytes
    # First step: the segments leave the log and their files are renamed to .deleted ...
    oldest = f"{before[0]:020d}"
    seen = wait_for("the oldest segment's .deleted files", lambda: (
        (names := deleted_files(d)) and f"{oldest}.log.deleted" in names and names))
    assert {f"{oldest}.index.deleted", f"{oldest}.timeindex.deleted"} <= seen
    assert f"{oldest}.log" not in os.listdir(d)
    # ... second step: after file.delete.delay.ms they are unlinked.
    wait_for(".deleted files to be unlinked", lambda: not (seen & set(os.listdir(d))), timeout=10)
    low, high = wait_for("log start and end", lambda: (w := watermarks(node, topic))[0] > before[0] and w)
    assert high == 400
    wait_for("no .deleted left", lambda: not deleted_files(d), timeout=10)
    bases = segment_bases(d)
    assert bases[0] == low and 0 not in bases
    # Kafka deletes whole segments only while what stays is at least retention.bytes.
    assert sum(os.path.getsize(d / f"{b:020d}.log") for b in bases) >= 12000

    # A consumer at a deleted offset with reset=earliest restarts at the new log start and reads
    # every record from there, no gap, nothing lost.
    got = consume(node, topic, reset="earliest", from_offset=0,
                  until=lambda g: len(g) >= high - low)
    assert [o for o, _ in got] == list(range(low, high))
    assert all(v == value_of(o) for o, v in got)

    # With reset=latest it jumps to the end: only records produced afterwards arrive.
    extra = [high]

    def produce_one() -> None:
        produce(node, topic, extra[-1], 1)
        extra.append(extra[-1] + 1)

    got = consume(node, topic, reset="latest", from_offset=0, until=lambda g: len(g) >= 1,
                  while_waiting=produce_one)
    assert got[0][0] >= high and got[0][1] == value_of(got[0][0])


def test_retention_ms_deletes_expired_segments_once_rolled(node):
    topic = create_topic(node, {"retention.ms": "3000"})
    produce(node, topic, 0, 200)
    d = partition_dir(node, topic)
    old_bases = segment_bases(d)
    assert len(old_bases) > 3
    # Retention never takes the active segment; a later append rolls past the expired ones.
    time.sleep(3.5)
    produce(node, topic, 200, 60)
    low, high = wait_for("expired segments to go",
                         lambda: (w := watermarks(node, topic))[0] > 0 and w)
    assert high == 260
    wait_for("old segment files to be unlinked",
             lambda: not (set(segment_bases(d)) & set(old_bases[:-1])) and not deleted_files(d))
    got = consume(node, topic, reset="earliest", from_offset=low, until=lambda g: len(g) >= high - low)
    assert [o for o, _ in got] == list(range(low, high))


def test_delete_records_then_retention_removes_segments_below_start(node):
    topic = create_topic(node, {})  # no time or size retention: only the log start counts
    produce(node, topic, 0, 200)
    d = partition_dir(node, topic)
    bases = segment_bases(d)
    target = bases[3] + 1
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    futures = admin.delete_records([TopicPartition(topic, 0, target)], request_timeout=15)
    for f in futures.values():
        f.result(timeout=20)
    assert watermarks(node, topic) == (target, 200)
    wait_for("segments wholly below the log start to go",
             lambda: segment_bases(d)[0] == bases[3] and not deleted_files(d))
    assert watermarks(node, topic) == (target, 200)
    got = consume(node, topic, reset="earliest", from_offset=0, until=lambda g: len(g) >= 200 - target)
    assert [o for o, _ in got] == list(range(target, 200))


def test_kill9_while_deleted_files_wait(node):
    # A long delay keeps the renamed files around for the crash.
    topic = create_topic(node, {"retention.bytes": "12000", "file.delete.delay.ms": "600000"})
    produce(node, topic, 0, 400)
    d = partition_dir(node, topic)
    leftovers = wait_for("renamed .deleted files", lambda: deleted_files(d))
    low, high = settled_watermarks(node, topic)
    node.kill9()
    assert deleted_files(d) >= leftovers  # still there after the crash
    node.start()
    assert not deleted_files(d), "leftovers of the interrupted deletion are removed at load"
    low2, high2 = watermarks(node, topic)
    assert (low2, high2) == (low, high)
    assert segment_bases(d)[0] <= low2
    got = consume(node, topic, reset="earliest", from_offset=0, until=lambda g: len(g) >= high - low)
    assert [o for o, _ in got] == list(range(low, high))
    assert all(v == value_of(o) for o, v in got)


def test_followers_apply_retention_to_their_own_logs(tmp_path):
    """Three combined nodes, a topic with three replicas: every replica, leader or follower,
    deletes its own old segments."""
    from helpers import FAST_FAILOVER
    from kafkapy.testing.cluster import LocalCluster

    class Bootstrap:  # what create_topic/produce/watermarks need of a node
        def __init__(self, servers: str) -> None:
            self.bootstrap = servers

    with LocalCluster(tmp_path / "cluster", combined=3,
                      overrides={**FAST_FAILOVER, **NODE_OVERRIDES}) as cluster:
        servers = Bootstrap(cluster.up())
        ids = cluster.broker_ids()
        topic = f"retention-rf3-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": servers.bootstrap})
        admin.create_topics([NewTopic(topic, 1, 3, config={
            "segment.bytes": str(SEGMENT_BYTES), "retention.bytes": "12000",
            "min.insync.replicas": "3"})], request_timeout=15)[topic].result(timeout=30)
        produce(servers, topic, 0, 400)  # acks=all with min.insync.replicas=3: on every replica
        low, high = wait_for("the log start to advance",
                             lambda: (w := watermarks(servers, topic))[0] > 0 and w, timeout=30)
        assert high == 400
        dirs = [cluster.node_dir(i) / "data" / f"{topic}-0" for i in ids]

        def every_replica_trimmed() -> bool:
            return all(segment_bases(d)[0] > 0 and not deleted_files(d) for d in dirs)

        wait_for("every replica to delete its old segments", every_replica_trimmed, timeout=30)
        for d in dirs:
            # Each replica measures retention.bytes on its own segments (a follower's can be
            # cut differently, as in Kafka): whole segments go only while what stays is at
            # least retention.bytes.
            assert sum(os.path.getsize(d / f"{b:020d}.log") for b in segment_bases(d)) >= 12000



def test_first_retention_pass_runs_after_the_initial_task_delay(tmp_path):
    """As Kafka: the first retention pass after log.initial.task.delay.ms, not after a whole
    log.retention.check.interval.ms (here ten minutes, far past the test's deadline).

    The expired records are written while the delay is long, so that they are all there before
    the node restarts with a short delay: no race with the first pass."""
    overrides = {"log.retention.check.interval.ms": "600000",
                 "log.initial.task.delay.ms": "600000",
                 "log.segment.delete.delay.ms": "1000"}
    with KafkaNode(tmp_path, overrides=overrides) as node:
        topic = create_topic(node, {"retention.ms": "60000"})
        day_old = int(time.time() * 1000) - 86_400_000
        producer = Producer({"bootstrap.servers": node.bootstrap, "acks": "all",
                             "linger.ms": 5, "batch.num.messages": 10})
        for i in range(200):
            producer.produce(topic, value_of(i), partition=0, timestamp=day_old + i)
        assert producer.flush(30) == 0
        assert len(segment_bases(partition_dir(node, topic))) > 3
        assert watermarks(node, topic) == (0, 200), "no pass yet: the delay is ten minutes"
        node.stop()
        node.overrides["log.initial.task.delay.ms"] = "3000"
        node.start()
        low, high = wait_for("the first retention pass",
                             lambda: (w := watermarks(node, topic))[0] > 0 and w, timeout=40)
        assert high == 200 and low > 0
