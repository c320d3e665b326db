"""A log dir that fails on a two-broker cluster: the broker takes it offline, reports it in its
heartbeats, and the controller moves the partition's leadership to the other in-sync replica;
acknowledged records survive and the broker keeps running.

The fault: the partition's directory on broker 2 vanishes under the running broker (as when the
disk under it goes away), so the next segment roll there fails with ENOENT, which is not a
full disk and takes the dir offline. (A read-only remount would be closer to a failing disk, but
Linux refuses it while the broker holds files open for writing.)
"""

from __future__ import annotations

import shutil
import time
import uuid
from pathlib import Path

import pytest

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from helpers import FAST_FAILOVER, wait_for  # noqa: E402
from kafkapy.testing.cluster import LocalCluster  # noqa: E402

FAILING, OTHER = 2, 3  # broker ids with --controllers 1 --brokers 2
TOPIC = "offline-dir"


def _leader_and_isr(admin: AdminClient) -> tuple[int, list[int]]:
    p = admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[0]
    return p.leader, sorted(p.isrs)


def _produce(bootstrap: str, values: list[bytes]) -> tuple[list[int], list[KafkaError]]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                         "message.timeout.ms": 20000, "retry.backoff.ms": 200})
    acked: list[int] = []
    errors: list[KafkaError] = []
    for v in values:
        producer.produce(TOPIC, v, partition=0, on_delivery=lambda err, msg: errors.append(err)
                         if err is not None else acked.append(msg.offset()))
        assert producer.flush(30) == 0  # one record a request: segments of 1 KiB roll often
    return acked, errors


def test_a_failed_log_dir_moves_leadership_to_an_in_sync_replica(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "c", controllers=1, brokers=2, overrides=FAST_FAILOVER)
    part_dir = cluster.node_dir(FAILING) / "data" / f"{TOPIC}-0"
    try:
        bootstrap = cluster.up()
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, num_partitions=1, replica_assignment=[[FAILING, OTHER]],
                                      config={"segment.bytes": "1024"})],
                            request_timeout=15)[TOPIC].result(timeout=20)
        assert _leader_and_isr(admin) == (FAILING, [FAILING, OTHER])
        acked, errors = _produce(bootstrap, [b"before-%d-" % i + b"x" * 200 for i in range(20)])
        assert len(acked) == 20 and not errors

        # The partition's directory goes away under broker 2: its next roll fails.
        shutil.rmtree(part_dir)
        acked2, errors2 = _produce(bootstrap, [b"after-%d-" % i + b"x" * 200 for i in range(10)])
        assert len(acked2) == 10, f"records lost: {errors2}"
        wait_for("leadership on broker 3, alone in the ISR",
                 lambda: _leader_and_isr(admin) == (OTHER, [OTHER]) or None, timeout=30)
        log = cluster.log(FAILING)
        assert "is offline" in log and "Reporting log dir" in log
        assert "Traceback" not in log
        assert cluster.state().node(FAILING).pid in cluster.pids(), "broker 2 died"

        # Every acknowledged record is readable from the new leader.
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        try:
            consumer.assign([TopicPartition(TOPIC, 0, 0)])
            got: dict[int, bytes] = {}
            deadline = time.monotonic() + 30
            while len(got) < 30 and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None and not msg.error():
                    got[msg.offset()] = msg.value()
        finally:
            consumer.close()
        assert sorted(got) == sorted(acked + acked2)
    finally:
        cluster.down()
