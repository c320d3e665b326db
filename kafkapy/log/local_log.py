"""A partition's segments on this broker's disk (Kafka's LocalLog).

``LocalLog`` keeps the ordered segment list and what is physically true of it: the log end
offset, the recovery point (everything below it is fsynced), which segment holds an offset.
It appends to the active segment, rolls, reads, truncates, deletes and swaps segments, and
flushes. It knows nothing of high watermarks, log start offsets, producers or leader epochs:
``PartitionLog`` owns those and tells it which segments to drop.
"""

from __future__ import annotations

import bisect
import functools
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

from kafkapy.log import files
from kafkapy.log.config import LogConfig
from kafkapy.log.segment import BatchRef, FetchSlice, LogSegment
from kafkapy.log.storage_errors import storage_error
from kafkapy.log.transaction_index import AbortedTxn
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.records import reader

__all__ = ["LocalLog", "OffsetAndTimestamp", "TimestampAndOffset"]


class OffsetAndTimestamp(NamedTuple):
    """A record's offset and timestamp (ListOffsets answers)."""

    offset: int
    timestamp: int


class TimestampAndOffset(NamedTuple):
    """The log's largest timestamp and the offset of the first record carrying it."""

    timestamp: int
    offset: int


class LocalLog:
    """The segment list of one partition directory; see the module docstring."""

    def __init__(self, dir: str, config: LogConfig, *, topic: str, partition: int) -> None:
        self.dir = dir
        self.config = config
        self.topic = topic
        self.partition = partition
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self.recovery_point = 0
        self.last_flush_ms = 0
        # Base offset of the newest segment rolled but not yet fsynced. Kafka flushes a rolled
        # segment on its scheduler; our owner does it off the event loop via flush_rolled().
        self.pending_roll_flush: int | None = None
        # Names (in ``dir``) of retired segment files renamed to ``.deleted``, waiting for their
        # owner to unlink them after file.delete.delay.ms (take_files_to_delete).
        self._files_to_delete: list[str] = []

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    # ================================================================== the segment list
    def new_segment(self, base: int, now_ms: int) -> LogSegment:
        return LogSegment(self.dir, base, index_interval_bytes=self.config.index_interval_bytes,
                          max_index_size=self.config.segment_index_bytes, now_ms=now_ms)

    def set_segments(self, segments: list[LogSegment]) -> None:
        """Install the segment list (the loader, once it has opened and checked them)."""
        self._segments = segments
        self._bases = [s.base_offset for s in segments]

    @property
    def active(self) -> LogSegment:
        return self._segments[-1]

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    def segment_index(self, offset: int) -> int:
        """Index of the segment holding ``offset`` (the first one below the first base)."""
        return max(0, bisect.bisect_right(self._bases, offset) - 1)

    def on_other_segment(self, offset: int, end_offset: int) -> bool:
        """True when ``offset`` and ``end_offset`` lie in different segments."""
        return offset != end_offset and self.segment_index(offset) != self.segment_index(end_offset)

    def segment_for(self, offset: int) -> LogSegment:
        return self._segments[self.segment_index(offset)]

    def iter_batches_from(self, offset: int) -> Iterator[tuple[LogSegment, BatchRef]]:
        """Every batch whose last offset is ≥ ``offset``, in log order."""
        for seg in self._segments[self.segment_index(offset):]:
            ref = seg.translate_offset(offset)
            if ref is None:
                continue
            for r in seg.iter_batches(ref.position):
                yield seg, r

    def replace_segments(self, old: Sequence[LogSegment], new: LogSegment | None) -> None:
        """Put ``new`` (None: nothing) where the contiguous run ``old`` of inactive segments is
        (the cleaner swapping in a compacted segment, Kafka's replaceSegments). The caller has
        made the files so; ValueError when ``old`` is not such a run of this log."""
        inactive = self._segments[:-1]
        i = next((k for k, s in enumerate(inactive) if s is old[0]), -1) if old else -1
        if i < 0 or inactive[i:i + len(old)] != list(old):
            raise ValueError(f"{self.name}: the segments to replace are not in the log")
        self._segments[i:i + len(old)] = [] if new is None else [new]
        self._bases = [s.base_offset for s in self._segments]

    def detach_oldest(self, count: int) -> list[LogSegment]:
        """Take the ``count`` oldest segments out of the list (never all: the caller rolls
        first) and return them for :meth:`retire_segments`; the recovery point moves up to the
        first segment left."""
        doomed = self._segments[:count]
        self.set_segments(self._segments[count:])
        self.recovery_point = max(self.recovery_point, self._segments[0].base_offset)
        return doomed

    def retire_segments(self, doomed: list[LogSegment], *, async_delete: bool) -> None:
        """Remove the files of detached segments: renamed to ``.deleted`` for the owner to
        unlink later (``async_delete``, see take_files_to_delete) or unlinked now."""
        for seg in doomed:
            if async_delete:
                self._files_to_delete.extend(
                    os.path.basename(p) for p in seg.rename_for_deletion())
            else:
                seg.delete()

    def take_files_to_delete(self) -> list[str]:
        """Paths of the ``.deleted`` files retention left since the last call (the caller now
        owns unlinking them). Paths are resolved against the current directory, so a log moved
        since the rename still finds its files."""
        names, self._files_to_delete = self._files_to_delete, []
        return [os.path.join(self.dir, n) for n in names]

    # ================================================================== append, roll
    def roll(self, *, now_ms: int, expected_next_offset: int | None = None,
             before_switch: Callable[[int], None] | None = None) -> LogSegment:
        """Start a new active segment at max(expected_next_offset, log end offset).

        The old segment gets its final time index entry and trimmed indexes. ``before_switch``
        (given the old log end) runs once the new segment exists and before the list changes
        (the producer snapshot Kafka writes at a roll): if it raises OSError the new segment is
        removed and the log stays as it was.
        """
        leo = self.log_end_offset
        new_base = leo if expected_next_offset is None else max(expected_next_offset, leo)
        old = self.active
        if old.base_offset == new_base and old.size == 0:
            return old
        # Everything that can fail on a full disk (the old segment's final time index entry,
        # the new segment's preallocated indexes, the producer snapshot) happens before the
        # segment list changes, so a failed roll leaves the log as it was.
        if old.size > 0:
            old.on_become_inactive()
        new_paths = (files.log_file(self.dir, new_base), files.index_file(self.dir, new_base),
                     files.time_index_file(self.dir, new_base),
                     files.txn_index_file(self.dir, new_base))
        for path in new_paths:
            if os.path.exists(path):
                if path.endswith(files.LOG_SUFFIX) and os.path.getsize(path) > 0:
                    raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                                     f"trying to roll to {path} which already has data")
                os.remove(path)
        try:
            seg = self.new_segment(new_base, now_ms)
        except OSError as e:
            _remove_new_segment_files(new_paths)
            raise storage_error(e, "create segment", new_paths[0]) from e
        except BaseException:
            _remove_new_segment_files(new_paths)
            raise
        if before_switch is not None:
            try:
                before_switch(leo)
            except OSError as e:
                seg.delete()
                raise storage_error(e, "write a producer snapshot in", self.dir) from e
        if old.size == 0:
            # An empty active segment at a lower base (follower jumped ahead): replace it.
            old.delete()
            self._segments.pop()
        self._segments.append(seg)
        self._bases = [s.base_offset for s in self._segments]
        self.pending_roll_flush = new_base
        return seg

    # ================================================================== read
    def read(self, offset: int, max_bytes: int, *, max_offset: int, local_log_start_offset: int,
             min_one_message: bool) -> FetchSlice | None:
        """Whole batches from the one holding ``offset``, bounded by max_bytes and max_offset.

        Raises KafkaError(OFFSET_OUT_OF_RANGE) outside [local_log_start_offset, log_end_offset];
        returns None at the log end or when nothing below ``max_offset`` (the high watermark
        for consumers) is available. A batch is exposed only when its last offset is below
        ``max_offset`` (Kafka cuts at the position of the batch holding max_offset). With
        ``min_one_message`` the first batch is returned whole even if larger than max_bytes.
        Reads stay within one segment.
        """
        leo = self.log_end_offset
        if offset < local_log_start_offset or offset > leo:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"Received request for offset {offset} for partition {self.topic}-"
                f"{self.partition}, but we only have log segments in the range "
                f"{local_log_start_offset} to {leo}.")
        max_offset = min(max_offset, leo)
        if offset >= max_offset:
            return None
        i = self.segment_index(offset)
        while i < len(self._segments):
            seg = self._segments[i]
            max_pos = None
            if max_offset < seg.next_offset:
                ref = seg.translate_offset(max_offset)
                max_pos = ref.position if ref is not None else None
            got = seg.read(offset, max_bytes, max_pos, min_one_message=min_one_message)
            if got is None:
                i += 1
                continue
            pos, size, _ = got
            if size == 0:
                return None
            return seg.slice(pos, size)
        return None

    def collect_aborted_transactions(self, start_offset: int,
                                     upper_bound_offset: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [start_offset, upper_bound_offset), from the
        ``.txnindex`` of the segment holding ``start_offset`` on, until an index says no later
        segment can hold more (Kafka's LocalLog.collectAbortedTransactions)."""
        found: list[AbortedTxn] = []
        for seg in self._segments[self.segment_index(start_offset):]:
            search = seg.txn_index.collect(start_offset, upper_bound_offset)
            found.extend(search.aborted)
            if search.complete:
                break
        return found

    # ================================================================== timestamps (ListOffsets)
    def offset_for_timestamp(self, timestamp: int,
                             local_log_start_offset: int) -> OffsetAndTimestamp | None:
        """(offset, timestamp) of the first record with timestamp ≥ ``timestamp``, or None."""
        for seg in self._segments:
            if seg.largest_timestamp < timestamp:
                continue
            found = seg.find_offset_by_timestamp(
                timestamp, local_log_start_offset, functools.partial(self.record_timestamps, seg))
            if found is not None:
                return OffsetAndTimestamp(found[1], found[0])
        return None

    def max_timestamp_and_offset(self, local_log_start_offset: int) -> TimestampAndOffset | None:
        """(timestamp, offset) of the first record carrying the log's largest timestamp.

        For ListOffsets MAX_TIMESTAMP (KIP-734). None when no record has a timestamp. The
        field order follows the name (offset_for_timestamp's is (offset, timestamp)).
        """
        best: LogSegment | None = None
        for seg in self._segments:
            if best is None or seg.max_timestamp_so_far > best.max_timestamp_so_far:
                best = seg
        if best is None or best.max_timestamp_so_far < 0:
            return None
        ts = best.max_timestamp_so_far
        start = best.offset_index.lookup(best.offset_of_max_timestamp_so_far).position
        for ref in best.iter_batches(start):
            if ref.header.max_timestamp == ts and ref.header.last_offset >= local_log_start_offset:
                for off, rts in self.record_timestamps(best, ref):
                    if rts == ts and off >= local_log_start_offset:
                        return TimestampAndOffset(ts, off)
                return TimestampAndOffset(ts, ref.header.last_offset)
        return TimestampAndOffset(ts, best.offset_of_max_timestamp_so_far)

    def record_timestamps(self, seg: LogSegment, ref: BatchRef) -> Iterator[tuple[int, int]]:
        """(offset, timestamp) of every record of the batch at ``ref``."""
        h = ref.header
        if h.is_log_append_time:
            # Every record of a LogAppendTime batch carries the batch's max timestamp.
            yield h.base_offset, h.max_timestamp
            return
        for rec in reader.iter_records(seg.read_batch(ref)):
            yield rec.offset, rec.timestamp

    # ================================================================== truncation
    def truncate_to(self, offset: int) -> None:
        """Delete everything at or after ``offset``, which lies above the first segment's base
        and below the log end; the recovery point comes down with the log end."""
        i = self.segment_index(offset)
        for seg in self._segments[i + 1:]:
            seg.delete()
        self.set_segments(self._segments[:i + 1])
        seg = self.active
        seg.truncate_to(offset)
        seg.resize_indexes(self.config.segment_index_bytes)
        self.recovery_point = min(self.recovery_point, self.log_end_offset)

    def truncate_fully_and_start_at(self, offset: int, *, now_ms: int) -> None:
        """Delete every segment and restart empty at ``offset`` (the recovery point too)."""
        for seg in self._segments:
            seg.delete()
        self.set_segments([self.new_segment(offset, now_ms)])
        self.active.resize_indexes(self.config.segment_index_bytes)
        self.recovery_point = offset

    # ================================================================== durability, lifecycle
    def flush(self, *, now_ms: int | None = None) -> None:
        """fsync every segment that may hold unflushed data; advance the recovery point."""
        leo = self.log_end_offset
        if leo > self.recovery_point:
            for seg in self._segments[self.segment_index(self.recovery_point):]:
                seg.flush()
            self.recovery_point = leo
        if now_ms is not None:
            self.last_flush_ms = now_ms

    def flush_up_to(self, offset: int) -> None:
        """fsync the segments holding offsets below ``offset``; recovery point moves there."""
        if offset <= self.recovery_point:
            return
        for seg in self._segments[self.segment_index(self.recovery_point):]:
            if seg.base_offset >= offset:
                break
            seg.flush()
        self.recovery_point = min(offset, self.log_end_offset)

    def flush_rolled(self) -> None:
        """Flush segments that became inactive at a roll (Kafka's post-roll flush)."""
        target = self.pending_roll_flush
        if target is not None:
            self.pending_roll_flush = None
            self.flush_up_to(target)

    def maybe_flush(self, now_ms: int) -> bool:
        """flush.ms: flush when the last flush is older than the topic allows."""
        if now_ms - self.last_flush_ms >= self.config.flush_ms and \
                self.log_end_offset > self.recovery_point:
            self.flush(now_ms=now_ms)
            return True
        return False

    def close(self) -> None:
        """Trim the active indexes and close every segment's files."""
        for seg in self._segments:
            seg.close()

    def close_handlers(self) -> None:
        """Close the files without writing anything (no index trim)."""
        for seg in self._segments:
            seg.close_handlers()

    def delete(self) -> None:
        """Close without trimming and remove the whole directory."""
        self.close_handlers()
        shutil.rmtree(self.dir, ignore_errors=True)

    def rename_dir(self, new_dir: str) -> None:
        """Move the directory (topic deletion); open files stay valid across the rename."""
        os.rename(self.dir, new_dir)
        self.dir = new_dir
        for seg in self._segments:
            seg.dir = new_dir
            seg.log_path = os.path.join(new_dir, os.path.basename(seg.log_path))
            seg.offset_index.path = os.path.join(new_dir, os.path.basename(seg.offset_index.path))
            seg.time_index.path = os.path.join(new_dir, os.path.basename(seg.time_index.path))
            seg.txn_index.update_dir(new_dir)


def _remove_new_segment_files(paths: tuple[str, ...]) -> None:
    # The files of a segment that failed to come into being (all new and empty).
    for path in paths:
        try:
            os.remove(path)
        except OSError:
            pass
