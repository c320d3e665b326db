"""Partition reassignment that moves replicas between brokers, with and without throttles.

Three controllers and four brokers from ``kafkapy cluster up``. A topic placed on the first
three brokers moves to the last three while a stock idempotent acks=all producer
(``kafkapy.testing.acked_producer``) keeps writing: the reassignment must complete, every acked
record must be on every new replica exactly once and in order, and the broker that left must
have deleted its copy. A cancelled reassignment goes back to the original replicas and the
added broker deletes its partial copy; a throttled reassignment still completes.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from helpers import FAST_FAILOVER, metadata, send_to
from kafkapy.net.client import KafkaClient
from kafkapy.protocol import ErrorCode, messages as m
from kafkapy.testing.cluster import LocalCluster, eventually
from kafkapy.testing.ledger import problems, read_ledger, read_replica

RESOURCE_BROKER = 4
OP_SET = 0


def send(address: tuple[str, int], request, timeout: float = 20.0):
    return send_to(address, request, timeout=timeout)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # Small replica fetches, so a copy takes many of them and a throttle has a say between. A
    # replica moved away is renamed `-delete` at once and removed after the delete delay (60 s by
    # default, as in Kafka); a short one lets the tests see the files go.
    overrides = {**FAST_FAILOVER, "replica.fetch.max.bytes": 65536,
                 "log.segment.delete.delay.ms": 1000}
    with LocalCluster(tmp_path_factory.mktemp("reassign"), controllers=3, brokers=4,
                      overrides=overrides) as c:
        c.up()
        first = c.broker_ids()[0]
        eventually(lambda: len(send(c.broker_address(first), metadata(allow_auto_create=False)).brokers) == 4,
                   timeout=60, what="all four brokers to be unfenced")
        yield c


def create(cluster: LocalCluster, topic: str, replicas: Sequence[int], configs: dict[str, str]) -> None:
    Req = m.CreateTopicsRequest
    T = Req.CreatableTopic
    resp = send(cluster.broker_address(replicas[0]), Req(topics=[T(
        name=topic, num_partitions=-1, replication_factor=-1,
        assignments=[T.CreatableReplicaAssignment(partition_index=0, broker_ids=list(replicas))],
        configs=[T.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])],
        timeout_ms=10000, validate_only=False))
    assert resp.topics[0].error_code == ErrorCode.NONE, resp.topics[0]
    eventually(lambda: state(cluster, topic)[1] == tuple(sorted(replicas)), timeout=30, what=f"{topic}'s full ISR")


def state(cluster: LocalCluster, topic: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(replicas, sorted ISR) of partition 0 as a broker reports it."""
    meta = send(cluster.broker_address(cluster.broker_ids()[0]), metadata(topic, allow_auto_create=False))
    [t] = meta.topics
    if t.error_code != ErrorCode.NONE or not t.partitions:
        return (), ()
    p = t.partitions[0]
    return tuple(p.replica_nodes), tuple(sorted(p.isr_nodes))


def reassign(cluster: LocalCluster, topic: str, replicas: Sequence[int] | None) -> None:
    Req = m.AlterPartitionReassignmentsRequest
    T = Req.ReassignableTopic
    resp = send(cluster.broker_address(cluster.broker_ids()[0]), Req(timeout_ms=10000, topics=[
        T(name=topic, partitions=[T.ReassignablePartition(
            partition_index=0, replicas=None if replicas is None else list(replicas))])]))
    assert resp.error_code == ErrorCode.NONE, resp
    [[p]] = [t.partitions for t in resp.responses]
    assert p.error_code == ErrorCode.NONE, p


def ongoing(cluster: LocalCluster, topic: str) -> list[tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]:
    """(replicas, adding, removing) of the reassignments of ``topic`` in progress."""
    Req = m.ListPartitionReassignmentsRequest
    resp = send(cluster.broker_address(cluster.broker_ids()[-1]), Req(timeout_ms=10000, topics=None))
    assert resp.error_code == ErrorCode.NONE
    return [(tuple(p.replicas), tuple(p.adding_replicas), tuple(p.removing_replicas))
            for t in resp.topics if t.name == topic for p in t.partitions]


def set_cluster_default(cluster: LocalCluster, configs: dict[str, str]) -> None:
    Req = m.IncrementalAlterConfigsRequest
    R = Req.AlterConfigsResource
    resp = send(cluster.broker_address(cluster.broker_ids()[0]), Req(validate_only=False, resources=[R(
        resource_type=RESOURCE_BROKER, resource_name="",
        configs=[R.AlterableConfig(name=k, config_operation=OP_SET, value=v) for k, v in configs.items()])]))
    assert all(r.error_code == ErrorCode.NONE for r in resp.responses), resp


def prefill(cluster: LocalCluster, topic: str, count: int, size: int) -> None:
    from confluent_kafka import Producer
    # Small batches, so a replica fetch (replica.fetch.max.bytes) holds only part of the log.
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 20,
                         "batch.size": 16384})
    for i in range(count):
        producer.produce(topic, value=f"{i}:".encode().ljust(size, b"x"), partition=0)
        producer.poll(0)
    assert producer.flush(60) == 0


