"""What the leader copies to remote storage and what retention removes, locally and remotely."""

from __future__ import annotations

import uuid

from kafkapy.tiered.remote_metadata import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    TopicIdPartition,
)
from kafkapy.tiered.tiering_rules import (
    LocalSegment,
    copy_candidates,
    effective_local_retention,
    local_segments_to_delete,
    remote_segments_to_delete,
)

TP = TopicIdPartition(uuid.uuid4(), "t", 0)
# Four closed segments of 100 offsets and 1000 bytes, timestamps 1000, 2000, ...; the active one last.
LOG = [LocalSegment(i * 100, (i + 1) * 100, 1000, (i + 1) * 1000) for i in range(4)] + \
    [LocalSegment(400, 450, 500, 5000)]


def remote(start: int, end: int, size: int = 1000, max_ts: int = 0) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(RemoteLogSegmentId(TP, uuid.uuid4()), start, end, max_ts, 1, 0,
                                    size, {0: start}, RemoteLogSegmentState.COPY_SEGMENT_FINISHED)


def test_local_retention_defaults_to_the_total() -> None:
    assert effective_local_retention(7000, 5000, -2, -2) == (7000, 5000)
    assert effective_local_retention(7000, 5000, 100, 200) == (100, 200)


def test_copies_closed_committed_segments_after_what_is_remote() -> None:
    bases = lambda segs: [s.base_offset for s in segs]  # noqa: E731
    assert bases(copy_candidates(LOG, -1, 0, 450)) == [0, 100, 200, 300]
    # Only segments whose successor starts at or below the last stable offset are committed.
    assert bases(copy_candidates(LOG, -1, 0, 250)) == [0, 100]
    assert bases(copy_candidates(LOG, 199, 0, 450)) == [200, 300]
    # A copy that ended inside a segment (a different leader's cut) resumes with that segment.
    assert bases(copy_candidates(LOG, 150, 0, 450)) == [100, 200, 300]
    assert bases(copy_candidates(LOG, -1, 300, 450)) == [300]
    assert copy_candidates(LOG, 399, 0, 450) == [] and copy_candidates(LOG[-1:], -1, 0, 450) == []


def test_local_retention_only_removes_what_is_remote() -> None:
    # Everything is old, but only the first two segments are remote.
    assert local_segments_to_delete(LOG, 199, 10**9, 0, -1) == 2
    assert local_segments_to_delete(LOG, -1, 10**9, 0, -1) == 0
    # By size, as Kafka: a segment goes only if the log stays at or over the limit without it.
    # The log is 4500 bytes: a 2500-byte limit takes two segments, 2600 only one.
    assert local_segments_to_delete(LOG, 399, 0, -1, 2500) == 2
    assert local_segments_to_delete(LOG, 399, 0, -1, 2600) == 1
    # By time: segments whose newest record is older than 2500 ms at t=5000.
    assert local_segments_to_delete(LOG, 399, 5000, 2500, -1) == 2
    # Never the active segment.
    assert local_segments_to_delete(LOG, 10**9, 10**9, 0, 0) == 4


def test_remote_retention_by_time_size_and_log_start() -> None:
    segs = [remote(0, 99, max_ts=1000), remote(100, 199, max_ts=2000), remote(200, 299, max_ts=3000)]
    starts = lambda out: [s.start_offset for s in out]  # noqa: E731
    assert starts(remote_segments_to_delete(segs, 10_000, -1, -1, 0, 0)) == []
    assert starts(remote_segments_to_delete(segs, 4500, 2000, -1, 0, 0)) == [0, 100]
    # 3000 remote + 1500 local-only against 2600: 1900 over, so one whole segment goes.
    assert starts(remote_segments_to_delete(segs, 0, -1, 2600, 1500, 0)) == [0]
    assert starts(remote_segments_to_delete(segs, 0, -1, 1500, 1500, 0)) == [0, 100, 200]
    # DeleteRecords moved the log start past the first two segments.
    assert starts(remote_segments_to_delete(segs, 0, -1, -1, 0, 200)) == [0, 100]
    # Retention stops at the first segment it keeps.
    assert starts(remote_segments_to_delete(
        [remote(0, 99, max_ts=9000), remote(100, 199, max_ts=1000)], 10_000, 5000, -1, 0, 0)) == []
