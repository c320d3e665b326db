"""One partition's log: an ordered set of segments plus the state that lives beside them.

``PartitionLog`` is what Kafka splits into UnifiedLog, LocalLog and LogLoader: appends (as leader,
with offset assignment and idempotent-producer checks, or as follower with offsets as given),
reads for Fetch, lookups for ListOffsets, truncation, flushing, and loading/recovery from disk.

Directory contents (all in Kafka's formats, see ``files``): ``<base>.log/.index/.timeindex``
segments, ``<offset>.snapshot`` producer snapshots, ``leader-epoch-checkpoint`` and
``partition.metadata``.

Not thread-safe: one caller at a time per partition (appends in order, as Kafka's log lock).
Appends never fsync unless flush.messages asks for it; ``flush``, ``flush_rolled``, ``open`` and
``close`` do, so the broker runs those off the event loop.
"""

from __future__ import annotations

import bisect
import logging
import os
import shutil
import struct
import uuid
from collections.abc import Callable, Iterator
from typing import NamedTuple

from kafkapy.log import files
from kafkapy.log.config import LogConfig
from kafkapy.log.index import CorruptIndexError
from kafkapy.log.leader_epoch import LeaderEpochCache
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
from kafkapy.log.segment import AppendBatch, BatchRef, CorruptSegmentError, FetchSlice, LogSegment
from kafkapy.log.storage_errors import storage_error
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.records import format as fmt
from kafkapy.records import reader, recompress, record_checks, timestamps
from kafkapy.records._validate_common import RecordRefused, timestamp_bounds
from kafkapy.records.validate import AppendInfo, BatchInfo, validate_and_assign

__all__ = [
    "FetchSlice", "LogAppendResult", "OffsetAndTimestamp", "PartitionLog", "TimestampAndOffset",
]

_log = logging.getLogger(__name__)

