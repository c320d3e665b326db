"""One partition's log (Kafka's UnifiedLog): segments plus the state that lives beside them.

``PartitionLog`` appends (as leader, with offset assignment and idempotent-producer checks, or
as follower with offsets as given), reads for Fetch, answers ListOffsets lookups, truncates,
applies retention and flushes. It is the ONE owner of the partition's offsets: the high
watermark and the log start offsets (local, and the whole log's floor on a tiered log) are
read-only properties here, moved only by the named methods of this class; the replica manager
and the follower fetcher call those. As in Kafka, the parts are elsewhere: the segment list in
``local_log.LocalLog``, opening and recovery in ``loader``, record checks in
``append_validation``.

Directory contents (all in Kafka's formats, see ``files``): ``<base>.log/.index/.timeindex``
segments, ``<offset>.snapshot`` producer snapshots, ``leader-epoch-checkpoint`` and
``partition.metadata``.

Not thread-safe: one caller at a time per partition (appends in order, as Kafka's log lock).
Appends never fsync unless flush.messages asks for it; ``flush``, ``flush_rolled``, ``open`` and
``close`` do, so the broker runs those off the event loop.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable, Sequence
from typing import NamedTuple

from kafkapy.log import files
from kafkapy.log.append_validation import assign_trusted, validate_client_records
from kafkapy.log.config import LogConfig
from kafkapy.log.leader_epoch import LeaderEpochCache
from kafkapy.log.loader import (
    control_coordinator_epoch,
    load_log,
    rebuild_producer_state,
)
from kafkapy.log.local_log import LocalLog
from kafkapy.log.partition_metadata import (
    normalize_topic_id,
    read_partition_metadata,
    write_partition_metadata,
)
from kafkapy.log.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ProducerBatch,
    ProducerStateManager,
)
from kafkapy.log.segment import AppendBatch, CorruptSegmentError, FetchSlice, LogSegment
from kafkapy.log.storage_errors import storage_error
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.records import format as fmt
from kafkapy.records import reader

__all__ = [
    "FetchSlice", "LogAppendResult", "OffsetAndTimestamp", "PartitionLog", "TimestampAndOffset",
]

_log = logging.getLogger(__name__)


class OffsetAndTimestamp(NamedTuple):
    """A record's offset and timestamp (ListOffsets answers)."""

    offset: int
    timestamp: int


class TimestampAndOffset(NamedTuple):
    """The log's largest timestamp and the offset of the first record carrying it."""

    timestamp: int
    offset: int


class LogAppendResult(NamedTuple):
    """What a Produce response needs from an append."""

    first_offset: int
    last_offset: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    record_count: int
    duplicate: bool = False


