"""One partition's log (Kafka's UnifiedLog): segments plus the state that lives beside them.

``PartitionLog`` appends (as leader, with offset assignment and idempotent-producer checks, or
as follower with offsets as given), reads for Fetch, answers ListOffsets lookups, truncates,
applies retention and flushes. It is the ONE owner of the partition's offsets: the high
watermark and the two log start offsets, under Kafka's names (``log_start_offset``: where
the whole log starts, remote part included; ``local_log_start_offset``: the first offset held
on this broker's disk) are read-only properties here, moved only by the named methods of this class; the replica manager
and the follower fetcher call those. As in Kafka, the parts are elsewhere: the segment list in
``local_log.LocalLog``, opening and recovery in ``loader``, record checks in
``append_validation``.

Directory contents (all in Kafka's formats, see ``files``): ``<base>.log/.index/.timeindex``
segments (and ``.txnindex`` for those holding ABORT markers), ``<offset>.snapshot`` producer
snapshots, ``leader-epoch-checkpoint`` and ``partition.metadata``.

Not thread-safe: one caller at a time per partition (appends in order, as Kafka's log lock).
Appends never fsync unless flush.messages asks for it; ``flush``, ``flush_rolled``, ``open`` and
``close`` do, so the broker runs those off the event loop.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable, Sequence
from typing import Generic, NamedTuple, TypeVar

from kafkapy.log import files, retention
from kafkapy.log.append_validation import (
    assign_trusted,
    leader_producer_batches,
    parse_follower_records,
    validate_client_records,
)
from kafkapy.log.config import LogConfig
from kafkapy.log.leader_epoch import LeaderEpochCache
from kafkapy.log.loader import (
    check_topic_id,
    load_log,
    prepare_dir,
    rebuild_producer_state,
)
from kafkapy.log.local_log import LocalLog, OffsetAndTimestamp, TimestampAndOffset
from kafkapy.log.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ProducerStateManager,
)
from kafkapy.log.segment import CorruptSegmentError, FetchSlice, LogSegment
from kafkapy.log.stable_offsets import StableOffsets
from kafkapy.log.storage_errors import storage_error
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.records import format as fmt

__all__ = [
    "FetchSlice", "LogAppendResult", "OffsetAndTimestamp", "PartitionLog", "TimestampAndOffset",
]

_log = logging.getLogger(__name__)

T = TypeVar("T")


class LogAppendResult(NamedTuple):
    """What a Produce response needs from an append."""

    first_offset: int
    last_offset: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int  # the whole log's, as Kafka's LogAppendInfo
    record_count: int
    duplicate: bool = False


class _FromLocal(Generic[T]):
    """A read-only attribute of PartitionLog that is its LocalLog's attribute of the same name
    (or ``source``), as Kafka's UnifiedLog forwards to its LocalLog."""

    def __init__(self, source: str | None = None) -> None:
        self._source = source or ""  # "": the attribute's own name, filled in by __set_name__

    def __set_name__(self, owner: type, name: str) -> None:
        self._source = self._source or name

    def __get__(self, log: PartitionLog | None, owner: type | None = None) -> T:
        if log is None:
            return self  # type: ignore[return-value]  # the class attribute itself
        value: T = getattr(log._local, self._source)
        return value

    def __set__(self, log: PartitionLog, value: T) -> None:
        raise AttributeError(f"{self._source} belongs to the LocalLog")


class _RemoteOffsets:
    """The tiered-storage (KIP-405) offsets of a partition log, which Kafka's UnifiedLog keeps
    beside its high watermark and log start offset. The broker's remote log manager reports
    them through :meth:`update_remote_state`; nothing else writes them.

    While ``remote_log_enabled``, retention applies local.retention.* and deletes only segments
    whose every offset is at or below ``highest_offset_in_remote_storage`` (-1: nothing copied),
    and the whole log may start below the local log start (Kafka's logStartOffset vs
    localLogStartOffset: see ``log_start_offset``) at ``earliest_remote_offset`` (-1:
    nothing remote; None: not known yet, as after a restart until the remote metadata is read).
    """

    def __init__(self) -> None:
        self._remote_log_enabled = False
        self._highest_offset_in_remote_storage = -1
        self._earliest_remote_offset: int | None = None

    @property
    def remote_log_enabled(self) -> bool:
        """Whether this log is tiered (remote.storage.enable), as the remote log manager last
        said: retention then applies local.retention.* and waits for the copies."""
        return self._remote_log_enabled

    @property
    def highest_offset_in_remote_storage(self) -> int:
        """The last offset copied to remote storage (-1: nothing): local retention deletes only
        segments at or below it."""
        return self._highest_offset_in_remote_storage

    @property
    def earliest_remote_offset(self) -> int | None:
        """The first offset readable from remote storage (-1: nothing remote; None: not known
        yet, as after a restart until the remote metadata has been read)."""
        return self._earliest_remote_offset

    def update_remote_state(self, *, enabled: bool | None = None, highest_offset: int | None = None,
                            earliest_offset: int | None = None) -> None:
        """The remote log manager's report of the remote part (Kafka's
        updateHighestOffsetInRemoteStorage and friends): only the arguments given change."""
        if enabled is not None:
            self._remote_log_enabled = enabled
        if highest_offset is not None:
            self._highest_offset_in_remote_storage = highest_offset
        if earliest_offset is not None:
            self._earliest_remote_offset = earliest_offset


