"""The Raft log store seam: where a quorum keeps its record batches.

``RaftLogStore`` is what the quorum needs from a log: append whole batches at the end, read them
back from an offset, flush, truncate a divergent tail, and drop the prefix a snapshot covers
(``delete_before``) or everything when a follower installs a snapshot (``reset_to``); the last
two are durable on return, as Kafka checkpoints its log start offset. The node adapts the on-disk
``__cluster_metadata-0`` partition log to it; ``MemoryLogStore`` is the in-memory version for
tests and simulations (it can also "crash", losing unflushed batches).
"""

from __future__ import annotations

from bisect import bisect_right
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

    @property
    def log_start_offset(self) -> int:
        """The first offset the log still holds (== end_offset when it is empty)."""
        ...

    def delete_before(self, offset: int) -> None:
        """Drop every batch wholly below ``offset`` (a batch boundary); durable on return."""
        ...

    def reset_to(self, offset: int) -> None:
        """Drop everything; the log is empty and starts (and ends) at ``offset``. Durable."""
        ...


class MemoryLogStore:
    """An in-memory ``RaftLogStore``; ``crash()`` forgets batches appended since the last flush."""

    def __init__(self) -> None:
        self._bases: list[int] = []
        self._nexts: list[int] = []
        self._data: list[bytes] = []
        self._start = 0
        self._flushed_end = 0  # offsets below this are durable

    @property
    def log_start_offset(self) -> int:
        return self._start

    @property
    def end_offset(self) -> int:
        return self._nexts[-1] if self._nexts else self._start

    def append(self, batch: bytes) -> int:
        header = fmt.parse_header(memoryview(batch))
        if header.base_offset != self.end_offset:
            raise ValueError(f"batch base offset {header.base_offset} is not the log end "
                             f"offset {self.end_offset}")
        if header.size != len(batch):
            raise ValueError(f"batch length field says {header.size} bytes, got {len(batch)}")
        self._bases.append(header.base_offset)
        self._nexts.append(header.next_offset)
        self._data.append(bytes(batch))
        return header.base_offset

    def read(self, start_offset: int) -> Iterator[tuple[int, bytes]]:
        # First batch whose next offset is past start_offset.
        i = bisect_right(self._nexts, start_offset)
        bases, data = self._bases, self._data
        while i < len(bases):
            yield bases[i], data[i]
            i += 1

    def flush(self) -> None:
        self._flushed_end = self.end_offset

    def truncate_to(self, offset: int) -> None:
        if offset >= self.end_offset:
            return
        if offset == self._start and not self._bases:
            return
        i = bisect_right(self._bases, offset) - 1
        if offset != self._start and (i < 0 or self._bases[i] != offset):
            raise ValueError(f"offset {offset} is not a batch boundary")
        keep = i if i >= 0 and self._bases[i] == offset else 0
        del self._bases[keep:], self._nexts[keep:], self._data[keep:]
        self._flushed_end = min(self._flushed_end, self.end_offset)

    def delete_before(self, offset: int) -> None:
        if offset <= self._start:
            return
        if offset > self.end_offset:
            raise ValueError(f"cannot delete before {offset}: the log ends at {self.end_offset}")
        n = bisect_right(self._nexts, offset)  # batches wholly below offset
        if n < len(self._bases) and self._bases[n] != offset:
            raise ValueError(f"offset {offset} is not a batch boundary")
        del self._bases[:n], self._nexts[:n], self._data[:n]
        self._start = offset
        self._flushed_end = max(self._flushed_end, offset)

    def reset_to(self, offset: int) -> None:
        self._bases, self._nexts, self._data = [], [], []
        self._start = offset
        self._flushed_end = offset

    def crash(self) -> None:
        """Simulate a crash: batches not flushed are gone."""
        n = bisect_right(self._nexts, self._flushed_end)
        del self._bases[n:], self._nexts[n:], self._data[n:]



__all__ = ["MemoryLogStore", "RaftLogStore"]
