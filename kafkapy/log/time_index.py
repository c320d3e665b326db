"""Kafka's time index (``.timeindex``): timestamp → offset, for ListOffsets by time.

Entry (12 bytes, big-endian): ``int64 timestamp``, ``int32 relative offset``. An entry means "up
to this offset the largest timestamp seen is ``timestamp``"; entries are added only when the
maximum grows, so both columns are non-decreasing. One slot is always kept free so the final
entry written when the segment becomes inactive fits.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from kafkapy.log.index import CorruptIndexError, IndexOffsetError, MmapIndex

NO_TIMESTAMP = -1


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


class TimeIndex(MmapIndex):
    """A segment's sparse time index (mmap'ed, preallocated while active)."""

    ENTRY = struct.Struct(">qi")

    def entry(self, n: int) -> TimestampOffset:
        ts, rel = self._entry(n)
        return TimestampOffset(ts, self.base_offset + rel)

    def last_entry(self) -> TimestampOffset:
        """The last entry, or (NO_TIMESTAMP, base offset) when empty."""
        if self._entries == 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return self.entry(self._entries - 1)

    def is_full(self) -> bool:
        return self._entries >= self._max_entries - 1

    def sanity_check(self, *, full: bool = True) -> None:
        if self._length % self._entry_size != 0:
            raise CorruptIndexError(
                f"time index file {self.path} length {self._length} is not a multiple of "
                f"{self._entry_size}")
        if self._entries == 0:
            return
        last = self.last_entry()
        if last.offset < self.base_offset:
            raise CorruptIndexError(f"corrupt time index {self.path}: last offset below base")
        first = self.entry(0)
        if last.timestamp < first.timestamp or last.offset < first.offset:
            raise CorruptIndexError(f"corrupt time index {self.path}: first entry after last")
        if not full:
            return
        prev_ts, prev_rel = NO_TIMESTAMP - 1, -1
        for n in range(self._entries):
            ts, rel = self._entry(n)
            if ts < prev_ts or rel < prev_rel:
                raise CorruptIndexError(f"corrupt time index {self.path}: entry {n} out of order")
            prev_ts, prev_rel = ts, rel

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Append (timestamp, offset) when ``timestamp`` exceeds the last entry's."""
        if not skip_full_check and self.is_full():
            raise IndexOffsetError(f"time index {self.path} is full")
        last = self.last_entry()
        if self._entries and offset < last.offset:
            raise IndexOffsetError(
                f"offset {offset} is below the last time index offset {last.offset}")
        if self._entries and timestamp < last.timestamp:
            raise IndexOffsetError(
                f"timestamp {timestamp} is below the last time index timestamp {last.timestamp}")
        if timestamp > last.timestamp:
            self._write(timestamp, self.relative(offset))

    def lookup(self, target_ts: int) -> TimestampOffset:
        """The entry with the largest timestamp ≤ target, or (NO_TIMESTAMP, base offset)."""
        if self._entries == 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        n = self._bsearch(0, target_ts)
        if n < 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return self.entry(n)

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose offset is ≥ ``offset``."""
        if offset <= self.base_offset:
            self._truncate_entries(0)
            return
        # Keep every entry whose relative offset is ≤ cut - 1.
        self._truncate_entries(self._bsearch(1, offset - self.base_offset - 1) + 1)
