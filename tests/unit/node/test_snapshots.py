"""MetadataSnapshotter: snapshots of the metadata image at the right offsets, one at a time."""

from __future__ import annotations

import logging
import uuid

import pytest
import trio

from kafkapy.broker.metadata_publisher import BrokerMetadata
from kafkapy.config import BrokerConfig
from kafkapy.metadata.image import RESOURCE_TOPIC
from kafkapy.metadata.records import (
    ConfigRecord,
    FeatureLevelRecord,
    MetadataRecord,
    NoOpRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    decode_record,
    encode_record,
)
from kafkapy.metadata.snapshot import image_from_snapshot, read_snapshot, same_image
from kafkapy.node.snapshots import MetadataSnapshotter, SnapshotJob, encode_in_thread
from kafkapy.raft.control import build_leader_change_batch
from kafkapy.raft.messages import SnapshotId
from kafkapy.raft.snapshot_store import SnapshotNotStored
from kafkapy.records.builder import Record, build_batch
from kafkapy.records.reader import iter_batches, iter_records

NOW = 1_700_000_000_000
EPOCH = 4


class Log:
    """A committed metadata log fed batch by batch into a BrokerMetadata, as the node does."""

    def __init__(self) -> None:
        self.meta = BrokerMetadata("cid")
        self.next_offset = 0
        self.images: dict[int, object] = {}  # end offset -> image after that batch

    def batch(self, records: list[MetadataRecord], *, epoch: int = EPOCH) -> bytes:
        data = build_batch([Record(None, encode_record(r), (), NOW) for r in records],
                           base_offset=self.next_offset, partition_leader_epoch=epoch, now_ms=NOW)
        return self._commit(data)

    def control(self, *, epoch: int = EPOCH) -> bytes:
        data = build_leader_change_batch(base_offset=self.next_offset, epoch=epoch, leader_id=1,
                                         voters=[1], granting_voters=[1], now_ms=NOW)
        return self._commit(data)

    def _commit(self, data: bytes) -> bytes:
        for header, view in iter_batches(data):
            if not header.is_control:
                self.meta.on_commit([(decode_record(r.value), r.offset) for r in iter_records(view)])
            self.next_offset = header.next_offset
        self.images[self.next_offset] = self.meta.image
        return data


def bootstrap(log: Log) -> None:
    log.batch([FeatureLevelRecord("metadata.version", 21),
               RegisterBrokerRecord(1, uuid.UUID(int=1), 0, fenced=False)])


def topic(log: Log, i: int) -> bytes:
    tid = uuid.UUID(int=100 + i)
    return log.batch([TopicRecord(f"t{i}", tid)] +
                     [PartitionRecord(p, tid, (1,), (1,), 1) for p in range(3)])


def test_snapshots_at_the_byte_threshold_decode_to_the_image() -> None:
    written: list[tuple[int, int, bytes]] = []
    snap = MetadataSnapshotter(lambda *args: written.append(args), now_ms=NOW,
                               max_bytes_between_snapshots=1000, max_interval_ms=0)
    log = Log()
    bootstrap(log)
    expected_ends = []
    total = 0
    for i in range(12):
        data = topic(log, i)
        total += len(data)
        job = snap.observe_batch(log.meta.image, data, NOW + i)
        assert (job is not None) == (total >= 1000)
        if job is not None:
            expected_ends.append(log.next_offset)
            total = 0
    assert [end for end, _, _ in written] == expected_ends and len(expected_ends) >= 2
    for end, epoch, data in written:
        assert epoch == EPOCH
        loaded = image_from_snapshot(data, SnapshotId(end, epoch), cluster_id="cid")
        assert loaded.offset == end - 1
        assert same_image(loaded, log.images[end])
    assert snap.latest == SnapshotId(written[-1][0], EPOCH) and snap.in_flight is None


