"""Total retention over remote segments: what goes, what the storage and the metadata keep."""

from __future__ import annotations

import uuid

import pytest

from kafkapy.log.config import LogConfig
from kafkapy.log.partition_log import PartitionLog
from kafkapy.records.builder import Record, build_batch
from kafkapy.tiered.copier import copy_pass
from kafkapy.tiered.expiry import expire_pass
from kafkapy.tiered.local_dir_storage import LocalDirRemoteStorage
from kafkapy.tiered.metadata_cache import RemoteLogMetadataCache
from kafkapy.tiered.remote_metadata import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    TopicIdPartition,
)
from kafkapy.tiered.storage import RemoteResourceNotFoundError

TP = TopicIdPartition(uuid.uuid4(), "t", 0)
NOW = 1_700_000_000_000


@pytest.fixture
def tiered(tmp_path):
    plog = PartitionLog.open(str(tmp_path / "t-0"), LogConfig.from_props({"segment.bytes": "1024"}),
                             now_ms=NOW, recover=False)
    for i in range(40):
        plog.append_as_leader(bytearray(build_batch([Record(b"k", b"v%03d" % i * 8, (), NOW + i * 1000)])),
                              now_ms=NOW, leader_epoch=0)
    rsm = LocalDirRemoteStorage.at(tmp_path / "remote")
    cache = RemoteLogMetadataCache(TP)
    copied = copy_pass(plog, TP, rsm, cache, cache.apply, broker_id=1, now_ms=lambda: NOW).copied
    yield plog, rsm, cache, copied
    plog.close()


def expire(cache, rsm, **kw):
    args = dict(broker_id=1, now_ms=lambda: NOW + 100_000, retention_ms=-1, retention_bytes=-1,
                local_only_bytes=0, log_start_offset=0)
    args.update(kw)
    return expire_pass(cache, rsm, cache.apply, **args)


def gone(rsm, meta) -> bool:
    try:
        rsm.fetch_log_segment(meta.remote_log_segment_id, 0)
        return False
    except RemoteResourceNotFoundError:
        return True


def test_nothing_goes_without_retention(tiered) -> None:
    _, rsm, cache, copied = tiered
    assert expire(cache, rsm).deleted == ()
    assert not any(gone(rsm, m) for m in copied)


def test_size_retention_deletes_oldest_first_from_storage_and_metadata(tiered) -> None:
    _, rsm, cache, copied = tiered
    total = sum(m.segment_size_in_bytes for m in copied)
    result = expire(cache, rsm, retention_bytes=total - copied[0].segment_size_in_bytes - copied[1].segment_size_in_bytes)
    assert result.deleted == copied[:2]
    assert result.new_log_start_offset == copied[1].end_offset + 1
    assert gone(rsm, copied[0]) and gone(rsm, copied[1]) and not gone(rsm, copied[2])
    assert cache.remote_log_segment_metadata(0, copied[0].start_offset) is None
    assert cache.remote_log_segment_metadata(0, copied[2].start_offset) is not None


def test_time_retention_and_log_start(tiered) -> None:
    _, rsm, cache, copied = tiered
    cutoff = copied[1].max_timestamp_ms
    assert expire(cache, rsm, retention_ms=NOW + 100_000 - cutoff).deleted == copied[:1]
    assert expire(cache, rsm, log_start_offset=copied[2].start_offset).deleted == copied[1:2]


def test_abandoned_uploads_and_half_done_deletions_are_cleaned_up(tiered) -> None:
    _, rsm, cache, copied = tiered
    # A copy of the first segment that a crashed leader never finished.
    ghost = RemoteLogSegmentMetadata(RemoteLogSegmentId.generate_new(TP), copied[0].start_offset,
                                     copied[0].end_offset, 0, 2, NOW, 10, {0: 0})
    cache.apply(ghost)
    # A deletion a crashed leader announced but did not finish.
    cache.apply(RemoteLogSegmentMetadataUpdate(copied[-1].remote_log_segment_id, NOW,
                                               RemoteLogSegmentState.DELETE_SEGMENT_STARTED, 2))
    expire(cache, rsm)
    assert cache.segments_in_state(RemoteLogSegmentState.COPY_SEGMENT_STARTED) == []
    assert cache.segments_in_state(RemoteLogSegmentState.DELETE_SEGMENT_STARTED) == []
    assert gone(rsm, copied[-1]) and not any(gone(rsm, m) for m in copied[:-1])
