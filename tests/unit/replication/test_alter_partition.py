"""AlterPartitionManager: batching, one request at a time, every callback answered once."""

from __future__ import annotations

import uuid

import trio
import trio.testing

from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import ErrorCode, KafkaError
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


def run_manager(send, script, **kwargs) -> AlterPartitionManager:
    manager = AlterPartitionManager(send, node_id=1, broker_epoch=lambda: 5,
                                    broker_epoch_of=lambda b: 10 * b, **kwargs)

    async def main():
        async with trio.open_nursery() as nursery:
            await nursery.start(manager.run)
            await script(manager)
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return manager


def test_the_request_is_v3_by_topic_id_with_broker_epochs():
    sent = []

    async def send(request):
        sent.append(request)
        return response(request)

    async def script(manager):
        manager.submit(T1, 0, IsrProposal((1, 2), 3, 7), lambda e, d: None)
        manager.submit(T1, 2, IsrProposal((1,), 4, 9), lambda e, d: None)
        await trio.sleep(1)

    run_manager(send, script)
    (request,) = sent
    (topic,) = request.topics
    assert topic.topic_id == T1
    parts = {p.partition_index: p for p in topic.partitions}
    assert (parts[0].leader_epoch, parts[0].partition_epoch, parts[0].leader_recovery_state) == (3, 7, 0)
    assert [(b.broker_id, b.broker_epoch) for b in parts[2].new_isr_with_epochs] == [(1, 10)]
    assert m.AlterPartitionRequest.decode(request.encode(version=3), version=3).topics[0].topic_id == T1


def test_a_newer_submission_replaces_the_queued_one_and_the_old_callback_hears_so_later():
    sent = []
    results = []

    async def send(request):
        sent.append(request)
        await trio.sleep(1)
        return response(request)

    async def script(manager):
        manager.submit(T1, 0, IsrProposal((1, 2), 3, 7), lambda e, d: results.append(("first", e)))
        await trio.sleep(0.5)  # the first request is out
        manager.submit(T1, 1, IsrProposal((1,), 3, 2), lambda e, d: results.append(("old", e)))
        manager.submit(T1, 1, IsrProposal((1, 3), 3, 2), lambda e, d: results.append(("new", e)))
        assert results == [], "never answered from inside submit"
        await trio.sleep(5)

    run_manager(send, script)
    assert len(sent) == 2
    assert [b.broker_id for b in sent[1].topics[0].partitions[0].new_isr_with_epochs] == [1, 3]
    assert sorted(results) == [("first", ErrorCode.NONE), ("new", ErrorCode.NONE),
                               ("old", ErrorCode.OPERATION_NOT_ATTEMPTED)]


def test_errors_reach_every_proposal_and_the_next_request_waits():
    attempts = []
    results = []
    answers = iter([
        KafkaError(ErrorCode.REQUEST_TIMED_OUT, "no controller answered"),
        trio.TooSlowError(),
        "top-level",
        "partial",
    ])

    async def send(request):
        attempts.append(trio.current_time())
        answer = next(answers)
        if isinstance(answer, BaseException):
            raise answer
        if answer == "top-level":
            return Resp(throttle_time_ms=0, error_code=ErrorCode.NOT_CONTROLLER, topics=[])
        full = response(request)
        full.topics = full.topics[:1]  # the controller left T2 out
        return full

    async def script(manager):
        for _ in range(4):
            manager.submit(T1, 0, IsrProposal((1,), 0, 0), lambda e, d: results.append(("p0", e)))
            manager.submit(T2, 0, IsrProposal((1,), 0, 0), lambda e, d: results.append(("p1", e)))
            await trio.sleep(0.5)  # answered, and past the backoff a failure starts

    run_manager(send, script, retry_backoff_ms=300)
    assert results == [("p0", ErrorCode.REQUEST_TIMED_OUT), ("p1", ErrorCode.REQUEST_TIMED_OUT),
                       ("p0", ErrorCode.REQUEST_TIMED_OUT), ("p1", ErrorCode.REQUEST_TIMED_OUT),
                       ("p0", ErrorCode.NOT_CONTROLLER), ("p1", ErrorCode.NOT_CONTROLLER),
                       ("p0", ErrorCode.NONE), ("p1", ErrorCode.UNKNOWN_SERVER_ERROR)]
    gaps = [b - a for a, b in zip(attempts, attempts[1:])]
    assert len(gaps) == 3 and min(gaps) >= 0.3, "a failed request is followed by the backoff"


def test_a_failing_callback_does_not_stop_the_manager():
    results = []

    async def send(request):
        return response(request)

    def broken(error, data):
        raise RuntimeError("bug in a callback")

    async def script(manager):
        manager.submit(T1, 0, IsrProposal((1,), 0, 0), broken)
        await trio.sleep(1)
        manager.submit(T1, 0, IsrProposal((1, 2), 0, 1), lambda e, d: results.append(e))
        await trio.sleep(1)

    run_manager(send, script)
    assert results == [ErrorCode.NONE]
