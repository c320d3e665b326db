"""Opening a partition directory (Kafka's LogLoader): segments, sanity checks, recovery.

:func:`load_log` removes leftovers of interrupted operations, opens every segment, checks their
indexes, recovers (scans, CRC-checks, rebuilds indexes, cuts a torn or corrupt tail) what an
unclean shutdown may have left unflushed, completes an interrupted compaction swap, and rebuilds
the leader epoch cache's end and the producer state (a recovered segment's ``.txnindex`` is
rebuilt from its markers, with the producer state as of its base offset). It fills a :class:`LocalLog` and returns the
offsets it found; the ``PartitionLog`` calling it owns and assigns them.
"""

from __future__ import annotations

import bisect
import logging
import os
import uuid
from typing import NamedTuple

from kafkapy.log import files
from kafkapy.log.index import CorruptIndexError
from kafkapy.log.leader_epoch import LeaderEpochCache
from kafkapy.log.local_log import LocalLog
from kafkapy.log.partition_metadata import (
    normalize_topic_id,
    read_partition_metadata,
    write_partition_metadata,
)
from kafkapy.log.producer_state import ProducerBatch, ProducerStateManager
from kafkapy.log.segment import BatchRef, LogSegment
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.records import format as fmt
from kafkapy.records.control import read_marker

__all__ = [
    "LoadedOffsets", "check_topic_id", "load_log", "prepare_dir", "rebuild_producer_state",
]

_log = logging.getLogger("kafkapy.log.partition_log")  # the lines users know, unchanged

_LEFTOVER_SUFFIXES = (files.DELETED_SUFFIX, files.CLEANED_SUFFIX, ".tmp", files.SWAP_SUFFIX)


class LoadedOffsets(NamedTuple):
    """What loading found: the local log start offset, the whole log's start floor (0: none) and
    whether any segment was scanned (recovered)."""

    local_log_start_offset: int
    log_start_floor: int
    recovered: bool


def prepare_dir(dir: str) -> tuple[str, int]:
    """Create ``dir`` if needed; its (topic, partition) from the name (the name and 0 for a
    directory not named ``<topic>-<partition>``)."""
    parsed = files.parse_dir_name(dir)
    try:
        os.mkdir(dir)  # one syscall when it exists (loading thousands of logs at start-up)
    except FileExistsError:
        pass
    except FileNotFoundError:
        os.makedirs(dir, exist_ok=True)
    return parsed if parsed else (os.path.basename(dir), 0)


def check_topic_id(dir: str, topic_id: uuid.UUID | bytes | None) -> uuid.UUID | None:
    """The dir's topic id: ``partition.metadata``'s, written from ``topic_id`` when missing;
    KafkaError(INCONSISTENT_TOPIC_ID) when the dir belongs to another topic id."""
    topic_id = normalize_topic_id(topic_id)
    stored = read_partition_metadata(dir)
    if topic_id is not None and stored is not None and stored != topic_id:
        raise KafkaError(ErrorCode.INCONSISTENT_TOPIC_ID,
                         f"{dir} belongs to topic id {stored}, not {topic_id}")
    if topic_id is not None and stored is None:
        write_partition_metadata(dir, topic_id)
    return stored or topic_id


def load_log(local: LocalLog, epochs: LeaderEpochCache, producer_state: ProducerStateManager, *,
             now_ms: int, recover: bool, recovery_point: int,
             log_start_offset: int | None) -> LoadedOffsets:
    """Open the segments of ``local.dir`` into ``local``; see the module docstring.

    ``recover=True`` means the previous shutdown was not clean: every segment from the one
    holding ``recovery_point`` on is scanned. Otherwise the indexes are trusted after a sanity
    check (a failing or missing index is rebuilt anyway).
    """
    listing = os.listdir(local.dir)
    needs_recovery, swapped = _clean_temp_files(local.dir, listing)
    if any(n.endswith(_LEFTOVER_SUFFIXES) for n in listing):
        listing = os.listdir(local.dir)  # the cleanup changed the dir
    segments, missing_index = _open_segments(local, set(listing), now_ms)
    needs_recovery |= missing_index
    local.set_segments(segments)
    recovered, unflushed = _check_and_recover(local, epochs, segments, needs_recovery,
                                              recover=recover, recovery_point=recovery_point,
                                              now_ms=now_ms)
    _complete_swaps(segments, swapped)
    if not segments:
        segments.append(local.new_segment(log_start_offset or 0, now_ms))
    local.set_segments(segments)
    local.active.resize_indexes(local.config.segment_index_bytes)

    first_base = segments[0].base_offset
    leo = local.log_end_offset
    local_start = first_base if log_start_offset is None else max(log_start_offset, first_base)
    start = min(local_start, leo)
    floor = 0
    if log_start_offset is not None and log_start_offset < start:
        # A tiered log's whole start (checkpoint_log_start_offset), or a stale start from a
        # crash between deleting segments and checkpointing: harmless, as the floor counts
        # only on remote-enabled logs and never below their earliest remote offset.
        floor = log_start_offset
    # A clean shutdown flushed everything, and a recovery that kept nothing past the
    # checkpointed recovery point (or cut and fsynced) leaves it all durable; otherwise the
    # old recovery point stands.
    local.recovery_point = min(recovery_point, leo) if unflushed else leo
    epochs.truncate_from_end(leo)
    epochs.truncate_from_start(start)
    rebuild_producer_state(local, producer_state, start, leo, now_ms)
    local.last_flush_ms = now_ms
    # Loading may have mapped the active indexes (checks, recovery); the first append maps
    # them again. Python's mmap pins a duplicate descriptor per mapping: kept, 10k logs
    # would need 30k descriptors before serving anything.
    local.active.offset_index.release_mapping()
    local.active.time_index.release_mapping()
    return LoadedOffsets(start, floor, recovered)