class PartitionLog:
    """A partition's log directory, opened with :meth:`open`."""

    def __init__(self, dir: str, config: LogConfig, *, topic: str, partition: int,
                 producer_id_expiration_ms: int) -> None:
        # Use PartitionLog.open(); the constructor only sets fields.
        self._local = LocalLog(dir, config, topic=topic, partition=partition)
        self.topic = topic
        self.partition = partition
        self.topic_id: uuid.UUID | None = None
        # The partition's offsets. This class is their one owner (Kafka's UnifiedLog): read them
        # through the properties, move them only through the named methods below.
        self._log_start_offset = 0
        self._high_watermark = 0
        # A log nobody replicates exposes everything it holds. The replica manager clears this
        # on the logs it replicates and moves the high watermark itself (ISR progress on a
        # leader, the leader's high watermark on a follower).
        self.hw_follows_leo = True
        self.leader_epoch_cache = LeaderEpochCache(dir)
        self.producer_state = ProducerStateManager(
            dir, producer_id_expiration_ms=producer_id_expiration_ms)
        # Tiered storage (KIP-405), kept up to date by the broker's remote log manager: while
        # remote_log_enabled, retention applies local.retention.* and deletes only segments whose
        # every offset is at or below highest_offset_in_remote_storage (-1: nothing copied).
        self.remote_log_enabled = False
        self.highest_offset_in_remote_storage = -1
        # The whole log of a remote-enabled partition may start below its local log start
        # (Kafka's logStartOffset vs localLogStartOffset). The remote log manager keeps
        # earliest_remote_offset (-1: nothing remote; None: not known yet, as after a restart
        # until the remote metadata is read); log_start_floor is the highest start DeleteRecords,
        # remote retention or the leader asked for (0: none), kept here and in the log start
        # offset checkpoint because it may lie below everything this broker holds locally.
        # See whole_log_start_offset.
        self.earliest_remote_offset: int | None = None
        self._log_start_floor = 0
        self.closed = False
        #: Whether opening it scanned (recovered) any segment, for the loader's summary line.
        self.recovered = False

    # ================================================================== loading
    @classmethod
    def open(cls, dir: str, config: LogConfig, *, now_ms: int, recover: bool,
             topic_id: uuid.UUID | None = None, recovery_point: int = 0,
             log_start_offset: int | None = None,
             producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
             high_watermark: int | None = None) -> PartitionLog:
        """Open (creating if needed) the log in ``dir``.

        ``high_watermark``: the checkpointed high watermark (clamped into [log start, log end]);
        None starts it at the log end, for logs nobody replicates.

        ``recover=True`` means the previous shutdown was not clean: every segment from the one
        holding ``recovery_point`` on is scanned, CRC-checked, its indexes rebuilt and a torn or
        corrupt tail cut off. With ``recover=False`` the indexes are trusted after a sanity check
        (a failing or missing index is rebuilt anyway). See ``loader``.
        """
        parsed = files.parse_dir_name(dir)
        topic, partition = parsed if parsed else (os.path.basename(dir), 0)
        try:
            os.mkdir(dir)  # one syscall when it exists (loading thousands of logs at start-up)
        except FileExistsError:
            pass
        except FileNotFoundError:
            os.makedirs(dir, exist_ok=True)
        log = cls(dir, config, topic=topic, partition=partition,
                  producer_id_expiration_ms=producer_id_expiration_ms)
        log._check_topic_id(topic_id)
        loaded = load_log(log._local, log.leader_epoch_cache, log.producer_state, now_ms=now_ms,
                          recover=recover, recovery_point=recovery_point,
                          log_start_offset=log_start_offset)
        log._log_start_offset = loaded.log_start_offset
        log._log_start_floor = loaded.log_start_floor
        log.recovered = loaded.recovered
        log._high_watermark = log.log_end_offset
        if high_watermark is not None:
            log.update_high_watermark(high_watermark)
        return log

    def _check_topic_id(self, topic_id: uuid.UUID | bytes | None) -> None:
        topic_id = normalize_topic_id(topic_id)
        stored = read_partition_metadata(self.dir)
        if topic_id is not None and stored is not None and stored != topic_id:
            raise KafkaError(ErrorCode.INCONSISTENT_TOPIC_ID,
                             f"{self.dir} belongs to topic id {stored}, not {topic_id}")
        if topic_id is not None and stored is None:
            write_partition_metadata(self.dir, topic_id)
        self.topic_id = stored or topic_id

    # ================================================================== offsets
    @property
    def high_watermark(self) -> int:
        """The last committed offset + 1: what READ_UNCOMMITTED consumers may read up to."""
        return self._high_watermark

    @property
    def log_start_offset(self) -> int:
        """The first offset this broker holds locally (Kafka's localLogStartOffset on a
        remote-enabled log; see :attr:`whole_log_start_offset` for the whole log's start)."""
        return self._log_start_offset

    @property
    def log_start_floor(self) -> int:
        """The highest start DeleteRecords, remote retention or the leader asked for below the
        local log start (0: none); counts only on remote-enabled logs."""
        return self._log_start_floor

    def update_high_watermark(self, hw: int) -> int:
        """Set the high watermark to ``hw`` clamped into [log start, log end] (Kafka's
        updateHighWatermark: up or down, for a leader initialising it or a checkpoint loaded);
        returns the value set."""
        self._high_watermark = max(self._log_start_offset, min(hw, self.log_end_offset))
        return self._high_watermark

    def maybe_increment_high_watermark(self, new_hw: int) -> int | None:
        """Raise the high watermark to ``new_hw`` if that is higher (Kafka's
        maybeIncrementHighWatermark: ISR progress on a leader, the leader's high watermark on a
        follower); returns the old value if it moved, else None.

        A high watermark past the log end would expose offsets this log does not hold: a
        caller bug, refused with ValueError as Kafka does.
        """
        if new_hw > self.log_end_offset:
            raise ValueError(f"high watermark {new_hw} of {self._name} would pass the log end "
                             f"offset {self.log_end_offset}")
        old = self._high_watermark
        if new_hw <= old:
            return None
        self._high_watermark = new_hw
        return old

    # ================================================================== the local log
    @property
    def dir(self) -> str:
        return self._local.dir

    @property
    def config(self) -> LogConfig:
        return self._local.config

    def update_config(self, config: LogConfig) -> None:
        self._local.config = config

    @property
    def recovery_point(self) -> int:
        """Every offset below it is fsynced."""
        return self._local.recovery_point

    @property
    def last_flush_ms(self) -> int:
        return self._local.last_flush_ms

    @property
    def pending_roll_flush(self) -> int | None:
        return self._local.pending_roll_flush

    @property
    def active(self) -> LogSegment:
        return self._local.active

    @property
    def segments(self) -> list[LogSegment]:
        return self._local.segments

    @property
    def log_end_offset(self) -> int:
        """Offset after the last record (last batch's base + lastOffsetDelta + 1)."""
        return self._local.log_end_offset

    @property
    def size_in_bytes(self) -> int:
        return self._local.size_in_bytes

    @property
    def _name(self) -> str:
        return self._local.name

    def replace_segments(self, old: Sequence[LogSegment], new: LogSegment | None) -> None:
        """Put ``new`` (None: nothing) where the run ``old`` of inactive segments is; for the
        cleaner, which made the files so (see LocalLog.replace_segments)."""
        self._local.replace_segments(old, new)

    @property
    def last_stable_offset(self) -> int:
        """READ_COMMITTED bound: the first open transaction's first offset, capped by the HW.

        Simplification: Kafka also holds the LSO at a completed transaction whose marker is
        above the high watermark; with the HW following the log end that case cannot arise yet.
        """
        first = self.producer_state.first_undecided_offset()
        return self.high_watermark if first is None else min(first, self.high_watermark)

    # ================================================================== append
    def append_as_leader(self, buf: bytearray | memoryview, *, now_ms: int, leader_epoch: int,
                         from_client: bool = True) -> LogAppendResult:
        """Validate ``buf`` (a Produce request's records), assign offsets and append it.

        Producer-state checks happen before any byte is written; a duplicate of one of a
        producer's last five batches returns that batch's original offsets with
        ``duplicate=True`` and writes nothing. ``from_client=False`` is for the broker's own
        writes (transaction markers, coordinator records): control batches allowed, no
        sequence checks.
        """
        self._check_open()
        config = self.config
        if from_client:
            buf, info = validate_client_records(buf, config, now_ms=now_ms,
                                                next_offset=self.log_end_offset,
                                                leader_epoch=leader_epoch,
                                                topic_partition=self._name)
        else:
            info = assign_trusted(buf, next_offset=self.log_end_offset, now_ms=now_ms,
                                  partition_leader_epoch=leader_epoch,
                                  log_append_time=config.log_append_time)
        if len(buf) > self.config.segment_bytes:
            raise KafkaError(ErrorCode.RECORD_LIST_TOO_LARGE,
                             f"Message batch size is {len(buf)} bytes which exceeds the maximum "
                             f"configured segment size of {self.config.segment_bytes}.")
        pbatches = []
        for b in info.batches:
            if b.control and from_client:
                raise KafkaError(ErrorCode.INVALID_RECORD,
                                 "Clients are not allowed to write control records")
            if b.producer_id >= 0:
                coord = -1
                if b.control:
                    coord = control_coordinator_epoch(memoryview(buf)[b.position:b.position + b.size])
                pbatches.append(ProducerBatch(
                    b.producer_id, b.producer_epoch, b.base_sequence, b.base_offset,
                    b.last_offset, b.max_timestamp, b.transactional, b.control, coord))
        prepared = self.producer_state.prepare(pbatches, from_client=from_client)
        if prepared.duplicate is not None:
            d = prepared.duplicate
            # As Kafka: the original batch's offsets, its timestamp as log append time.
            return LogAppendResult(d.first_offset, d.last_offset, d.timestamp,
                                   self.log_start_offset, d.offset_delta + 1, duplicate=True)
        seg = self._maybe_roll(len(buf), info.max_timestamp, info.first_offset, info.last_offset,
                               now_ms)
        # BatchInfo carries the AppendBatch fields under the same names: no copy needed.
        seg.append(buf, info.batches)  # type: ignore[arg-type]
        self.leader_epoch_cache.assign(leader_epoch, info.first_offset)
        leo = info.last_offset + 1
        self.producer_state.commit(prepared, leo)
        self._after_append(leo, now_ms)
        return LogAppendResult(info.first_offset, info.last_offset,
                               now_ms if self.config.log_append_time else fmt.NO_TIMESTAMP,
                               self.log_start_offset, info.record_count)

    def append_as_follower(self, buf: bytes | bytearray | memoryview, *,
                           now_ms: int = 0) -> LogAppendResult | None:
        """Append batches replicated from the leader, offsets as given.

        Every whole batch is CRC-checked; a trailing partial batch is ignored. Offsets must
        start at or after the log end offset and increase. Returns None for an empty buffer.
        """
        self._check_open()
        view = memoryview(buf).cast("B")
        batches: list[AppendBatch] = []
        pbatches: list[ProducerBatch] = []
        headers: list[fmt.BatchHeader] = []
        expected = self.log_end_offset
        end = 0
        max_ts = fmt.NO_TIMESTAMP
        count = 0
        for h, bview in reader.iter_batches(view):
            pos = end
            if fmt.compute_crc(view, pos, h.size) != h.crc:
                raise KafkaError(ErrorCode.CORRUPT_MESSAGE,
                                 f"batch at offset {h.base_offset} fails its CRC check")
            if h.base_offset < expected or h.last_offset_delta < 0:
                raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                 f"unexpected append offset {h.base_offset}; log end offset "
                                 f"is {expected}")
            batches.append(AppendBatch(pos, h.size, h.last_offset, h.max_timestamp))
            headers.append(h)
            coord = control_coordinator_epoch(bview) if h.is_control else -1
            if h.producer_id != fmt.NO_PRODUCER_ID:
                pbatches.append(ProducerBatch.from_header(h, coord))
            max_ts = max(max_ts, h.max_timestamp)
            count += h.record_count
            expected = h.next_offset
            end = pos + h.size
        if not batches:
            return None
        first, last = headers[0].base_offset, headers[-1].last_offset
        prepared = self.producer_state.prepare(pbatches, from_client=False)
        seg = self._maybe_roll(end, max_ts, first, last, now_ms)
        seg.append(view[:end], batches)
        for h in headers:
            if h.partition_leader_epoch >= 0:
                self.leader_epoch_cache.assign(h.partition_leader_epoch, h.base_offset)
        self.producer_state.commit(prepared, last + 1)
        self._after_append(last + 1, now_ms)
        return LogAppendResult(first, last, fmt.NO_TIMESTAMP, self.log_start_offset, count)

    def _after_append(self, leo: int, now_ms: int) -> None:
        if self.hw_follows_leo:
            self._high_watermark = leo
        if leo - self.recovery_point >= self.config.flush_messages:
            try:
                self.flush(now_ms=now_ms)
            except OSError as e:
                raise storage_error(e, "flush", self.dir) from e

    def _maybe_roll(self, messages_size: int, max_timestamp: int, first_offset: int,
                    last_offset: int, now_ms: int) -> LogSegment:
        seg = self.active
        roll_ms = self.config.segment_ms - self.config.segment_jitter_ms
        if seg.should_roll(messages_size=messages_size, max_timestamp_in_messages=max_timestamp,
                           max_offset_in_messages=last_offset, now_ms=now_ms,
                           segment_bytes=self.config.segment_bytes, roll_ms=roll_ms):
            return self.roll(now_ms=now_ms, expected_next_offset=first_offset)
        return seg

    def roll(self, *, now_ms: int, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at max(expected_next_offset, log end offset).

        The old segment gets its final time index entry and trimmed indexes, and a producer
        snapshot is written at the new base offset, as Kafka does on roll.
        """
        def snapshot(leo: int) -> None:
            self.producer_state.map_end_offset = leo
            self.producer_state.take_snapshot()

        return self._local.roll(now_ms=now_ms, expected_next_offset=expected_next_offset,
                                before_switch=snapshot)

    # ================================================================== read
    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one_message: bool = True) -> FetchSlice | None:
        """Whole batches from the one holding ``offset``, bounded by max_bytes and max_offset.

        Raises KafkaError(OFFSET_OUT_OF_RANGE) outside [log_start_offset, log_end_offset];
        returns None at the log end or when nothing below ``max_offset`` (the high watermark
        for consumers) is available. A batch is exposed only when its last offset is below
        ``max_offset`` (Kafka cuts at the position of the batch holding max_offset). With
        ``min_one_message`` the first batch is returned whole even if larger than max_bytes.
        Reads stay within one segment.
        """
        return self._local.read(
            offset, max_bytes, max_offset=self.log_end_offset if max_offset is None else max_offset,
            log_start_offset=self.log_start_offset, min_one_message=min_one_message)

    # ================================================================== timestamps
    def offset_for_timestamp(self, timestamp: int) -> OffsetAndTimestamp | None:
        """(offset, timestamp) of the first record with timestamp ≥ ``timestamp``, or None."""
        for seg in self._local.segments:
            if seg.largest_timestamp < timestamp:
                continue
            found = seg.find_offset_by_timestamp(
                timestamp, self.log_start_offset,
                lambda ref, seg=seg: self._local.record_timestamps(seg, ref))
            if found is not None:
                return OffsetAndTimestamp(found[1], found[0])
        return None

    def max_timestamp_and_offset(self) -> TimestampAndOffset | None:
        """(timestamp, offset) of the first record carrying the log's largest timestamp.

        For ListOffsets MAX_TIMESTAMP (KIP-734). None when no record has a timestamp. The
        field order follows the name (offset_for_timestamp's is (offset, timestamp)).
        """
        best: LogSegment | None = None
        for seg in self._local.segments:
            if best is None or seg.max_timestamp_so_far > best.max_timestamp_so_far:
                best = seg
        if best is None or best.max_timestamp_so_far < 0:
            return None
        ts = best.max_timestamp_so_far
        start = best.offset_index.lookup(best.offset_of_max_timestamp_so_far).position
        for ref in best.iter_batches(start):
            if ref.header.max_timestamp == ts and ref.header.last_offset >= self.log_start_offset:
                for off, rts in self._local.record_timestamps(best, ref):
                    if rts == ts and off >= self.log_start_offset:
                        return TimestampAndOffset(ts, off)
                return TimestampAndOffset(ts, ref.header.last_offset)
        return TimestampAndOffset(ts, best.offset_of_max_timestamp_so_far)

    max_timestamp_offset = max_timestamp_and_offset  # name used in docs/architecture.md

    # ================================================================== truncation
    def truncate_to(self, offset: int, *, now_ms: int = 0) -> bool:
        """Remove everything at or after ``offset`` (whole batches); True if anything went.

        A high watermark above the new log end comes down to it; one below stays (a follower
        truncating its divergent tail keeps what it knows is committed). A log start offset
        above it comes down too (as Kafka's truncateTo), so log start <= high watermark <= log
        end holds even when a follower that took the leader's log start must drop offsets below
        it for a new leader whose log ends there.
        """
        self._check_open()
        if offset < 0:
            raise ValueError(f"cannot truncate to negative offset {offset}")
        if offset >= self.log_end_offset:
            return False
        if offset <= self._local.segments[0].base_offset:
            self.truncate_fully_and_start_at(offset, now_ms=now_ms)
            return True
        self._local.truncate_to(offset)
        leo = self.log_end_offset
        self._log_start_offset = min(self._log_start_offset, leo)
        self.leader_epoch_cache.truncate_from_end(leo)
        self._high_watermark = min(self._high_watermark, leo)
        rebuild_producer_state(self._local, self.producer_state, self._log_start_offset, leo,
                               now_ms)
        return True

    def truncate_fully_and_start_at(self, offset: int, *, now_ms: int = 0) -> None:
        """Drop every segment and restart the log empty at ``offset`` (log start, recovery point
        and high watermark all move there, down or up)."""
        self._check_open()
        self._local.truncate_fully_and_start_at(offset, now_ms=now_ms)
        self._log_start_offset = offset
        self._high_watermark = offset
        self.leader_epoch_cache.clear()
        self.producer_state.truncate_fully_and_start_at(offset)

    # ================================================================== log start, retention
    @property
    def whole_log_start_offset(self) -> int:
        """Where the whole log starts (ListOffsets earliest, the low watermark, fetch ranges).

        The local log start, except on a remote-enabled log with remote data: there the earliest
        remote offset, or the floor DeleteRecords set if that is higher (the remote segments
        below it are deleted by the next expiration pass), never above the local log start.
        """
        local = self.log_start_offset
        earliest = self.earliest_remote_offset
        if not self.remote_log_enabled or earliest is None or earliest < 0:
            return local
        return min(local, max(self.log_start_floor, earliest))

    @property
    def replicated_log_start_offset(self) -> int:
        """The start a leader tells its followers in fetch responses: the whole log's, or -1
        ("unknown", which followers ignore) while a remote-enabled log does not know its remote
        part yet: its local start then would make them drop the remote offsets for good."""
        if self.remote_log_enabled and self.earliest_remote_offset is None:
            return -1
        return self.whole_log_start_offset

    @property
    def checkpoint_log_start_offset(self) -> int:
        """The start offset to checkpoint: the whole log's when its floor lies below the local
        log start (it cannot be rebuilt from local files), else the local log start."""
        floor = self.log_start_floor
        return floor if 0 < floor < self.log_start_offset else self.log_start_offset

    def _raise_floor(self, new_start: int) -> bool:
        """Move the whole log's start to ``new_start`` below the local log start (remote-enabled
        logs only: elsewhere those offsets are already gone); True if it moved."""
        if not self.remote_log_enabled or new_start <= self.log_start_floor:
            return False
        self._log_start_floor = new_start
        return True

    def increment_log_start_offset(self, new_start: int) -> bool:
        """Move the log start offset forward (DeleteRecords, retention); True if it moved.

        It may not pass the high watermark (KafkaError(OFFSET_OUT_OF_RANGE)). Segments wholly
        below it are deleted by the next ``delete_old_segments``. On a remote-enabled log an
        offset below the local log start moves only the whole log's start (``log_start_floor``).
        """
        self._check_open()
        if new_start > self.high_watermark:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                             f"Cannot increment the log start offset to {new_start} of "
                             f"partition {self.topic}-{self.partition} since it is larger "
                             f"than the high watermark {self.high_watermark}")
        if new_start <= self.log_start_offset:
            return self._raise_floor(new_start)
        self._set_log_start_offset(new_start)
        return True

    def maybe_increment_log_start_offset(self, new_start: int) -> bool:
        """Follow the leader's log start offset as far as this replica allows; True if it moved.

        For followers, which must not keep offsets the leader deleted (DeleteRecords, retention)
        visible to a later ListOffsets or to themselves as leader. Unlike
        :meth:`increment_log_start_offset` no offset makes it raise: the target is capped at the log end
        offset (a follower cannot start past what it holds; a fetch out of range restarts it
        instead), and when it passes the high watermark the high watermark is raised to it, as
        Kafka's follower does: the leader only deletes below its own high watermark, so those
        offsets were committed even if this replica had not heard so yet.
        """
        self._check_open()
        new_start = min(new_start, self.log_end_offset)
        if new_start <= self.log_start_offset:
            return self._raise_floor(new_start)
        if new_start > self.high_watermark:
            self._high_watermark = new_start
        self._set_log_start_offset(new_start)
        return True

    def _set_log_start_offset(self, new_start: int) -> None:
        self._log_start_offset = new_start
        if self.remote_log_enabled:
            # The whole log starts here too now: an older, lower floor must not reopen the
            # remote offsets below it.
            self._log_start_floor = max(self._log_start_floor, new_start)
        self.leader_epoch_cache.truncate_from_start(new_start)
        self.producer_state.delete_snapshots_before(
            self._local.segment_for(new_start).base_offset)

    def delete_old_segments(self, now_ms: int) -> int:
        """Apply retention (Kafka's deleteOldSegments); returns the number of segments deleted.

        In Kafka's order, from the oldest: segments wholly below the log start offset, then
        (when cleanup.policy has delete) those that take the log over retention.bytes, then those
        whose largest timestamp is older than retention.ms. Only segments entirely below the high
        watermark go; if every segment goes, the log rolls first so an empty active one stays.
        The log start offset moves up to the first remaining segment.

        Deletion is Kafka's two-step one: the segments leave the log and their files are renamed
        to ``.deleted`` now; :meth:`take_files_to_delete` hands those names to the owner, which
        unlinks them after file.delete.delay.ms. The config is read on each call, so a changed
        retention.ms / retention.bytes (``update_config``) applies from the next pass.
        """
        if self.closed:
            return 0  # a log being deleted or shut down keeps its files for its owner to handle
        config = self.config
        deleted = self._delete_segments_while(self._below_start, async_delete=True)
        if not config.delete:
            return deleted
        retention_bytes, retention_ms = config.retention_bytes, config.retention_ms
        highest: int | None = None
        if self.remote_log_enabled:
            # Kafka's UnifiedLog with remote storage: local.retention.* (-2: the total value)
            # bounds the local log, and a segment goes only once all of it is remote.
            if config.local_retention_bytes != -2:
                retention_bytes = config.local_retention_bytes
            if config.local_retention_ms != -2:
                retention_ms = config.local_retention_ms
            highest = self.highest_offset_in_remote_storage

        def copied(seg: LogSegment, nxt: LogSegment | None) -> bool:
            if highest is None:
                return True
            upper = nxt.base_offset if nxt is not None else self.log_end_offset
            return upper - 1 <= highest
        if retention_bytes >= 0 and self.size_in_bytes >= retention_bytes:
            excess = [self.size_in_bytes - retention_bytes]

            def over_size(seg: LogSegment, nxt: LogSegment | None) -> bool:
                if excess[0] - seg.size >= 0 and copied(seg, nxt):
                    excess[0] -= seg.size
                    return True
                return False

            deleted += self._delete_segments_while(over_size, async_delete=True)
        if retention_ms >= 0:
            deleted += self._delete_segments_while(
                lambda seg, nxt: now_ms - self._largest_timestamp(seg) > retention_ms and copied(seg, nxt),
                async_delete=True)
        return deleted

    def delete_segments_below_start(self, *, async_delete: bool = False) -> int:
        """Delete the segments wholly below the log start offset (no retention rules).

        ``async_delete=False`` unlinks at once (for owners with no delayed-delete scheduler, such
        as the metadata log); True renames to ``.deleted`` as :meth:`delete_old_segments` does.
        """
        if self.closed:
            return 0
        return self._delete_segments_while(self._below_start, async_delete=async_delete)

    def _below_start(self, seg: LogSegment, nxt: LogSegment | None) -> bool:
        return nxt is not None and nxt.base_offset <= self.log_start_offset

    def take_files_to_delete(self) -> list[str]:
        """Paths of the ``.deleted`` files retention left since the last call (the caller now
        owns unlinking them). Paths are resolved against the current directory, so a log moved
        since the rename still finds its files."""
        return self._local.take_files_to_delete()

    @staticmethod
    def _largest_timestamp(seg: LogSegment) -> int:
        if seg.max_timestamp_so_far >= 0:
            return seg.max_timestamp_so_far
        # No timestamps: Kafka falls back to the file's modification time.
        return int(os.stat(seg.log_path).st_mtime * 1000)

    def _delete_segments_while(
            self, predicate: Callable[[LogSegment, LogSegment | None], bool], *,
            async_delete: bool) -> int:
        doomed: list[LogSegment] = []
        segments = self._local.segments
        for i, seg in enumerate(segments):
            nxt = segments[i + 1] if i + 1 < len(segments) else None
            upper = nxt.base_offset if nxt is not None else self.log_end_offset
            if nxt is None and seg.size == 0:
                break
            if self.high_watermark >= upper and predicate(seg, nxt):
                doomed.append(seg)
            else:
                break
        if not doomed:
            return 0
        if len(doomed) == len(segments):
            self.roll(now_ms=self.active.created_ms)
        # As Kafka: first the segments leave the log and the log start offset moves, then the
        # files go. A crash after this point leaves files the next load ignores or removes
        # (.deleted ones, indexes without a log), and the log opens at the first segment still
        # there, which the log start offset checkpoint can only confirm or raise.
        self._local.detach_oldest(len(doomed))
        first = self._local.segments[0].base_offset
        if first > self.log_start_offset:
            self._log_start_offset = first
            self.leader_epoch_cache.truncate_from_start(first)
        self.producer_state.delete_snapshots_before(first)
        self._local.retire_segments(doomed, async_delete=async_delete)
        return len(doomed)

    # ================================================================== durability, lifecycle
    def flush(self, *, now_ms: int | None = None) -> None:
        """fsync every segment that may hold unflushed data; advance the recovery point."""
        self._local.flush(now_ms=now_ms)

    def flush_up_to(self, offset: int) -> None:
        """fsync the segments holding offsets below ``offset``; recovery point moves there."""
        self._local.flush_up_to(offset)

    def flush_rolled(self) -> None:
        """Flush segments that became inactive at a roll (Kafka's post-roll flush)."""
        self._local.flush_rolled()

    def maybe_flush(self, now_ms: int) -> bool:
        """flush.ms: flush when the last flush is older than the topic allows."""
        if now_ms - self.last_flush_ms >= self.config.flush_ms and \
                self.log_end_offset > self.recovery_point:
            self.flush(now_ms=now_ms)
            return True
        return False

    def close(self) -> None:
        """Trim the active indexes, write a producer snapshot at the log end, close files."""
        if self.closed:
            return
        self.producer_state.map_end_offset = self.log_end_offset
        self.producer_state.take_snapshot()
        self._local.close()
        self.closed = True

    def close_handlers(self) -> None:
        """Close the files without writing anything (no index trim, no producer snapshot): for
        a log being deleted."""
        if not self.closed:
            self._local.close_handlers()
            self.closed = True

    def delete(self) -> None:
        """Close without trimming and remove the whole directory."""
        self.close_handlers()
        self._local.delete()

    def rename_dir(self, new_dir: str) -> None:
        """Move the directory (topic deletion); open files stay valid across the rename."""
        self._local.rename_dir(new_dir)
        self.producer_state.dir = new_dir
        if self.leader_epoch_cache.path:
            self.leader_epoch_cache.path = os.path.join(new_dir, files.LEADER_EPOCH_CHECKPOINT)

    def _check_open(self) -> None:
        if self.closed:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"log {self.dir} is closed")

    def __repr__(self) -> str:
        return (f"PartitionLog({self.dir!r}, start={self.log_start_offset}, "
                f"end={self.log_end_offset}, segments={self._local.segment_count})")


# CorruptSegmentError is re-exported for callers that walk segments themselves.
__all__ += ["CorruptSegmentError"]
