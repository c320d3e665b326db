"""Shared machinery of Kafka's sparse, memory-mapped segment indexes.

An index file is a flat array of fixed-size big-endian entries, sorted by offset. While a segment
is active its index file is preallocated to ``segment.index.bytes`` (rounded down to a whole number
of entries) and mapped; when the segment stops being active (roll, close) the file is trimmed to
its entries, which is what makes a cleanly closed index's length equal entries × entry size.
"""

from __future__ import annotations

import mmap
import os
import struct

from kafkapy.log.storage_errors import storage_error

# Index blocks allocated at a time (8192 offset entries: about 32 MiB of log at the default
# index.interval.bytes).
_ALLOCATION_CHUNK = 64 * 1024


class CorruptIndexError(Exception):
    """An index file fails its sanity check; the segment must rebuild it from the log."""


class IndexOffsetError(Exception):
    """An append would break the index's ordering (a bug in the caller)."""


class MmapIndex:
    """Base class: file handling, mapping, resize/trim, entry count. Subclasses define entries."""

    ENTRY = struct.Struct(">")  # overridden

    def __init__(self, path: str, base_offset: int, max_index_size: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._entry_size = self.ENTRY.size
        #: Slots from the start known to be backed by disk blocks (written entries are; the
        #: sparse rest is allocated by reserve() before it is written through the mapping).
        self.backed_entries = 0
        self._mm: mmap.mmap | None = None
        self._closed = False
        try:
            length = os.stat(path).st_size  # one stat: thousands of indexes open at start-up
            exists = True
        except FileNotFoundError:
            exists = False
        if not exists:
            length = self._round(max_index_size)
            try:
                self._set_file_length(length)
            except BaseException:
                _remove_quietly(path)  # a half-made index of a segment that will not exist
                raise
            self._entries = 0
        else:
            # An existing file holds floor(length / entry) entries; a file left preallocated by a
            # crash ends in zero entries, which _count_valid() discards.
            self._entries = length // self._entry_size
        self._length = length
        self._max_entries = self._length // self._entry_size
        if exists:
            self._entries = self._count_valid(self._entries)
        self.backed_entries = self._entries

    # ----------------------------------------------------------------- file and mapping
    # No descriptor is kept: the mapping holds its own, and it is made on first use, so the
    # indexes of segments nobody reads cost neither a descriptor nor address space.
    def _round(self, size: int) -> int:
        return (size // self._entry_size) * self._entry_size

    def _set_file_length(self, length: int) -> None:
        """Set the file's length (sparse, as Kafka's: blocks come with :meth:`reserve`)."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise storage_error(e, "open index file", self.path) from e
        try:
            os.ftruncate(fd, length)
        except OSError as e:
            raise storage_error(e, "resize index file", self.path) from e
        finally:
            os.close(fd)
        self.backed_entries = min(self.backed_entries, length // self._entry_size)

    def reserve(self, n: int) -> None:
        """Back the next ``n`` slots with disk blocks before anything writes them through the
        mapping (raises LogStorageError, e.g. for ENOSPC).

        The file is sparse. Writing a hole through a shared mapping when the file system has no
        block left for it kills the process with SIGBUS; allocating first turns a full disk into
        an exception here, before the append writes anything. Blocks are allocated a chunk at a
        time, so this is a comparison on almost every append, and an index costs disk only for
        the entries it holds, not for its whole preallocated length.
        """
        if self._entries + n <= self.backed_entries:
            return
        size = self._entry_size
        start = self.backed_entries * size
        end = min(self._length, max((self._entries + n) * size, start + _ALLOCATION_CHUNK))
        if end <= start:
            return  # a full index: nothing more will be written through the mapping
        try:
            fd = os.open(self.path, os.O_RDWR)
            try:
                os.posix_fallocate(fd, start, end - start)
            finally:
                os.close(fd)
        except OSError as e:
            raise storage_error(e, "allocate index file", self.path) from e
        self.backed_entries = end // size

    def _mapped(self) -> mmap.mmap:
        mm = self._mm
        if mm is None:
            if self._closed:
                raise ValueError(f"index {self.path} is closed")
            fd = os.open(self.path, os.O_RDWR)
            try:
                mm = self._mm = mmap.mmap(fd, self._length)
            finally:
                os.close(fd)
        return mm

    def release_mapping(self) -> None:
        """Drop the mapping until the next use maps again: Python's mmap keeps a duplicate of
        the file's descriptor, so thousands of idle mapped indexes hit the open-files limit."""
        self._unmap()

    def _unmap(self) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None

    def resize(self, new_size: int) -> bool:
        """Set the file length to ``new_size`` rounded to whole entries (≥ the entries held)."""
        rounded = max(self._round(new_size), self._entries * self._entry_size)
        if rounded == self._length:
            return False
        self._unmap()
        self._set_file_length(rounded)
        self._length = rounded
        self._max_entries = rounded // self._entry_size
        return True

    def trim_to_valid_size(self) -> None:
        """Shrink the file to exactly its entries (segment becoming inactive / closing)."""
        self.resize(self._entries * self._entry_size)

    def flush(self) -> None:
        if self._mm is not None:
            self._mm.flush()

    def close(self) -> None:
        if self._closed:
            return
        self.trim_to_valid_size()
        self._unmap()
        self._closed = True

    def close_no_trim(self) -> None:
        self._unmap()
        self._closed = True

    def delete(self) -> None:
        self.close_no_trim()
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass

    def rename_to(self, path: str) -> None:
        os.rename(self.path, path)
        self.path = path

    # ----------------------------------------------------------------- entries
    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        return self._max_entries

    @property
    def size_in_bytes(self) -> int:
        return self._entries * self._entry_size

    @property
    def file_length(self) -> int:
        return self._length

    def is_full(self) -> bool:
        return self._entries >= self._max_entries

    def writable_buffer(self) -> mmap.mmap | bytearray:
        """The mapped file (``max_entries`` slots), for writers that fill slots themselves and
        then call :meth:`set_entries` (the log-append indexing in ``log._fast``/``_pure``); an
        empty bytearray for a file of no slots, which has nothing to map."""
        return self._mapped() if self._length else bytearray()

    def set_entries(self, n: int) -> None:
        """Entries [0, n) are valid (after a writer filled slots through writable_buffer)."""
        if not self._entries <= n <= self._max_entries:
            raise IndexOffsetError(f"{self.path}: cannot go from {self._entries} to {n} entries")
        self._entries = n

    def zero_slots(self, start: int, end: int) -> None:
        """Zero the slots [start, end) past the entries (a failed writer's leftovers)."""
        end = min(end, self._max_entries, self.backed_entries)
        if start >= end or self._mm is None:
            return  # never mapped: nothing was written through a mapping
        self._mm[start * self._entry_size:end * self._entry_size] = bytes(
            (end - start) * self._entry_size)

    def _entry(self, n: int) -> tuple[int, ...]:
        return self.ENTRY.unpack_from(self._mapped(), n * self._entry_size)

    def _write(self, *values: int) -> None:
        if self._entries >= self._max_entries:
            # Only reachable through skip_full_check (time index at roll): grow by one entry.
            self.resize(self._length + self._entry_size)
        self.reserve(1)
        self.ENTRY.pack_into(self._mapped(), self._entries * self._entry_size, *values)
        self._entries += 1

    def _is_empty_slot(self, n: int) -> bool:
        return self._raw_is_empty(self._entry(n))

    def _last_slot_is_empty(self, n: int) -> bool:
        # One pread instead of a mapping: the common (trimmed) case never maps the file.
        fd = os.open(self.path, os.O_RDONLY)
        try:
            raw = os.pread(fd, self._entry_size, (n - 1) * self._entry_size)
        finally:
            os.close(fd)
        return self._raw_is_empty(self.ENTRY.unpack(raw))

    def _raw_is_empty(self, entry: tuple[int, ...]) -> bool:
        return all(v == 0 for v in entry)

    def _count_valid(self, n: int) -> int:
        """Entries before the trailing run of all-zero slots a preallocated file ends with."""
        if n == 0 or not self._last_slot_is_empty(n):
            return n
        lo, hi = 0, min(n - 1, -(-self._data_end() // self._entry_size))  # first empty slot
        while lo < hi:
            mid = (lo + hi) // 2
            if self._is_empty_slot(mid):
                hi = mid
            else:
                lo = mid + 1
        return lo

    def _data_end(self) -> int:
        """Where the file's first hole starts: a preallocated index is sparse past its entries,
        and probing holes through the mapping costs a page fault each (about a millisecond on
        a busy ext4; tens per index, thousands of indexes after a crash)."""
        fd = os.open(self.path, os.O_RDONLY)
        try:
            return os.lseek(fd, 0, os.SEEK_HOLE)
        except OSError:  # no SEEK_HOLE here: treat it all as data
            return self._length
        finally:
            os.close(fd)

    def _bsearch(self, key_index: int, target: int) -> int:
        """Index of the last entry whose field ``key_index`` is ≤ target, or -1."""
        if self._entries == 0:
            return -1
        lo, hi = 0, self._entries - 1
        found = -1
        mm, size, unpack = self._mapped(), self._entry_size, self.ENTRY.unpack_from
        while lo <= hi:
            mid = (lo + hi) >> 1
            if unpack(mm, mid * size)[key_index] <= target:
                found = mid
                lo = mid + 1
            else:
                hi = mid - 1
        return found

    def _truncate_entries(self, n: int) -> None:
        if n < self._entries:
            start = n * self._entry_size
            end = self._entries * self._entry_size
            # Zero the dropped slots so a later crash cannot resurrect them.
            self._mapped()[start:end] = bytes(end - start)
            self._entries = n

    def truncate(self) -> None:
        """Remove every entry."""
        self._truncate_entries(0)

    def relative(self, offset: int) -> int:
        rel = offset - self.base_offset
        if not 0 <= rel <= 0x7FFFFFFF:
            raise IndexOffsetError(f"offset {offset} is not relative to {self.base_offset}")
        return rel

    def can_append_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= 0x7FFFFFFF


def _remove_quietly(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass
