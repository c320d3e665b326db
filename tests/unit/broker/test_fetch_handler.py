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
from kafkapy.records.control import marker_batch
from kafkapy.records.reader import iter_batches, iter_records
from tests.unit.broker.fakes import FakeAbortedTxn, InMemoryBroker, reply_frame

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
            replica_id: int = -1, last_fetched_epoch: int = -1, isolation_level: int = 0,
            version: int = VERSION, session_id: int = 0, session_epoch: int = -1) -> Request:
    """A Fetch of (topic, partition, offset) entries, sessionless unless a session is named."""
    by_topic: dict[str, list[Any]] = {}
    for topic, partition, offset in partitions:
        by_topic.setdefault(topic, []).append(F.FetchTopic.FetchPartition(
            partition=partition, current_leader_epoch=leader_epoch, fetch_offset=offset,
            last_fetched_epoch=last_fetched_epoch, log_start_offset=-1,
            partition_max_bytes=partition_max_bytes))
    body = F(replica_id=replica_id, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
             isolation_level=isolation_level, session_id=session_id, session_epoch=session_epoch,
             rack_id="", forgotten_topics_data=[],
             topics=[F.FetchTopic(topic=t, topic_id=uuid.UUID(int=0), partitions=ps) for t, ps in by_topic.items()])
    header = RequestHeader(ApiKey.FETCH, version, 7, "t", 2 if version >= 12 else 1)
    return Request(ApiKey.FETCH, version, 7, "t", header, body, 0)


def decode(reply: Any, version: int = VERSION) -> dict[tuple[str, int], Any]:
    """Each answered partition of the reply's frame, by (topic, partition)."""
    frame = reply_frame(reply)
    header = 4 + 4 + (1 if version >= 12 else 0)  # size, correlation id, tagged fields
    resp = response_class(ApiKey.FETCH).decode(memoryview(frame)[header:], version=version)
    return {(t.topic, p.partition_index): p for t in resp.responses for p in t.partitions}


def values(p: Any) -> list[bytes]:
    return [r.value for _, batch in iter_batches(p.records or b"") for r in iter_records(batch)]


async def fetch(broker: InMemoryBroker, req: Request) -> dict[tuple[str, int], Any]:
    return decode(await handle_fetch(broker.ctx, req), req.api_version)


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


def _rolled(broker: InMemoryBroker) -> None:
    """Orders-0 holds "old" in its first segment and "new" in the next one."""
    broker.produce("orders", 0, b"old")
    broker.replicas.get("orders", 0).log.roll(now_ms=0)
    broker.produce("orders", 0, b"new")


@pytest.mark.parametrize("replica_id", [-1, 2], ids=["consumer", "follower"])
def test_a_long_poll_on_an_older_segment_answers_at_once(broker, replica_id) -> None:
    # A read stops at its segment's end, so min_bytes may never be reachable from here: Kafka's
    # DelayedFetch answers at once (kafka-go's reader, for one, stalls on compacted logs if not).
    _rolled(broker)

    async def scenario() -> tuple[dict, float]:
        start = trio.current_time()
        got = await fetch(broker, request(("orders", 0, 0), max_wait_ms=5_000, min_bytes=1 << 20,
                                          replica_id=replica_id))
        return got, trio.current_time() - start

    got, waited = run(scenario)
    assert values(got[("orders", 0)]) == [b"old"]
    assert waited == 0


def test_a_long_poll_in_the_last_segment_still_waits_for_min_bytes(broker) -> None:
    _rolled(broker)

    async def scenario() -> tuple[dict, float]:
        start = trio.current_time()
        got = await fetch(broker, request(("orders", 0, 1), max_wait_ms=5_000, min_bytes=1 << 20))
        return got, trio.current_time() - start

    got, waited = run(scenario)
    assert values(got[("orders", 0)]) == [b"new"]
    assert waited == pytest.approx(5.0)