def test_a_snapshot_after_a_control_batch_covers_it() -> None:
    """The image's last record is below the control batch; the snapshot ends after it."""
    written = []
    snap = MetadataSnapshotter(lambda *args: written.append(args), now_ms=NOW,
                               max_bytes_between_snapshots=1, max_interval_ms=0)
    log = Log()
    bootstrap(log)
    topic(log, 0)
    data = log.control(epoch=EPOCH + 1)
    assert log.meta.image.offset == log.next_offset - 2
    job = snap.observe_batch(log.meta.image, data, NOW)
    assert job is not None and job.snapshot_id == SnapshotId(log.next_offset, EPOCH + 1)
    end, epoch, blob = written[-1]
    loaded = image_from_snapshot(blob, SnapshotId(end, epoch), cluster_id="cid")
    assert loaded.offset == end - 1 and same_image(loaded, log.meta.image)


def test_no_snapshot_before_metadata_version_is_set() -> None:
    written = []
    snap = MetadataSnapshotter(lambda *args: written.append(args), now_ms=NOW,
                               max_bytes_between_snapshots=1, max_interval_ms=0)
    log = Log()
    assert snap.observe_batch(log.meta.image, log.batch([NoOpRecord()]), NOW) is None
    bootstrap(log)
    # The bytes kept counting: the first usable batch snapshots.
    assert snap.observe_batch(log.meta.image, log.batch([NoOpRecord()]), NOW) is not None
    assert len(written) == 1


def test_time_trigger_fires_on_the_first_batch_after_the_interval() -> None:
    written = []
    snap = MetadataSnapshotter(lambda *args: written.append(args), now_ms=NOW,
                               max_bytes_between_snapshots=10**9, max_interval_ms=60_000)
    log = Log()
    bootstrap(log)
    assert snap.observe_batch(log.meta.image, topic(log, 0), NOW + 59_999) is None
    job = snap.observe_batch(log.meta.image, topic(log, 1), NOW + 60_000)
    assert job is not None and "60000 ms" in job.reason and job.now_ms == NOW + 60_000


def test_one_snapshot_in_flight_the_policy_keeps_counting() -> None:
    written = []
    jobs: list[SnapshotJob] = []
    snap = MetadataSnapshotter(lambda *args: written.append(args), now_ms=NOW,
                               max_bytes_between_snapshots=1, max_interval_ms=0,
                               schedule=jobs.append)
    log = Log()
    bootstrap(log)
    first = snap.observe_batch(log.meta.image, topic(log, 0), NOW)
    assert jobs == [first] and snap.in_flight is first and written == []
    # Busy: these batches start nothing.
    assert snap.observe_batch(log.meta.image, topic(log, 1), NOW) is None
    assert snap.observe_batch(log.meta.image, topic(log, 2), NOW) is None
    assert jobs == [first]
    snap.complete(first, first.encode())
    assert [w[0] for w in written] == [first.snapshot_id.end_offset] and snap.in_flight is None
    second = snap.observe_batch(log.meta.image, topic(log, 3), NOW)
    assert second is not None and second.snapshot_id.end_offset == log.next_offset
    snap.abandon(second)
    assert snap.in_flight is None
    snap.complete(second, b"ignored")  # an abandoned job writes nothing
    assert len(written) == 1


def test_a_loaded_snapshot_resets_the_counters_and_blocks_older_offsets() -> None:
    written = []
    snap = MetadataSnapshotter(lambda *args: written.append(args), now_ms=NOW,
                               max_bytes_between_snapshots=10_000, max_interval_ms=0)
    log = Log()
    bootstrap(log)
    snap.policy.bytes_since_last = 9_999
    snap.snapshot_loaded(SnapshotId(500, 3), NOW)
    assert snap.policy.bytes_since_last == 0 and snap.latest == SnapshotId(500, 3)
    snap.policy.bytes_since_last = 10_000
    assert snap.observe_batch(log.meta.image, topic(log, 0), NOW) is None  # ends below 500


