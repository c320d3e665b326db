"""Transactions on a live single node: the coordinator found with FindCoordinator key type 1,
InitProducerId with a transactional id, a stock client's (confluent-kafka) commits and aborts as
read_committed consumers see them, zombie fencing, and a restart that keeps committed
transactions and resumes a PrepareCommit's markers.
"""

from __future__ import annotations

import subprocess
import time

import pytest

from helpers import (
    TXN_NODE_OVERRIDES,
    add_partitions,
    added_codes,
    batch,
    consume_values,
    create_topics,
    init_request,
    make_topic,
    open_transaction,
    retry_send,
    run_client,
    txn_produce,
    txn_producer,
    unique_name,
)
from kafkapy.net.client import KafkaClient
from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import ErrorCode as E
from kafkapy.testing.apache_kafka import java_command, kafka_home

confluent_kafka = pytest.importorskip("confluent_kafka")

NODE_OVERRIDES = TXN_NODE_OVERRIDES


def describe(node, txn_id: str):
    async def go(c: KafkaClient):
        r = await retry_send(c, m.DescribeTransactionsRequest(transactional_ids=[txn_id]), 0,
                             lambda r: r.transaction_states[0].error_code)
        return r.transaction_states[0]

    return run_client(node, go)


def wait_state(node, txn_id: str, wanted: str, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while True:
        st = describe(node, txn_id)
        if st.transaction_state == wanted:
            return st
        if time.monotonic() > deadline:
            raise AssertionError(f"{txn_id} is {st.transaction_state}, not {wanted}")
        time.sleep(0.2)


# ----------------------------------------------------------------------------------------------

def test_find_coordinator_and_init_producer_id(node):
    txn_id = unique_name("init")

    async def go(c: KafkaClient):
        # key type 1: the first call creates __transaction_state; then this node coordinates
        r = await retry_send(c, m.FindCoordinatorRequest(key=txn_id, key_type=1), 3)
        assert (r.error_code, r.node_id, r.port) == (E.NONE, 1, node.port)
        r = await c.send(m.FindCoordinatorRequest(key_type=1, coordinator_keys=[txn_id, "other"]), 4)
        assert [(x.error_code, x.node_id) for x in r.coordinators] == [(E.NONE, 1), (E.NONE, 1)]
        r = await c.send(m.FindCoordinatorRequest(key="", key_type=1), 3)
        assert r.error_code == E.INVALID_REQUEST

        first = await retry_send(c, init_request(txn_id), 4)
        assert first.error_code == E.NONE and first.producer_id >= 0 and first.producer_epoch == 0
        again = await retry_send(c, init_request(txn_id), 4)
        assert (again.producer_id, again.producer_epoch) == (first.producer_id, 1)
        r = await c.send(init_request(txn_id, timeout_ms=10**9), 4)
        assert r.error_code == E.INVALID_TRANSACTION_TIMEOUT

        # a transaction the coordinator knows: AddPartitionsToTxn then DescribeTransactions
        topic = unique_name("desc")
        assert (await c.send(create_topics((topic, 2, 1)))).topics[0].error_code == E.NONE
        r = await c.send(add_partitions(txn_id, again.producer_id, again.producer_epoch, topic, [0, 1]), 3)
        assert added_codes(r) == [E.NONE, E.NONE]
        # an old epoch is fenced (INVALID_PRODUCER_EPOCH before v2)
        stale = add_partitions(txn_id, again.producer_id, 0, topic, [0])
        for version, code in ((1, E.INVALID_PRODUCER_EPOCH), (3, E.PRODUCER_FENCED)):
            assert added_codes(await c.send(stale, version)) == [code]
        r = await c.send(m.DescribeTransactionsRequest(transactional_ids=[txn_id, unique_name("unknown")]), 0)
        known, unknown = r.transaction_states
        assert (known.error_code, known.transaction_state, known.producer_id) == \
            (E.NONE, "Ongoing", again.producer_id)
        assert [(t.topic, sorted(t.partitions)) for t in known.topics] == [(topic, [0, 1])]
        assert unknown.error_code == E.TRANSACTIONAL_ID_NOT_FOUND
        r = await retry_send(c, m.ListTransactionsRequest(state_filters=["Ongoing", "Nonsense"],
                                                          producer_id_filters=[], duration_filter=-1), 1)
        assert r.unknown_state_filters == ["Nonsense"]
        assert (txn_id, again.producer_id, "Ongoing") in [
            (t.transactional_id, t.producer_id, t.transaction_state) for t in r.transaction_states]

    run_client(node, go, timeout=60)


def test_an_open_transaction_is_hidden_from_read_committed(node):
    topic = make_topic(node, unique_name("open"))
    p = txn_producer(node, unique_name("open"))
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(4):
        p.produce(topic, value=b"open-%d" % i, partition=i % 2)
    p.flush(10)
    assert consume_values(node, topic, 2, committed=False, expect=4) == [b"open-%d" % i for i in range(4)]
    assert consume_values(node, topic, 2, committed=True, expect=1, secs=3) == []
    p.commit_transaction(30)
    assert consume_values(node, topic, 2, committed=True, expect=4) == [b"open-%d" % i for i in range(4)]


def test_commit_is_visible_to_read_committed(node):
    topic = make_topic(node, unique_name("commit"))
    txn_id = unique_name("commit")
    p = txn_producer(node, txn_id)
    p.init_transactions(30)
    for n in range(3):
        p.begin_transaction()
        for i in range(3):
            p.produce(topic, value=b"c%d-%d" % (n, i), partition=i % 2)
        p.commit_transaction(30)
    expected = sorted(b"c%d-%d" % (n, i) for n in range(3) for i in range(3))
    assert consume_values(node, topic, 2, committed=True, expect=len(expected)) == expected
    assert wait_state(node, txn_id, "CompleteCommit").producer_epoch == 0


def test_aborted_records_are_never_seen_by_read_committed(node):
    topic = make_topic(node, unique_name("abort"))
    p = txn_producer(node, unique_name("abort"))
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(4):
        p.produce(topic, value=b"aborted-%d" % i, partition=i % 2)
    p.flush(10)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce(topic, value=b"kept", partition=0)
    p.commit_transaction(30)
    assert consume_values(node, topic, 2, committed=True, expect=2, secs=6) == [b"kept"]
    assert len(consume_values(node, topic, 2, committed=False, expect=5)) == 5


def test_a_second_producer_fences_the_first(node):
    topic = make_topic(node, unique_name("zombie"))
    txn_id = unique_name("zombie")
    old = txn_producer(node, txn_id)
    old.init_transactions(30)
    old.begin_transaction()
    old.produce(topic, value=b"zombie", partition=0)
    old.flush(10)
    new = txn_producer(node, txn_id)
    new.init_transactions(30)  # aborts the old producer's transaction under a bumped epoch
    with pytest.raises(confluent_kafka.KafkaException) as err:
        old.produce(topic, value=b"zombie-2", partition=1)
        old.commit_transaction(15)
    assert err.value.args[0].fatal() or err.value.args[0].code() in (
        confluent_kafka.KafkaError._FENCED, confluent_kafka.KafkaError.PRODUCER_FENCED,
        confluent_kafka.KafkaError.INVALID_PRODUCER_EPOCH)
    new.begin_transaction()
    new.produce(topic, value=b"new", partition=1)
    new.commit_transaction(30)
    st = wait_state(node, txn_id, "CompleteCommit")
    assert st.producer_epoch >= 2  # one bump for the fence, one for the new producer
    assert consume_values(node, topic, 2, committed=True, expect=2, secs=6) == [b"new"]


def _java(*args: str, timeout: float = 120) -> str:
    p = subprocess.run(java_command(*args), capture_output=True, timeout=timeout, text=True)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout


@pytest.mark.skipif(not (kafka_home() / "libs").is_dir(), reason="Apache Kafka's jars are not fetched (make tools)")
def test_kafka_java_client_and_tools(node):
    """Kafka 4.4's own producer (transactional ProducerPerformance), kafka-transactions and a
    read_committed console consumer against the node."""
    topic = make_topic(node, unique_name("java"))
    txn_id = unique_name("java")
    _java("org.apache.kafka.tools.ProducerPerformance", "--topic", topic, "--num-records", "500",
          "--record-size", "50", "--throughput", "-1", "--transactional-id", txn_id,
          "--transaction-duration-ms", "100", "--command-property", f"bootstrap.servers={node.bootstrap}")
    out = _java("org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server", node.bootstrap,
                "describe", "--transactional-id", txn_id)
    assert "CompleteCommit" in out, out
    out = _java("org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server", node.bootstrap, "list")
    assert txn_id in out, out
    out = _java("org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", node.bootstrap,
                "--topic", topic, "--from-beginning", "--isolation-level", "read_committed",
                "--timeout-ms", "8000")
    assert len(out.splitlines()) == 500


def test_a_restart_keeps_commits_and_resumes_a_prepare_commit(node):
    committed_topic = make_topic(node, unique_name("kept"))
    p = txn_producer(node, unique_name("kept"))
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(committed_topic, value=b"kept", partition=0)
    p.commit_transaction(30)

    # A partition whose markers cannot be written yet: min.insync.replicas 2 on one replica
    # (NOT_ENOUGH_REPLICAS, retried). The producer's batch goes in with acks=1.
    stuck = make_topic(node, unique_name("stuck"), partitions=1, configs={"min.insync.replicas": "2"})
    txn_id = unique_name("stuck")

    async def prepare(c: KafkaClient):
        pid, epoch = await open_transaction(c, txn_id, stuck, [0])
        records = batch([b"s0", b"s1"], producer_id=pid, producer_epoch=epoch, base_sequence=0, transactional=True)
        r = await c.send(txn_produce(txn_id, stuck, 0, records, acks=1), 9)
        assert r.responses[0].partition_responses[0].error_code == E.NONE
        r = await retry_send(c, m.EndTxnRequest(transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
                                                committed=True), 3)
        assert r.error_code == E.NONE

    run_client(node, prepare, timeout=60)
    time.sleep(1)
    assert describe(node, txn_id).transaction_state == "PrepareCommit"

    node.restart()
    assert consume_values(node, committed_topic, 2, committed=True, expect=1) == [b"kept"]
    assert wait_state(node, txn_id, "PrepareCommit").transaction_state == "PrepareCommit"
    assert consume_values(node, stuck, 1, committed=True, expect=1, secs=3) == []

    async def unstick(c: KafkaClient):
        R = m.IncrementalAlterConfigsRequest
        res = R.AlterConfigsResource
        r = await c.send(R(resources=[res(resource_type=2, resource_name=stuck, configs=[
            res.AlterableConfig(name="min.insync.replicas", config_operation=0, value="1")])],
            validate_only=False), 1)
        assert r.responses[0].error_code == E.NONE

    run_client(node, unstick)
    wait_state(node, txn_id, "CompleteCommit", timeout=30)
    assert consume_values(node, stuck, 1, committed=True, expect=2) == [b"s0", b"s1"]
