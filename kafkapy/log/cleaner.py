"""Log compaction for ``cleanup.policy=compact`` (Kafka's log cleaner, single-threaded and simple).

What a clean does to one partition log:

1. **Offset map.** Every record of the *cleanable* segments (all but the active one, which is never
   cleaned, as in Kafka) is scanned; the map keeps the last offset of each key.
2. **Rewrite.** Adjacent cleanable segments are grouped while their total size fits in
   ``segment.bytes`` (so small segments merge and the segment count stays bounded). Each group is
   rewritten into one segment holding only the records that are the latest for their key, with
   their original offsets and timestamps; each surviving part of a batch stays one batch with the
   source batch's codec, epoch and timestamp type. A group with nothing left is deleted (unless it
   starts the log, whose base offset is the log start).
3. **Tombstones** (null values) are kept while the source segment's newest timestamp is younger
   than ``delete.retention.ms``, so consumers that read the topic see the delete; older ones go.
   Records younger than ``min.compaction.lag.ms`` are not compacted away.
4. **Swap** with Kafka's crash-safe file protocol: the new segment is written to
   ``<base>.log.cleaned`` and fsynced, renamed ``<base>.log.swap``, the old segments are deleted,
   and the swap file is renamed ``<base>.log``. After a crash the log loader
   (``PartitionLog._clean_temp_files``) drops a ``.cleaned`` file and completes a ``.swap`` (the
   segments inside its range are deleted), so no state in between loses or duplicates a record.

Batches of idempotent or transactional producers and control batches are kept whole (their
producer state and markers must survive); records without a key are kept. Offsets never change:
readers of a compacted log see gaps, exactly as with Kafka.

The cleaner runs on the caller's thread and swaps segments inside a live ``PartitionLog``; readers
already holding a ``FetchSlice`` keep reading the old (unlinked) file.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass

from kafkapy.log import files
from kafkapy.log.segment import LogSegment
from kafkapy.records import format as fmt
from kafkapy.records.builder import Record, encode_record
from kafkapy.records.compression import compress
from kafkapy.records.reader import DecodedRecord, iter_records

log = logging.getLogger(__name__)

_CRC = struct.Struct(">I")
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

    @property
    def cleaned(self) -> bool:
        return self.segments_before > 0


def _is_whole(header: fmt.BatchHeader) -> bool:
    """Batches kept as they are: control, transactional and idempotent ones."""
    return bool(header.attributes & (fmt.CONTROL_MASK | fmt.TRANSACTIONAL_MASK)) or header.producer_id >= 0


def _segment_batches(seg: LogSegment) -> Iterable[tuple[fmt.BatchHeader, bytes]]:
    for ref in seg.iter_batches():
        yield ref.header, seg.read_batch(ref)


def build_offset_map(segments: list[LogSegment]) -> dict[bytes, int]:
    """The last offset of every key in ``segments``."""
    latest: dict[bytes, int] = {}
    for seg in segments:
        for header, data in _segment_batches(seg):
            if header.attributes & fmt.CONTROL_MASK:
                continue
            for rec in iter_records(data):
                if rec.key is not None:
                    latest[rec.key] = rec.offset
    return latest


def encode_batch(header: fmt.BatchHeader, records: list[DecodedRecord]) -> bytes:
    """A v2 batch holding ``records`` (original offsets and timestamps), shaped like ``header``."""
    base = records[0].offset
    base_ts = records[0].timestamp
    log_append = bool(header.attributes & fmt.TIMESTAMP_TYPE_MASK)
    body = b"".join(
        encode_record(r.offset - base, 0 if log_append else r.timestamp - base_ts,
                      Record(r.key, r.value, r.headers, r.timestamp))
        for r in records)
    codec = header.attributes & fmt.COMPRESSION_MASK
    if codec != fmt.NO_COMPRESSION:
        body = compress(codec, body)
    max_ts = header.max_timestamp if log_append else max(r.timestamp for r in records)
    buf = bytearray(fmt.HEADER_SIZE + len(body))
    fmt.HEADER_STRUCT.pack_into(
        buf, 0, base, len(buf) - fmt.LOG_OVERHEAD, header.partition_leader_epoch, fmt.CURRENT_MAGIC, 0,
        header.attributes, records[-1].offset - base, header.max_timestamp if log_append else base_ts,
        max_ts, fmt.NO_PRODUCER_ID, fmt.NO_PRODUCER_EPOCH, fmt.NO_SEQUENCE, len(records))
    buf[fmt.HEADER_SIZE:] = body
    _CRC.pack_into(buf, fmt.CRC, fmt.compute_crc(buf, 0, len(buf)))
    return bytes(buf)


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


def clean_log(plog, *, now_ms: int) -> CleanResult:  # noqa: ANN001 - a PartitionLog
    """Compact ``plog`` (see the module docstring); returns what changed."""
    result = CleanResult()
    config = plog.config
    segments: list[LogSegment] = list(plog._segments[:-1])  # never the active segment
    if not segments:
        return result
    latest = build_offset_map(segments)
    result.segments_before = len(segments)
    result.bytes_before = sum(s.size for s in segments)
    horizon = now_ms - config.delete_retention_ms
    lag_limit = now_ms - config.min_compaction_lag_ms
    new_segments: list[LogSegment] = []
    for group in _group_segments(segments, config.segment_bytes):
        out = bytearray()
        for seg in group:
            drop_tombstones = seg.largest_timestamp < horizon
            for header, data in _segment_batches(seg):
                if _is_whole(header):
                    out += data
                    continue
                kept = []
                for rec in iter_records(data):
                    if rec.key is None or rec.timestamp > lag_limit:
                        kept.append(rec)
                    elif latest.get(rec.key) != rec.offset:
                        result.records_removed += 1
                    elif rec.value is None and drop_tombstones:
                        result.tombstones_removed += 1
                        result.records_removed += 1
                    else:
                        if rec.value is None:
                            result.tombstones_kept += 1
                        kept.append(rec)
                if kept:
                    out += encode_batch(header, kept)
        if not out and group[0] is not plog._segments[0]:
            # Nothing survived: the segments go (a later segment keeps the log's start offset).
            for seg in group:
                seg.delete()
            continue
        new_segments.append(_swap_in(plog, group, bytes(out), now_ms))
    # The log's segment list: the rewritten groups, then the active segment.
    plog._segments[:-1] = new_segments
    plog._bases = [s.base_offset for s in plog._segments]
    result.segments_after = len(new_segments)
    result.bytes_after = sum(s.size for s in new_segments)
    return result


def _swap_in(plog, group: list[LogSegment], data: bytes, now_ms: int) -> LogSegment:  # noqa: ANN001
    base = group[0].base_offset
    target = files.log_file(plog.dir, base)
    cleaned = target + files.CLEANED_SUFFIX
    swap = target + files.SWAP_SUFFIX
    with open(cleaned, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(cleaned, swap)
    _fsync_dir(plog.dir)
    # From here a crash is completed by the loader: the swap file replaces the group.
    first = group[0]
    first.deleted = True
    first.offset_index.delete()
    first.time_index.delete()
    for seg in group[1:]:
        seg.delete()
    os.replace(swap, target)
    _fsync_dir(plog.dir)
    seg = LogSegment(plog.dir, base, index_interval_bytes=plog.config.index_interval_bytes,
                     max_index_size=plog.config.segment_index_bytes, now_ms=now_ms)
    seg.recover()  # builds the offset and time indexes of the new file
    seg.on_become_inactive()
    seg.flush()
    return seg


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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
    def dirty_ratio(plog, first_dirty: int) -> float:  # noqa: ANN001
        inactive = plog._segments[:-1]
        total = sum(s.size for s in inactive)
        if total == 0:
            return 0.0
        dirty = sum(s.size for s in inactive if s.base_offset >= first_dirty)
        return dirty / total

    def run_once(self, logs: Iterable, *, now_ms: int) -> list[tuple[str, int, CleanResult]]:  # noqa: ANN001
        done = []
        alive = set()
        for plog in logs:
            key = id(plog)
            alive.add(key)
            if plog.closed or not plog.config.compact or len(plog._segments) < 2:
                continue
            first_dirty = self._first_dirty.get(key, plog.log_start_offset)
            ratio = self.dirty_ratio(plog, first_dirty)
            recheck = self._recheck.get(key)
            due = (ratio > 0 and ratio >= plog.config.min_cleanable_dirty_ratio) or (
                recheck is not None and now_ms >= recheck)
            if not due:
                continue
            end = plog._segments[-1].base_offset
            try:
                result = clean_log(plog, now_ms=now_ms)
            except Exception:  # a bad segment must not stop the cleaning of others
                log.exception("Cleaning %s-%d failed", plog.topic, plog.partition)
                self._first_dirty[key] = end
                continue
            self._first_dirty[key] = end
            # Tombstones still inside delete.retention.ms: look again once they may go.
            if result.tombstones_kept:
                self._recheck[key] = now_ms + plog.config.delete_retention_ms
            else:
                self._recheck.pop(key, None)
            if result.records_removed or result.segments_after != result.segments_before:
                log.info("Cleaned %s-%d: %d segments (%d bytes) -> %d segments (%d bytes), %d records removed",
                         plog.topic, plog.partition, result.segments_before, result.bytes_before,
                         result.segments_after, result.bytes_after, result.records_removed)
            done.append((plog.topic, plog.partition, result))
        for table in (self._first_dirty, self._recheck):
            for key in [k for k in table if k not in alive]:
                del table[key]
        return done
