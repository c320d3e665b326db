"""One log segment: a ``.log`` file of record batches plus its ``.index``, ``.timeindex`` and
(once it holds an ABORT marker) ``.txnindex``.

All its files are named by the segment's base offset (``files.filename_prefix``). The segment
knows nothing about producers or leader epochs; ``recover`` reports each valid batch through a
callback so the partition log can rebuild that state in the same scan.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

from kafkapy._speedups import load
from kafkapy.log import files
from kafkapy.log.index import CorruptIndexError
from kafkapy.log.offset_index import OffsetIndex
from kafkapy.log.segment_recovery import RecoveryResult, check_tail, scan_file
from kafkapy.log.storage_errors import LogStorageError, storage_error
from kafkapy.log.time_index import NO_TIMESTAMP, TimeIndex, TimestampOffset
from kafkapy.log.transaction_index import TransactionIndex
from kafkapy.records import format as fmt

log = logging.getLogger(__name__)

# Per-append indexing: Cython ext/log/_fast.pyx, or its pure twin kafkapy/log/_pure.py.
_index_batches = load("kafkapy.log._fast", "kafkapy.log._pure").index_batches

# Bytes read per pread while walking batch headers; small batches share one read.
_SCAN_CHUNK = 4096
_INT32_MAX = 0x7FFFFFFF


class CorruptSegmentError(Exception):
    """A batch header in the middle of a segment does not parse (found outside recovery)."""


class BatchRef(NamedTuple):
    """Where one batch sits in a segment, with its header."""

    position: int
    header: fmt.BatchHeader


class AppendBatch(NamedTuple):
    """What ``LogSegment.append`` needs about each batch of the buffer it writes."""

    position: int  # relative to the buffer
    size: int
    last_offset: int
    max_timestamp: int


class _Descriptor:
    """One open descriptor, closed when the last reference to this object goes.

    CPython's reference count is the count of users: the segment holds one reference while it
    is open, each :class:`FetchSlice` cut from it another. Nothing ever closes the number
    explicitly, so no close (by any caller, on any thread) can free a number a reader is still
    sending from, and none is skipped: the last reference dropped, by ``release()`` or by the
    garbage collector, closes it.
    """

    __slots__ = ("fd", "path")

    def __init__(self, fd: int, path: str) -> None:
        self.fd = fd
        self.path = path  # as opened; only for log lines (renames don't follow)

    def __del__(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass


class SegmentFile:
    """The descriptor of a ``.log`` file, shared by the segment and every FetchSlice cut from it.

    :meth:`close` is the segment letting go: the descriptor closes then if no slice holds it, or
    when the last slice is released. So deleting a topic, retention, compaction or truncation
    never frees the number under an in-flight sendfile (Linux would hand it to the next file
    opened, and the reply would carry that file's bytes), and an unlinked file stays readable
    through the slices taken before.
    """

    __slots__ = ("_desc", "fd")

    def __init__(self, path: str) -> None:
        self._desc: _Descriptor | None = None
        self.fd = -1
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self._desc = _Descriptor(fd, path)
        self.fd = fd

    def fileno(self) -> int:
        if self._desc is None:
            raise ValueError("segment file is closed")
        return self.fd

    def share(self) -> _Descriptor:
        """The descriptor, for a reader that keeps it open until it lets go of it."""
        desc = self._desc
        if desc is None:
            raise ValueError("segment file is closed")
        return desc

    def close(self) -> None:
        """Let go of the descriptor (closed now, or when the last slice is released)."""
        self.fd = -1
        self._desc = None


class FetchSlice:
    """A byte range of a segment file, to be sent with ``os.sendfile`` or read into memory.

    Holds the segment's descriptor open (even after the segment is closed or its file deleted)
    until :meth:`release` or until the slice is garbage; :meth:`fileno` is valid until then. A
    ``kafkapy.protocol.FileRegion`` made from it releases it once the reply is written.
    """

    __slots__ = ("_desc", "position", "size")

    def __init__(self, file: SegmentFile, position: int, size: int) -> None:
        self._desc: _Descriptor | None = file.share()
        self.position = position
        self.size = size

    def fileno(self) -> int:
        desc = self._desc
        if desc is None:
            raise ValueError("fetch slice already released")
        return desc.fd

    def release(self) -> None:
        """Let go of the descriptor (idempotent); the slice can't be read afterwards."""
        self._desc = None

    def read_bytes(self) -> bytes:
        return _pread_range(self.fileno(), self.position, self.size)

    def __repr__(self) -> str:
        desc = self._desc
        return f"FetchSlice({desc.path if desc is not None else 'released'})"


def _pread_range(fd: int, position: int, size: int) -> bytes:
    out = bytearray()
    pos, left = position, size
    while left > 0:
        chunk = os.pread(fd, left, pos)
        if not chunk:
            break  # the file shrank under us (truncation); return what exists
        out += chunk
        pos += len(chunk)
        left -= len(chunk)
    return bytes(out)


class LogSegment:
    """A segment of a partition log (Kafka's LogSegment)."""

    def __init__(self, dir: str, base_offset: int, *, index_interval_bytes: int,
                 max_index_size: int, now_ms: int) -> None:
        self.dir = dir
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.max_index_size = max_index_size
        self.log_path = files.log_file(dir, base_offset)
        # No O_APPEND (Linux pwrite ignores the position under it); writes are pwrites at the
        # end, and FetchSlices share the descriptor object.
        self.file = SegmentFile(self.log_path)
        self.fd = self.file.fd
        self.size = os.fstat(self.fd).st_size
        self.offset_index = OffsetIndex(files.index_file(dir, base_offset), base_offset,
                                        max_index_size)
        self.time_index = TimeIndex(files.time_index_file(dir, base_offset), base_offset,
                                    max_index_size)
        self.txn_index = TransactionIndex(files.txn_index_file(dir, base_offset), base_offset)
        # Wall-clock creation time: the fallback for time-based rolling of a segment whose first
        # batch has no timestamp. Like Kafka, it restarts when the broker does.
        self.created_ms = now_ms
        self._rolling_ts: int | None = None  # first batch's max timestamp, loaded lazily
        self.bytes_since_last_index_entry = 0
        # Largest timestamp and the offset of its batch; read from the time index on first use
        # (a closed segment's last time index entry holds them).
        self._max_ts: int | None = None
        self._max_ts_offset = base_offset
        self._next_offset: int | None = None
        self.deleted = False
        self.last_recovery: RecoveryResult | None = None

    # ------------------------------------------------------------------ basic properties
    def _load_max_timestamp(self) -> int:
        last = self.time_index.last_entry()
        self._max_ts, self._max_ts_offset = last.timestamp, last.offset
        return last.timestamp

    @property
    def max_timestamp_so_far(self) -> int:
        ts = self._max_ts
        return self._load_max_timestamp() if ts is None else ts

    @max_timestamp_so_far.setter
    def max_timestamp_so_far(self, value: int) -> None:
        self._max_ts = value

    @property
    def offset_of_max_timestamp_so_far(self) -> int:
        if self._max_ts is None:
            self._load_max_timestamp()
        return self._max_ts_offset

    @offset_of_max_timestamp_so_far.setter
    def offset_of_max_timestamp_so_far(self, value: int) -> None:
        self._max_ts_offset = value

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path!r}, size={self.size})"

    def sanity_check(self, *, full: bool = True) -> None:
        """Raise CorruptIndexError if an index is inconsistent (the caller rebuilds).

        ``full`` checks every entry (the active segment's). Otherwise only what needs no
        mapping: whole entries in each file. Like Kafka since KAFKA-7283, a cleanly closed,
        inactive segment's indexes are trusted and loaded only when first used (the small
        ``.txnindex``, absent in most segments, is always checked, as Kafka does)."""
        self.txn_index.sanity_check()
        if not full:
            for idx in (self.offset_index, self.time_index):
                if idx.file_length % idx.ENTRY.size:
                    raise CorruptIndexError(f"{idx.path} length is not a multiple of "
                                            f"{idx.ENTRY.size}")
            return
        self.offset_index.sanity_check(full=full)
        self.time_index.sanity_check(full=full)
        if self.offset_index.entries:
            last = self.offset_index.entry(self.offset_index.entries - 1)
            if last.position >= self.size:
                raise CorruptIndexError(f"{self.offset_index.path} points past the log end")

    def resize_indexes(self, size: int) -> None:
        """Re-expand (or shrink) both indexes to ``size``.

        On a full disk an index keeps the size it has: it then reads as full, so the next
        append rolls, and that roll fails with KAFKA_STORAGE_ERROR until space is freed. A log
        can thus be opened and read on a full disk.
        """
        for idx in (self.offset_index, self.time_index):
            try:
                idx.resize(size)
            except LogStorageError as e:
                if not e.space:
                    raise
                log.warning("%s stays at %d bytes: %s", idx.path, idx.file_length, e.message)

    @property
    def next_offset(self) -> int:
        """The offset after the last record in this segment (base offset when empty)."""
        if self._next_offset is None:
            nxt = self.base_offset
            start = self.offset_index.lookup(_INT32_MAX + self.base_offset).position
            for ref in self.iter_batches(start):
                nxt = ref.header.next_offset
            self._next_offset = nxt
        return self._next_offset

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= _INT32_MAX

    @property
    def rolling_based_timestamp(self) -> int:
        """Max timestamp of the first batch (what time-based rolling measures from), or -1."""
        if self._rolling_ts is None:
            if self.size >= fmt.HEADER_SIZE:
                self._rolling_ts = fmt.parse_header(os.pread(self.fd, fmt.HEADER_SIZE, 0)).max_timestamp
            else:
                return NO_TIMESTAMP
        return self._rolling_ts

    @property
    def largest_timestamp(self) -> int:
        return self.max_timestamp_so_far

    # ------------------------------------------------------------------ scanning
    def iter_batches(self, start: int = 0, end: int | None = None) -> Iterator[BatchRef]:
        """Headers of the whole batches in [start, end), read with a few large preads."""
        end = self.size if end is None else end
        pos = start
        buf = b""
        buf_start = start
        # Held for the whole walk: the cleaner walks segments on a worker thread, and a close
        # meanwhile must not free the number under it.
        desc = self.file.share()
        fd = desc.fd
        while end - pos >= fmt.HEADER_SIZE:
            rel = pos - buf_start
            if rel < 0 or rel + fmt.HEADER_SIZE > len(buf):
                buf = os.pread(fd, _SCAN_CHUNK, pos)
                buf_start, rel = pos, 0
                if len(buf) < fmt.HEADER_SIZE:
                    return
            h = fmt.parse_header(buf, rel)
            size = h.batch_length + fmt.LOG_OVERHEAD
            if size < fmt.HEADER_SIZE:
                raise CorruptSegmentError(
                    f"{self.log_path}: batch at position {pos} has size {size}")
            if pos + size > end:
                return
            yield BatchRef(pos, h)
            pos += size

    def translate_offset(self, offset: int, starting_position: int = 0) -> BatchRef | None:
        """The first batch whose last offset is ≥ ``offset`` (None if past this segment)."""
        mapping = self.offset_index.lookup(offset)
        for ref in self.iter_batches(max(mapping.position, starting_position)):
            if ref.header.last_offset >= offset:
                return ref
        return None

    # ------------------------------------------------------------------ append
    def append(self, buf: bytes | bytearray | memoryview, batches: Sequence[AppendBatch]) -> None:
        """Write ``buf`` (whole validated batches) at the end with one write, then index it.

        Offset index entries go in for every batch that starts after ``index.interval.bytes``
        have accumulated since the last entry; the time index gains an entry at the same time
        when the segment's max timestamp has grown, as Kafka's LogSegment.append does.
        """
        if not batches:
            return
        last_offset = batches[-1].last_offset
        if not self.can_convert_to_relative_offset(last_offset):
            raise ValueError(f"offset {last_offset} does not fit segment {self.base_offset}")
        physical = self.size
        # Held across the write: a close meanwhile (from any thread) can't free the number under
        # it, so the bytes never land in whatever file gets the number next.
        desc = self.file.share()
        oi, ti = self.offset_index, self.time_index
        max_ts = self.max_timestamp_so_far  # (loads it from the time index on first use)
        # Blocks for every index slot this append may fill, before a byte is written: a full
        # disk fails here, with nothing to undo.
        n = len(batches)
        if oi.entries + n > oi.backed_entries:
            oi.reserve(n)
        if ti.entries + n > ti.backed_entries:
            ti.reserve(n)
        try:
            _write_all(desc.fd, buf, physical)
            # One pass in Cython (or its pure twin): largest timestamp, and the index entries
            # due every index.interval.bytes, written straight into the mmap'ed index files
            # (allocated when created, so these writes cannot fault on a full disk).
            (bytes_since, new_max_ts, new_max_ts_offset, oi_entries,
             ti_entries) = _index_batches(
                batches, physical, self.index_interval_bytes, self.bytes_since_last_index_entry,
                max_ts, self._max_ts_offset, self.base_offset,
                oi.writable_buffer(), oi.entries, oi.max_entries,
                ti.writable_buffer(), ti.entries, ti.max_entries)
        except BaseException as exc:
            self._undo_append(physical, len(batches))
            if isinstance(exc, OSError):
                raise storage_error(exc, "append to log file", self.log_path) from exc
            raise
        (self.bytes_since_last_index_entry, self._max_ts,
         self._max_ts_offset) = bytes_since, new_max_ts, new_max_ts_offset
        oi.set_entries(oi_entries)
        ti.set_entries(ti_entries)
        if physical == 0:
            self._rolling_ts = batches[0].max_timestamp
        self.size = physical + len(buf)
        self._next_offset = last_offset + 1

    def _undo_append(self, physical: int, batch_count: int) -> None:
        """Put the segment back as it was before an append that failed part-way: the log file
        cut to its old size, index slots the append may have filled zeroed (they were never
        counted as entries, but a crash must not find them either).

        If the cut itself fails, the file holds bytes nobody can vouch for: the error says the
        dir must go offline.
        """
        try:
            os.ftruncate(self.fd, physical)
            for idx in (self.offset_index, self.time_index):
                idx.zero_slots(idx.entries, idx.entries + batch_count)
        except OSError as e:
            raise LogStorageError(
                f"Disk error when trying to roll back a failed append to {self.log_path}: "
                f"{os.strerror(e.errno) if e.errno else e}",
                path=self.log_path, cause=e, offline=True) from e

    def _add_index_entries(self, last_offset: int, position: int) -> None:
        # A full index only makes lookups scan further; the roll check keeps this rare (one
        # request with many batches, or a smaller index.interval.bytes at recovery), and the
        # bytes are already written, so never fail here.
        if not self.offset_index.is_full():
            self.offset_index.append(last_offset, position)
        if not self.time_index.is_full():
            self.time_index.maybe_append(self.max_timestamp_so_far,
                                         self.offset_of_max_timestamp_so_far)
        self.bytes_since_last_index_entry = 0

    # ------------------------------------------------------------------ read
    def read(self, start_offset: int, max_size: int, max_position: int | None = None, *,
             min_one_message: bool = True) -> tuple[int, int, int] | None:
        """(position, size, first batch base offset) of whole batches from ``start_offset``.

        Starts at the batch holding ``start_offset``; takes whole batches while they fit in
        ``max_size`` (the first one regardless when ``min_one_message``) and end at or before
        ``max_position``. None when the offset is beyond this segment.
        """
        ref = self.translate_offset(start_offset)
        if ref is None:
            return None
        pos = ref.position
        limit = self.size if max_position is None else min(max_position, self.size)
        first = ref.header.batch_length + fmt.LOG_OVERHEAD
        if pos >= limit or pos + first > limit:
            return pos, 0, ref.header.base_offset
        if first > max_size:
            return (pos, first if min_one_message else 0, ref.header.base_offset)
        if limit - pos <= max_size:
            return pos, limit - pos, ref.header.base_offset
        end_target = pos + max_size
        # Jump close to the cut with the index (positions grow with offsets), then walk headers.
        hint = self.offset_index.lookup_by_position(end_target).position
        boundary = max(pos, hint) if hint <= end_target else pos
        for b in self.iter_batches(boundary, limit):
            nxt = b.position + b.header.batch_length + fmt.LOG_OVERHEAD
            if nxt > end_target:
                break
            boundary = nxt
        return pos, boundary - pos, ref.header.base_offset

    def slice(self, position: int, size: int) -> FetchSlice:
        return FetchSlice(self.file, position, size)

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int,
                                 record_timestamps: Callable[[BatchRef], Iterator[tuple[int, int]]]
                                 ) -> tuple[int, int] | None:
        """(timestamp, offset) of the first record with timestamp ≥ target at ≥ starting_offset.

        The time index narrows where to start; then batches are walked and the first whose max
        timestamp reaches the target has its records examined (``record_timestamps`` yields
        (offset, timestamp) of a batch's records).
        """
        ts_entry = self.time_index.lookup(timestamp)
        start = self.offset_index.lookup(max(ts_entry.offset, starting_offset)).position
        for ref in self.iter_batches(start):
            h = ref.header
            if h.max_timestamp >= timestamp and h.last_offset >= starting_offset:
                for off, ts in record_timestamps(ref):
                    if ts >= timestamp and off >= starting_offset:
                        return ts, off
        return None

    def read_batch(self, ref: BatchRef) -> bytes:
        desc = self.file.share()  # (kept open across the reads, see iter_batches)
        return _pread_range(desc.fd, ref.position, ref.header.size)

    # ------------------------------------------------------------------ roll and recovery
    def should_roll(self, *, messages_size: int, max_timestamp_in_messages: int,
                    max_offset_in_messages: int, now_ms: int, segment_bytes: int,
                    roll_ms: int) -> bool:
        """Kafka's roll test: size, age, index capacity, or relative offset overflow."""
        if not self.can_convert_to_relative_offset(max_offset_in_messages):
            return True
        if self.size == 0:
            return False  # an empty segment takes any batch (one bigger than it included)
        if self.size > segment_bytes - messages_size:
            return True
        if self.time_waited_for_roll(now_ms, max_timestamp_in_messages) > roll_ms:
            return True
        return self.offset_index.is_full() or self.time_index.is_full()

    def time_waited_for_roll(self, now_ms: int, max_timestamp_in_messages: int) -> int:
        first = self.rolling_based_timestamp
        if first >= 0:
            return max_timestamp_in_messages - first
        return now_ms - self.created_ms

    def on_become_inactive(self) -> None:
        """The segment stopped being active: record the final max timestamp, trim indexes."""
        # _max_ts None: never loaded, so nothing was appended since the index was written.
        if self._max_ts is not None and self._max_ts >= 0:
            self.time_index.maybe_append(self.max_timestamp_so_far,
                                         self.offset_of_max_timestamp_so_far,
                                         skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()

    def validate_tail(self) -> str | None:
        """Check what a clean close leaves at the end of the file; None when it holds.

        The batches from the offset index's last entry to the end of the file must each be
        whole, magic 2, CRC-valid and in offset order, and end exactly at the end of the file
        (the first of them being the batch the entry names). Only that tail is read: at most
        index.interval.bytes plus one batch. On success next_offset is known without another
        walk. Otherwise: what is wrong, for the caller's log line (it recovers the segment).
        """
        file_size = os.fstat(self.fd).st_size
        if file_size != self.size:
            return f"file size {file_size} differs from the {self.size} bytes opened"
        start, entry_offset = 0, None
        if self.offset_index.entries:
            last = self.offset_index.entry(self.offset_index.entries - 1)
            start, entry_offset = last.position, last.offset
            if start >= file_size:
                return f"the offset index points to byte {start}, past the end ({file_size})"
        tail = os.pread(self.fd, file_size - start, start)
        if len(tail) != file_size - start:
            return f"short read of the last {file_size - start} bytes"
        problem, next_offset = check_tail(tail, start=start, base_offset=self.base_offset,
                                          entry_offset=entry_offset)
        if problem is not None:
            return problem
        if tail or not self.offset_index.entries:
            self._next_offset = next_offset
        return None

    def recover(self, on_batch: Callable[[fmt.BatchHeader, int], None] | None = None, *,
                active: bool = False) -> int:
        """Rebuild both indexes from the log; cut the file at the first invalid batch (see
        segment_recovery.scan_valid). Returns the bytes truncated; ``last_recovery`` tells why,
        where, and which offsets were kept and (roughly) dropped, for the caller's log line.
        """
        file_size = os.fstat(self.fd).st_size
        self.txn_index.reset()  # ``on_batch`` (the loader) appends its entries back
        self.offset_index.truncate()
        self.offset_index.resize(self.max_index_size)
        self.time_index.truncate()
        self.time_index.resize(self.max_index_size)
        self.max_timestamp_so_far = NO_TIMESTAMP
        self.offset_of_max_timestamp_so_far = self.base_offset
        self.bytes_since_last_index_entry = 0
        self._rolling_ts = None

        def on_valid(h: fmt.BatchHeader, position: int, size: int) -> None:
            if h.max_timestamp > self.max_timestamp_so_far:
                self.max_timestamp_so_far = h.max_timestamp
                self.offset_of_max_timestamp_so_far = h.last_offset
            if self.bytes_since_last_index_entry > self.index_interval_bytes:
                self._add_index_entries(h.last_offset, position)
            self.bytes_since_last_index_entry += size
            if on_batch is not None:
                on_batch(h, position)

        result = self.last_recovery = scan_file(self.fd, file_size, self.base_offset, on_valid)
        valid, truncated, next_offset = result.valid_bytes, result.truncated_bytes, result.next_offset
        if truncated:
            os.ftruncate(self.fd, valid)
        self.size = valid
        self._next_offset = next_offset
        # As a normally closed segment: the largest timestamp gets a final time index entry and
        # both indexes are trimmed. Not the ``active`` one: the partition log would only grow
        # the indexes back (four ftruncates, milliseconds each on a busy ext4), and the final
        # entry would land in a hole of the preallocated file (a block allocation, about as
        # slow); the active segment keeps its largest timestamp in memory and gets that entry
        # when it rolls or closes.
        if not active:
            self.on_become_inactive()
        return truncated

    def truncate_to(self, offset: int) -> int:
        """Remove every batch holding an offset ≥ ``offset`` (whole batches); bytes removed."""
        ref = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self.resize_indexes(self.max_index_size)
        if ref is None:
            return 0
        removed = self.size - ref.position
        desc = self.file.share()  # (held across the truncate, as in append)
        os.ftruncate(desc.fd, ref.position)
        self.size = ref.position
        self._next_offset = None
        last = self.time_index.last_entry()
        self.max_timestamp_so_far = last.timestamp
        self.offset_of_max_timestamp_so_far = last.offset
        # Recompute the precise max from batches after the last time index entry.
        start = self.offset_index.lookup(last.offset).position if self.time_index.entries else 0
        for b in self.iter_batches(start):
            if b.header.max_timestamp > self.max_timestamp_so_far:
                self.max_timestamp_so_far = b.header.max_timestamp
                self.offset_of_max_timestamp_so_far = b.header.last_offset
        self.bytes_since_last_index_entry = 0
        if self.size == 0:
            self._rolling_ts = None
        return removed

    def max_timestamp_and_offset(self) -> TimestampOffset:
        return TimestampOffset(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far)

    # ------------------------------------------------------------------ lifecycle
    def flush(self) -> None:
        os.fsync(self.fd)
        for idx in (self.offset_index, self.time_index, self.txn_index):
            idx.flush()

    def close(self) -> None:
        """Final time index entry, trim indexes, close files."""
        if self.deleted:
            return
        self.on_become_inactive()
        self.offset_index.close()
        self.time_index.close()
        self._release_file()

    def close_handlers(self) -> None:
        self.offset_index.close_no_trim()
        self.time_index.close_no_trim()
        self._release_file()

    def _release_file(self) -> None:
        # The descriptor closes once no FetchSlice holds it (see SegmentFile); this segment's
        # own number goes now, so a stray write after close fails (EBADF) instead of landing in
        # whatever file gets the number next.
        self.file.close()
        self.fd = -1

    def rename_for_deletion(self) -> list[str]:
        """First step of Kafka's asynchronous segment deletion: rename every file of the segment
        to ``<name>.deleted`` and return the new paths, for the owner to unlink after
        file.delete.delay.ms.

        The ``.log`` goes first: a crash part-way leaves index files without a log, which the
        next load removes, never a log without its place in the offset order. The descriptor
        stays open (see SegmentFile); the index maps are released, as nothing looks a retired
        segment up again.
        """
        self.deleted = True
        self.offset_index.close_no_trim()
        self.time_index.close_no_trim()
        renamed: list[str] = []
        txn = self.txn_index.path
        for path in (self.log_path, self.offset_index.path, self.time_index.path, txn):
            target = files.deleted_name(path)
            try:
                os.rename(path, target)
            except FileNotFoundError:
                continue
            renamed.append(target)
        self.log_path = files.deleted_name(self.log_path)
        for idx in (self.offset_index, self.time_index, self.txn_index):
            idx.path = files.deleted_name(idx.path)
        return renamed

    def delete(self) -> None:
        """Remove the segment's files. The descriptor stays open while this object or any
        FetchSlice cut from it lives (a cleaner planning on a worker thread may still walk it):
        in-flight sendfiles finish from the unlinked inode, and the number is never reused
        under them."""
        self.deleted = True
        for idx in (self.offset_index, self.time_index, self.txn_index):
            idx.delete()
        try:
            os.remove(self.log_path)
        except FileNotFoundError:
            pass


def _write_all(fd: int, buf: bytes | bytearray | memoryview, position: int) -> None:
    view = memoryview(buf).cast("B") if not isinstance(buf, memoryview) else buf.cast("B")
    while view:
        n = os.pwrite(fd, view, position)
        position += n
        view = view[n:]