@pytest.mark.parametrize("isolation_level", [0, 1], ids=["read_uncommitted", "read_committed"])
def test_a_long_poll_past_the_high_watermark_in_a_later_segment_answers_at_once(tmp_path, isolation_level) -> None:
    # A consumer at an offset beyond the high watermark, in a newer segment than the one
    # holding it: the offset it was given came from a log end that moved back (a new leader's
    # high watermark, a truncation). Kafka's DelayedFetch answers at once, as for an older
    # segment, rather than hold the consumer for max_wait_ms.
    b = InMemoryBroker(tmp_path)
    try:
        b.create("orders", ORDERS, replicas=(1, 2))
        b.produce("orders", 0, b"a", b"b")
        run(fetch, b, request(("orders", 0, 1), replica_id=2))  # the follower has "a" only
        b.replicas.get("orders", 0).log.roll(now_ms=0)
        b.produce("orders", 0, b"c")  # offset 2, in the new segment
        assert b.replicas.get("orders", 0).high_watermark == 1

        async def scenario() -> tuple[dict, float]:
            start = trio.current_time()
            got = await fetch(b, request(("orders", 0, 3), max_wait_ms=5_000, isolation_level=isolation_level))
            return got, trio.current_time() - start

        got, waited = run(scenario)
        assert got[("orders", 0)].error_code == ErrorCode.NONE and values(got[("orders", 0)]) == []
        assert waited == 0
    finally:
        b.close()


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
        # Before v11 consumers read from leaders only (from v11 followers serve them too:
        # test_follower_fetch).
        got = run(fetch, b, request(("others", 0, 0), version=10))
        assert got[("others", 0)].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        got = run(fetch, b, request(("nope", 0, 0)))
        assert got[("nope", 0)].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    finally:
        b.close()


def test_leadership_moving_away_turns_reads_into_not_leader(broker) -> None:
    broker.produce("orders", 0, b"a")
    broker.step(PartitionChangeRecord(partition_id=0, topic_id=ORDERS, leader=2, replicas=(1, 2), isr=(1, 2)))
    got = run(fetch, broker, request(("orders", 0, 0), version=10))
    assert got[("orders", 0)].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    # From v11 this broker serves as a follower now, but not a client of the old leader epoch.
    got = run(fetch, broker, request(("orders", 0, 0), leader_epoch=3))
    assert got[("orders", 0)].error_code == ErrorCode.FENCED_LEADER_EPOCH


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

    async def read_remote_committed(self, hosted: Any, offset: int, max_bytes: int, *,
                                    min_one: bool) -> tuple[bytes, list[tuple[int, int]]] | None:
        data = await self.read_remote(hosted, offset, max_bytes, min_one=min_one)
        return None if data is None else (data, [(7, offset - 2)])

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


def test_a_read_committed_remote_read_lists_what_remote_storage_says_was_aborted(broker) -> None:
    broker.produce("orders", 0, b"a")
    broker.ctx.remote = FakeRemote(build_batch([Record(b"k", b"remote")], now_ms=0))
    got = run(fetch, broker, request(("orders", 0, 12), isolation_level=1))
    p = got[("orders", 0)]
    assert values(p) == [b"remote"]
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(7, 10)]
    # read_uncommitted: null, as for a local read.
    assert run(fetch, broker, request(("orders", 0, 12)))[("orders", 0)].aborted_transactions is None


# -- read_committed: up to the last stable offset, with the aborted transactions ------------------

READ_COMMITTED = 1
NOW = 1_700_000_000_000


def txn_append(broker: InMemoryBroker, pid: int, *vals: bytes, seq: int = 0) -> int:
    """A transactional batch of producer ``pid`` on orders-0; its first offset."""
    batch = build_batch([Record(b"k", v) for v in vals], producer_id=pid, producer_epoch=0,
                        base_sequence=seq, transactional=True, now_ms=NOW)
    return broker.replicas.append(broker.replicas.leader("orders", 0), bytearray(batch), now_ms=NOW).first_offset


def end_txn(broker: InMemoryBroker, pid: int, *, commit: bool) -> None:
    marker = marker_batch(producer_id=pid, producer_epoch=0, commit=commit, coordinator_epoch=0, now_ms=NOW)
    broker.replicas.leader("orders", 0).append(bytearray(marker), now_ms=NOW, from_client=False)