_CONTROL_VALUE = struct.Struct(">hi")  # end-transaction marker value: version, coordinator epoch


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
        self.dir = dir
        self.config = config
        self.topic = topic
        self.partition = partition
        self.topic_id: uuid.UUID | None = None
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        # The partition's offsets. This class is their one owner (Kafka's UnifiedLog): read them
        # through the properties, move them only through the named methods below.
        self._log_start_offset = 0
        self.recovery_point = 0
        self._high_watermark = 0
        # A log nobody replicates exposes everything it holds. The replica manager clears this
        # on the logs it replicates and moves the high watermark itself (ISR progress on a
        # leader, the leader's high watermark on a follower).
        self.hw_follows_leo = True
        self.leader_epoch_cache = LeaderEpochCache(dir)
        self.producer_state = ProducerStateManager(
            dir, producer_id_expiration_ms=producer_id_expiration_ms)
        self.last_flush_ms = 0
        # Base offset of the newest segment rolled but not yet fsynced. Kafka flushes a rolled
        # segment on its scheduler; our owner does it off the event loop via flush_rolled().
        self.pending_roll_flush: int | None = None
        # Names (in ``dir``) of retired segment files renamed to ``.deleted``, waiting for their
        # owner to unlink them after file.delete.delay.ms (take_files_to_delete).
        self._files_to_delete: list[str] = []
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
        (a failing or missing index is rebuilt anyway).
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
        log._load(now_ms=now_ms, recover=recover, recovery_point=recovery_point,
                  log_start_offset=log_start_offset)
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

    def _clean_temp_files(self, names: list[str]) -> tuple[set[int], set[int]]:
        """Remove leftovers of interrupted operations among ``names`` (the dir's listing).

        Returns (bases of segments that need recovery, bases of segments swapped in); empty
        sets and nothing touched in the common case.
        """
        needs_recovery: set[int] = set()
        swapped: set[int] = set()
        for name in names:
            path = os.path.join(self.dir, name)
            if name.endswith((files.DELETED_SUFFIX, files.CLEANED_SUFFIX, ".tmp")):
                os.remove(path)
            elif name.endswith(files.SWAP_SUFFIX):
                # A swap finished writing but was not renamed in: complete it for the log file;
                # its indexes are rebuilt from the log.
                target = path[: -len(files.SWAP_SUFFIX)]
                if target.endswith(files.LOG_SUFFIX):
                    os.replace(path, target)
                    base = files.offset_from_filename(target)
                    needs_recovery.add(base)
                    swapped.add(base)
                else:
                    os.remove(path)
        return needs_recovery, swapped

    def _load(self, *, now_ms: int, recover: bool, recovery_point: int,
              log_start_offset: int | None) -> None:
        listing = os.listdir(self.dir)
        needs_recovery, swapped = self._clean_temp_files(listing)
        if any(n.endswith((files.DELETED_SUFFIX, files.CLEANED_SUFFIX, ".tmp", files.SWAP_SUFFIX))
               for n in listing):
            listing = os.listdir(self.dir)  # the cleanup changed the dir
        names = set(listing)
        bases: list[int] = []
        for name in names:
            if name.endswith(files.LOG_SUFFIX):
                try:
                    bases.append(files.offset_from_filename(name))
                except ValueError:
                    continue
        # Index files whose segment is gone would confuse a later segment at that offset.
        for name in names:
            if name.endswith((files.INDEX_SUFFIX, files.TIME_INDEX_SUFFIX, files.TXN_INDEX_SUFFIX)):
                try:
                    base = files.offset_from_filename(name)
                except ValueError:
                    continue
                if base not in bases:
                    os.remove(os.path.join(self.dir, name))
        bases.sort()
        for base in bases:
            missing_index = not (files.filename_prefix(base) + files.INDEX_SUFFIX in names
                                 and files.filename_prefix(base) + files.TIME_INDEX_SUFFIX in names)
            seg = self._new_segment(base, now_ms)
            if missing_index:
                needs_recovery.add(base)
            self._segments.append(seg)
        self._bases = [s.base_offset for s in self._segments]

        # Which segments to scan: on an unclean shutdown every one that may hold unflushed
        # data (from the segment containing the recovery point on); always those whose indexes
        # fail the sanity check or were missing.
        first_unflushed = 0
        if recover and self._segments:
            first_unflushed = max(0, bisect.bisect_right(self._bases, recovery_point) - 1)
        i = 0
        unflushed = False
        while i < len(self._segments):
            seg = self._segments[i]
            scan = (recover and i >= first_unflushed) or seg.base_offset in needs_recovery
            if not scan:
                is_active = i == len(self._segments) - 1
                try:
                    # Every entry of the active segment's indexes is checked; older segments
                    # get Kafka's cheap checks (their indexes were trimmed and flushed at roll).
                    seg.sanity_check(full=is_active)
                except CorruptIndexError as e:
                    _log.warning("%s: index of segment %s is corrupt (%s); rebuilding it",
                                 self._name, seg.log_path, e)
                    scan = True
                if not scan and is_active:
                    # The clean-shutdown marker is a promise about the whole dir, made before
                    # anything (a torn write, a bad disk, another process) could touch this file
                    # after it: check the tail it vouches for, cheaply, before serving from it.
                    problem = seg.validate_tail()
                    if problem is not None:
                        _log.warning("%s: the active segment %s does not end cleanly despite the "
                                     "clean-shutdown marker (%s); recovering it",
                                     self._name, seg.log_path, problem)
                        scan = True
            if scan:
                self.recovered = True
                prev_end = recovery_point if recover else None
                truncated = seg.recover(self._on_recovered_batch,
                                        active=i == len(self._segments) - 1)
                dropped_later = self._segments[i + 1:] if truncated > 0 else []
                if truncated > 0:
                    self._warn_truncated(seg, dropped_later, prev_end)
                # Only a cut is made durable here. As in Kafka, data a crash recovery kept past
                # the recovery point is not fsynced at load (three syncs per log would be minutes
                # at 10k logs): the recovery point stays where it was (below), so a second crash
                # scans it again.
                if truncated > 0:
                    seg.flush()
                elif recover and seg.next_offset > recovery_point:
                    unflushed = True
                if dropped_later:
                    # Data after a corrupt point is untrustworthy: drop the following segments.
                    for later in dropped_later:
                        later.delete()
                    del self._segments[i + 1:]
            i += 1
        # A swapped-in segment (compaction) replaces every older segment inside its range.
        for base in swapped:
            seg = next((x for x in self._segments if x.base_offset == base), None)
            if seg is None:
                continue
            end = seg.next_offset
            for other in [x for x in self._segments if base < x.base_offset < end]:
                other.delete()
                self._segments.remove(other)
        self._bases = [s.base_offset for s in self._segments]

        if not self._segments:
            start = log_start_offset if log_start_offset is not None else 0
            self._segments.append(self._new_segment(start, now_ms))
            self._bases = [start]
        self.active.resize_indexes(self.config.segment_index_bytes)

        first_base = self._segments[0].base_offset
        leo = self.log_end_offset
        lso = first_base if log_start_offset is None else max(log_start_offset, first_base)
        self._log_start_offset = min(lso, leo)
        if log_start_offset is not None and log_start_offset < self.log_start_offset:
            # A tiered log's whole start (checkpoint_log_start_offset), or a stale start from a
            # crash between deleting segments and checkpointing: harmless, as the floor counts
            # only on remote-enabled logs and never below their earliest remote offset.
            self._log_start_floor = log_start_offset
        # A clean shutdown flushed everything, and a recovery that kept nothing past the
        # checkpointed recovery point (or cut and fsynced) leaves it all durable; otherwise the
        # old recovery point stands.
        self.recovery_point = min(recovery_point, leo) if unflushed else leo
        self.leader_epoch_cache.truncate_from_end(leo)
        self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        self._rebuild_producer_state(leo, now_ms)
        self._high_watermark = leo
        self.last_flush_ms = now_ms
        # Loading may have mapped the active indexes (checks, recovery); the first append maps
        # them again. Python's mmap pins a duplicate descriptor per mapping: kept, 10k logs
        # would need 30k descriptors before serving anything.
        self.active.offset_index.release_mapping()
        self.active.time_index.release_mapping()

    @property
    def _name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def _warn_truncated(self, seg: LogSegment, dropped: list[LogSegment],
                        prev_end: int | None) -> None:
        """One WARN line per cut: where, why, offsets kept and dropped, bytes dropped."""
        rec = seg.last_recovery
        assert rec is not None
        dropped_bytes = rec.truncated_bytes + sum(s.size for s in dropped)
        last = rec.dropped_last_offset
        if dropped:
            last = None  # the later segments' ends are not read; name their bases instead
        dropped_desc = (f"{rec.next_offset}..{last}" if last is not None
                        else f"{rec.next_offset} and above")
        later = ""
        if dropped:
            later = (f", and {len(dropped)} later segment(s) from offset "
                     f"{dropped[0].base_offset} ({sum(s.size for s in dropped)} bytes)")
        kept = (f"{seg.base_offset}..{rec.next_offset - 1}" if rec.next_offset > seg.base_offset
                else "none")
        torn = "torn write" in rec.reason or "zero-filled" in rec.reason
        what = "Truncated the torn tail of" if torn else "Found invalid messages in"
        _log.warning("%s log segment %s of %s at byte offset %d: %s. Kept offsets %s of the "
                     "segment (%d bytes); dropped offsets %s: %d bytes in this segment%s; %d "
                     "bytes in all. The log now ends at offset %d%s",
                     what, seg.log_path, self._name, rec.valid_bytes, rec.reason, kept,
                     rec.valid_bytes, dropped_desc, rec.truncated_bytes, later, dropped_bytes,
                     rec.next_offset,
                     "" if prev_end is None or prev_end <= rec.next_offset
                     else f", below its recovery point {prev_end}: flushed data was lost")

    def _on_recovered_batch(self, h: fmt.BatchHeader, position: int) -> None:
        # As Kafka's recovery: only epochs newer than the cache's latest are added; older ones
        # are already recorded (and re-assigning them would drop the newer entries).
        if h.partition_leader_epoch > self.leader_epoch_cache.latest_epoch:
            self.leader_epoch_cache.assign(h.partition_leader_epoch, h.base_offset)

    def _new_segment(self, base: int, now_ms: int) -> LogSegment:
        return LogSegment(self.dir, base, index_interval_bytes=self.config.index_interval_bytes,
                          max_index_size=self.config.segment_index_bytes, now_ms=now_ms)

    def _rebuild_producer_state(self, upto: int, now_ms: int) -> None:
        """Newest snapshot at or below ``upto`` (the recovered log end), then replay the log."""
        psm = self.producer_state
        psm.delete_snapshots_outside(self.log_start_offset, upto)
        start = psm.load_latest_snapshot(upto, now_ms)
        if start is None:
            psm.producers.clear()
            start = self.log_start_offset
            psm.map_end_offset = start
        for seg, ref in self._iter_batches_from(start):
            h = ref.header
            coord = -1
            if h.is_control and h.producer_id != fmt.NO_PRODUCER_ID:
                coord = self._control_coordinator_epoch(seg, ref)
            psm.replay(ProducerBatch.from_header(h, coord))
        psm.map_end_offset = upto

    @staticmethod
    def _control_coordinator_epoch(seg: LogSegment, ref: BatchRef) -> int:
        try:
            for rec in reader.iter_records(seg.read_batch(ref)):
                if rec.value is not None and len(rec.value) >= _CONTROL_VALUE.size:
                    return _CONTROL_VALUE.unpack_from(rec.value)[1]
        except KafkaError:
            pass
        return -1

    def _iter_batches_from(self, offset: int) -> Iterator[tuple[LogSegment, BatchRef]]:
        """Every batch whose last offset is ≥ ``offset``, in log order."""
        i = max(0, bisect.bisect_right(self._bases, offset) - 1)
        for seg in self._segments[i:]:
            ref = seg.translate_offset(offset)
            if ref is None:
                continue
            for r in seg.iter_batches(ref.position):
                yield seg, r

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

    # ================================================================== properties
    @property
    def active(self) -> LogSegment:
        return self._segments[-1]

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def log_end_offset(self) -> int:
        """Offset after the last record (last batch's base + lastOffsetDelta + 1)."""
        return self.active.next_offset

    @property
    def last_stable_offset(self) -> int:
        """READ_COMMITTED bound: the first open transaction's first offset, capped by the HW.

        Simplification: Kafka also holds the LSO at a completed transaction whose marker is
        above the high watermark; with the HW following the log end that case cannot arise yet.
        """
        first = self.producer_state.first_undecided_offset()
        return self.high_watermark if first is None else min(first, self.high_watermark)

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    def _segment_for(self, offset: int) -> int:
        return max(0, bisect.bisect_right(self._bases, offset) - 1)

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
            floor, ceiling = timestamp_bounds(now_ms, config.message_timestamp_before_max_ms,
                                              config.message_timestamp_after_max_ms)
            if config.log_append_time:  # the broker stamps the records: nothing to bound
                floor, ceiling = timestamps.UNBOUNDED
            compact = config.compact
            try:
                info = validate_and_assign(
                    buf, next_offset=self.log_end_offset, now_ms=now_ms,
                    partition_leader_epoch=leader_epoch,
                    max_batch_bytes=config.max_message_bytes,
                    log_append_time=config.log_append_time,
                    timestamp_floor=floor, timestamp_ceiling=ceiling, require_keys=compact)
            except RecordRefused as refused:
                # Kafka lists every refused record of the batch, not only the first.
                record_checks.refuse_batch(buf, refused, topic_partition=self._name,
                                           require_keys=compact, floor=floor, ceiling=ceiling)
            if compact or timestamps.bounds_set(floor, ceiling):
                record_checks.check_compressed(buf, info, topic_partition=self._name,
                                               require_keys=compact, floor=floor,
                                               ceiling=ceiling, floor_set=timestamps.floor_set(
                                                   config.message_timestamp_before_max_ms))
            codec = recompress.target_codec(config.compression_type)
            if codec is not None and recompress.needs_recompression(buf, info, codec):
                buf, info = self._recompress(buf, info, codec)
        else:
            info = _assign_trusted(buf, next_offset=self.log_end_offset, now_ms=now_ms,
                                   partition_leader_epoch=leader_epoch,
                                   log_append_time=self.config.log_append_time)
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
                    coord = _coordinator_epoch_of(memoryview(buf)[b.position:b.position + b.size])
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

    def _recompress(self, buf: bytearray | memoryview, info: AppendInfo,
                    codec: int) -> tuple[bytearray, AppendInfo]:
        # As Kafka: the topic's compression.type wins over the producer's codec, and the size
        # limit applies again to what will actually be stored.
        out, info = recompress.recompress(buf, info, codec,
                                          gzip_level=self.config.compression_gzip_level)
        limit = self.config.max_message_bytes
        for b in info.batches:
            if b.size > limit:
                raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE,
                                 f"record batch is {b.size} bytes once recompressed as "
                                 f"{self.config.compression_type}, over max.message.bytes "
                                 f"{limit}")
        return out, info

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
            coord = _coordinator_epoch_of(bview) if h.is_control else -1
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
                     files.time_index_file(self.dir, new_base))
        for path in new_paths:
            if os.path.exists(path):
                if path.endswith(files.LOG_SUFFIX) and os.path.getsize(path) > 0:
                    raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                                     f"trying to roll to {path} which already has data")
                os.remove(path)
        try:
            seg = self._new_segment(new_base, now_ms)
        except OSError as e:
            _remove_new_segment_files(new_paths)
            raise storage_error(e, "create segment", new_paths[0]) from e
        except BaseException:
            _remove_new_segment_files(new_paths)
            raise
        try:
            self.producer_state.map_end_offset = leo
            self.producer_state.take_snapshot()
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
        leo = self.log_end_offset
        if offset < self.log_start_offset or offset > leo:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"Received request for offset {offset} for partition {self.topic}-"
                f"{self.partition}, but we only have log segments in the range "
                f"{self.log_start_offset} to {leo}.")
        if max_offset is None or max_offset > leo:
            max_offset = leo
        if offset >= max_offset:
            return None
        i = self._segment_for(offset)
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

    # ================================================================== timestamps
    def offset_for_timestamp(self, timestamp: int) -> OffsetAndTimestamp | None:
        """(offset, timestamp) of the first record with timestamp ≥ ``timestamp``, or None."""
        for seg in self._segments:
            if seg.largest_timestamp < timestamp:
                continue
            found = seg.find_offset_by_timestamp(
                timestamp, self.log_start_offset,
                lambda ref, seg=seg: self._record_timestamps(seg, ref))
            if found is not None:
                return OffsetAndTimestamp(found[1], found[0])
        return None

    def _record_timestamps(self, seg: LogSegment, ref: BatchRef) -> Iterator[tuple[int, int]]:
        h = ref.header
        if h.is_log_append_time:
            # Every record of a LogAppendTime batch carries the batch's max timestamp.
            yield h.base_offset, h.max_timestamp
            return
        for rec in reader.iter_records(seg.read_batch(ref)):
            yield rec.offset, rec.timestamp

    def max_timestamp_and_offset(self) -> TimestampAndOffset | None:
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
            if ref.header.max_timestamp == ts and ref.header.last_offset >= self.log_start_offset:
                for off, rts in self._record_timestamps(best, ref):
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
        if offset <= self._segments[0].base_offset:
            self.truncate_fully_and_start_at(offset, now_ms=now_ms)
            return True
        i = self._segment_for(offset)
        for seg in self._segments[i + 1:]:
            seg.delete()
        del self._segments[i + 1:]
        self._bases = [s.base_offset for s in self._segments]
        seg = self.active
        seg.truncate_to(offset)
        seg.resize_indexes(self.config.segment_index_bytes)
        leo = self.log_end_offset
        self._log_start_offset = min(self._log_start_offset, leo)
        self.leader_epoch_cache.truncate_from_end(leo)
        self._high_watermark = min(self._high_watermark, leo)
        self.recovery_point = min(self.recovery_point, leo)
        self._rebuild_producer_state(leo, now_ms)
        return True

    def truncate_fully_and_start_at(self, offset: int, *, now_ms: int = 0) -> None:
        """Drop every segment and restart the log empty at ``offset`` (log start, recovery point
        and high watermark all move there, down or up)."""
        self._check_open()
        for seg in self._segments:
            seg.delete()
        self._segments = [self._new_segment(offset, now_ms)]
        self._bases = [offset]
        self.active.resize_indexes(self.config.segment_index_bytes)
        self._log_start_offset = offset
        self.recovery_point = offset
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
            self._segments[self._segment_for(new_start)].base_offset)

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
        names, self._files_to_delete = self._files_to_delete, []
        return [os.path.join(self.dir, n) for n in names]

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
        for i, seg in enumerate(self._segments):
            nxt = self._segments[i + 1] if i + 1 < len(self._segments) else None
            upper = nxt.base_offset if nxt is not None else self.log_end_offset
            if nxt is None and seg.size == 0:
                break
            if self.high_watermark >= upper and predicate(seg, nxt):
                doomed.append(seg)
            else:
                break
        if not doomed:
            return 0
        if len(doomed) == len(self._segments):
            self.roll(now_ms=self.active.created_ms)
        # As Kafka: first the segments leave the log and the log start offset moves, then the
        # files go. A crash after this point leaves files the next load ignores or removes
        # (.deleted ones, indexes without a log), and the log opens at the first segment still
        # there, which the log start offset checkpoint can only confirm or raise.
        self._segments = self._segments[len(doomed):]
        self._bases = [s.base_offset for s in self._segments]
        first = self._segments[0].base_offset
        if first > self.log_start_offset:
            self._log_start_offset = first
            self.leader_epoch_cache.truncate_from_start(first)
        self.producer_state.delete_snapshots_before(first)
        self.recovery_point = max(self.recovery_point, first)
        for seg in doomed:
            if async_delete:
                self._files_to_delete.extend(
                    os.path.basename(p) for p in seg.rename_for_deletion())
            else:
                seg.delete()
        return len(doomed)

    # ================================================================== durability, lifecycle
    def flush(self, *, now_ms: int | None = None) -> None:
        """fsync every segment that may hold unflushed data; advance the recovery point."""
        leo = self.log_end_offset
        if leo > self.recovery_point:
            for seg in self._segments[self._segment_for(self.recovery_point):]:
                seg.flush()
            self.recovery_point = leo
        if now_ms is not None:
            self.last_flush_ms = now_ms

    def flush_up_to(self, offset: int) -> None:
        """fsync the segments holding offsets below ``offset``; recovery point moves there."""
        if offset <= self.recovery_point:
            return
        first = self._segment_for(self.recovery_point)
        for seg in self._segments[first:]:
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

    def update_config(self, config: LogConfig) -> None:
        self.config = config

    def close(self) -> None:
        """Trim the active indexes, write a producer snapshot at the log end, close files."""
        if self.closed:
            return
        self.producer_state.map_end_offset = self.log_end_offset
        self.producer_state.take_snapshot()
        for seg in self._segments:
            seg.close()
        self.closed = True

    def close_handlers(self) -> None:
        """Close the files without writing anything (no index trim, no producer snapshot): for
        a log being deleted."""
        if not self.closed:
            for seg in self._segments:
                seg.close_handlers()
            self.closed = True

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
        self.producer_state.dir = new_dir
        if self.leader_epoch_cache.path:
            self.leader_epoch_cache.path = os.path.join(new_dir, files.LEADER_EPOCH_CHECKPOINT)

    def _check_open(self) -> None:
        if self.closed:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"log {self.dir} is closed")

    def __repr__(self) -> str:
        return (f"PartitionLog({self.dir!r}, start={self.log_start_offset}, "
                f"end={self.log_end_offset}, segments={len(self._segments)})")


