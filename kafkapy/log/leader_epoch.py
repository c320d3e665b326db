"""Leader epoch cache and its ``leader-epoch-checkpoint`` file (Kafka's LeaderEpochFileCache).

Each entry says: leader epoch ``epoch`` started writing at offset ``start_offset``. Entries are
strictly increasing in both epoch and start offset. The file is a Kafka CheckpointFile: version
line ``0``, count line, then ``<epoch> <start offset>`` lines. It is rewritten on every change.
"""

from __future__ import annotations

import bisect
import os
from typing import NamedTuple

from kafkapy.log.checkpoint import CorruptCheckpointError, read_checkpoint, write_checkpoint
from kafkapy.log.files import LEADER_EPOCH_CHECKPOINT

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochCache:
    """In-memory epochs of one partition, persisted to ``<dir>/leader-epoch-checkpoint``."""

    def __init__(self, dir: str | None, *, sync: bool = True) -> None:
        # dir None keeps the cache in memory only (tests, raft's own log).
        self.path = os.path.join(dir, LEADER_EPOCH_CHECKPOINT) if dir else None
        self._sync = sync
        self._entries: list[EpochEntry] = []
        if self.path:
            self._entries = self._load()

    def _load(self) -> list[EpochEntry]:
        assert self.path
        rows = read_checkpoint(self.path)
        if rows is None:
            return []
        out: list[EpochEntry] = []
        for r in rows:
            if len(r) != 2:
                raise CorruptCheckpointError(f"{self.path}: bad entry {' '.join(r)!r}")
            out.append(EpochEntry(int(r[0]), int(r[1])))
        return out

    def _flush(self, sync: bool | None = None) -> None:
        if self.path:
            write_checkpoint(self.path, (f"{e.epoch} {e.start_offset}" for e in self._entries),
                             sync=self._sync if sync is None else sync)

    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    def assign(self, epoch: int, start_offset: int, *, sync: bool | None = None) -> None:
        """Record that ``epoch`` begins at ``start_offset`` (no-op if already known).

        Entries that would break monotonicity (epoch ≥ new epoch or start ≥ new start) are
        dropped first, as Kafka does when a new leader's epoch arrives. ``sync=False`` leaves
        the fsync to the caller (bulk log creation fsyncs many files together).
        """
        if epoch < 0:
            return
        last = self.latest_entry()
        if last is not None and last.epoch == epoch and start_offset >= last.start_offset:
            return
        self._entries = [e for e in self._entries
                         if e.epoch < epoch and e.start_offset < start_offset]
        self._entries.append(EpochEntry(epoch, start_offset))
        self._flush(sync)

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after ``end_offset`` (log truncated to ``end_offset``)."""
        if end_offset < 0 or not self._entries or self._entries[-1].start_offset < end_offset:
            return
        self._entries = [e for e in self._entries if e.start_offset < end_offset]
        self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop entries wholly before ``start_offset``; the one covering it moves up to it."""
        if not self._entries:
            return
        keep_from = 0
        for i, e in enumerate(self._entries):
            if e.start_offset <= start_offset:
                keep_from = i
        first = self._entries[keep_from]
        if keep_from == 0 and first.start_offset >= start_offset:
            return
        new = self._entries[keep_from:]
        new[0] = EpochEntry(first.epoch, max(first.start_offset, start_offset))
        self._entries = new
        self._flush()

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch, as Kafka's ``endOffsetFor``.

        The end offset of an epoch is the start offset of the next higher epoch, or the log end
        offset for the latest epoch; an unknown epoch in between answers with the largest known
        epoch below it.
        """
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._entries[-1].epoch:
            return requested_epoch, log_end_offset
        epochs = [e.epoch for e in self._entries]
        hi = bisect.bisect_right(epochs, requested_epoch)
        if hi == len(epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        higher = self._entries[hi]
        if hi == 0:
            return requested_epoch, higher.start_offset
        return self._entries[hi - 1].epoch, higher.start_offset

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch under which ``offset`` was written, or UNDEFINED_EPOCH."""
        result = UNDEFINED_EPOCH
        for e in self._entries:
            if e.start_offset <= offset:
                result = e.epoch
            else:
                break
        return result

    def clear(self) -> None:
        self._entries = []
        self._flush()

    def delete(self) -> None:
        if self.path:
            try:
                os.remove(self.path)
            except FileNotFoundError:
                pass