def _clean_temp_files(dir: str, names: list[str]) -> tuple[set[int], set[int]]:
    """Remove leftovers of interrupted operations among ``names`` (the dir's listing).

    Returns (bases of segments that need recovery, bases of segments swapped in); empty
    sets and nothing touched in the common case.
    """
    needs_recovery: set[int] = set()
    swapped: set[int] = set()
    for name in names:
        path = os.path.join(dir, name)
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


def _open_segments(local: LocalLog, names: set[str],
                   now_ms: int) -> tuple[list[LogSegment], set[int]]:
    """The dir's segments in offset order, and the bases of those missing an index file."""
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
                os.remove(os.path.join(local.dir, name))
    bases.sort()
    segments: list[LogSegment] = []
    missing: set[int] = set()
    for base in bases:
        prefix = files.filename_prefix(base)
        if not (prefix + files.INDEX_SUFFIX in names and prefix + files.TIME_INDEX_SUFFIX in names):
            missing.add(base)
        seg = local.new_segment(base, now_ms)
        if prefix + files.TXN_INDEX_SUFFIX not in names:
            seg.txn_index.mark_absent()  # most segments: no open() to find that out again
        segments.append(seg)
    return segments, missing


def _check_and_recover(local: LocalLog, epochs: LeaderEpochCache, segments: list[LogSegment],
                       needs_recovery: set[int], *, recover: bool,
                       recovery_point: int, now_ms: int) -> tuple[bool, bool]:
    """Sanity-check or recover each segment in place; returns (any recovered, anything kept
    past the recovery point unflushed)."""
    txns = _SegmentTxnRebuild(local, now_ms)

    def on_batch(h: fmt.BatchHeader, position: int) -> None:
        # As Kafka's recovery: only epochs newer than the cache's latest are added; older ones
        # are already recorded (and re-assigning them would drop the newer entries).
        if h.partition_leader_epoch > epochs.latest_epoch:
            epochs.assign(h.partition_leader_epoch, h.base_offset)
        txns.on_batch(h, position)

    # Which segments to scan: on an unclean shutdown every one that may hold unflushed
    # data (from the segment containing the recovery point on); always those whose indexes
    # fail the sanity check or were missing.
    first_unflushed = 0
    if recover and segments:
        bases = [s.base_offset for s in segments]
        first_unflushed = max(0, bisect.bisect_right(bases, recovery_point) - 1)
    recovered = unflushed = False
    i = 0
    while i < len(segments):
        seg = segments[i]
        is_active = i == len(segments) - 1
        scan = (recover and i >= first_unflushed) or seg.base_offset in needs_recovery
        if not scan:
            scan = _fails_checks(local.name, seg, is_active)
        if scan:
            recovered = True
            txns.start_segment(seg)
            truncated = seg.recover(on_batch, active=is_active)
            dropped_later = segments[i + 1:] if truncated > 0 else []
            if truncated > 0:
                warn_truncated(local.name, seg, dropped_later, recovery_point if recover else None)
            # Only a cut is made durable here. As in Kafka, data a crash recovery kept past
            # the recovery point is not fsynced at load (three syncs per log would be minutes
            # at 10k logs): the recovery point stays where it was, so a second crash scans it
            # again.
            if truncated > 0:
                seg.flush()
            elif recover and seg.next_offset > recovery_point:
                unflushed = True
            if dropped_later:
                # Data after a corrupt point is untrustworthy: drop the following segments.
                for later in dropped_later:
                    later.delete()
                del segments[i + 1:]
        i += 1
    return recovered, unflushed


