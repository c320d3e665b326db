"""Which segments to copy to remote storage, and which local and remote segments may go.

Kafka's RemoteLogManager rules (KIP-405), as pure functions of the partition's state, so the
leader's copy and expiration tasks can be tested without storage, clocks or threads:

* **Copy**: closed segments, from just after the highest offset already copied (or the local log
  start), whose next segment starts at or below the last stable offset: everything in them is
  committed, so every replica that becomes leader would hold the same bytes.
* **Local retention**: ``local.retention.ms`` / ``local.retention.bytes`` (-2 means "same as
  retention.ms / retention.bytes") apply to the local log, but only to segments already in remote
  storage: local deletion never loses data a consumer could still read.
* **Remote (total) retention**: ``retention.ms`` / ``retention.bytes`` over the whole log, remote
  and local together; remote segments go oldest first, and any wholly below the log start offset
  (DeleteRecords) go too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kafkapy.tiered.remote_metadata import RemoteLogSegmentMetadata

#: local.retention.* value that means "use the topic's total retention".
USE_TOTAL_RETENTION = -2


@dataclass(frozen=True)
class LocalSegment:
    """What the rules need of one local segment."""

    base_offset: int
    #: The base offset of the next segment (for the active segment: the log end offset).
    next_offset: int
    size: int
    largest_timestamp: int


def effective_local_retention(retention_ms: int, retention_bytes: int, local_retention_ms: int,
                              local_retention_bytes: int) -> tuple[int, int]:
    """(ms, bytes) of local retention after resolving Kafka's -2 ("same as total")."""
    ms = retention_ms if local_retention_ms == USE_TOTAL_RETENTION else local_retention_ms
    size = retention_bytes if local_retention_bytes == USE_TOTAL_RETENTION else local_retention_bytes
    return ms, size


def copy_candidates(segments: Sequence[LocalSegment], copied_up_to: int, local_log_start: int,
                    last_stable_offset: int) -> list[LocalSegment]:
    """Closed segments to copy next, oldest first.

    ``segments`` is the local log in offset order, active segment last; ``copied_up_to`` the
    highest offset already in remote storage (-1 for none). A segment qualifies when it holds
    offsets after ``copied_up_to`` and the log start, and its successor starts at or below
    ``last_stable_offset`` (so it is closed and wholly committed).
    """
    start = max(copied_up_to + 1, local_log_start)
    out = []
    for seg, nxt in zip(segments, segments[1:]):
        if seg.next_offset <= start:
            continue  # everything in it is already remote (or below the log start)
        if nxt.base_offset > last_stable_offset:
            break
        out.append(seg)
    return out


def local_segments_to_delete(segments: Sequence[LocalSegment], copied_up_to: int, now_ms: int,
                             local_retention_ms: int, local_retention_bytes: int) -> int:
    """How many of the oldest local segments local retention removes (never the active one).

    Only segments whose every offset is already remote (``next_offset - 1 <= copied_up_to``)
    count; among them, as Kafka's log retention does, first those that take the local log over
    ``local_retention_bytes``, then those older than ``local_retention_ms`` (-1 disables each).
    """
    closed = list(segments[:-1])
    eligible = 0
    for seg in closed:
        if seg.next_offset - 1 > copied_up_to:
            break
        eligible += 1
    doomed = 0
    if local_retention_bytes >= 0:
        excess = sum(s.size for s in segments) - local_retention_bytes
        while doomed < eligible and excess - closed[doomed].size >= 0:
            excess -= closed[doomed].size
            doomed += 1
    if local_retention_ms >= 0:
        while doomed < eligible and now_ms - closed[doomed].largest_timestamp > local_retention_ms:
            doomed += 1
    return doomed


def remote_segments_to_delete(remote: Sequence[RemoteLogSegmentMetadata], now_ms: int,
                              retention_ms: int, retention_bytes: int, local_only_bytes: int,
                              log_start_offset: int) -> list[RemoteLogSegmentMetadata]:
    """Remote segments total retention removes, oldest first.

    ``remote`` holds the copied segments (COPY_SEGMENT_FINISHED) in offset order;
    ``local_only_bytes`` is the size of the local segments not in remote storage, which count
    toward ``retention_bytes`` too (the log is remote + local-only). A segment goes when it lies
    wholly below ``log_start_offset``, when its newest record is older than ``retention_ms``, or
    while the whole log is over ``retention_bytes`` by at least its size.
    """
    ordered = sorted(remote, key=lambda s: s.start_offset)
    doomed: list[RemoteLogSegmentMetadata] = []
    breached = (sum(s.segment_size_in_bytes for s in ordered) + local_only_bytes - retention_bytes
                if retention_bytes >= 0 else -1)
    for seg in ordered:
        if seg.end_offset < log_start_offset:
            doomed.append(seg)
            breached -= seg.segment_size_in_bytes
            continue
        if retention_ms >= 0 and now_ms - seg.max_timestamp_ms > retention_ms:
            doomed.append(seg)
            breached -= seg.segment_size_in_bytes
            continue
        if retention_bytes >= 0 and breached - seg.segment_size_in_bytes >= 0:
            doomed.append(seg)
            breached -= seg.segment_size_in_bytes
            continue
        break  # retention stops at the first segment it keeps, as local retention does
    return doomed
