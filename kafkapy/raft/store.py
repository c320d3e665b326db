"""The Raft log store seam: where a quorum keeps its record batches.

``RaftLogStore`` is what the quorum needs from a log: append whole batches at the end, read them
back from an offset, flush, and truncate a divergent tail (the multi-voter Raft needs the last).
The node adapts the on-disk ``__cluster_metadata-0`` partition log to it; ``MemoryLogStore`` is
the in-memory version for tests and simulations (it can also "crash", losing unflushed batches).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol, runtime_checkable

from kafkapy.records import format as fmt


@runtime_checkable
class RaftLogStore(Protocol):
    """A log of record batches with consecutive offsets."""

    def append(self, batch: bytes) -> int:
        """Append one whole batch whose base offset is ``end_offset``; return that base offset."""
        ...

    def read(self, start_offset: int) -> Iterator[tuple[int, bytes]]:
        """Yield ``(base_offset, batch)`` for every batch holding an offset >= ``start_offset``,
        in offset order."""
        ...

    @property
    def end_offset(self) -> int:
        """The offset the next appended batch starts at."""
        ...

    def flush(self) -> None:
        """Make every appended batch durable."""
        ...

    def truncate_to(self, offset: int) -> None:
        """Drop every batch at or after ``offset`` (``offset`` must be a batch boundary or the
        end offset)."""
        ...


class MemoryLogStore:
    """An in-memory ``RaftLogStore``; ``crash()`` forgets batches appended since the last flush."""

    def __init__(self) -> None:
        self._batches: list[tuple[int, int, bytes]] = []  # (base, next offset, bytes)
        self._flushed = 0  # number of batches known durable

    @property
    def end_offset(self) -> int:
        return self._batches[-1][1] if self._batches else 0

    def append(self, batch: bytes) -> int:
        header = fmt.parse_header(memoryview(batch))
        if header.base_offset != self.end_offset:
            raise ValueError(f"batch base offset {header.base_offset} is not the log end "
                             f"offset {self.end_offset}")
        if header.size != len(batch):
            raise ValueError(f"batch length field says {header.size} bytes, got {len(batch)}")
        self._batches.append((header.base_offset, header.next_offset, bytes(batch)))
        return header.base_offset

    def read(self, start_offset: int) -> Iterator[tuple[int, bytes]]:
        for base, nxt, data in list(self._batches):
            if nxt > start_offset:
                yield base, data

    def flush(self) -> None:
        self._flushed = len(self._batches)

    def truncate_to(self, offset: int) -> None:
        if offset >= self.end_offset:
            return
        if not any(base == offset for base, _, _ in self._batches):
            raise ValueError(f"offset {offset} is not a batch boundary")
        self._batches = [b for b in self._batches if b[0] < offset]
        self._flushed = min(self._flushed, len(self._batches))

    def crash(self) -> None:
        """Simulate a crash: unflushed batches are gone."""
        del self._batches[self._flushed:]


__all__ = ["MemoryLogStore", "RaftLogStore"]
