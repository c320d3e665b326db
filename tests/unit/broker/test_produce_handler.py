"""The Produce handler as a client sees it: a malformed request appends nothing, and no answer
reports failure for records that were appended (a client would retry them into duplicates).

Real partition logs in a temporary directory behind a real ReplicaManager; requests are built
as message objects, so shapes the wire decoder may refuse can still reach the handler here.
"""

from __future__ import annotations

import logging
import struct
import uuid
from typing import Any

import pytest
import trio
import trio.testing

from kafkapy.broker.context import BrokerContext
from kafkapy.broker.handlers.produce import handle_produce, malformed
from kafkapy.broker.replica_manager import ReplicaManager
from kafkapy.config import BrokerConfig, Listener
from kafkapy.log.config import LogConfig
from kafkapy.log.log_manager import LogManager
from kafkapy.metadata.delta import MetadataDelta
from kafkapy.metadata.image import MetadataImage
from kafkapy.metadata.records import PartitionRecord, RegisterBrokerRecord, TopicRecord
from kafkapy.protocol import ApiKey
from kafkapy.protocol import messages as m
from kafkapy.protocol.connection import Request, RequestHeader
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.events import Reply
from kafkapy.records.builder import Record, build_batch
from tests.unit.broker.fakes import InMemoryBroker

NODE = 1
TOPICS = {"a": uuid.UUID(int=1), "b": uuid.UUID(int=2)}
P = m.ProduceRequest
TD = P.TopicProduceData
PD = TD.PartitionProduceData


class Clock:
    def now_ms(self) -> int:
        return 1_700_000_000_000


def _image() -> MetadataImage:
    delta = MetadataDelta(MetadataImage.empty("test-cluster"))
    records: list[Any] = [RegisterBrokerRecord(broker_id=NODE, incarnation_id=uuid.UUID(int=9), broker_epoch=1,
                                               fenced=False)]
    for name, topic_id in TOPICS.items():
        records.append(TopicRecord(name=name, topic_id=topic_id))
        records += [PartitionRecord(partition_id=p, topic_id=topic_id, replicas=(NODE,), isr=(NODE,),
                                    leader=NODE, leader_epoch=0, partition_epoch=0) for p in (0, 1)]
    for offset, record in enumerate(records, start=1):
        delta.replay(record, offset)
    return delta.apply()


@pytest.fixture
def ctx(tmp_path):
    log_manager = LogManager([str(tmp_path)], LogConfig(), now_ms=0)
    manager = ReplicaManager(log_manager, BrokerConfig.from_sources({}), NODE)
    image = _image()
    manager.apply_image(image, now_ms=0)
    yield BrokerContext(node_id=NODE, cluster_id="test-cluster", config=BrokerConfig.from_sources({}),
                        clock=Clock(), replicas=manager, image=lambda: image, controller=None,
                        advertised=[Listener("PLAINTEXT", "127.0.0.1", 9092)])
    log_manager.shutdown()


def records(n: int = 2) -> bytearray:
    return bytearray(build_batch([Record(b"k", b"v%d" % i) for i in range(n)], now_ms=1_700_000_000_000))


def request(topic_data: Any, *, acks: int = 1, version: int = 9) -> Request:
    body = P(transactional_id=None, acks=acks, timeout_ms=5000, topic_data=topic_data)
    header = RequestHeader(ApiKey.PRODUCE, version, 7, "t", 2)
    return Request(ApiKey.PRODUCE, version, 7, "t", header, body, 0)


def produce(ctx: BrokerContext, req: Request) -> Reply | None:
    return trio.run(handle_produce, ctx, req)


def answers(reply: Reply | None, version: int = 9) -> list[tuple[str, int, int, int]]:
    """(topic, partition, error code, base offset) per partition of the reply's frame."""
    assert reply is not None and reply.parts is not None
    frame = b"".join(bytes(p) for p in reply.parts)
    body = frame[4 + 4 + (1 if version >= 9 else 0):]  # size, correlation id, header tags
    resp = m.ProduceResponse.decode(body, version=version)
    return [(t.name, p.index, p.error_code, p.base_offset)
            for t in resp.responses for p in t.partition_responses]


def ends(ctx: BrokerContext) -> dict[tuple[str, int], int]:
    return {(t, p): ctx.replicas.get(t, p).log.log_end_offset for t in TOPICS for p in (0, 1)}


# -- a request with a null where the schema has none: nothing is appended --------------------------