def has_copy(cluster: LocalCluster, broker: int, topic: str) -> bool:
    return any(d.name.startswith(f"{topic}-0") for d in (cluster.node_dir(broker) / "data").iterdir())


class AckedProducer:
    """The acked producer in its own process, stopped (SIGTERM, then kill) on exit."""

    def __init__(self, cluster: LocalCluster, topic: str, workdir: Path) -> None:
        self.ledger = workdir / f"{topic}.ledger"
        self._stderr = open(workdir / f"{topic}.producer.stderr", "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kafkapy.testing.acked_producer", "--bootstrap", cluster.bootstrap,
             "--topic", topic, "--partitions", "1", "--ledger", str(self.ledger), "--rate", "200"],
            stdout=subprocess.DEVNULL, stderr=self._stderr)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._stderr.close()
        return self.proc.returncode


def test_move_under_an_acks_all_producer_keeps_every_acked_record(cluster, tmp_path):
    b1, b2, b3, b4 = cluster.broker_ids()
    topic = "moving"
    create(cluster, topic, [b1, b2, b3], {"min.insync.replicas": "2"})
    producer = AckedProducer(cluster, topic, tmp_path)
    try:
        eventually(lambda: producer.ledger.exists() and producer.ledger.stat().st_size > 2000,
                   timeout=30, what="acknowledgements before the move")
        reassign(cluster, topic, [b2, b3, b4])
        eventually(lambda: not ongoing(cluster, topic) and state(cluster, topic)[0] == (b2, b3, b4),
                   timeout=60, what="the reassignment to complete")
        size = producer.ledger.stat().st_size
        eventually(lambda: producer.ledger.stat().st_size > size + 1000, timeout=30,
                   what="acknowledgements after the move")
    finally:
        assert producer.stop() == 0
    acks = read_ledger(producer.ledger)
    end = max(a.offset for a in acks[0]) + 1

    def found() -> list[str]:
        replicas = {0: {b: read_replica(cluster.node_dir(b) / "data", topic, 0) for b in (b2, b3, b4)}}
        return problems(acks, replicas, committed={0: end})
    eventually(lambda: found() == [], timeout=30, what="every new replica to hold every acked record")
    eventually(lambda: not has_copy(cluster, b1, topic), timeout=30, what=f"broker {b1} to delete its copy")
    assert state(cluster, topic) == ((b2, b3, b4), (b2, b3, b4))


def test_cancel_goes_back_and_the_added_broker_deletes_its_copy(cluster):
    b1, b2, b3, b4 = cluster.broker_ids()
    topic = "cancelled"
    # Throttled hard on the leader's side, so the copy to b4 is still running when the cancel
    # arrives (unthrottled, 200 kB copy in well under a second).
    set_cluster_default(cluster, {"leader.replication.throttled.rate": "1000"})
    create(cluster, topic, [b1, b2, b3], {"leader.replication.throttled.replicas": "*"})
    prefill(cluster, topic, 200, 1000)
    reassign(cluster, topic, [b2, b3, b4])
    assert ongoing(cluster, topic) == [((b2, b3, b4, b1), (b4,), (b1,))]
    eventually(lambda: has_copy(cluster, b4, topic), timeout=30, what=f"broker {b4} to start its copy")
    time.sleep(2)
    assert ongoing(cluster, topic) == [((b2, b3, b4, b1), (b4,), (b1,))], "the throttle holds the copy back"
    print(f"copied to broker {b4} before the cancel: "
          f"{len(read_replica(cluster.node_dir(b4) / 'data', topic, 0).records)} of 200 records")
    reassign(cluster, topic, None)
    assert ongoing(cluster, topic) == []
    eventually(lambda: state(cluster, topic) == ((b2, b3, b1), (b1, b2, b3)), timeout=30,
               what="the original replicas back")
    eventually(lambda: not has_copy(cluster, b4, topic), timeout=30, what=f"broker {b4} to delete its copy")


def test_throttled_move_completes(cluster):
    b1, b2, b3, b4 = cluster.broker_ids()
    topic = "throttled"
    # Throttled on the follower's side only, for the replica that moves (as
    # kafka-reassign-partitions.sh --throttle names it).
    set_cluster_default(cluster, {"follower.replication.throttled.rate": "40000"})
    create(cluster, topic, [b1, b2, b3], {"follower.replication.throttled.replicas": f"0:{b4}"})
    prefill(cluster, topic, 600, 1000)
    started = time.monotonic()
    reassign(cluster, topic, [b4, b2, b3])
    eventually(lambda: not ongoing(cluster, topic) and state(cluster, topic)[0] == (b4, b2, b3),
               timeout=60, what="the throttled reassignment to complete")
    print(f"throttled move of {600 * 1000} bytes at 40000 B/s took {time.monotonic() - started:.1f} s")
    copies = {b: read_replica(cluster.node_dir(b) / "data", topic, 0) for b in (b2, b3, b4)}
    assert {len(c.records) for c in copies.values()} == {600}
    assert problems({}, {0: copies}) == []
