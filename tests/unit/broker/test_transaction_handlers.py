"""The transaction coordinator's handlers over an in-memory broker: a real coordinator edge on a
real __transaction_state partition, requests in, answers (with each version's error codes) out."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import trio
import trio.testing

from kafkapy.broker.handlers.coordinator import handle_find_coordinator
from kafkapy.broker.handlers.produce import handle_produce
from kafkapy.broker.handlers.producer_ids import handle_init_producer_id
from kafkapy.broker.handlers.transactions import (
    handle_add_offsets_to_txn,
    handle_add_partitions_to_txn,
    handle_describe_transactions,
    handle_end_txn,
    handle_list_transactions,
)
from kafkapy.config import BrokerConfig
from kafkapy.coordinator.transaction import TRANSACTION_STATE_TOPIC
from kafkapy.coordinator.transaction_service import TransactionCoordinator
from kafkapy.protocol import ApiKey
from kafkapy.protocol import messages as m
from kafkapy.protocol.connection import Request, RequestHeader
from kafkapy.protocol.errors import ErrorCode as E
from kafkapy.records.builder import Record, build_batch
from tests.unit.broker.fakes import InMemoryBroker

TXN = "tx"
APR = m.AddPartitionsToTxnRequest


def request(api: ApiKey, version: int, body: Any) -> Request:
    return Request(api, version, 7, "t", RequestHeader(api, version, 7, "t", 2), body, 0)


@pytest.fixture
def broker(tmp_path):
    b = InMemoryBroker(tmp_path, brokers=(1,))
    b.create(TRANSACTION_STATE_TOPIC, uuid.uuid4(), 1, leader_epoch=3)
    b.create("t", uuid.uuid4(), 2)
    yield b
    b.close()


def run(broker: InMemoryBroker, fn) -> None:
    async def main():
        ids = iter(range(500, 600))

        async def next_id() -> int:
            return next(ids)

        config = BrokerConfig.from_sources({"transaction.state.log.num.partitions": "1"})
        coord = TransactionCoordinator(config, broker.replicas, broker.ctx.clock, 1, next_producer_id=next_id,
                                       image=lambda: broker.image, connect=None)
        broker.ctx.transactions = coord
        coord.on_image(broker.image)
        async with trio.open_nursery() as n:
            await n.start(coord.run)
            await trio.sleep(0.1)
            await fn(broker.ctx)
            n.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


async def init(ctx, version: int = 4):
    body = m.InitProducerIdRequest(transactional_id=TXN, transaction_timeout_ms=60000, producer_id=-1,
                                   producer_epoch=-1)
    for _ in range(20):
        r = await handle_init_producer_id(ctx, request(ApiKey.INIT_PRODUCER_ID, version, body))
        if r.error_code != E.COORDINATOR_LOAD_IN_PROGRESS:
            return r
        await trio.sleep(0.1)
    raise AssertionError("no producer id")


def add_v3(pid: int, epoch: int, parts: dict[str, list[int]]):
    return APR(v3_and_below_transactional_id=TXN, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
               v3_and_below_topics=[APR.AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in parts.items()])


def codes_v3(resp) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.partition_error_code
            for t in resp.results_by_topic_v3_and_below for p in t.results_by_partition}


def test_a_transaction_through_the_handlers(broker):
    async def go(ctx):
        r = await init(ctx)
        assert (r.error_code, r.producer_id, r.producer_epoch) == (E.NONE, 500, 0)
        pid = r.producer_id
        # an unknown partition: nothing is added, the others were not attempted
        resp = await handle_add_partitions_to_txn(ctx, request(ApiKey.ADD_PARTITIONS_TO_TXN, 3,
                                                               add_v3(pid, 0, {"t": [0], "nope": [0]})))
        assert codes_v3(resp) == {("t", 0): E.OPERATION_NOT_ATTEMPTED, ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
        resp = await handle_add_partitions_to_txn(ctx, request(ApiKey.ADD_PARTITIONS_TO_TXN, 3,
                                                               add_v3(pid, 0, {"t": [0]})))
        assert codes_v3(resp) == {("t", 0): E.NONE}
        r = await handle_add_offsets_to_txn(ctx, request(ApiKey.ADD_OFFSETS_TO_TXN, 3, m.AddOffsetsToTxnRequest(
            transactional_id=TXN, producer_id=pid, producer_epoch=0, group_id="grp")))
        assert r.error_code == E.NONE

        # a partition leader's batched VerifyOnly (v4): not in the transaction is INVALID_TXN_STATE
        # for v4 (TRANSACTION_ABORTABLE is v5's)
        body = APR(transactions=[APR.AddPartitionsToTxnTransaction(
            transactional_id=TXN, producer_id=pid, producer_epoch=0, verify_only=True,
            topics=[APR.AddPartitionsToTxnTopic(name="t", partitions=[0, 1])])])
        resp = await handle_add_partitions_to_txn(ctx, request(ApiKey.ADD_PARTITIONS_TO_TXN, 4, body))
        [result] = resp.results_by_transaction
        assert {(t.name, p.partition_index): p.partition_error_code for t in result.topic_results
                for p in t.results_by_partition} == {("t", 0): E.NONE, ("t", 1): E.INVALID_TXN_STATE}

        # the Produce handler takes the transactional batch
        records = bytearray(build_batch([Record(None, b"v")], now_ms=ctx.clock.now_ms(), producer_id=pid, producer_epoch=0,
                              base_sequence=0, transactional=True))
        P = m.ProduceRequest
        body = P(transactional_id=TXN, acks=1, timeout_ms=1000, topic_data=[P.TopicProduceData(
            name="t", partition_data=[P.TopicProduceData.PartitionProduceData(index=0, records=records)])])
        await handle_produce(ctx, request(ApiKey.PRODUCE, 9, body))
        assert ctx.replicas.get("t", 0).log.log_end_offset == 1

        r = await handle_describe_transactions(ctx, request(ApiKey.DESCRIBE_TRANSACTIONS, 0,
                                                            m.DescribeTransactionsRequest(transactional_ids=[TXN])))
        [st] = r.transaction_states
        assert (st.transaction_state, st.producer_id) == ("Ongoing", pid)
        topics = {t.topic: list(t.partitions) for t in st.topics}
        assert topics["t"] == [0] and len(topics["__consumer_offsets"]) == 1  # AddOffsetsToTxn's partition

        # a stale epoch: INVALID_PRODUCER_EPOCH before v2, PRODUCER_FENCED from it
        for version, code in ((1, E.INVALID_PRODUCER_EPOCH), (3, E.PRODUCER_FENCED)):
            r = await handle_end_txn(ctx, request(ApiKey.END_TXN, version, m.EndTxnRequest(
                transactional_id=TXN, producer_id=pid, producer_epoch=7, committed=True)))
            assert r.error_code == code
        r = await handle_end_txn(ctx, request(ApiKey.END_TXN, 3, m.EndTxnRequest(
            transactional_id=TXN, producer_id=pid, producer_epoch=0, committed=False)))
        assert r.error_code == E.NONE
        r = await handle_list_transactions(ctx, request(ApiKey.LIST_TRANSACTIONS, 1, m.ListTransactionsRequest(
            state_filters=[], producer_id_filters=[pid], duration_filter=-1)))
        assert [(t.transactional_id, t.transaction_state) for t in r.transaction_states] == [(TXN, "PrepareAbort")]

    run(broker, go)


def test_find_coordinator_for_a_transactional_id(broker):
    async def go(ctx):
        # (the in-memory brokers register no listener: the live node's test checks the address)
        r = await handle_find_coordinator(ctx, request(ApiKey.FIND_COORDINATOR, 3, m.FindCoordinatorRequest(
            key="", key_type=1)))
        assert r.error_code == E.INVALID_REQUEST
        ctx.transactions = None
        r = await handle_find_coordinator(ctx, request(ApiKey.FIND_COORDINATOR, 3, m.FindCoordinatorRequest(
            key=TXN, key_type=1)))
        assert r.error_code == E.COORDINATOR_NOT_AVAILABLE
        r = await handle_init_producer_id(ctx, request(ApiKey.INIT_PRODUCER_ID, 4, m.InitProducerIdRequest(
            transactional_id=TXN, transaction_timeout_ms=1000, producer_id=-1, producer_epoch=-1)))
        assert r.error_code == E.COORDINATOR_NOT_AVAILABLE

    run(broker, go)
