"""Transactions across brokers: one controller and three brokers, a replicated
__transaction_state, partition leaders spread over the brokers (the coordinator sends markers to
the others over the inter-broker listener), and the coordinator's broker killed with a
transaction open: the next coordinator loads the id, the next producer fences and aborts the
old transaction, and read_committed consumers see exactly the committed records."""

from __future__ import annotations

import time
import uuid

import pytest

from helpers import create_topics, metadata, send_to
from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import ErrorCode as E
from kafkapy.testing.cluster import LocalCluster, eventually

confluent_kafka = pytest.importorskip("confluent_kafka")

PARTITIONS = 6


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    overrides = {"transaction.state.log.num.partitions": "3", "offsets.topic.num.partitions": "3",
                 "group.initial.rebalance.delay.ms": "0"}
    with LocalCluster(tmp_path_factory.mktemp("txn-cluster"), controllers=1, brokers=3,
                      overrides=overrides) as c:
        c.up()
        first = c.broker_ids()[0]
        eventually(lambda: len(send_to(c.broker_address(first), metadata(allow_auto_create=False)).brokers) == 3,
                   timeout=90, what="the three brokers to be unfenced")
        yield c


def consume(bootstrap: str, topic: str, expect: int, secs: float = 20.0) -> list[bytes]:
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                                  "enable.auto.commit": False, "isolation.level": "read_committed"})
    c.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got: list[bytes] = []
    deadline = time.monotonic() + secs
    try:
        while time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is not None and not msg.error():
                got.append(msg.value())
            if len(got) >= expect:
                deadline = min(deadline, time.monotonic() + 1.0)
    finally:
        c.close()
    return sorted(got)


def coordinator_of(cluster: LocalCluster, txn_id: str) -> int:
    for broker in cluster.broker_ids():
        try:
            r = send_to(cluster.broker_address(broker),
                        m.FindCoordinatorRequest(key_type=1, coordinator_keys=[txn_id]))  # v4+
        except Exception:  # noqa: BLE001 - a stopped broker
            continue
        if r.coordinators[0].error_code == E.NONE:
            return r.coordinators[0].node_id
    raise AssertionError(f"no coordinator for {txn_id}")


def test_markers_reach_every_leader_and_a_coordinator_failover_fences_the_open_transaction(cluster):
    bootstrap = cluster.bootstrap
    topic = f"eos-{uuid.uuid4().hex[:6]}"
    r = send_to(cluster.broker_address(cluster.broker_ids()[0]), create_topics((topic, PARTITIONS, 3)), timeout=60)
    assert r.topics[0].error_code == E.NONE, r
    txn_id = f"txn-{uuid.uuid4().hex[:6]}"
    config = {"bootstrap.servers": bootstrap, "transactional.id": txn_id, "transaction.timeout.ms": 60000}

    first = confluent_kafka.Producer(config)
    first.init_transactions(60)
    expected = []
    for n in range(3):
        first.begin_transaction()
        for p in range(PARTITIONS):
            value = b"t%d-p%d" % (n, p)
            first.produce(topic, value=value, partition=p)
            expected.append(value)
        first.commit_transaction(60)
    assert consume(bootstrap, topic, len(expected)) == sorted(expected)

    # A transaction left open on every partition, then its coordinator's broker dies.
    first.begin_transaction()
    for p in range(PARTITIONS):
        first.produce(topic, value=b"open-p%d" % p, partition=p)
    first.flush(30)
    dead = coordinator_of(cluster, txn_id)
    cluster.kill9(dead)

    second = confluent_kafka.Producer(config)
    second.init_transactions(90)  # the new coordinator aborts the open transaction first
    assert coordinator_of(cluster, txn_id) != dead
    second.begin_transaction()
    for p in range(PARTITIONS):
        value = b"after-p%d" % p
        second.produce(topic, value=value, partition=p)
        expected.append(value)
    second.commit_transaction(60)
    got = consume(bootstrap, topic, len(expected), secs=30)
    assert got == sorted(expected)
    cluster.start(dead)