def data(p: Any) -> list[bytes]:
    """The values of the data records (control batches left out)."""
    return [r.value for h, batch in iter_batches(p.records or b"") if not h.is_control
            for r in iter_records(batch)]


def aborted(p: Any) -> list[tuple[int, int]] | None:
    if p.aborted_transactions is None:
        return None
    return [(a.producer_id, a.first_offset) for a in p.aborted_transactions]


@pytest.mark.parametrize("version", [4, 11, 12])
def test_read_committed_lists_the_aborted_transactions_of_what_it_read(broker, version) -> None:
    txn_append(broker, 7, b"x", b"y")          # 0-1, then aborted by the marker at 2
    end_txn(broker, 7, commit=False)
    broker.produce("orders", 0, b"plain")      # 3
    index = broker.index_aborted("orders", 0, FakeAbortedTxn(7, 0, 2))
    got = run(fetch, broker, request(("orders", 0, 0), ("orders", 1, 0), version=version,
                                     isolation_level=READ_COMMITTED))
    p = got[("orders", 0)]
    # The consumer drops producer 7's records itself; the broker sends them with the list.
    assert data(p) == [b"x", b"y", b"plain"] and aborted(p) == [(7, 0)]
    assert (p.high_watermark, p.last_stable_offset) == (4, 4)
    assert index.asked == [(0, 4)]  # the read ran to the end of the active segment: the log end
    # Nothing to read is an empty list, not null (Kafka's emptyFetchDataInfo).
    assert aborted(got[("orders", 1)]) == []
    # read_uncommitted: the same records and null; the index is not consulted.
    got = run(fetch, broker, request(("orders", 0, 0), version=version))
    assert data(got[("orders", 0)]) == [b"x", b"y", b"plain"] and aborted(got[("orders", 0)]) is None
    assert index.asked == [(0, 4)]


def test_read_committed_stops_at_an_open_transaction(broker) -> None:
    broker.produce("orders", 0, b"a")          # 0
    txn_append(broker, 7, b"x")                # 1, aborted at 2
    end_txn(broker, 7, commit=False)
    txn_append(broker, 9, b"open")             # 3: still open, the LSO
    broker.produce("orders", 0, b"after")      # 4
    index = broker.index_aborted("orders", 0, FakeAbortedTxn(7, 1, 2))
    p = run(fetch, broker, request(("orders", 0, 0), isolation_level=READ_COMMITTED))[("orders", 0)]
    assert data(p) == [b"a", b"x"] and aborted(p) == [(7, 1)]
    assert (p.high_watermark, p.last_stable_offset) == (5, 3)
    assert index.asked == [(0, 3)]  # up to the batch after the bytes returned
    # At the LSO there is nothing to read yet: an empty list, and no index lookup.
    p = run(fetch, broker, request(("orders", 0, 3), isolation_level=READ_COMMITTED))[("orders", 0)]
    assert data(p) == [] and aborted(p) == [] and index.asked == [(0, 3)]
    # Once the transaction is decided, its records and those after it are readable.
    end_txn(broker, 9, commit=True)
    p = run(fetch, broker, request(("orders", 0, 3), isolation_level=READ_COMMITTED))[("orders", 0)]
    assert data(p) == [b"open", b"after"] and aborted(p) == [] and p.last_stable_offset == 6


def test_the_aborted_list_covers_only_the_range_returned(broker) -> None:
    txn_append(broker, 7, b"x" * 100)          # 0
    broker.produce("orders", 0, b"y" * 100)    # 1
    end_txn(broker, 7, commit=False)           # 2
    broker.replicas.get("orders", 0).log.roll(now_ms=NOW)
    broker.produce("orders", 0, b"z")          # 3, in the new active segment
    index = broker.index_aborted("orders", 0, FakeAbortedTxn(7, 0, 2))

    def read_committed(offset: int, **limits: int) -> Any:
        req = request(("orders", 0, offset), isolation_level=READ_COMMITTED, **limits)
        return run(fetch, broker, req)[("orders", 0)]

    # Cut by the byte limit after one batch: the bound is the next batch's offset.
    p = read_committed(0, partition_max_bytes=1)
    assert data(p) == [b"x" * 100] and aborted(p) == [(7, 0)] and index.asked[-1] == (0, 1)
    # To the end of a segment: the bound is the next segment's base offset.
    p = read_committed(1)
    assert data(p) == [b"y" * 100] and aborted(p) == [(7, 0)] and index.asked[-1] == (1, 3)
    # In the active segment, past the transaction: the log end, and nothing overlaps.
    p = read_committed(3)
    assert data(p) == [b"z"] and aborted(p) == [] and index.asked[-1] == (3, 4)


