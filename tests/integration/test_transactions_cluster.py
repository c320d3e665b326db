"""Transactions across brokers: one controller and three brokers, a replicated
__transaction_state, partition leaders spread over the brokers (the coordinator sends markers to
the others over the inter-broker listener), and the coordinator's broker killed with a
transaction open: the next coordinator loads the id, the next producer fences and aborts the
old transaction, and read_committed consumers see exactly the committed records."""

from __future__ import annotations

import uuid

import pytest

from helpers import TXN_NODE_OVERRIDES, consume_values, create_topics, metadata, send_to, txn_producer
from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import ErrorCode as E
from kafkapy.testing.cluster import LocalCluster, eventually

pytest.importorskip("confluent_kafka")

PARTITIONS = 6


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with LocalCluster(tmp_path_factory.mktemp("txn-cluster"), controllers=1, brokers=3,
                      overrides=TXN_NODE_OVERRIDES) as c:
        c.up()
        first = c.broker_ids()[0]
        eventually(lambda: len(send_to(c.broker_address(first), metadata(allow_auto_create=False)).brokers) == 3,
                   timeout=90, what="the three brokers to be unfenced")
        yield c


def consume(cluster: LocalCluster, topic: str, expect: int, secs: float = 20.0) -> list[bytes]:
    return consume_values(cluster, topic, PARTITIONS, committed=True, expect=expect, secs=secs, grace=1.0)


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
    topic = f"eos-{uuid.uuid4().hex[:6]}"
    r = send_to(cluster.broker_address(cluster.broker_ids()[0]), create_topics((topic, PARTITIONS, 3)), timeout=60)
    assert r.topics[0].error_code == E.NONE, r
    txn_id = f"txn-{uuid.uuid4().hex[:6]}"

    first = txn_producer(cluster, txn_id)
    first.init_transactions(60)
    expected = []
    for n in range(3):
        first.begin_transaction()
        for p in range(PARTITIONS):
            value = b"t%d-p%d" % (n, p)
            first.produce(topic, value=value, partition=p)
            expected.append(value)
        first.commit_transaction(60)
    assert consume(cluster, topic, len(expected)) == sorted(expected)

    # A transaction left open on every partition, then its coordinator's broker dies.
    first.begin_transaction()
    for p in range(PARTITIONS):
        first.produce(topic, value=b"open-p%d" % p, partition=p)
    first.flush(30)
    dead = coordinator_of(cluster, txn_id)
    cluster.kill9(dead)

    second = txn_producer(cluster, txn_id)
    second.init_transactions(90)  # the new coordinator aborts the open transaction first
    assert coordinator_of(cluster, txn_id) != dead
    second.begin_transaction()
    for p in range(PARTITIONS):
        value = b"after-p%d" % p
        second.produce(topic, value=value, partition=p)
        expected.append(value)
    second.commit_transaction(60)
    got = consume(cluster, topic, len(expected), secs=30)
    assert got == sorted(expected)
    cluster.start(dead)