class PartitionLog(_RemoteOffsets, StableOffsets):
    """A partition's log directory, opened with :meth:`open`."""

    def __init__(self, dir: str, config: LogConfig, *, topic: str, partition: int,
                 producer_id_expiration_ms: int) -> None:
        # Use PartitionLog.open(); the constructor only sets fields.
        super().__init__()
        self._local = LocalLog(dir, config, topic=topic, partition=partition)
        self.topic = topic
        self.partition = partition
        self.topic_id: uuid.UUID | None = None
        # The partition's offsets. This class is their one owner (Kafka's UnifiedLog): read them
        # through the properties, move them only through the named methods below.
        self._local_log_start_offset = 0
        self._log_hw = 0
        # A log nobody replicates exposes everything it holds. The replica manager clears this
        # on the logs it replicates and moves the high watermark itself (ISR progress on a
        # leader, the leader's high watermark on a follower).
        self.hw_follows_leo = True
        self.leader_epoch_cache = LeaderEpochCache(dir)
        self.producer_state = ProducerStateManager(
            dir, producer_id_expiration_ms=producer_id_expiration_ms)
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

        ``log_start_offset``: the checkpointed (whole) log start; the local log start is the
        higher of it and the first segment's base offset.

        ``high_watermark``: the checkpointed high watermark (clamped into [local log start, log
        end]); None starts it at the log end, for logs nobody replicates.

        ``recover=True`` means the previous shutdown was not clean: the segments from the one
        holding ``recovery_point`` on are recovered (see ``loader.load_log``).
        """
        topic, partition = prepare_dir(dir)
        log = cls(dir, config, topic=topic, partition=partition,
                  producer_id_expiration_ms=producer_id_expiration_ms)
        log.topic_id = check_topic_id(dir, topic_id)
        loaded = load_log(log._local, log.leader_epoch_cache, log.producer_state, now_ms=now_ms,
                          recover=recover, recovery_point=recovery_point,
                          log_start_offset=log_start_offset)
        log._local_log_start_offset = loaded.local_log_start_offset
        log._log_start_floor = loaded.log_start_floor
        log.recovered = loaded.recovered
        if high_watermark is None:
            log._high_watermark = log.log_end_offset
        else:
            log.update_high_watermark(high_watermark)
        return log

    # ================================================================== offsets
    @property
    def log_start_offset(self) -> int:
        """Where the whole log starts (Kafka's logStartOffset), as clients and followers see it
        (ListOffsets EARLIEST, Fetch and Produce responses, DeleteRecords' low watermark).

        The local log start, except on a remote-enabled log with remote data: there the earliest
        remote offset, or the floor DeleteRecords set if that is higher (the remote segments
        below it are deleted by the next expiration pass), never above the local log start."""
        local = self._local_log_start_offset
        earliest = self._earliest_remote_offset
        if not self._remote_log_enabled or earliest is None or earliest < 0:
            return local
        return min(local, max(self._log_start_floor, earliest))

    @property
    def local_log_start_offset(self) -> int:
        """The first offset on this broker's disk (Kafka's localLogStartOffset), where local
        reads and segment deletion start; above :attr:`log_start_offset` only on a tiered log."""
        return self._local_log_start_offset

    @property
    def log_start_floor(self) -> int:
        """The highest whole-log start DeleteRecords, remote retention or the leader asked for
        (0: none), from which a remote-enabled log computes :attr:`log_start_offset` (elsewhere
        it does not count); checkpointed, as it may lie below every local offset."""
        return self._log_start_floor

    def update_high_watermark(self, hw: int) -> int:
        """Set the high watermark to ``hw`` clamped into [local log start, log end] (Kafka's
        updateHighWatermark: up or down, for a leader initialising it or a checkpoint loaded);
        returns the value set."""
        self._high_watermark = max(self._local_log_start_offset, min(hw, self.log_end_offset))
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
    # What the segment list knows, read through to the LocalLog (read-only here too).
    dir: _FromLocal[str] = _FromLocal()
    config: _FromLocal[LogConfig] = _FromLocal()
    recovery_point: _FromLocal[int] = _FromLocal()  # every offset below it is fsynced
    last_flush_ms: _FromLocal[int] = _FromLocal()
    pending_roll_flush: _FromLocal[int | None] = _FromLocal()
    active: _FromLocal[LogSegment] = _FromLocal()
    segments: _FromLocal[list[LogSegment]] = _FromLocal()  # a copy of the list
    #: Offset after the last record (last batch's base + lastOffsetDelta + 1).
    log_end_offset: _FromLocal[int] = _FromLocal()
    size_in_bytes: _FromLocal[int] = _FromLocal()
    _name: _FromLocal[str] = _FromLocal("name")

    def update_config(self, config: LogConfig) -> None:
        self._local.config = config

    #: replace_segments(old, new): put ``new`` (None: nothing) where the run ``old`` of inactive
    #: segments is; for the cleaner, which made the files so.
    replace_segments: _FromLocal[Callable[[Sequence[LogSegment], LogSegment | None], None]] = \
        _FromLocal()

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
        pbatches = leader_producer_batches(buf, info, config, from_client=from_client)
        prepared = self.producer_state.prepare(pbatches, from_client=from_client, as_leader=True)
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
        self.producer_state.commit(prepared, leo, seg.txn_index)
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
        parsed = parse_follower_records(buf, self.log_end_offset)
        if parsed is None:
            return None
        headers = parsed.headers
        first, last = headers[0].base_offset, headers[-1].last_offset
        prepared = self.producer_state.prepare(parsed.producer_batches, from_client=False)
        seg = self._maybe_roll(parsed.size, parsed.max_timestamp, first, last, now_ms)
        seg.append(parsed.data, parsed.batches)
        for h in headers:
            if h.partition_leader_epoch >= 0:
                self.leader_epoch_cache.assign(h.partition_leader_epoch, h.base_offset)
        self.producer_state.commit(prepared, last + 1, seg.txn_index)
        self._after_append(last + 1, now_ms)
        return LogAppendResult(first, last, fmt.NO_TIMESTAMP, self.log_start_offset,
                               parsed.record_count)

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
        """Start a new active segment at max(expected_next_offset, log end offset) (see
        LocalLog.roll), with a producer snapshot at its base offset, as Kafka does on roll."""
        def snapshot(leo: int) -> None:
            self.producer_state.map_end_offset = leo
            self.producer_state.take_snapshot()

        return self._local.roll(now_ms=now_ms, expected_next_offset=expected_next_offset,
                                before_switch=snapshot)

    # ================================================================== read
    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one_message: bool = True) -> FetchSlice | None:
        """Whole batches of one segment from the one holding ``offset``, below ``max_offset``
        (the high watermark for consumers); see LocalLog.read."""
        return self._local.read(
            offset, max_bytes, max_offset=self.log_end_offset if max_offset is None else max_offset,
            local_log_start_offset=self.local_log_start_offset,
            min_one_message=min_one_message)

    def on_other_segment(self, offset: int, end_offset: int) -> bool:
        """True when ``offset`` and ``end_offset`` lie in different segments: a read from an
        earlier one stops at its segment's end, short of ``end_offset``, and one from a later
        one is past an end that truncation moved back (Kafka's onOlderSegment, both ways)."""
        return self._local.on_other_segment(offset, end_offset)

    # ================================================================== timestamps
    def offset_for_timestamp(self, timestamp: int) -> OffsetAndTimestamp | None:
        """(offset, timestamp) of the first record with timestamp ≥ ``timestamp``, or None."""
        return self._local.offset_for_timestamp(timestamp, self.local_log_start_offset)

    def max_timestamp_and_offset(self) -> TimestampAndOffset | None:
        """(timestamp, offset) of the first record carrying the log's largest timestamp.

        For ListOffsets MAX_TIMESTAMP (KIP-734). None when no record has a timestamp. The
        field order follows the name (offset_for_timestamp's is (offset, timestamp)).
        """
        return self._local.max_timestamp_and_offset(self.local_log_start_offset)

    max_timestamp_offset = max_timestamp_and_offset  # name used in docs/architecture.md

    # ================================================================== truncation
    def truncate_to(self, offset: int, *, now_ms: int = 0) -> bool:
        """Remove everything at or after ``offset`` (whole batches); True if anything went.

        A high watermark above the new log end comes down to it; one below stays (a follower
        truncating its divergent tail keeps what it knows is committed). A local log start
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
        self._local_log_start_offset = min(self._local_log_start_offset, leo)
        self.leader_epoch_cache.truncate_from_end(leo)
        rebuild_producer_state(self._local, self.producer_state, self._local_log_start_offset, leo,
                               now_ms)
        # After the rebuild, so the transactions it completed below the HW count as stable.
        self._high_watermark = min(self._log_hw, leo)
        return True

    def truncate_fully_and_start_at(self, offset: int, *, now_ms: int = 0) -> None:
        """Drop every segment and restart the log empty at ``offset`` (Kafka's
        truncateFullyAndStartAt: local log start, recovery point and high watermark all move
        there, down or up; on a remote-enabled log the whole log may still start below it)."""
        self._check_open()
        self._local.truncate_fully_and_start_at(offset, now_ms=now_ms)
        self._local_log_start_offset = offset
        self._high_watermark = offset
        self.leader_epoch_cache.clear()
        self.producer_state.truncate_fully_and_start_at(offset)

    # ================================================================== log start, retention
    @property
    def replicated_log_start_offset(self) -> int:
        """The start a leader tells its followers in fetch responses: the whole log's, or -1
        ("unknown", which followers ignore) while a remote-enabled log does not know its remote
        part yet: its local start then would make them drop the remote offsets for good."""
        if self.remote_log_enabled and self.earliest_remote_offset is None:
            return -1
        return self.log_start_offset

    @property
    def checkpoint_log_start_offset(self) -> int:
        """The start offset to checkpoint: the whole log's when its floor lies below the local
        log start (it cannot be rebuilt from local files), else the local log start."""
        floor = self.log_start_floor
        return floor if 0 < floor < self.local_log_start_offset else self.local_log_start_offset

    def _raise_floor(self, new_start: int) -> bool:
        """Move the whole log's start to ``new_start`` below the local log start (remote-enabled
        logs only: elsewhere those offsets are already gone); True if it moved."""
        if not self.remote_log_enabled or new_start <= self.log_start_floor:
            return False
        self._log_start_floor = new_start
        return True

    def maybe_increment_log_start_offset(self, new_start: int) -> bool:
        """Move the log start offset forward (Kafka's maybeIncrementLogStartOffset: DeleteRecords,
        remote retention, metadata snapshots); True if it moved.

        It may not pass the high watermark (KafkaError(OFFSET_OUT_OF_RANGE)). Past the local log
        start, that moves too and the next ``delete_old_segments`` deletes the segments wholly
        below it. On a remote-enabled log an offset below the local log start moves only the
        whole log's start (``log_start_floor``).
        """
        self._check_open()
        if new_start > self.high_watermark:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                             f"Cannot increment the log start offset to {new_start} of "
                             f"partition {self.topic}-{self.partition} since it is larger "
                             f"than the high watermark {self.high_watermark}")
        if new_start <= self.local_log_start_offset:
            return self._raise_floor(new_start)
        self._increment_start_offsets(new_start)
        return True

    def maybe_increment_log_start_offset_from_leader(self, new_start: int) -> bool:
        """Follow the leader's log start offset as far as this replica allows; True if it moved
        (Kafka's follower calls maybeIncrementLogStartOffset with reason LeaderOffsetIncremented).

        For followers, which must not keep offsets the leader deleted (DeleteRecords, retention)
        visible to a later ListOffsets or to themselves as leader. Unlike
        :meth:`maybe_increment_log_start_offset` no offset makes it raise: the target is capped
        at the log end offset (a follower cannot start past what it holds; a fetch out of range restarts it
        instead), and when it passes the high watermark the high watermark is raised to it, as
        Kafka's follower does: the leader only deletes below its own high watermark, so those
        offsets were committed even if this replica had not heard so yet.
        """
        self._check_open()
        new_start = min(new_start, self.log_end_offset)
        if new_start <= self.local_log_start_offset:
            return self._raise_floor(new_start)
        if new_start > self.high_watermark:
            self._high_watermark = new_start
        self._increment_start_offsets(new_start)
        return True

    def _increment_start_offsets(self, new_start: int) -> None:
        """Both log starts move to ``new_start``, above the local log start."""
        self._local_log_start_offset = new_start
        if self.remote_log_enabled:
            # The whole log starts here too now: an older, lower floor must not reopen the
            # remote offsets below it.
            self._log_start_floor = max(self._log_start_floor, new_start)
        self.leader_epoch_cache.truncate_from_start(new_start)
        self.producer_state.on_log_start_offset_incremented(new_start)
        self.producer_state.delete_snapshots_before(
            self._local.segment_for(new_start).base_offset)

    def delete_old_segments(self, now_ms: int) -> int:
        """Apply retention (Kafka's deleteOldSegments); returns the number of segments deleted.

        In Kafka's order, from the oldest: segments wholly below the local log start, then
        (when cleanup.policy has delete) those that take the log over retention.bytes, then those
        whose largest timestamp is older than retention.ms. Only segments entirely below the high
        watermark go; if every segment goes, the log rolls first so an empty active one stays.
        The local log start moves up to the first remaining segment.

        Deletion is Kafka's two-step one: the segments leave the log and their files are renamed
        to ``.deleted`` now; :meth:`take_files_to_delete` hands those names to the owner, which
        unlinks them after file.delete.delay.ms. The config is read on each call, so a changed
        retention.ms / retention.bytes (``update_config``) applies from the next pass.
        """
        if self.closed:
            return 0  # a log being deleted or shut down keeps its files for its owner to handle
        deleted = self._delete_segments_while(self._below_local_start, async_delete=True)
        if not self.config.delete:
            return deleted
        limits = retention.limits_for(
            self.config, remote_log_enabled=self.remote_log_enabled,
            highest_offset_in_remote_storage=self.highest_offset_in_remote_storage)
        copied = retention.copied_to_remote(limits.highest_remote_offset,
                                            lambda: self.log_end_offset)
        size_rule = retention.over_size(self.size_in_bytes, limits.retention_bytes, copied)
        if size_rule is not None:
            deleted += self._delete_segments_while(size_rule, async_delete=True)
        time_rule = retention.over_time(now_ms, limits.retention_ms, copied)
        if time_rule is not None:
            deleted += self._delete_segments_while(time_rule, async_delete=True)
        return deleted

    def delete_segments_below_start(self, *, async_delete: bool = False) -> int:
        """Delete the segments wholly below the local log start (no retention rules).

        ``async_delete=False`` unlinks at once (for owners with no delayed-delete scheduler, such
        as the metadata log); True renames to ``.deleted`` as :meth:`delete_old_segments` does.
        """
        if self.closed:
            return 0
        return self._delete_segments_while(self._below_local_start, async_delete=async_delete)

    def _below_local_start(self, seg: LogSegment, nxt: LogSegment | None) -> bool:
        return nxt is not None and nxt.base_offset <= self.local_log_start_offset

    #: Paths of the ``.deleted`` files retention left since the last call (the caller now owns
    #: unlinking them), resolved against the current directory (the log may have moved since).
    take_files_to_delete: _FromLocal[Callable[[], list[str]]] = _FromLocal()

    def _delete_segments_while(
            self, predicate: retention.Rule, *,
            async_delete: bool) -> int:
        segments = self._local.segments
        doomed = retention.deletable_prefix(segments, predicate, self.high_watermark,
                                            self.log_end_offset)
        if not doomed:
            return 0
        if len(doomed) == len(segments):
            self.roll(now_ms=self.active.created_ms)
        # As Kafka: first the segments leave the log and the local log start moves, then the
        # files go. A crash after this point leaves files the next load ignores or removes
        # (.deleted ones, indexes without a log), and the log opens at the first segment still
        # there, which the log start offset checkpoint can only confirm or raise.
        self._local.detach_oldest(len(doomed))
        first = self._local.segments[0].base_offset
        if first > self.local_log_start_offset:
            self._local_log_start_offset = first
            self.leader_epoch_cache.truncate_from_start(first)
            self.producer_state.on_log_start_offset_incremented(first)
        self.producer_state.delete_snapshots_before(first)
        self._local.retire_segments(doomed, async_delete=async_delete)
        return len(doomed)

    # ================================================================== durability, lifecycle
    # fsync what may be unflushed (advancing the recovery point): all, below an offset, what a
    # roll left (Kafka's post-roll flush), or all when flush.ms has passed (True if it did).
    flush: _FromLocal[Callable[..., None]] = _FromLocal()
    flush_up_to: _FromLocal[Callable[[int], None]] = _FromLocal()
    flush_rolled: _FromLocal[Callable[[], None]] = _FromLocal()
    maybe_flush: _FromLocal[Callable[[int], bool]] = _FromLocal()

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
        return (f"PartitionLog({self.dir!r}, start={self.local_log_start_offset}, "
                f"end={self.log_end_offset}, segments={self._local.segment_count})")


# CorruptSegmentError is re-exported for callers that walk segments themselves.
__all__ += ["CorruptSegmentError"]