def test_errors_carry_null_or_an_empty_list_as_kafka_answers_them(tmp_path) -> None:
    b = InMemoryBroker(tmp_path)
    try:
        b.create("others", OTHERS, replicas=(2, 1))  # led by broker 2
        got = run(fetch, b, request(("others", 0, 0), ("nope", 0, 0), isolation_level=READ_COMMITTED,
                                    version=10))  # v10: followers do not serve consumers
        # A read that failed is null; a partition the metadata does not know, answered before
        # any read, keeps the generated default: an empty array.
        assert got[("others", 0)].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert aborted(got[("others", 0)]) is None
        assert got[("nope", 0)].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert aborted(got[("nope", 0)]) == []
    finally:
        b.close()


def test_a_follower_gets_null(broker) -> None:
    txn_append(broker, 7, b"x")
    end_txn(broker, 7, commit=False)
    broker.index_aborted("orders", 0, FakeAbortedTxn(7, 0, 1))
    p = run(fetch, broker, request(("orders", 0, 0), replica_id=2))[("orders", 0)]
    assert data(p) == [b"x"] and aborted(p) is None


def test_an_incremental_session_sends_aborted_records_like_any_new_records(broker) -> None:
    async def session_fetch(req: Request) -> tuple[int, dict[tuple[str, int], Any]]:
        frame = reply_frame(await handle_fetch(broker.ctx, req))
        resp = response_class(ApiKey.FETCH).decode(memoryview(frame)[9:], version=VERSION)
        return resp.session_id, {(t.topic, p.partition_index): p for t in resp.responses for p in t.partitions}

    txn_append(broker, 7, b"x")                # 0, aborted at 1
    end_txn(broker, 7, commit=False)
    index = broker.index_aborted("orders", 0, FakeAbortedTxn(7, 0, 1))
    sid, got = run(session_fetch, request(("orders", 0, 0), ("orders", 1, 0),
                                          isolation_level=READ_COMMITTED, session_epoch=0))
    assert sid != 0 and aborted(got[("orders", 0)]) == [(7, 0)] and aborted(got[("orders", 1)]) == []
    # Nothing new: both partitions are left out (Kafka's rule: records, a moved high watermark
    # or log start, or an error bring a partition back; its aborted list follows its records).
    _, got = run(session_fetch, request(("orders", 0, 2), isolation_level=READ_COMMITTED,
                                        session_id=sid, session_epoch=1))
    assert got == {}
    # A new aborted transaction: its records come with its entry; the idle partition stays out.
    txn_append(broker, 8, b"w")                # 2, aborted at 3
    end_txn(broker, 8, commit=False)
    index.aborted.append(FakeAbortedTxn(8, 2, 3))
    _, got = run(session_fetch, request(("orders", 0, 2), isolation_level=READ_COMMITTED,
                                        session_id=sid, session_epoch=2))
    assert list(got) == [("orders", 0)]
    assert data(got[("orders", 0)]) == [b"w"] and aborted(got[("orders", 0)]) == [(8, 2)]


def test_read_committed_without_aborted_transactions_is_an_empty_list(broker) -> None:
    # The log's own index (no fake): plain records, nothing aborted.
    broker.produce("orders", 0, b"a", b"b")
    p = run(fetch, broker, request(("orders", 0, 0), isolation_level=READ_COMMITTED))[("orders", 0)]
    assert data(p) == [b"a", b"b"] and aborted(p) == [] and p.last_stable_offset == 2