@pytest.mark.parametrize("bad", [
    pytest.param(lambda: [TD(name="a", partition_data=[PD(index=0, records=records())]),
                          TD(name="b", partition_data=None)], id="second-topic-null-partitions"),
    pytest.param(lambda: [TD(name="a", partition_data=[PD(index=0, records=records())]),
                          TD(name=None, partition_data=[PD(index=0, records=records())])], id="null-topic-name"),
    pytest.param(lambda: [TD(name="a", partition_data=[PD(index=0, records=records()), None])],
                 id="null-partition-entry"),
    pytest.param(lambda: [TD(name="a", partition_data=[PD(index=0, records=records())]),
                          TD(name="b", partition_data=[PD(index=None, records=records())])], id="null-index"),
])
def test_a_malformed_request_appends_nothing_and_is_refused_whole(ctx, bad, caplog) -> None:
    before = ends(ctx)
    with caplog.at_level(logging.INFO, logger="kafkapy.broker.handlers.produce"):
        reply = produce(ctx, request(bad()))
    assert ends(ctx) == before
    got = answers(reply)
    assert got and all(code == ErrorCode.INVALID_REQUEST and offset == -1 for _, _, code, offset in got)
    assert len([r for r in caplog.records if "rejected" in r.getMessage()]) == 1


def test_null_topics_are_refused_and_acks0_hangs_up(ctx) -> None:
    assert answers(produce(ctx, request(None))) == []
    before = ends(ctx)
    reply = produce(ctx, request([TD(name="a", partition_data=[PD(index=0, records=records())]),
                                  TD(name="b", partition_data=None)], acks=0))
    assert reply is not None and reply.close and reply.parts is None
    assert ends(ctx) == before


def test_malformed_names_what_is_wrong() -> None:
    ok = P(transactional_id=None, acks=1, timeout_ms=1,
           topic_data=[TD(name="a", partition_data=[PD(index=0, records=None)])])
    assert malformed(ok, 9) is None  # null records are Kafka's per-partition business
    bad = P(transactional_id=None, acks=1, timeout_ms=1, topic_data=[TD(name="x", partition_data=None)])
    assert malformed(bad, 9) == "topic entry 0 (x) has null partition_data"
    v13 = P(transactional_id=None, acks=1, timeout_ms=1,
            topic_data=[TD(name=None, topic_id=None, partition_data=[])])
    assert malformed(v13, 13) == "topic entry 0 has a null topic_id"


# -- per-partition errors stay per partition ----------------------------------------------------


