"""``RaftLog``: the replicated log as the Raft core sees it — batches, their epochs, snapshots.

It joins a ``RaftLogStore``, a ``SnapshotStore`` and the ``EpochCache`` and answers the
questions of Kafka's ``ReplicatedLog``: the last fetched epoch, where an epoch ends, whether a
follower's (fetch offset, last fetched epoch) is in this log (``validate_offset_and_epoch``), and
how far a follower truncates when told it diverged (``truncate_to_end_offset``).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import NamedTuple

from kafkapy.raft.epoch_cache import EpochCache
from kafkapy.raft.messages import EpochEndOffset, SnapshotId
from kafkapy.raft.snapshot_store import SnapshotStore
from kafkapy.raft.store import RaftLogStore
from kafkapy.records import format as fmt


class RaftInvariantError(AssertionError):
    """The log or a peer broke a Raft invariant this node relies on (a bug, not a fault)."""


class ValidKind(enum.Enum):
    VALID = "valid"
    DIVERGING = "diverging"
    SNAPSHOT = "snapshot"


class ValidOffsetAndEpoch(NamedTuple):
    kind: ValidKind
    epoch: int
    offset: int


def batch_epoch(batch: bytes) -> int:
    return int.from_bytes(batch[fmt.PARTITION_LEADER_EPOCH:fmt.PARTITION_LEADER_EPOCH + 4],
                          "big", signed=True)


class RaftLog:
    """The log plus its epoch cache and snapshots. ``start()`` must run before anything else."""

    def __init__(self, store: RaftLogStore, snapshots: SnapshotStore) -> None:
        self.store = store
        self.snapshots = snapshots
        self.cache = EpochCache()
        self.latest_snapshot: SnapshotId | None = None
        self._dirty = False
        # What a dynamic quorum (KIP-853) watches: every batch appended or loaded (base, bytes),
        # truncations (new end offset) and snapshot installs. None: nobody watches.
        self.on_batch: Callable[[int, bytes], object] | None = None
        self.on_truncate: Callable[[int], None] | None = None
        self.on_snapshot: Callable[[SnapshotId, bool], None] | None = None

    def start(self) -> None:
        """Reconcile the log with the latest snapshot and rebuild the epoch cache."""
        self.latest_snapshot = self.snapshots.latest()
        snap = self.latest_snapshot
        if snap is not None:
            if snap.end_offset > self.store.end_offset:
                self.store.reset_to(snap.end_offset)  # crashed between install and reset
            elif self.store.log_start_offset < snap.end_offset:
                self.store.delete_before(snap.end_offset)
        self.cache.clear()
        if snap is not None and self.on_snapshot is not None:
            self.on_snapshot(snap, False)
        for base, batch in self.store.read(self.store.log_start_offset):
            self.cache.assign(batch_epoch(batch), base)
            if self.on_batch is not None:
                self.on_batch(base, batch)
        self._dirty = False

    # -- positions -------------------------------------------------------------------------------

    @property
    def start_offset(self) -> int:
        return self.store.log_start_offset

    @property
    def end_offset(self) -> int:
        return self.store.end_offset

    @property
    def last_fetched_epoch(self) -> int:
        """The epoch of the last batch, else of the latest snapshot, else 0 (empty log)."""
        latest = self.cache.latest_epoch
        if latest is not None:
            return latest
        if self.latest_snapshot is not None:
            return self.latest_snapshot.epoch
        return 0

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """``(epoch', end offset)`` as Kafka's ``KafkaMetadataLog.endOffsetForEpoch``."""
        found = self.cache.end_offset_for(epoch, self.end_offset)
        if found is None:
            return self.last_fetched_epoch, self.end_offset
        snap = self.latest_snapshot
        if snap is not None and found[1] == snap.end_offset and found[0] < snap.epoch:
            return snap.epoch, found[1]
        return found

    def validate_offset_and_epoch(self, offset: int, epoch: int) -> ValidOffsetAndEpoch:
        """Is (``offset``, ``epoch``) a prefix of this log? Kafka's ``validateOffsetAndEpoch``."""
        if self.start_offset == 0 and offset == 0:
            return ValidOffsetAndEpoch(ValidKind.VALID, 0, 0)
        snap = self.latest_snapshot
        if snap is not None and self.start_offset > 0 and (
                offset < self.start_offset
                or (offset == self.start_offset and epoch != snap.epoch)
                or epoch < snap.epoch):
            return ValidOffsetAndEpoch(ValidKind.SNAPSHOT, snap.epoch, snap.end_offset)
        end_epoch, end_offset = self.end_offset_for_epoch(epoch)
        if end_epoch != epoch or end_offset < offset:
            return ValidOffsetAndEpoch(ValidKind.DIVERGING, end_epoch, end_offset)
        return ValidOffsetAndEpoch(ValidKind.VALID, epoch, offset)

    # -- reads -----------------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int) -> tuple[bytes, ...]:
        """Whole batches from ``offset``, at least one, then as many as fit in ``max_bytes``."""
        out: list[bytes] = []
        size = 0
        for _base, batch in self.store.read(offset):
            if out and size + len(batch) > max_bytes:
                break
            out.append(batch)
            size += len(batch)
        return tuple(out)

    def batch_at(self, offset: int) -> tuple[int, int, bytes] | None:
        """``(base, next offset, bytes)`` of the batch holding ``offset``."""
        for base, batch in self.store.read(offset):
            header = fmt.parse_header(memoryview(batch))
            return base, header.next_offset, batch
        return None

    # -- writes ----------------------------------------------------------------------------------

    def append(self, batch: bytes) -> None:
        """Append one whole batch at the end (leader or follower) and note its epoch."""
        base = self.store.append(batch)
        self.cache.assign(batch_epoch(batch), base)
        self._dirty = True
        if self.on_batch is not None:
            self.on_batch(base, batch)

    @property
    def needs_flush(self) -> bool:
        return self._dirty

    def flush(self) -> None:
        if self._dirty:
            self.store.flush()
            self._dirty = False

    def truncate_to(self, offset: int) -> None:
        self.store.truncate_to(offset)
        self.cache.truncate_from_end(offset)
        if self.on_truncate is not None:
            self.on_truncate(offset)

    def truncate_to_end_offset(self, diverging: EpochEndOffset) -> int:
        """Truncate to where the leader says epoch ``diverging.epoch`` ends (or to where our own
        copy of that epoch ends, if sooner); return the new end offset."""
        if diverging.epoch == 0:
            offset = min(diverging.end_offset, self.end_offset)
        else:
            local_epoch, local_end = self.end_offset_for_epoch(diverging.epoch)
            if local_epoch == diverging.epoch:
                offset = min(local_end, diverging.end_offset)
            else:
                offset = local_end
        offset = max(offset, self.start_offset)
        self.truncate_to(offset)
        return offset

    def delete_before_snapshot(self, snapshot_id: SnapshotId) -> None:
        """Drop the log prefix ``snapshot_id`` covers, and older snapshots."""
        self.latest_snapshot = snapshot_id
        self.store.delete_before(snapshot_id.end_offset)
        self.cache.truncate_from_start(snapshot_id.end_offset)
        self.snapshots.delete_before(snapshot_id)
        if self.on_snapshot is not None:
            self.on_snapshot(snapshot_id, True)

    def reset_to_snapshot(self, snapshot_id: SnapshotId) -> None:
        """The log restarts empty at ``snapshot_id.end_offset`` (a follower installed it)."""
        self.latest_snapshot = snapshot_id
        self.store.reset_to(snapshot_id.end_offset)
        self.cache.clear()
        self.snapshots.delete_before(snapshot_id)
        self._dirty = False
        if self.on_snapshot is not None:
            self.on_snapshot(snapshot_id, False)


__all__ = ["RaftInvariantError", "RaftLog", "ValidKind", "ValidOffsetAndEpoch", "batch_epoch"]
