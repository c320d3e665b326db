"""The mirror fetcher against a scripted source: what it appends, cuts, restarts and refuses.

The source is a fake ``ClusterClient`` answering Fetch, OffsetsForLeaderEpoch and ListOffsets
from a list of batches; the mirror partition is a real ``PartitionLog`` behind a small replica
that does what the broker's Partition does with the fetcher's calls. Trio's MockClock makes the
back-offs instant.
"""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import trio
import trio.testing

from kafkapy.link.cluster_client import ClusterMetadata, PartitionInfo, TopicInfo
from kafkapy.link.mirror_fetcher import MirrorAssignment, MirrorFetcher
from kafkapy.log.config import LogConfig
from kafkapy.log.partition_log import PartitionLog
from kafkapy.metadata.link_configs import LinkSettings
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.records.builder import Record, build_batch

TOPIC = "orders"


def batch(base: int, count: int, epoch: int) -> bytes:
    return bytes(build_batch([Record(None, f"v{base + i}".encode(), timestamp=1000 + base + i)
                              for i in range(count)], base_offset=base, partition_leader_epoch=epoch))


class FakeSource:
    """A one-partition source: its batches, log start, and leader epoch."""

    def __init__(self, batches: list[bytes], *, epoch: int = 0, log_start: int = 0,
                 epoch_ends: dict[int, tuple[int, int]] | None = None) -> None:
        self.batches = batches
        self.epoch = epoch
        self.log_start = log_start
        self.epoch_ends = epoch_ends or {}
        self.metadata: ClusterMetadata | None = None
        self.last_contact = 0.0
        self.requests: list[int] = []
        self.timeout = 5.0

    @property
    def end(self) -> int:
        from kafkapy.records.reader import iter_batches
        last = 0
        for b in self.batches:
            for h, _ in iter_batches(b):
                last = h.last_offset + 1
        return last

    async def refresh(self, topics: list[str] | None) -> ClusterMetadata:
        self.metadata = ClusterMetadata("src", {1: ("src", 9092)}, {TOPIC: TopicInfo(
            TOPIC, uuid.uuid4(), {0: PartitionInfo(1, self.epoch)})}, trio.current_time())
        return self.metadata

    async def aclose(self) -> None:
        pass

    async def send_to(self, node_id: int, request: Any, version: int | None = None,
                      timeout: float | None = None) -> Any:
        await trio.sleep(0.001)  # a network round trip, however short
        self.requests.append(request.API_KEY)
        if request.API_KEY == ApiKey.FETCH:
            p = request.topics[0].partitions[0]
            if p.fetch_offset < self.log_start or p.fetch_offset > self.end:
                return _fetch_answer(ErrorCode.OFFSET_OUT_OF_RANGE, -1, -1, b"")
            from kafkapy.records.reader import iter_batches
            out = b"".join(b for b in self.batches for h, _ in iter_batches(b) if h.last_offset >= p.fetch_offset)
            return _fetch_answer(ErrorCode.NONE, self.end, self.log_start, out)
        if request.API_KEY == ApiKey.OFFSET_FOR_LEADER_EPOCH:
            p = request.topics[0].partitions[0]
            epoch, end = self.epoch_ends.get(p.leader_epoch, (p.leader_epoch, self.end))
            return SimpleNamespace(topics=[SimpleNamespace(topic=TOPIC, partitions=[SimpleNamespace(
                partition=0, error_code=0, leader_epoch=epoch, end_offset=end)])])
        if request.API_KEY == ApiKey.LIST_OFFSETS:
            ts = request.topics[0].partitions[0].timestamp
            return SimpleNamespace(topics=[SimpleNamespace(partitions=[SimpleNamespace(
                error_code=0, offset=self.log_start if ts == -2 else self.end)])])
        raise AssertionError(request)


def _fetch_answer(error: int, hw: int, log_start: int, records: bytes) -> Any:
    return SimpleNamespace(error_code=0, responses=[SimpleNamespace(topic=TOPIC, partitions=[SimpleNamespace(
        partition_index=0, error_code=error, high_watermark=hw, log_start_offset=log_start,
        diverging_epoch=None, records=records)])])


class Replica:
    """What the broker's Partition does with the fetcher's calls, over a real log."""

    def __init__(self, log: PartitionLog, ceiling: int = 1_000_000) -> None:
        self.log = log
        self.mirror_epoch_ceiling = ceiling
        self.cuts: list[str] = []

    def mirror_log(self, leader_epoch: int) -> PartitionLog:
        return self.log

    def append_mirrored(self, records: bytes, *, now_ms: int) -> None:
        self.log.append_as_follower(records, now_ms=now_ms)
        self.log.maybe_increment_high_watermark(self.log.log_end_offset)

    def truncate_mirrored(self, offset: int, *, now_ms: int, why: str) -> None:
        self.cuts.append(f"truncate {offset}: {why}")
        self.log.truncate_to(offset, now_ms=now_ms)

    def restart_mirrored_at(self, offset: int, *, now_ms: int, why: str) -> None:
        self.cuts.append(f"restart {offset}: {why}")
        self.log.truncate_fully_and_start_at(offset, now_ms=now_ms)

    def follow_source_log_start(self, offset: int) -> None:
        target = min(offset, self.log.high_watermark)
        if target > self.log.log_start_offset:
            self.log.maybe_increment_log_start_offset(target)