def test_per_partition_errors_do_not_touch_the_appended_partitions(ctx) -> None:
    corrupt = records()
    struct.pack_into(">I", corrupt, 17, 0)  # the CRC
    reply = produce(ctx, request([
        TD(name="a", partition_data=[PD(index=0, records=records(3)), PD(index=1, records=corrupt)]),
        TD(name="nope", partition_data=[PD(index=0, records=records())]),
        TD(name="b", partition_data=[PD(index=0, records=None), PD(index=1, records=records(2))]),
    ]))
    assert answers(reply) == [
        ("a", 0, ErrorCode.NONE, 0), ("a", 1, ErrorCode.CORRUPT_MESSAGE, -1),
        ("nope", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
        ("b", 0, ErrorCode.CORRUPT_MESSAGE, -1), ("b", 1, ErrorCode.NONE, 0),
    ]
    assert ends(ctx) == {("a", 0): 3, ("a", 1): 0, ("b", 0): 0, ("b", 1): 2}


def test_a_partition_named_twice_is_refused_not_half_written(ctx) -> None:
    reply = produce(ctx, request([
        TD(name="a", partition_data=[PD(index=0, records=records()), PD(index=1, records=records())]),
        TD(name="a", partition_data=[PD(index=0, records=records())]),
    ]))
    assert answers(reply) == [("a", 0, ErrorCode.INVALID_REQUEST, -1), ("a", 1, ErrorCode.NONE, 0),
                              ("a", 0, ErrorCode.INVALID_REQUEST, -1)]
    assert ends(ctx)[("a", 0)] == 0


# -- an unexpected exception while appending -----------------------------------------------------


def test_an_unexpected_append_failure_is_that_partitions_error_alone(ctx, monkeypatch, caplog) -> None:
    real = ctx.replicas.append

    def append(hosted, buf, **kw):
        if hosted.topic == "b":
            raise RuntimeError("a bug")
        return real(hosted, buf, **kw)

    monkeypatch.setattr(ctx.replicas, "append", append)
    with caplog.at_level(logging.INFO, logger="kafkapy.broker.handlers.produce"):
        reply = produce(ctx, request([TD(name="a", partition_data=[PD(index=0, records=records(2))]),
                                      TD(name="b", partition_data=[PD(index=0, records=records())]),
                                      TD(name="a", partition_data=[PD(index=1, records=records(4))])]))
    assert answers(reply) == [("a", 0, ErrorCode.NONE, 0), ("b", 0, ErrorCode.UNKNOWN_SERVER_ERROR, -1),
                              ("a", 1, ErrorCode.NONE, 0)]
    assert ends(ctx) == {("a", 0): 2, ("a", 1): 4, ("b", 0): 0, ("b", 1): 0}
    [line] = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert "b-0" in line.getMessage() and line.exc_info is not None


def test_a_failure_after_the_log_grew_is_reported_as_the_append_it_was(ctx, monkeypatch) -> None:
    real = ctx.replicas.append

    def append(hosted, buf, **kw):
        real(hosted, buf, **kw)
        raise RuntimeError("bookkeeping bug after the write")

    monkeypatch.setattr(ctx.replicas, "append", append)
    produce(ctx, request([TD(name="a", partition_data=[PD(index=0, records=records(5))])]))
    reply = produce(ctx, request([TD(name="a", partition_data=[PD(index=0, records=records(1))])]))
    assert answers(reply) == [("a", 0, ErrorCode.NONE, 5)]


def test_acks0_answers_nothing_and_hangs_up_only_when_a_partition_failed(ctx) -> None:
    assert produce(ctx, request([TD(name="a", partition_data=[PD(index=0, records=records())])], acks=0)) is None
    reply = produce(ctx, request([TD(name="a", partition_data=[PD(index=1, records=records())]),
                                  TD(name="nope", partition_data=[PD(index=0, records=records())])], acks=0))
    assert reply is not None and reply.close
    assert ends(ctx)[("a", 0)] == 2 and ends(ctx)[("a", 1)] == 2


def test_acks_all_a_failing_wait_stays_with_its_partition(ctx, monkeypatch) -> None:
    real = ctx.replicas.wait_for_replication

    async def wait(hosted, required, deadline):
        if hosted.index == 1:
            raise RuntimeError("a bug in the purgatory")
        return await real(hosted, required, deadline)

    monkeypatch.setattr(ctx.replicas, "wait_for_replication", wait)
    reply = produce(ctx, request([TD(name="a", partition_data=[PD(index=0, records=records()),
                                                               PD(index=1, records=records())])], acks=-1))
    assert answers(reply) == [("a", 0, ErrorCode.NONE, 0), ("a", 1, ErrorCode.UNKNOWN_SERVER_ERROR, -1)]


# -- acks=all: the purgatory, under Trio's mock clock --------------------------------------------


def _replicated(tmp_path: Any) -> InMemoryBroker:
    b = InMemoryBroker(tmp_path)
    b.create("r", uuid.UUID(int=3), replicas=(NODE, 2))
    return b


def test_acks_all_answers_once_the_follower_has_the_records(tmp_path) -> None:
    b = _replicated(tmp_path)

    async def scenario() -> tuple[Reply | None, float]:
        start = trio.current_time()
        out: list[Reply | None] = []

        async def producer() -> None:
            out.append(await handle_produce(b.ctx, request([TD(name="r", partition_data=[
                PD(index=0, records=records(3))])], acks=-1)))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(producer)
            await trio.sleep(1)
            b.replicas.on_follower_fetch(b.replicas.get("r", 0), 2, 3, now_ms=0)
        return out[0], trio.current_time() - start

    try:
        reply, waited = trio.run(scenario, clock=trio.testing.MockClock(autojump_threshold=0))
        assert answers(reply) == [("r", 0, ErrorCode.NONE, 0)]
        assert waited == pytest.approx(1.0)
    finally:
        b.close()


def test_acks_all_times_out_when_the_follower_never_fetches(tmp_path) -> None:
    b = _replicated(tmp_path)

    async def scenario() -> tuple[Reply | None, float]:
        start = trio.current_time()
        reply = await handle_produce(b.ctx, request([TD(name="r", partition_data=[
            PD(index=0, records=records(1))])], acks=-1))
        return reply, trio.current_time() - start

    try:
        reply, waited = trio.run(scenario, clock=trio.testing.MockClock(autojump_threshold=0))
        assert answers(reply) == [("r", 0, ErrorCode.REQUEST_TIMED_OUT, -1)]
        assert waited == pytest.approx(5.0)  # the request's timeout_ms
        assert b.replicas.get("r", 0).log.log_end_offset == 1  # appended, not yet committed
    finally:
        b.close()
