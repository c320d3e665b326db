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

from helpers import (
    TXN_NODE_OVERRIDES,
    TXN_RETRIABLE,
    batch,
    consume_values,
    create_topics,
    make_topic,
    open_transaction,
    partition_response,
    run_client,
    txn_produce,
    txn_producer,
    unique_name,
)
from kafkapy.net.client import KafkaClient
from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import ErrorCode as E
from kafkapy.testing.apache_kafka import ApacheKafkaNode

pytest.importorskip("confluent_kafka")

NODE_OVERRIDES = TXN_NODE_OVERRIDES
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
        pid, epoch = await open_transaction(c, txn_id, topic, [0])

        async def write(partition: int, seq: int, with_id: bool = True):
            records = batch([b"v"], producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True)
            return partition_response(await c.send(txn_produce(txn_id if with_id else None, topic, partition,
                                                               records), 9))

        out = {}
        for name, partition, with_id in (("added", 0, True), ("not added", 1, True), ("no id", 1, False)):
            r = await write(partition, 0, with_id)
            out[name] = (r.error_code, r.error_message, r.base_offset)
        if not switch_off:
            return out
        assert (await c.send(_set_cluster_default("false"), 1)).responses[0].error_code == E.NONE
        try:
            with trio.fail_after(20):  # until the config reaches the broker's metadata image
                while (code := (await write(1, 0)).error_code) in (E.INVALID_TXN_STATE, *TXN_RETRIABLE):
                    await trio.sleep(0.1)
            out["verification off"] = code
        finally:
            assert (await c.send(_set_cluster_default(None), 1)).responses[0].error_code == E.NONE
        return out

    return scenario


def test_a_partition_not_in_the_transaction_is_refused_until_verification_is_off(node):
    out = run_client(node, _answers(unique_name("verify"), unique_name("verify"), switch_off=True), timeout=90)
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
    topic = make_topic(node, unique_name("verified"))
    p = txn_producer(node, unique_name("verified"))
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(4):
        p.produce(topic, value=b"%d" % i, partition=i % 2)
    p.commit_transaction(30)
    assert consume_values(node, topic, 2, committed=True, expect=4) == [b"0", b"1", b"2", b"3"]
