"""AlterPartitionManager: batching, one request at a time, every callback answered once."""

from __future__ import annotations

import uuid

import trio
import trio.testing

from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import ErrorCode
from kafkapy.replication.alter_partition import AlterPartitionManager
from kafkapy.replication.leader_state import IsrProposal

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
Resp = m.AlterPartitionResponse


def response(request) -> object:
    topics = []
    for t in request.topics:
        parts = [Resp.TopicData.PartitionData(
            partition_index=p.partition_index, error_code=0, leader_id=1, leader_epoch=p.leader_epoch,
            isr=[b.broker_id for b in p.new_isr_with_epochs], leader_recovery_state=0,
            partition_epoch=p.partition_epoch + 1) for p in t.partitions]
        topics.append(Resp.TopicData(topic_id=t.topic_id, partitions=parts))
    return Resp(throttle_time_ms=0, error_code=0, topics=topics)


def test_proposals_are_batched_and_answered():
    sent = []
    results: dict = {}

    async def send(request):
        sent.append(request)
        await trio.sleep(1)
        return response(request)

    async def main():
        manager = AlterPartitionManager(send, node_id=1, broker_epoch=lambda: 42,
                                        broker_epoch_of=lambda b: 100 + b)
        async with trio.open_nursery() as nursery:
            await nursery.start(manager.run)
            manager.submit(T1, 0, IsrProposal((1, 2), 3, 7), lambda e, d: results.__setitem__("a", (e, d)))
            manager.submit(T2, 4, IsrProposal((1,), 0, 1), lambda e, d: results.__setitem__("b", (e, d)))
            await trio.sleep(0.5)
            manager.submit(T1, 1, IsrProposal((1, 3), 3, 2), lambda e, d: results.__setitem__("c", (e, d)))
            await trio.sleep(5)
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert len(sent) == 2, "the third proposal waits for the first request"
    first = sent[0]
    assert (first.broker_id, first.broker_epoch) == (1, 42)
    states = [(b.broker_id, b.broker_epoch) for b in first.topics[0].partitions[0].new_isr_with_epochs]
    assert states == [(1, 101), (2, 102)]
    assert results["a"][0] == ErrorCode.NONE and list(results["a"][1].isr) == [1, 2]
    assert results["b"][1].partition_epoch == 2 and results["c"][1].partition_epoch == 3


def test_a_failed_request_fails_every_proposal_in_it():
    results = []

    async def send(request):
        raise OSError("controller unreachable")

    async def main():
        manager = AlterPartitionManager(send, node_id=1, broker_epoch=lambda: 1, broker_epoch_of=lambda b: -1)
        async with trio.open_nursery() as nursery:
            await nursery.start(manager.run)
            manager.submit(T1, 0, IsrProposal((1,), 0, 0), lambda e, d: results.append((e, d)))
            await trio.sleep(1)
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert results == [(ErrorCode.UNKNOWN_SERVER_ERROR, None)]