def test_image_past_the_batch_end_is_refused() -> None:
    snap = MetadataSnapshotter(lambda *args: None, now_ms=NOW)
    log = Log()
    bootstrap(log)
    with pytest.raises(ValueError):
        snap.observe(log.meta.image, log.meta.image.offset, EPOCH, 10, NOW)


def test_from_config_reads_kafkas_settings() -> None:
    config = BrokerConfig({"metadata.log.max.record.bytes.between.snapshots": "4096",
                           "metadata.log.max.snapshot.interval.ms": "0"})
    snap = MetadataSnapshotter.from_config(config, lambda *args: None, now_ms=NOW)
    assert snap.policy.max_bytes_between_snapshots == 4096 and snap.policy.max_interval_ms == 0
    default = MetadataSnapshotter.from_config(BrokerConfig(), lambda *args: None, now_ms=NOW)
    assert default.policy.max_bytes_between_snapshots == 20971520
    assert default.policy.max_interval_ms == 3600000


def test_encoding_on_a_worker_thread() -> None:
    written = []
    log = Log()
    bootstrap(log)
    for i in range(5):
        topic(log, i)
    image = log.meta.image

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            snap = MetadataSnapshotter(
                lambda *args: written.append(args), now_ms=NOW,
                max_bytes_between_snapshots=1, max_interval_ms=0,
                schedule=lambda job: nursery.start_soon(
                    encode_in_thread, snap, job, trio.to_thread.run_sync))
            job = snap.observe(image, log.next_offset, EPOCH, 100, NOW)
            assert job is not None and snap.in_flight is job and written == []
        assert snap.in_flight is None

    trio.run(main)
    (end, epoch, data), = written
    assert (end, epoch) == (log.next_offset, EPOCH)
    assert read_snapshot(data)[0].epoch == EPOCH
    assert same_image(image_from_snapshot(data, SnapshotId(end, epoch), cluster_id="cid"), image)


def test_a_failed_encoding_is_logged_and_the_next_snapshot_may_start(caplog) -> None:
    snap = MetadataSnapshotter(lambda *args: None, now_ms=NOW, max_bytes_between_snapshots=1,
                               max_interval_ms=0, schedule=lambda job: None)
    log = Log()
    bootstrap(log)
    job = snap.observe_batch(log.meta.image, topic(log, 0), NOW)
    assert job is not None

    async def broken(fn):
        raise RuntimeError("no space")

    with caplog.at_level(logging.ERROR, logger="kafkapy.node.snapshots"):
        trio.run(encode_in_thread, snap, job, broken)
    assert snap.in_flight is None and "no space" in caplog.text


def test_a_snapshot_the_disk_has_no_room_for_is_one_log_line(caplog) -> None:
    def full(end_offset: int, epoch: int, data: bytes) -> None:
        raise SnapshotNotStored("00000000000000000003-0000000005.checkpoint: No space left on device")

    snap = MetadataSnapshotter(full, now_ms=NOW, max_bytes_between_snapshots=1, max_interval_ms=0,
                               schedule=lambda job: None)
    log = Log()
    bootstrap(log)
    job = snap.observe_batch(log.meta.image, topic(log, 0), NOW)
    assert job is not None

    async def inline(fn):
        return fn()

    with caplog.at_level(logging.ERROR, logger="kafkapy.node.snapshots"):
        trio.run(encode_in_thread, snap, job, inline)
    assert snap.in_flight is None and snap.latest is None
    [record] = caplog.records
    assert "was not written, the disk is full" in record.getMessage() and record.exc_info is None


def test_a_cancelled_encoding_is_abandoned() -> None:
    snap = MetadataSnapshotter(lambda *args: None, now_ms=NOW, max_bytes_between_snapshots=1,
                               max_interval_ms=0, schedule=lambda job: None)
    log = Log()
    bootstrap(log)
    job = snap.observe_batch(log.meta.image, topic(log, 0), NOW)

    async def main() -> None:
        with trio.move_on_after(0.01):
            await encode_in_thread(snap, job, _sleep_forever)

    trio.run(main)
    assert snap.in_flight is None


