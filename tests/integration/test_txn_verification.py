"""KIP-890 part 1 on a live node: the partition leader asks the transaction coordinator whether
a transactional write belongs to an ongoing transaction before appending it.

A transactional batch for a partition that was never added with AddPartitionsToTxn is refused
with INVALID_TXN_STATE while ``transaction.partition.verification.enable`` is on, and taken once
it is switched off (a dynamic cluster-wide config); one sent without its transactional id is
TRANSACTIONAL_ID_AUTHORIZATION_FAILED. Apache Kafka 4.4 gives the same answers (codes and
messages) to the same requests. A confluent-kafka producer's transaction still commits with
verification on.
"""

from __future__ import annotations

import pytest
import trio
from test_transactions import RETRIABLE, _name, consume, init_request, make_topic, producer, retry

from helpers import batch, create_topics, partition_response, produce, run_client
from kafkapy.net.client import KafkaClient
from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import ErrorCode as E
from kafkapy.testing.apache_kafka import ApacheKafkaNode

pytest.importorskip("confluent_kafka")

NODE_OVERRIDES = {"transaction.state.log.num.partitions": "3", "offsets.topic.num.partitions": "3",
                  "group.initial.rebalance.delay.ms": "0"}
CONFIG = "transaction.partition.verification.enable"


def _set_cluster_default(value: str | None):
    R = m.IncrementalAlterConfigsRequest
    res = R.AlterConfigsResource
    op = 0 if value is not None else 1  # SET / DELETE
    return R(resources=[res(resource_type=4, resource_name="", configs=[
        res.AlterableConfig(name=CONFIG, config_operation=op, value=value)])], validate_only=False)


def _answers(topic: str, txn_id: str, switch_off: bool):
    """What a transactional producer's writes get: to a partition added to its transaction, to
    one not added, without the transactional id, and (``switch_off``) to the one not added once
    verification is switched off."""

    async def scenario(c: KafkaClient):
        r = await c.send(create_topics((topic, 2, 1)))
        assert r.topics[0].error_code == E.NONE, r
        # FindCoordinator first: it creates __transaction_state, as a producer's would.
        with trio.fail_after(60):
            while (await c.send(m.FindCoordinatorRequest(key=txn_id, key_type=1), 3)).error_code != E.NONE:
                await trio.sleep(0.2)
        init = await retry(c, init_request(txn_id), 4, timeout=60)
        pid, epoch = init.producer_id, init.producer_epoch
        A = m.AddPartitionsToTxnRequest
        added = await retry(c, A(v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid,
                                 v3_and_below_producer_epoch=epoch,
                                 v3_and_below_topics=[A.AddPartitionsToTxnTopic(name=topic, partitions=[0])]), 3,
                            lambda r: r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code)
        assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == E.NONE

        async def write(partition: int, seq: int, with_id: bool = True):
            request = produce(topic, partition, batch([b"v"], producer_id=pid, producer_epoch=epoch,
                                                      base_sequence=seq, transactional=True))
            request.transactional_id = txn_id if with_id else None
            return partition_response(await c.send(request, 9))

        out = {}
        for name, partition, with_id in (("added", 0, True), ("not added", 1, True), ("no id", 1, False)):
            r = await write(partition, 0, with_id)
            out[name] = (r.error_code, r.error_message, r.base_offset)
        if not switch_off:
            return out
        assert (await c.send(_set_cluster_default("false"), 1)).responses[0].error_code == E.NONE
        try:
            with trio.fail_after(20):  # until the config reaches the broker's metadata image
                while (code := (await write(1, 0)).error_code) in (E.INVALID_TXN_STATE, *RETRIABLE):
                    await trio.sleep(0.1)
            out["verification off"] = code
        finally:
            assert (await c.send(_set_cluster_default(None), 1)).responses[0].error_code == E.NONE
        return out

    return scenario


def test_a_partition_not_in_the_transaction_is_refused_until_verification_is_off(node):
    out = run_client(node, _answers(_name("verify"), _name("verify"), switch_off=True), timeout=90)
    assert out == {"added": (E.NONE, None, 0),
                   "not added": (E.INVALID_TXN_STATE, "Partition was not added to the transaction", -1),
                   "no id": (E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None, -1),
                   "verification off": E.NONE}


def test_apache_kafka_answers_the_same():
    with ApacheKafkaNode(overrides={"transaction.state.log.replication.factor": "1",
                                    "transaction.state.log.min.isr": "1"}) as kafka:
        theirs = run_client(kafka, _answers("verify-diff", "verify-diff", switch_off=False), timeout=120)
    assert theirs == {"added": (E.NONE, None, 0),
                      "not added": (E.INVALID_TXN_STATE, "Partition was not added to the transaction", -1),
                      "no id": (E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None, -1)}


def test_a_stock_producers_transaction_commits_with_verification_on(node):
    topic = make_topic(node, _name("verified"))
    p = producer(node, _name("verified"))
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(4):
        p.produce(topic, value=b"%d" % i, partition=i % 2)
    p.commit_transaction(30)
    assert consume(node, topic, 2, committed=True, expect=4) == [b"0", b"1", b"2", b"3"]
