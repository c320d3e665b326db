"""The Fetch handler as a consumer (and a follower) sees it, against an in-memory broker.

Real partition logs in a temporary directory behind a real ReplicaManager (``fakes.InMemoryBroker``);
no sockets, no node process. Long polls run under Trio's MockClock, so a five-second wait takes
no real time and its length is exact.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import trio
import trio.testing

from kafkapy.broker.handlers.fetch import handle_fetch
from kafkapy.metadata.records import PartitionChangeRecord
from kafkapy.protocol import ApiKey
from kafkapy.protocol import messages as m
from kafkapy.protocol.apis import response_class
from kafkapy.protocol.connection import Request, RequestHeader
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.records.builder import Record, build_batch
from kafkapy.records.reader import iter_batches, iter_records
from tests.unit.broker.fakes import InMemoryBroker, reply_frame

F = m.FetchRequest
ORDERS, OTHERS = uuid.UUID(int=1), uuid.UUID(int=2)
VERSION = 12  # topics by name, last fetched epoch and diverging epochs


@pytest.fixture
def broker(tmp_path):
    b = InMemoryBroker(tmp_path)
    b.create("orders", ORDERS, partitions=2, leader_epoch=3)
    yield b
    b.close()


def request(*partitions: tuple[str, int, int], max_wait_ms: int = 0, min_bytes: int = 1,
            max_bytes: int = 1 << 20, partition_max_bytes: int = 1 << 20, leader_epoch: int = -1,
            replica_id: int = -1, last_fetched_epoch: int = -1) -> Request:
    """A sessionless Fetch of (topic, partition, offset) entries."""
    by_topic: dict[str, list[Any]] = {}
    for topic, partition, offset in partitions:
        by_topic.setdefault(topic, []).append(F.FetchTopic.FetchPartition(
            partition=partition, current_leader_epoch=leader_epoch, fetch_offset=offset,
            last_fetched_epoch=last_fetched_epoch, log_start_offset=-1,
            partition_max_bytes=partition_max_bytes))
    body = F(replica_id=replica_id, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
             isolation_level=0, session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[],
             topics=[F.FetchTopic(topic=t, topic_id=uuid.UUID(int=0), partitions=ps) for t, ps in by_topic.items()])
    header = RequestHeader(ApiKey.FETCH, VERSION, 7, "t", 2)
    return Request(ApiKey.FETCH, VERSION, 7, "t", header, body, 0)


def decode(reply: Any) -> dict[tuple[str, int], Any]:
    """Each answered partition of the reply's frame, by (topic, partition)."""
    frame = reply_frame(reply)
    resp = response_class(ApiKey.FETCH).decode(memoryview(frame)[4 + 4 + 1:], version=VERSION)
    return {(t.topic, p.partition_index): p for t in resp.responses for p in t.partitions}


def values(p: Any) -> list[bytes]:
    return [r.value for _, batch in iter_batches(p.records or b"") for r in iter_records(batch)]


async def fetch(broker: InMemoryBroker, req: Request) -> dict[tuple[str, int], Any]:
    return decode(await handle_fetch(broker.ctx, req))


def run(coro_fn: Any, *args: Any) -> Any:
    return trio.run(coro_fn, *args, clock=trio.testing.MockClock(autojump_threshold=0))


def test_a_consumer_reads_what_was_produced(broker) -> None:
    broker.produce("orders", 0, b"a", b"b")
    broker.produce("orders", 0, b"c")
    got = run(fetch, broker, request(("orders", 0, 0), ("orders", 1, 0)))
    assert got[("orders", 0)].error_code == ErrorCode.NONE
    assert values(got[("orders", 0)]) == [b"a", b"b", b"c"]
    assert got[("orders", 0)].high_watermark == 3 and got[("orders", 0)].log_start_offset == 0
    assert got[("orders", 1)].error_code == ErrorCode.NONE and values(got[("orders", 1)]) == []


