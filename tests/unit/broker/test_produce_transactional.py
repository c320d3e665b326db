"""Produce of transactional records: they come with their transactional id or are refused whole.

As Kafka's ``KafkaApis.handleProduceRequest``: a request whose partitions carry a transactional
batch (the first batch of each partition is looked at) and no transactional id gets
TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every partition and nothing is appended; acks=0 gets the
connection closed. Idempotent and plain batches are unaffected.
"""

from __future__ import annotations

import trio

from kafkapy.broker.context import BrokerContext
from kafkapy.broker.handlers.produce import handle_produce
from kafkapy.protocol import ApiKey
from kafkapy.protocol import messages as m
from kafkapy.protocol.connection import Request, RequestHeader
from kafkapy.protocol.errors import ErrorCode
from kafkapy.records.builder import Record, build_batch
from tests.unit.broker import test_produce_handler as base
from tests.unit.broker.test_produce_handler import PD, TD, answers, ends

ctx = base.ctx  # the fixture: a real ReplicaManager over temporary logs
P = m.ProduceRequest
NOW = 1_700_000_000_000


def _batch(*, transactional: bool, producer_id: int = 7, sequence: int = 0) -> bytearray:
    return bytearray(build_batch([Record(None, b"v")], now_ms=NOW, producer_id=producer_id, producer_epoch=0,
                                 base_sequence=sequence, transactional=transactional))


def _request(parts: dict[tuple[str, int], bytearray], *, txn_id: str | None, acks: int = 1) -> Request:
    topics: dict[str, list[object]] = {}
    for (topic, index), records in parts.items():
        topics.setdefault(topic, []).append(PD(index=index, records=records))
    body = P(transactional_id=txn_id, acks=acks, timeout_ms=5000,
             topic_data=[TD(name=t, partition_data=ps) for t, ps in topics.items()])
    header = RequestHeader(ApiKey.PRODUCE, 9, 7, "t", 2)
    return Request(ApiKey.PRODUCE, 9, 7, "t", header, body, 0)


def test_transactional_records_without_a_transactional_id_are_refused_whole(ctx: BrokerContext) -> None:
    before = ends(ctx)
    req = _request({("a", 0): _batch(transactional=False, producer_id=-1),
                    ("b", 1): _batch(transactional=True)}, txn_id=None)
    reply = trio.run(handle_produce, ctx, req)
    failed = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert answers(reply) == [("a", 0, failed, -1), ("b", 1, failed, -1)]
    assert ends(ctx) == before  # not even the plain batch was appended


def test_acks0_transactional_records_without_an_id_close_the_connection(ctx: BrokerContext) -> None:
    reply = trio.run(handle_produce, ctx, _request({("a", 0): _batch(transactional=True)}, txn_id=None, acks=0))
    assert reply is not None and reply.close
    assert ends(ctx)[("a", 0)] == 0


def test_idempotent_records_need_no_transactional_id(ctx: BrokerContext) -> None:
    reply = trio.run(handle_produce, ctx, _request({("a", 0): _batch(transactional=False)}, txn_id=None))
    assert answers(reply) == [("a", 0, ErrorCode.NONE, 0)]


def test_transactional_records_with_their_id_are_appended(ctx: BrokerContext) -> None:
    reply = trio.run(handle_produce, ctx, _request({("a", 1): _batch(transactional=True)}, txn_id="tx"))
    assert answers(reply) == [("a", 1, ErrorCode.NONE, 0)]
