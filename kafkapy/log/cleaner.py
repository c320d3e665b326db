"""Log compaction for ``cleanup.policy=compact`` (Kafka's log cleaner, single-threaded and simple).

What a clean does to one partition log:

1. **Cleanable range.** Every segment but the active one, and never past the last stable offset
   (Kafka's first uncleanable offset): an undecided transaction, and everything after it, stays
   as written. A segment holding the LSO is cleaned below it only.
2. **Offset map.** The records of the cleanable range are scanned, aborted transactions left out
   (their ``.txnindex`` entries say which); the map keeps the last offset of each key.
3. **Rewrite.** Adjacent cleanable segments are grouped while their total size fits in
   ``segment.bytes`` (so small segments merge and the segment count stays bounded). Each group is
   rewritten into one segment holding only the records that are the latest for their key, with
   their original offsets and timestamps; each surviving part of a batch stays one batch with the
   source batch's base and last offset, codec, epoch, producer fields and timestamp type. Batches
   of aborted transactions go; each active producer's last batch stays (emptied if its records
   go) so its sequence survives a restart; end markers stay while their transaction has data in
   the log (see ``cleaner_txn``). A group with nothing left is deleted (unless it starts the log,
   whose base offset is the log start). Its ``.txnindex`` keeps the aborted transactions whose
   ABORT marker stayed.
   Records younger than ``min.compaction.lag.ms`` are not compacted away.
   Tombstones (null values), and markers whose transaction has no data left, are kept by the
   first clean that could remove them, which stamps their batch with a delete horizon (now +
   ``delete.retention.ms``, KIP-534); the first clean after it removes them, so consumers that
   read the topic within ``delete.retention.ms`` see the delete.
4. **Swap**, crash-safe as Kafka's: the cleaned segment and its indexes are built (and fsynced)
   in a scratch directory of the log dir (``.kafkapy-cleaner/``, ignored by the LogManager and
   emptied at start), its ``.log`` is renamed into the partition as ``<base>.log.swap``, the old
   segments are deleted, the indexes moved in, and the swap file renamed ``<base>.log``. After a
   crash the log loader (``PartitionLog._clean_temp_files``) completes a ``.swap`` (segments
   inside its range are deleted, indexes rebuilt) and drops a ``.cleaned`` file, so no state in
   between loses or duplicates a record.

Records without a key are kept (Kafka's cleaner drops them; the append path refuses them on a
compacted topic anyway). Offsets never change: readers of a compacted log see gaps, exactly as with
Kafka.

``plan_clean`` (reading, the offset map, writing the new segments) never changes the log and may
run on a worker thread, given the log's live state as ``clean_inputs`` took it where the log's
appends run (the segment list, the last stable offset, the producers' last batches and the aborted
transactions change under appends); ``apply_clean`` (renames and the segment list) must run there
too. Readers already holding a ``FetchSlice`` keep reading the old, unlinked file.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkapy.durable import fsync_dir
from kafkapy.log import files
from kafkapy.log.cleaner_txn import (
    CleanedTransactions,
    LastRecord,
    delete_horizon,
    empty_batch,
    encode_batch,
    is_last_batch_of_producer,
    last_records_of_producers,
)
from kafkapy.log.segment import AppendBatch, LogSegment
from kafkapy.log.transaction_index import AbortedTxn
from kafkapy.records import format as fmt
from kafkapy.records.reader import DecodedRecord, iter_records

if TYPE_CHECKING:
    from kafkapy.log.partition_log import PartitionLog

log = logging.getLogger(__name__)

_MAX_RELATIVE = 2**31 - 1


@dataclass
class CleanResult:
    segments_before: int = 0
    segments_after: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    records_removed: int = 0
    tombstones_removed: int = 0
    tombstones_kept: int = 0
    aborted_records_removed: int = 0
    markers_removed: int = 0
    markers_kept: int = 0         # end markers of transactions without data, waiting for a horizon
    next_horizon_ms: int | None = None  # the earliest delete horizon a kept tombstone/marker waits for
    first_uncleanable: int | None = None  # where this clean stopped (the active segment, the LSO)

    @property
    def cleaned(self) -> bool:
        return self.segments_before > 0


def _segment_batches(seg: LogSegment) -> Iterable[tuple[fmt.BatchHeader, bytes]]:
    for ref in seg.iter_batches():
        yield ref.header, seg.read_batch(ref)


def build_offset_map(segments: list[LogSegment], aborted: list[AbortedTxn],
                     upper_bound: int) -> dict[bytes, int]:
    """The last offset of every key below ``upper_bound`` in ``segments``, aborted transactions
    left out (their writes must not shadow the committed value of a key)."""
    txns = CleanedTransactions(aborted)
    latest: dict[bytes, int] = {}
    for seg in segments:
        for header, data in _segment_batches(seg):
            if header.base_offset >= upper_bound:
                return latest
            if header.is_control:
                txns.on_control_batch(header, data)
                continue
            if txns.on_data_batch(header):
                continue
            for rec in iter_records(data):
                if rec.key is not None and rec.offset < upper_bound:
                    latest[rec.key] = rec.offset
    return latest


def _group_segments(segments: list[LogSegment], max_bytes: int) -> list[list[LogSegment]]:
    groups: list[list[LogSegment]] = []
    for seg in segments:
        if groups:
            cur = groups[-1]
            size = sum(s.size for s in cur) + seg.size
            if size <= max_bytes and seg.next_offset - cur[0].base_offset <= _MAX_RELATIVE:
                cur.append(seg)
                continue
        groups.append([seg])
    return groups


CLEANER_TMP_DIR = ".kafkapy-cleaner"


@dataclass
class _CleanedGroup:
    segments: list[LogSegment]
    tmp_dir: str | None  # holds the new segment's files; None: nothing survived


@dataclass
class CleanPlan:
    groups: list[_CleanedGroup]
    result: CleanResult


def cleaner_tmp_root(plog: PartitionLog) -> str:
    """Where cleaned segments are built: a directory of the log dir that the LogManager ignores
    (its name is no ``<topic>-<partition>``), on the same filesystem so renames are atomic."""
    return os.path.join(os.path.dirname(os.path.abspath(plog.dir)), CLEANER_TMP_DIR)


@dataclass
class _Pass:
    """The fixed inputs of one clean, and the rules it applies to each batch below ``limit``."""

    now_ms: int
    lag_limit: int        # records newer than this are not compacted away (min.compaction.lag.ms)
    new_horizon: int      # the delete horizon stamped now: now + delete.retention.ms
    limit: int            # the first uncleanable offset: the active segment, the LSO
    latest: dict[bytes, int]
    last_records: dict[int, LastRecord]
    txns: CleanedTransactions
    result: CleanResult

    def clean_batch(self, header: fmt.BatchHeader, data: bytes) -> bytes | None:
        """The batch as it stays in the log (maybe ``data`` itself), or None when it goes."""
        control = header.is_control
        discardable = (self.txns.on_control_batch(header, data) if control
                       else self.txns.on_data_batch(header))
        if header.last_offset >= self.limit:
            return data  # undecided transactions (at or after the LSO) are never cleaned
        horizon = delete_horizon(header)
        if control:
            drop_all = discardable and horizon is not None and horizon <= self.now_ms
        else:
            drop_all = discardable and header.max_timestamp <= self.lag_limit
        keep_empty = header.producer_id >= 0 and is_last_batch_of_producer(header, self.last_records)
        result = self.result
        if drop_all:
            if control:
                result.markers_removed += header.record_count
            else:
                result.aborted_records_removed += header.record_count
            result.records_removed += header.record_count
            if not keep_empty:
                return None
            return data if header.record_count == 0 else empty_batch(header)
        if control:
            kept, all_kept = list(iter_records(data)), True
        else:
            kept, all_kept = self._retained_records(data, horizon)
        if not kept:
            if not keep_empty:
                return None
            return data if header.record_count == 0 else empty_batch(header)
        # Tombstones and the markers of transactions without data wait for a delete horizon.
        waits = (control and discardable) or any(r.value is None for r in kept)
        if waits:
            due = horizon if horizon is not None else self.new_horizon
            if result.next_horizon_ms is None or due < result.next_horizon_ms:
                result.next_horizon_ms = due
            if control:
                result.markers_kept += 1
        stamp = waits and horizon is None
        if all_kept and not stamp:
            return data
        return encode_batch(header, kept, self.new_horizon if stamp else horizon)

    def _retained_records(self, data: bytes, horizon: int | None) -> tuple[list[DecodedRecord], bool]:
        kept = []
        result = self.result
        total = 0
        for rec in iter_records(data):
            total += 1
            if rec.key is None or rec.timestamp > self.lag_limit:
                kept.append(rec)
                continue
            found = self.latest.get(rec.key)
            if found is not None and rec.offset < found:
                result.records_removed += 1
            elif rec.value is None and horizon is not None and horizon <= self.now_ms:
                result.tombstones_removed += 1
                result.records_removed += 1
            else:
                if rec.value is None:
                    result.tombstones_kept += 1
                kept.append(rec)
        return kept, len(kept) == total


def first_uncleanable_offset(plog: PartitionLog) -> int:
    """Where cleaning stops (Kafka's firstUncleanableDirtyOffset): the active segment, and never
    past the last stable offset, so open transactions stay as they were written."""
    return min(plog.segments[-1].base_offset, plog.last_stable_offset)


@dataclass(frozen=True)
class CleanInputs:
    """The log's live state a clean starts from, taken where the log's appends run."""

    limit: int  # the first uncleanable offset
    segments: list[LogSegment]  # the cleanable ones, oldest first (never the active one)
    first_segment: LogSegment  # the log's first, which a clean never deletes
    last_records: dict[int, LastRecord]
    aborted: list[AbortedTxn]


def clean_inputs(plog: PartitionLog) -> CleanInputs:
    """What ``plan_clean`` needs from the live log: what lies below the limit is decided."""
    limit = first_uncleanable_offset(plog)
    all_segments = list(plog.segments)
    segments = [s for s in all_segments[:-1] if s.base_offset < limit]
    aborted = (plog.collect_aborted_transactions(segments[0].base_offset, segments[-1].next_offset)
               if segments else [])
    return CleanInputs(limit, segments, all_segments[0], last_records_of_producers(plog.producer_state),
                       aborted)


def plan_clean(plog: PartitionLog, *, now_ms: int, inputs: CleanInputs | None = None) -> CleanPlan:
    """The heavy part of a clean: read the cleanable segments, build the offset map and write the
    cleaned segments with their indexes into a scratch directory. It never changes the log, so it
    may run on a worker thread while the log takes appends (which only touch the active segment),
    given ``inputs`` taken beforehand (see ``clean_inputs``; taken here when not given).
    """
    result = CleanResult()
    config = plog.config
    if inputs is None:
        inputs = clean_inputs(plog)
    limit, segments, aborted = inputs.limit, inputs.segments, inputs.aborted
    last_records, first_segment = inputs.last_records, inputs.first_segment
    result.first_uncleanable = limit
    if not segments:
        return CleanPlan([], result)
    result.segments_before = len(segments)
    result.bytes_before = sum(s.size for s in segments)
    rules = _Pass(now_ms, now_ms - config.min_compaction_lag_ms, now_ms + config.delete_retention_ms,
                  limit, build_offset_map(segments, aborted, limit), last_records,
                  CleanedTransactions(aborted), result)
    planned: list[_CleanedGroup] = []
    for group in _group_segments(segments, config.segment_bytes):
        out = bytearray()
        batches: list[AppendBatch] = []
        index_from = len(rules.txns.kept_index_entries)
        for seg in group:
            for header, data in _segment_batches(seg):
                kept_bytes = rules.clean_batch(header, data)
                if kept_bytes is not None:
                    h = header if kept_bytes is data else fmt.parse_header(kept_bytes)
                    batches.append(AppendBatch(len(out), len(kept_bytes), h.last_offset,
                                               h.max_timestamp))
                    out += kept_bytes
        if not out and group[0] is not first_segment:
            # Nothing survived: the segments go (a later segment keeps the log's start offset).
            planned.append(_CleanedGroup(group, None))
            continue
        tmp = os.path.join(cleaner_tmp_root(plog), f"{os.path.basename(plog.dir)}-{group[0].base_offset}")
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        seg = LogSegment(tmp, group[0].base_offset, index_interval_bytes=config.index_interval_bytes,
                         max_index_size=config.segment_index_bytes, now_ms=now_ms)
        seg.append(out, batches)
        # The aborted transactions whose ABORT marker stayed in this group (with data of theirs
        # seen in this pass): the others have nothing left for a READ_COMMITTED reader to skip.
        for txn in rules.txns.kept_index_entries[index_from:]:
            seg.txn_index.append(txn)
        seg.flush()
        seg.close()  # final time index entry, trimmed indexes
        result.bytes_after += len(out)
        planned.append(_CleanedGroup(group, tmp))
    return CleanPlan(planned, result)


def apply_clean(plog: PartitionLog, plan: CleanPlan, *, now_ms: int) -> CleanResult:
    """Swap the planned segments into the log (quick: renames). Must run where the log's appends
    run. A group whose segments changed meanwhile (deleted by retention, log closed) is skipped."""
    result = plan.result
    if plog.closed:
        _discard(plan)
        return CleanResult()
    for cg in plan.groups:
        current = plog.segments[:-1]
        try:
            i = next(k for k, s in enumerate(current) if s is cg.segments[0])
        except StopIteration:
            i = -1
        if i < 0 or current[i:i + len(cg.segments)] != cg.segments:
            if cg.tmp_dir:
                shutil.rmtree(cg.tmp_dir, ignore_errors=True)
            continue
        if cg.tmp_dir is None:
            plog.replace_segments(cg.segments, None)
            for seg in cg.segments:
                seg.delete()
            continue
        plog.replace_segments(cg.segments, _swap_in(plog, cg, cg.tmp_dir, now_ms))
    inactive = plog.segments[:-1]
    result.segments_after = len(inactive)
    result.bytes_after = sum(s.size for s in inactive)
    return result


def clean_log(plog: PartitionLog, *, now_ms: int) -> CleanResult:
    """Compact ``plog`` in one go (see the module docstring); returns what changed."""
    return apply_clean(plog, plan_clean(plog, now_ms=now_ms), now_ms=now_ms)


def _discard(plan: CleanPlan) -> None:
    for cg in plan.groups:
        if cg.tmp_dir:
            shutil.rmtree(cg.tmp_dir, ignore_errors=True)


def _swap_in(plog: PartitionLog, cg: _CleanedGroup, tmp_dir: str, now_ms: int) -> LogSegment:
    base = cg.segments[0].base_offset
    target = files.log_file(plog.dir, base)
    swap = target + files.SWAP_SUFFIX
    os.replace(files.log_file(tmp_dir, base), swap)
    fsync_dir(plog.dir)
    # From here a crash is completed by the loader: the swap file replaces the group (and the
    # indexes are rebuilt from it).
    first = cg.segments[0]
    first.deleted = True
    first.offset_index.delete()
    first.time_index.delete()
    for seg in cg.segments[1:]:
        seg.delete()
    os.replace(files.index_file(tmp_dir, base), files.index_file(plog.dir, base))
    os.replace(files.time_index_file(tmp_dir, base), files.time_index_file(plog.dir, base))
    # The group's .txnindex entries, or none: the first segment's old file must not stay.
    if os.path.exists(files.txn_index_file(tmp_dir, base)):
        os.replace(files.txn_index_file(tmp_dir, base), files.txn_index_file(plog.dir, base))
    else:
        first.txn_index.delete()
    os.replace(swap, target)
    fsync_dir(plog.dir)
    shutil.rmtree(tmp_dir, ignore_errors=True)
    return LogSegment(plog.dir, base, index_interval_bytes=plog.config.index_interval_bytes,
                      max_index_size=plog.config.segment_index_bytes, now_ms=now_ms)


class LogCleaner:
    """Decides when to clean which compacted logs; the node calls :meth:`run_once` periodically.

    As Kafka, a log is cleaned when its *dirty ratio* reaches ``min.cleanable.dirty.ratio``: the
    bytes of non-active segments written since the last clean (from the first dirty offset on)
    over all non-active bytes. A log whose last clean kept tombstones is looked at again once
    ``delete.retention.ms`` has passed. The first dirty offset is kept in memory, so the first
    pass after a restart cleans the whole log.
    """

    def __init__(self) -> None:
        self._first_dirty: dict[int, int] = {}
        self._recheck: dict[int, int] = {}

    @staticmethod
    def dirty_ratio(plog: PartitionLog, first_dirty: int) -> float:
        """Kafka's cleanable ratio: the bytes between the first dirty and the first uncleanable
        offset (the active segment, the LSO) over those and the clean bytes before them. A
        hanging transaction thus makes nothing look dirty, rather than the log always."""
        limit = first_uncleanable_offset(plog)
        below = [s for s in plog.segments[:-1] if s.base_offset < limit]
        total = sum(s.size for s in below)
        if total == 0:
            return 0.0
        dirty = sum(s.size for s in below if s.base_offset >= first_dirty)
        return dirty / total

    def due(self, logs: Iterable[PartitionLog], *, now_ms: int) -> list[PartitionLog]:
        """The compacted logs to clean now (dirty enough, or tombstones to look at again)."""
        out = []
        alive = set()
        for plog in logs:
            key = id(plog)
            alive.add(key)
            if plog.closed or not plog.config.compact or len(plog.segments) < 2:
                continue
            first_dirty = self._first_dirty.get(key, plog.local_log_start_offset)
            ratio = self.dirty_ratio(plog, first_dirty)
            recheck = self._recheck.get(key)
            if (ratio > 0 and ratio >= plog.config.min_cleanable_dirty_ratio) or (
                    recheck is not None and now_ms >= recheck):
                out.append(plog)
        for table in (self._first_dirty, self._recheck):
            for key in [k for k in table if k not in alive]:
                del table[key]
        return out

    def cleaned(self, plog: PartitionLog, end: int, result: CleanResult | None, *, now_ms: int) -> None:
        """Record a clean of ``plog`` up to ``end`` (the active segment's base when it started)."""
        key = id(plog)
        if result is not None and result.first_uncleanable is not None:
            end = min(end, result.first_uncleanable)  # an open transaction held the clean back
        self._first_dirty[key] = end
        # Tombstones and markers waiting for their delete horizon: look again once they may go.
        if result is not None and result.next_horizon_ms is not None:
            self._recheck[key] = result.next_horizon_ms
        else:
            self._recheck.pop(key, None)
        if result is not None and (result.records_removed or result.segments_after != result.segments_before):
            log.info("Cleaned %s-%d: %d segments (%d bytes) -> %d segments (%d bytes), %d records removed",
                     plog.topic, plog.partition, result.segments_before, result.bytes_before,
                     result.segments_after, result.bytes_after, result.records_removed)

    def run_once(self, logs: Iterable[PartitionLog], *, now_ms: int) -> list[tuple[str, int, CleanResult]]:
        """Clean every due log on this thread (the node splits plan and swap, see ``plan_clean``)."""
        done = []
        for plog in self.due(logs, now_ms=now_ms):
            end = plog.active.base_offset
            try:
                result = clean_log(plog, now_ms=now_ms)
            except Exception:  # a bad segment must not stop the cleaning of others
                log.exception("Cleaning %s-%d failed", plog.topic, plog.partition)
                self.cleaned(plog, end, None, now_ms=now_ms)
                continue
            self.cleaned(plog, end, result, now_ms=now_ms)
            done.append((plog.topic, plog.partition, result))
        return done