async def _sleep_forever(fn) -> None:
    await trio.sleep_forever()


# -- with the Raft core: the snapshot replaces the log prefix, a restart reads it back ---------

class Voter:
    """A single-voter RaftReplica over memory stores that survive its restart."""

    def __init__(self) -> None:
        from kafkapy.raft.quorum_state import MemoryQuorumStateStore
        from kafkapy.raft.snapshot_store import MemorySnapshotStore
        from kafkapy.raft.store import MemoryLogStore

        self.stores = (MemoryLogStore(), MemoryQuorumStateStore(), MemorySnapshotStore())
        self.now = 0
        self.replica = self._start()

    def _start(self):
        import random

        from kafkapy.raft.core import RaftReplica

        replica = RaftReplica(1, frozenset({1}), *self.stores, random.Random(7), cluster_id="cid",
                              election_timeout_ms=1, election_backoff_max_ms=1)
        replica.start(self.now)
        return replica

    def advance(self) -> list:
        events = []
        for _ in range(20):
            self.now += 5
            self.replica.tick(self.now)
            self.replica.poll_outbound()
            events.extend(self.replica.take_committed())
        return events

    def restart(self) -> list:
        self.stores[0].crash()
        self.replica = self._start()
        return self.advance()


def test_restart_from_the_newest_snapshot_plus_the_tail_gives_the_same_image() -> None:
    from kafkapy.raft.events import CommittedBatch, SnapshotLoad

    voter = Voter()
    voter.advance()
    assert voter.replica.is_leader
    meta = BrokerMetadata("cid")
    snap = MetadataSnapshotter(
        lambda end, epoch, data: voter.replica.snapshot_written(end, epoch, data, voter.now),
        now_ms=0, max_bytes_between_snapshots=1500, max_interval_ms=0)

    def apply(events) -> None:
        for event in events:
            assert isinstance(event, CommittedBatch)
            if not event.is_control:
                meta.on_commit([(decode_record(r.value), r.offset)
                                for r in iter_records(event.batch)])
            snap.observe_batch(meta.image, event.batch, voter.now)

    apply(voter.advance())  # the epoch's LeaderChange
    records: list[list[MetadataRecord]] = [[FeatureLevelRecord("metadata.version", 21),
                                            RegisterBrokerRecord(1, uuid.UUID(int=1), 0)]]
    for i in range(10):
        tid = uuid.UUID(int=100 + i)
        records.append([TopicRecord(f"t{i}", tid)] +
                       [PartitionRecord(p, tid, (1,), (1,), 1) for p in range(4)])
    records.append([ConfigRecord(RESOURCE_TOPIC, "t3", "retention.ms", "1")])  # below the threshold
    for batch in records:
        voter.replica.append([encode_record(r) for r in batch], voter.now)
        apply(voter.advance())
    newest = voter.stores[2].latest()
    assert newest is not None and newest == snap.latest
    assert voter.replica.log_start_offset == newest.end_offset > 0  # the prefix is gone
    assert newest.end_offset < voter.replica.log_end_offset  # and a tail follows it

    events = voter.restart()
    load, tail = events[0], events[1:]
    assert any(not event.is_control for event in tail)
    assert isinstance(load, SnapshotLoad) and load.snapshot_id == newest
    image = image_from_snapshot(load.data, load.snapshot_id, cluster_id="cid")
    restarted = BrokerMetadata("cid")
    restarted.load_image(image)
    for event in tail:
        if not event.is_control:
            restarted.on_commit([(decode_record(r.value), r.offset) for r in iter_records(event.batch)])
    assert same_image(restarted.image, meta.image)
    assert restarted.image.topics.by_name.keys() == {f"t{i}" for i in range(10)}