def test_a_consumer_reads_only_below_the_high_watermark(tmp_path) -> None:
    b = InMemoryBroker(tmp_path)
    try:
        b.create("orders", ORDERS, replicas=(1, 2))  # a follower that has fetched nothing yet
        b.produce("orders", 0, b"a")
        got = run(fetch, b, request(("orders", 0, 0)))
        assert got[("orders", 0)].high_watermark == 0 and values(got[("orders", 0)]) == []
        # The follower catches up: the high watermark moves, and the record is readable.
        b.replicas.on_follower_fetch(b.replicas.get("orders", 0), 2, 1, now_ms=0)
        got = run(fetch, b, request(("orders", 0, 0)))
        assert got[("orders", 0)].high_watermark == 1 and values(got[("orders", 0)]) == [b"a"]
    finally:
        b.close()


def test_a_long_poll_wakes_when_records_arrive(broker) -> None:
    async def scenario() -> tuple[dict, float]:
        start = trio.current_time()
        got: dict = {}

        async def consumer() -> None:
            got.update(await fetch(broker, request(("orders", 0, 0), max_wait_ms=10_000)))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(consumer)
            await trio.sleep(2)
            broker.produce("orders", 0, b"late")
        return got, trio.current_time() - start

    got, waited = run(scenario)
    assert values(got[("orders", 0)]) == [b"late"]
    assert waited == pytest.approx(2.0)  # answered on the append, not at max_wait_ms


def test_a_long_poll_with_nothing_to_read_answers_at_max_wait(broker) -> None:
    async def scenario() -> tuple[dict, float]:
        start = trio.current_time()
        got = await fetch(broker, request(("orders", 0, 0), max_wait_ms=5_000))
        return got, trio.current_time() - start

    got, waited = run(scenario)
    assert got[("orders", 0)].error_code == ErrorCode.NONE and values(got[("orders", 0)]) == []
    assert waited == pytest.approx(5.0)


def test_an_error_answers_a_long_poll_at_once(broker) -> None:
    async def scenario() -> tuple[dict, float]:
        start = trio.current_time()
        got = await fetch(broker, request(("orders", 0, 0), ("orders", 1, 7), max_wait_ms=5_000))
        return got, trio.current_time() - start

    got, waited = run(scenario)
    assert got[("orders", 1)].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert waited == 0


def test_max_bytes_limits_the_response_but_never_below_one_batch(broker) -> None:
    first = broker.produce("orders", 0, b"x" * 100)
    broker.produce("orders", 0, b"y" * 100)
    broker.produce("orders", 1, b"z" * 100)
    # One byte: the first partition with data still gets one whole batch (KIP-74), no more.
    got = run(fetch, broker, request(("orders", 0, 0), ("orders", 1, 0), max_bytes=1))
    assert values(got[("orders", 0)]) == [b"x" * 100]
    assert values(got[("orders", 1)]) == []
    # The per-partition limit alike: only the first batch of the response goes over a limit.
    got = run(fetch, broker, request(("orders", 0, 0), ("orders", 1, 0), partition_max_bytes=1))
    assert values(got[("orders", 0)]) == [b"x" * 100]
    assert values(got[("orders", 1)]) == []
    assert first.first_offset == 0
    # Enough for everything.
    got = run(fetch, broker, request(("orders", 0, 0), ("orders", 1, 0)))
    assert values(got[("orders", 0)]) == [b"x" * 100, b"y" * 100]
    assert values(got[("orders", 1)]) == [b"z" * 100]


def test_an_offset_past_the_log_end_is_out_of_range(broker) -> None:
    broker.produce("orders", 0, b"a", b"b")
    got = run(fetch, broker, request(("orders", 0, 3)))
    p = got[("orders", 0)]
    assert p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and values(p) == []
    # The client resets from the offsets the error carries.
    assert p.high_watermark == 2 and p.log_start_offset == 0


def test_a_partition_led_elsewhere_is_not_leader_or_follower(tmp_path) -> None:
    b = InMemoryBroker(tmp_path)
    try:
        b.create("others", OTHERS, replicas=(2, 1))  # broker 2 leads, we follow
        got = run(fetch, b, request(("others", 0, 0)))
        assert got[("others", 0)].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        got = run(fetch, b, request(("nope", 0, 0)))
        assert got[("nope", 0)].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    finally:
        b.close()


