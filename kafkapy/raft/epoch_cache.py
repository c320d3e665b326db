"""The leader epoch cache: where each epoch starts in the log (Kafka's ``LeaderEpochFileCache``).

Rebuilt from the batches' partition leader epochs on start; kept in step with appends and both
kinds of truncation. ``end_offset_for`` answers "where does epoch ``e`` end in this log?", the
question behind Fetch divergence detection.
"""

from __future__ import annotations

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class EpochCache:
    """Ascending ``(epoch, start_offset)`` entries, one per epoch present in the log."""

    def __init__(self) -> None:
        self._entries: list[tuple[int, int]] = []

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1][0] if self._entries else None

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (no-op for the latest epoch)."""
        if self._entries:
            last_epoch, last_start = self._entries[-1]
            if epoch == last_epoch:
                return
            if epoch < last_epoch or start_offset < last_start:
                raise ValueError(f"epoch {epoch} at {start_offset} does not follow "
                                 f"epoch {last_epoch} at {last_start}")
        self._entries.append((epoch, start_offset))

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int] | None:
        """``(epoch', end_offset)`` as Kafka's ``endOffsetFor``: the largest epoch <= ``epoch``
        and the offset where the next epoch starts (the log end for the latest epoch). None when
        the cache is empty."""
        if not self._entries:
            return None
        if epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if epoch == self._entries[-1][0]:
            return epoch, log_end_offset
        higher = next((e for e in self._entries if e[0] > epoch), None)
        if higher is None:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        floor = None
        for e in self._entries:
            if e[0] <= epoch:
                floor = e
        if floor is None:
            return epoch, higher[1]
        return floor[0], higher[1]

    def truncate_from_end(self, end_offset: int) -> None:
        """The log now ends at ``end_offset``: forget epochs starting at or after it."""
        self._entries = [e for e in self._entries if e[1] < end_offset]

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: the epoch covering it starts there."""
        removed = [e for e in self._entries if e[1] <= start_offset]
        if removed:
            kept = [e for e in self._entries if e[1] > start_offset]
            self._entries = [(removed[-1][0], start_offset)] + kept

    def clear(self) -> None:
        self._entries = []


__all__ = ["EpochCache", "UNDEFINED_EPOCH", "UNDEFINED_OFFSET"]