def run_until(source: FakeSource, replica: Replica, done: Any, limit: float = 30.0) -> MirrorFetcher:
    settings = LinkSettings.of({"bootstrap.servers": "src:9092", "replica.fetch.backoff.ms": "50"})
    fetcher = MirrorFetcher("l", source, settings, SimpleNamespace(mirror_replica=lambda t, p: replica),  # type: ignore[arg-type]
                            now_ms=lambda: 0)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(fetcher.run)
            fetcher.assign({(TOPIC, 0): MirrorAssignment(TOPIC, leader_epoch=0)})
            with trio.fail_after(limit):
                while not done():
                    await trio.sleep(0.05)
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return fetcher


def open_log(tmp_path: Any) -> PartitionLog:
    return PartitionLog.open(str(tmp_path / "orders-0"), LogConfig.from_props({}), now_ms=0, recover=False)


def test_the_sources_batches_land_byte_for_byte_at_their_offsets(tmp_path) -> None:
    source = FakeSource([batch(0, 5, 0), batch(5, 3, 2)], epoch=2)
    log = open_log(tmp_path)
    replica = Replica(log)
    fetcher = run_until(source, replica, lambda: log.log_end_offset == 8)
    assert log.leader_epoch_cache.latest_epoch == 2  # the source's epochs, not ours
    assert fetcher.lags()[(TOPIC, 0)].lag == 0
    assert replica.cuts == []
    log.close()


def test_the_tail_past_the_sources_history_is_cut_before_fetching(tmp_path) -> None:
    log = open_log(tmp_path)
    log.append_as_follower(batch(0, 10, 0), now_ms=0)
    log.append_as_follower(batch(10, 5, 1), now_ms=0)  # epoch 1 at 10-14: the source lost 12-14
    source = FakeSource([batch(0, 10, 0), batch(10, 2, 1), batch(12, 4, 3)], epoch=3, epoch_ends={1: (1, 12)})
    replica = Replica(log)
    run_until(source, replica, lambda: log.log_end_offset == 16)
    assert replica.cuts and replica.cuts[0].startswith("truncate 12")
    assert log.leader_epoch_cache.latest_epoch == 3
    log.close()


def test_a_batch_above_the_epoch_ceiling_stops_the_partition(tmp_path) -> None:
    source = FakeSource([batch(0, 5, 0), batch(5, 5, 9)], epoch=9)
    log = open_log(tmp_path)
    replica = Replica(log, ceiling=5)
    fetcher = run_until(source, replica, lambda: fetcher_stopped(source))
    assert log.log_end_offset == 0  # the response held the epoch-9 batch: nothing appended
    assert "above the mirror's epoch ceiling 5" in (fetcher.lags()[(TOPIC, 0)].stopped or "")
    log.close()


def fetcher_stopped(source: FakeSource) -> bool:
    return source.requests.count(ApiKey.FETCH) >= 1


def test_records_the_source_deleted_before_they_were_mirrored_restart_the_log(tmp_path) -> None:
    source = FakeSource([batch(20, 5, 0)], log_start=20)
    log = open_log(tmp_path)
    replica = Replica(log)
    run_until(source, replica, lambda: log.log_end_offset == 25)
    assert replica.cuts[0].startswith("restart 20")
    assert log.log_start_offset == 20
    log.close()


def test_a_mirror_stopped_while_the_source_is_asked_is_not_cut(tmp_path) -> None:
    source = FakeSource([batch(20, 5, 0)], log_start=20)
    log = open_log(tmp_path)
    replica = Replica(log)
    stopped = {"now": False}
    asked = source.send_to

    async def send_to(node_id: int, request: Any, version: int | None = None, timeout: float | None = None) -> Any:
        if request.API_KEY == ApiKey.LIST_OFFSETS:
            stopped["now"] = True  # promoted while the answer is on its way
        return await asked(node_id, request, version, timeout)

    source.send_to = send_to  # type: ignore[method-assign]
    replica.mirror_log = lambda epoch: None if stopped["now"] else log  # type: ignore[method-assign]
    run_until(source, replica, lambda: source.requests.count(ApiKey.LIST_OFFSETS) >= 2)
    assert replica.cuts == [] and log.log_end_offset == 0
    log.close()