def test_leadership_moving_away_turns_reads_into_not_leader(broker) -> None:
    broker.produce("orders", 0, b"a")
    broker.step(PartitionChangeRecord(partition_id=0, topic_id=ORDERS, leader=2, replicas=(1, 2), isr=(1, 2)))
    got = run(fetch, broker, request(("orders", 0, 0)))
    assert got[("orders", 0)].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_a_fenced_or_unknown_leader_epoch_is_refused(broker) -> None:
    broker.produce("orders", 0, b"a")
    got = run(fetch, broker, request(("orders", 0, 0), leader_epoch=2))
    assert got[("orders", 0)].error_code == ErrorCode.FENCED_LEADER_EPOCH and values(got[("orders", 0)]) == []
    got = run(fetch, broker, request(("orders", 0, 0), leader_epoch=4))
    assert got[("orders", 0)].error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    got = run(fetch, broker, request(("orders", 0, 0), leader_epoch=3))
    assert got[("orders", 0)].error_code == ErrorCode.NONE and values(got[("orders", 0)]) == [b"a"]


def test_a_follower_reads_to_the_log_end_and_its_fetch_moves_the_high_watermark(tmp_path) -> None:
    b = InMemoryBroker(tmp_path)
    try:
        b.create("orders", ORDERS, replicas=(1, 2))
        b.produce("orders", 0, b"a", b"b")
        got = run(fetch, b, request(("orders", 0, 0), replica_id=2))
        assert values(got[("orders", 0)]) == [b"a", b"b"], "past the high watermark"
        assert b.replicas.get("orders", 0).high_watermark == 0
        run(fetch, b, request(("orders", 0, 2), replica_id=2))  # it has both now
        assert b.replicas.get("orders", 0).high_watermark == 2
    finally:
        b.close()


def test_a_follower_with_a_divergent_epoch_is_told_where_to_truncate(broker) -> None:
    broker.produce("orders", 0, b"a", b"b")  # epoch 3 from offset 0
    got = run(fetch, broker, request(("orders", 0, 5), replica_id=2, last_fetched_epoch=2))
    p = got[("orders", 0)]
    assert p.error_code == ErrorCode.NONE and values(p) == []
    # Epoch 2 ended where epoch 3 began here: the follower truncates to offset 0.
    assert (p.diverging_epoch.epoch, p.diverging_epoch.end_offset) == (2, 0)


class FakeRemote:
    """Remote storage (``edges.RemoteLog``) that holds one batch at every offset from 10."""

    def __init__(self, answer: bytes | None | KafkaError) -> None:
        self.answer = answer
        self.reads: list[tuple[str, int, int, bool]] = []

    def serves_remotely(self, hosted: Any, offset: int) -> bool:
        return offset >= 10

    async def read_remote(self, hosted: Any, offset: int, max_bytes: int, *, min_one: bool) -> bytes | None:
        self.reads.append((hosted.topic, offset, max_bytes, min_one))
        if isinstance(self.answer, KafkaError):
            raise self.answer
        return self.answer

    def highest_remote_offset(self, hosted: Any) -> int:
        return -1

    async def offset_for_timestamp(self, hosted: Any, timestamp: int) -> tuple[int, int] | None:
        return None


@pytest.mark.parametrize("answer, error", [
    (build_batch([Record(b"k", b"remote")], now_ms=0), ErrorCode.NONE),
    (None, ErrorCode.OFFSET_OUT_OF_RANGE),
    (KafkaError(ErrorCode.KAFKA_STORAGE_ERROR), ErrorCode.KAFKA_STORAGE_ERROR),
], ids=["read", "not-there", "storage-error"])
def test_a_read_outside_the_local_log_continues_in_remote_storage(broker, answer, error) -> None:
    broker.produce("orders", 0, b"a")
    remote = broker.ctx.remote = FakeRemote(answer)
    got = run(fetch, broker, request(("orders", 0, 12), ("orders", 1, 0), max_bytes=1000))
    p = got[("orders", 0)]
    assert p.error_code == error
    assert values(p) == ([b"remote"] if error == ErrorCode.NONE else [])
    assert p.high_watermark == 1  # the local log's offsets, as for any read
    assert remote.reads == [("orders", 12, 1000, True)]
    # An offset remote storage does not serve stays out of range, without asking it.
    got = run(fetch, broker, request(("orders", 0, 5)))
    assert got[("orders", 0)].error_code == ErrorCode.OFFSET_OUT_OF_RANGE and len(remote.reads) == 1