def _fails_checks(name: str, seg: LogSegment, is_active: bool) -> bool:
    """Whether a segment the shutdown vouched for still needs a scan."""
    try:
        # Every entry of the active segment's indexes is checked; older segments get Kafka's
        # cheap checks (their indexes were trimmed and flushed at roll).
        seg.sanity_check(full=is_active)
    except CorruptIndexError as e:
        _log.warning("%s: index of segment %s is corrupt (%s); rebuilding it",
                     name, seg.log_path, e)
        return True
    if is_active:
        # The clean-shutdown marker is a promise about the whole dir, made before anything (a
        # torn write, a bad disk, another process) could touch this file after it: check the
        # tail it vouches for, cheaply, before serving from it.
        problem = seg.validate_tail()
        if problem is not None:
            _log.warning("%s: the active segment %s does not end cleanly despite the "
                         "clean-shutdown marker (%s); recovering it", name, seg.log_path, problem)
            return True
    return False


def _complete_swaps(segments: list[LogSegment], swapped: set[int]) -> None:
    # A swapped-in segment (compaction) replaces every older segment inside its range.
    for base in swapped:
        seg = next((x for x in segments if x.base_offset == base), None)
        if seg is None:
            continue
        end = seg.next_offset
        for other in [x for x in segments if base < x.base_offset < end]:
            other.delete()
            segments.remove(other)


def warn_truncated(name: str, seg: LogSegment, dropped: list[LogSegment],
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
                 what, seg.log_path, name, rec.valid_bytes, rec.reason, kept,
                 rec.valid_bytes, dropped_desc, rec.truncated_bytes, later, dropped_bytes,
                 rec.next_offset,
                 "" if prev_end is None or prev_end <= rec.next_offset
                 else f", below its recovery point {prev_end}: flushed data was lost")


def rebuild_producer_state(local: LocalLog, psm: ProducerStateManager, local_log_start_offset: int,
                           upto: int, now_ms: int) -> None:
    """Newest snapshot at or below ``upto`` (the recovered log end), then replay the log.

    Open transactions come back from the snapshot's entries and the replay; the transactions
    the replay completes wait for the high watermark as after any append."""
    psm.delete_snapshots_outside(local_log_start_offset, upto)
    _load_state_at(local, psm, local_log_start_offset, upto, now_ms)


def _load_state_at(local: LocalLog, psm: ProducerStateManager, floor: int, upto: int,
                   now_ms: int) -> None:
    """Producer state of the log below ``upto``: the newest snapshot at or below it, then
    the batches after it (from ``floor`` when there is no snapshot)."""
    start = psm.load_latest_snapshot(upto, now_ms)
    if start is None:
        start = floor
        psm.clear(start)
    for seg, ref in local.iter_batches_from(start):
        if ref.header.base_offset >= upto:
            break
        psm.replay(producer_batch(seg, ref))
    psm.map_end_offset = upto


def producer_batch(seg: LogSegment, ref: BatchRef) -> ProducerBatch:
    """The producer view of a batch read back from ``seg`` (its marker read when a control one)."""
    h = ref.header
    marker = None
    if h.is_control and h.producer_id != fmt.NO_PRODUCER_ID:
        marker = read_marker(seg.read_batch(ref))
    return ProducerBatch.from_header(h, marker)


class _SegmentTxnRebuild:
    """Rebuilds the ``.txnindex`` of the segments being recovered (Kafka's recoverSegment): a
    scratch producer state at the segment's base offset (snapshot, then the earlier batches)
    replays the segment's batches, writing an entry per aborted transaction. Consecutive
    recovered segments share one replay."""

    def __init__(self, local: LocalLog, now_ms: int) -> None:
        self._local = local
        self._now_ms = now_ms
        self._psm: ProducerStateManager | None = None
        self._seg: LogSegment | None = None

    def start_segment(self, seg: LogSegment) -> None:
        psm = self._psm
        if psm is None or psm.map_end_offset != seg.base_offset:
            psm = ProducerStateManager(self._local.dir)
            first = self._local.segments[0].base_offset
            _load_state_at(self._local, psm, first, seg.base_offset, self._now_ms)
        self._psm, self._seg = psm, seg

    def on_batch(self, h: fmt.BatchHeader, position: int) -> None:
        seg, psm = self._seg, self._psm
        if seg is None or psm is None:
            return
        if not h.is_transactional:
            # Only transactional batches and markers open or close transactions (and the
            # scratch state never answers sequence or epoch questions).
            psm.map_end_offset = h.last_offset + 1
        else:
            psm.replay(producer_batch(seg, BatchRef(position, h)), seg.txn_index)