def _remove_new_segment_files(paths: tuple[str, ...]) -> None:
    # The files of a segment that failed to come into being (all new and empty).
    for path in paths:
        try:
            os.remove(path)
        except OSError:
            pass


_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_U32 = struct.Struct(">I")


def _assign_trusted(buf: bytearray, *, next_offset: int, now_ms: int,
                    partition_leader_epoch: int, log_append_time: bool) -> AppendInfo:
    """Offset assignment for batches the broker built itself (coordinators, txn markers).

    No client validation (control batches are allowed), but the framing must hold. Base offset
    and leader epoch sit outside the CRC; a LogAppendTime rewrite recomputes it.
    """
    view = memoryview(buf).cast("B")
    batches: list[BatchInfo] = []
    pos = 0
    offset = next_offset
    max_ts, off_of_max, count = fmt.NO_TIMESTAMP, -1, 0
    for h, _ in reader.iter_batches(view):
        _I64.pack_into(view, pos + fmt.BASE_OFFSET, offset)
        _I32.pack_into(view, pos + fmt.PARTITION_LEADER_EPOCH, partition_leader_epoch)
        batch_max = h.max_timestamp
        if log_append_time:
            _I16.pack_into(view, pos + fmt.ATTRIBUTES, h.attributes | fmt.TIMESTAMP_TYPE_MASK)
            _I64.pack_into(view, pos + fmt.MAX_TIMESTAMP, now_ms)
            _U32.pack_into(view, pos + fmt.CRC, fmt.compute_crc(view, pos, h.size))
            batch_max = now_ms
        last = offset + h.last_offset_delta
        if batch_max > max_ts:
            max_ts, off_of_max = batch_max, last
        batches.append(BatchInfo(pos, h.size, offset, last, batch_max, h.producer_id,
                                 h.producer_epoch, h.base_sequence, h.record_count,
                                 h.is_transactional, h.is_control))
        count += h.record_count
        offset = last + 1
        pos += h.size
    if not batches or pos != len(view):
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "incomplete record batch in broker append")
    return AppendInfo(next_offset, offset - 1, max_ts, off_of_max, count, batches)


def _coordinator_epoch_of(batch: memoryview) -> int:
    """Coordinator epoch of an end-transaction marker batch (-1 when unreadable)."""
    try:
        for rec in reader.iter_records(batch):
            if rec.value is not None and len(rec.value) >= _CONTROL_VALUE.size:
                return _CONTROL_VALUE.unpack_from(rec.value)[1]
    except KafkaError:
        pass
    return -1


# CorruptSegmentError is re-exported for callers that walk segments themselves.
__all__ += ["CorruptSegmentError"]
