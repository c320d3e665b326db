"""Produce of transactional records: they come with their transactional id or are refused whole,
and (KIP-890 part 1) a write that would open a transaction in a partition is first verified with
the transaction coordinator (a fake one here).

As Kafka's ``KafkaApis.handleProduceRequest``: a request whose partitions carry a transactional
batch (the first batch of each partition is looked at) and no transactional id gets
TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every partition and nothing is appended; acks=0 gets the
connection closed. Idempotent and plain batches are unaffected.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import trio

from kafkapy.broker.context import BrokerContext
from kafkapy.broker.handlers.produce import handle_produce
from kafkapy.config import BrokerConfig
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


# -- KIP-890 part 1: verification with the transaction coordinator ------------------------------

class FakeVerifier:
    """Answers verifications with fixed codes, recording what was asked; ``meanwhile`` runs
    while the 'coordinator' is being asked (a marker arriving, say)."""

    def __init__(self, code: int = ErrorCode.NONE, meanwhile: Any = None) -> None:
        self.code = code
        self.meanwhile = meanwhile
        self.asked: list[tuple[str, int, int, dict[str, list[int]]]] = []

    async def verify(self, state_partition: int, txn_id: str, pid: int, epoch: int,
                     partitions: dict[str, list[int]]) -> dict[tuple[str, int], int]:
        self.asked.append((txn_id, pid, epoch, partitions))
        if self.meanwhile is not None:
            self.meanwhile()
        return {(t, p): self.code for t, ps in partitions.items() for p in ps}


class FakeTransactions:
    def partition_for(self, transactional_id: str) -> int:
        return 0


def verifying(ctx: BrokerContext, verifier: FakeVerifier, **config: str) -> BrokerContext:
    settings = {k.replace("_", "."): v for k, v in config.items()}
    return dataclasses.replace(ctx, txn_verifier=verifier, transactions=FakeTransactions(),
                               config=BrokerConfig.from_sources(settings) if settings else ctx.config)


def test_a_partition_not_in_the_transaction_is_refused(ctx: BrokerContext) -> None:
    verifier = FakeVerifier(ErrorCode.INVALID_TXN_STATE)
    reply = trio.run(handle_produce, verifying(ctx, verifier), _request({("a", 0): _batch(transactional=True)},
                                                                        txn_id="tx"))
    assert answers(reply) == [("a", 0, ErrorCode.INVALID_TXN_STATE, -1)]
    assert verifier.asked == [("tx", 7, 0, {"a": [0]})]
    assert ends(ctx)[("a", 0)] == 0


def test_retriable_coordinator_errors_are_not_enough_replicas(ctx: BrokerContext) -> None:
    verifier = FakeVerifier(ErrorCode.NOT_COORDINATOR)
    reply = trio.run(handle_produce, verifying(ctx, verifier), _request({("a", 0): _batch(transactional=True)},
                                                                        txn_id="tx"))
    assert answers(reply) == [("a", 0, ErrorCode.NOT_ENOUGH_REPLICAS, -1)]


def test_a_verified_write_opens_the_transaction_and_later_ones_are_not_asked_about(ctx: BrokerContext) -> None:
    verifier = FakeVerifier()
    vctx = verifying(ctx, verifier)
    first = trio.run(handle_produce, vctx, _request({("a", 0): _batch(transactional=True),
                                                     ("b", 0): _batch(transactional=False, producer_id=-1)},
                                                    txn_id="tx"))
    assert answers(first) == [("a", 0, ErrorCode.NONE, 0), ("b", 0, ErrorCode.NONE, 0)]
    second = trio.run(handle_produce, vctx, _request({("a", 0): _batch(transactional=True, sequence=1)},
                                                     txn_id="tx"))
    assert answers(second) == [("a", 0, ErrorCode.NONE, 1)]
    assert verifier.asked == [("tx", 7, 0, {"a": [0]})]  # only the write that opened it


def test_a_guard_cleared_while_verifying_refuses_the_append(ctx: BrokerContext) -> None:
    state = ctx.replicas.get("a", 0).log.producer_state
    # As a marker of the producer written while the coordinator was asked would.
    verifier = FakeVerifier(meanwhile=state.verifications.clear)
    reply = trio.run(handle_produce, verifying(ctx, verifier), _request({("a", 0): _batch(transactional=True)},
                                                                        txn_id="tx"))
    assert answers(reply) == [("a", 0, ErrorCode.INVALID_TXN_STATE, -1)]
    assert ends(ctx)[("a", 0)] == 0


def test_verification_can_be_switched_off(ctx: BrokerContext) -> None:
    verifier = FakeVerifier(ErrorCode.INVALID_TXN_STATE)
    vctx = verifying(ctx, verifier, transaction_partition_verification_enable="false")
    reply = trio.run(handle_produce, vctx, _request({("a", 0): _batch(transactional=True)}, txn_id="tx"))
    assert answers(reply) == [("a", 0, ErrorCode.NONE, 0)]
    assert verifier.asked == []
