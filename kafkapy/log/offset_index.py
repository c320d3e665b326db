"""Kafka's offset index (``.index``): offset → file position, one entry per indexed batch.

Entry (8 bytes, big-endian): ``int32 relative offset`` (offset − segment base offset),
``int32 position`` (byte position of the batch in the ``.log``). Kafka indexes a batch by its
*last* offset with the batch's start position, so the floor entry of a target offset gives a
position at or before the batch that holds the target.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from kafkapy.log.index import CorruptIndexError, IndexOffsetError, MmapIndex


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class OffsetIndex(MmapIndex):
    """A segment's sparse offset index (mmap'ed, preallocated while active)."""

    ENTRY = struct.Struct(">ii")

    def entry(self, n: int) -> OffsetPosition:
        rel, pos = self._entry(n)
        return OffsetPosition(self.base_offset + rel, pos)

    @property
    def last_offset(self) -> int:
        """Offset of the last entry, or the base offset when empty."""
        if self._entries == 0:
            return self.base_offset
        return self.base_offset + self._entry(self._entries - 1)[0]

    def _raw_is_empty(self, entry: tuple[int, ...]) -> bool:
        # No real entry has position 0: the first batch of a segment is never indexed.
        return entry[1] == 0

    def sanity_check(self, *, full: bool = True) -> None:
        if self._length % self._entry_size != 0:
            raise CorruptIndexError(
                f"index file {self.path} length {self._length} is not a multiple of "
                f"{self._entry_size}")
        if self._entries and self.last_offset < self.base_offset:
            raise CorruptIndexError(f"corrupt index {self.path}: last offset below base offset")
        if self._entries > 1:
            first, last = self._entry(0), self._entry(self._entries - 1)
            if first[0] >= last[0] or first[1] >= last[1]:
                raise CorruptIndexError(f"corrupt index {self.path}: first entry after last")
        if not full:
            return
        # Entries must increase in both offset and position; check every one (cheap next to the
        # log scan a rebuild costs, and catches garbage in the middle).
        prev_rel, prev_pos = -1, -1
        for n in range(self._entries):
            rel, pos = self._entry(n)
            if rel <= prev_rel or pos <= prev_pos:
                raise CorruptIndexError(f"corrupt index {self.path}: entry {n} out of order")
            prev_rel, prev_pos = rel, pos

    def append(self, offset: int, position: int) -> None:
        """Add (offset, position); offsets must strictly increase."""
        if self._entries and offset <= self.last_offset:
            raise IndexOffsetError(
                f"offset {offset} is not larger than the last index offset {self.last_offset}")
        if self.is_full():
            raise IndexOffsetError(f"index {self.path} is full")
        self._write(self.relative(offset), position)

    def lookup(self, target: int) -> OffsetPosition:
        """The entry with the largest offset ≤ target, or (base offset, 0)."""
        if target < self.base_offset or self._entries == 0:
            return OffsetPosition(self.base_offset, 0)
        n = self._bsearch(0, target - self.base_offset)
        if n < 0:
            return OffsetPosition(self.base_offset, 0)
        return self.entry(n)

    def lookup_by_position(self, position: int) -> OffsetPosition:
        """The entry with the largest position ≤ ``position``, or (base offset, 0)."""
        if self._entries == 0:
            return OffsetPosition(self.base_offset, 0)
        n = self._bsearch(1, position)
        if n < 0:
            return OffsetPosition(self.base_offset, 0)
        return self.entry(n)

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose offset is ≥ ``offset``."""
        if offset <= self.base_offset:
            self._truncate_entries(0)
            return
        # Keep every entry whose relative offset is ≤ cut - 1.
        self._truncate_entries(self._bsearch(0, offset - self.base_offset - 1) + 1)
