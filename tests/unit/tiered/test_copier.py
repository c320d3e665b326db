"""The leader's copy pass over a real on-disk log into the local-directory remote storage."""

from __future__ import annotations

import os
import uuid

import pytest

from kafkapy.log.config import LogConfig
from kafkapy.log.leader_epoch import EpochEntry
from kafkapy.log.partition_log import PartitionLog
from kafkapy.records.builder import Record, build_batch
from kafkapy.tiered.copier import copy_pass, highest_copied_offset, segment_epochs
from kafkapy.tiered.local_dir_storage import LocalDirRemoteStorage
from kafkapy.tiered.metadata_cache import RemoteLogMetadataCache
from kafkapy.tiered.remote_metadata import RemoteLogSegmentState, TopicIdPartition
from kafkapy.tiered.storage import IndexType

TP = TopicIdPartition(uuid.uuid4(), "t", 0)
NOW = 1_700_000_000_000


@pytest.fixture
def plog(tmp_path):
    log = PartitionLog.open(str(tmp_path / "t-0"), LogConfig.from_props({"segment.bytes": "1024"}),
                            now_ms=NOW, recover=False)
    yield log
    log.close()


def append(log: PartitionLog, n: int, epoch: int) -> None:
    for i in range(n):
        batch = bytearray(build_batch([Record(b"k", b"value-%03d" % i * 5, (), NOW + i)]))
        log.append_as_leader(batch, now_ms=NOW, leader_epoch=epoch)


def clock() -> int:
    return NOW


def test_epoch_helpers() -> None:
    epochs = [EpochEntry(0, 0), EpochEntry(3, 50), EpochEntry(4, 120)]
    assert segment_epochs(epochs, 40, 99) == {0: 40, 3: 50}
    assert segment_epochs(epochs, 130, 140) == {4: 130}
    cache = RemoteLogMetadataCache(TP)
    assert highest_copied_offset(cache, epochs) == -1


def test_copies_every_closed_segment_once_and_reads_back(plog, tmp_path) -> None:
    append(plog, 30, epoch=0)
    append(plog, 10, epoch=3)
    rsm = LocalDirRemoteStorage.at(tmp_path / "remote")
    cache = RemoteLogMetadataCache(TP)
    events = []

    def publish(event) -> None:
        events.append(event)
        cache.apply(event)

    result = copy_pass(plog, TP, rsm, cache, publish, broker_id=1, now_ms=clock)
    closed = plog.segments[:-1]
    assert [m.start_offset for m in result.copied] == [s.base_offset for s in closed]
    assert [m.end_offset for m in result.copied] == [s.base_offset - 1 for s in plog.segments[1:]]
    assert [type(e).__name__ for e in events] == [
        "RemoteLogSegmentMetadata", "RemoteLogSegmentMetadataUpdate"] * len(closed)
    for seg, meta in zip(closed, result.copied):
        assert meta.state == RemoteLogSegmentState.COPY_SEGMENT_FINISHED
        with open(seg.log_path, "rb") as f:
            assert rsm.fetch_log_segment(meta.remote_log_segment_id, 0).read() == f.read()
        assert rsm.fetch_index(meta.remote_log_segment_id, IndexType.PRODUCER_SNAPSHOT).read()
        # Readers find each offset in the segment that holds it, under its epoch.
        epoch = max(meta.segment_leader_epochs)
        assert cache.remote_log_segment_metadata(epoch, meta.end_offset) == meta
    assert highest_copied_offset(cache, plog.leader_epoch_cache.entries) == closed[-1].next_offset - 1
    # Nothing new: nothing copied. More data and a roll: only the new segments.
    assert copy_pass(plog, TP, rsm, cache, publish, broker_id=1, now_ms=clock).copied == ()
    append(plog, 20, epoch=3)
    again = copy_pass(plog, TP, rsm, cache, publish, broker_id=1, now_ms=clock)
    assert again.copied and again.copied[0].start_offset == closed[-1].next_offset


def test_uncommitted_segments_wait_for_the_high_watermark(plog, tmp_path) -> None:
    append(plog, 30, epoch=0)
    rsm = LocalDirRemoteStorage.at(tmp_path / "remote")
    cache = RemoteLogMetadataCache(TP)
    second = plog.segments[1].base_offset
    out = copy_pass(plog, TP, rsm, cache, cache.apply, broker_id=1, now_ms=clock,
                    last_stable_offset=second)
    assert [m.start_offset for m in out.copied] == [0]


class FailingOnce:
    """A remote storage whose first upload dies half-way (a crash mid-copy)."""

    def __init__(self, inner) -> None:
        self.inner, self.failed = inner, False

    def copy_log_segment_data(self, sid, data):
        if not self.failed:
            self.failed = True
            raise OSError("connection reset mid-upload")
        return self.inner.copy_log_segment_data(sid, data)


def test_an_interrupted_copy_stays_invisible_and_the_next_pass_copies_it_once(plog, tmp_path) -> None:
    append(plog, 30, epoch=0)
    inner = LocalDirRemoteStorage.at(tmp_path / "remote")
    cache = RemoteLogMetadataCache(TP)
    with pytest.raises(OSError):
        copy_pass(plog, TP, FailingOnce(inner), cache, cache.apply, broker_id=1, now_ms=clock)
    [stuck] = cache.segments_in_state(RemoteLogSegmentState.COPY_SEGMENT_STARTED)
    assert cache.remote_log_segment_metadata(0, 0) is None
    out = copy_pass(plog, TP, inner, cache, cache.apply, broker_id=1, now_ms=clock)
    assert out.copied[0].start_offset == 0 and out.copied[0].remote_log_segment_id != stuck.remote_log_segment_id
    finished = cache.segments_in_state(RemoteLogSegmentState.COPY_SEGMENT_FINISHED)
    starts = [m.start_offset for m in finished]
    assert len(starts) == len(set(starts)) == len(plog.segments) - 1
    assert os.path.isdir(tmp_path / "remote")
