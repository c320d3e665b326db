"""Which old segments retention may delete (the rules of Kafka's deleteOldSegments).

Each rule is a predicate over (segment, next segment or None) that ``PartitionLog`` applies from
the oldest segment on, stopping at the first segment it keeps; the log itself does the deleting
and moves its log start offset. Nothing here changes a log.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import NamedTuple

from kafkapy.log.config import LogConfig
from kafkapy.log.segment import LogSegment

__all__ = [
    "RetentionLimits",
    "Rule",
    "copied_to_remote",
    "deletable_prefix",
    "largest_timestamp",
    "limits_for",
    "over_size",
    "over_time",
]

#: (segment, the next one or None for the active segment) -> whether it may go.
Rule = Callable[[LogSegment, LogSegment | None], bool]


class RetentionLimits(NamedTuple):
    """retention.bytes / retention.ms as they apply to this log's local segments (-1: none),
    and the highest offset copied to remote storage (None: the log is not tiered)."""

    retention_bytes: int
    retention_ms: int
    highest_remote_offset: int | None


def limits_for(config: LogConfig, *, remote_log_enabled: bool,
               highest_offset_in_remote_storage: int) -> RetentionLimits:
    if not remote_log_enabled:
        return RetentionLimits(config.retention_bytes, config.retention_ms, None)
    # Kafka's UnifiedLog with remote storage: local.retention.* (-2: the total value) bounds
    # the local log, and a segment goes only once all of it is remote.
    retention_bytes, retention_ms = config.retention_bytes, config.retention_ms
    if config.local_retention_bytes != -2:
        retention_bytes = config.local_retention_bytes
    if config.local_retention_ms != -2:
        retention_ms = config.local_retention_ms
    return RetentionLimits(retention_bytes, retention_ms, highest_offset_in_remote_storage)


def copied_to_remote(highest: int | None, log_end_offset: Callable[[], int]) -> Rule:
    """Whether every offset of the segment is in remote storage (always, for a local log)."""
    def copied(seg: LogSegment, nxt: LogSegment | None) -> bool:
        if highest is None:
            return True
        upper = nxt.base_offset if nxt is not None else log_end_offset()
        return upper - 1 <= highest
    return copied


def over_size(size_in_bytes: int, retention_bytes: int, copied: Rule) -> Rule | None:
    """retention.bytes: the oldest segments whose removal keeps the log at or above the limit;
    None when the log is within it."""
    if retention_bytes < 0 or size_in_bytes < retention_bytes:
        return None
    excess = [size_in_bytes - retention_bytes]

    def rule(seg: LogSegment, nxt: LogSegment | None) -> bool:
        if excess[0] - seg.size >= 0 and copied(seg, nxt):
            excess[0] -= seg.size
            return True
        return False
    return rule


def over_time(now_ms: int, retention_ms: int, copied: Rule) -> Rule | None:
    """retention.ms: segments whose largest timestamp is older than the limit (None: no limit)."""
    if retention_ms < 0:
        return None
    return lambda seg, nxt: now_ms - largest_timestamp(seg) > retention_ms and copied(seg, nxt)


def largest_timestamp(seg: LogSegment) -> int:
    if seg.max_timestamp_so_far >= 0:
        return seg.max_timestamp_so_far
    # No timestamps: Kafka falls back to the file's modification time.
    return int(os.stat(seg.log_path).st_mtime * 1000)


def deletable_prefix(segments: list[LogSegment], rule: Rule, high_watermark: int,
                     log_end_offset: int) -> list[LogSegment]:
    """The oldest segments ``rule`` lets go, up to the first it keeps. Only segments entirely
    below the high watermark qualify, and never an empty active segment."""
    doomed: list[LogSegment] = []
    for i, seg in enumerate(segments):
        nxt = segments[i + 1] if i + 1 < len(segments) else None
        upper = nxt.base_offset if nxt is not None else log_end_offset
        if nxt is None and seg.size == 0:
            break
        if high_watermark >= upper and rule(seg, nxt):
            doomed.append(seg)
        else:
            break
    return doomed
