"""Where the Raft keeps snapshots (KIP-630): opaque bytes keyed by (end offset, epoch).

``MemorySnapshotStore`` is the in-memory version for tests and simulations; its writes survive a
simulated crash of the log store, since a snapshot is durable once written.
"""

from __future__ import annotations

from typing import Protocol

from kafkapy.raft.messages import SnapshotId


class SnapshotNotStored(Exception):
    """A snapshot could not be stored for lack of space; nothing of it was kept.

    A snapshot only shortens the replay at the next start, and the log still holds every
    record it would have covered, so this is not a failure of the quorum: the next snapshot is
    simply tried later.
    """


class SnapshotStore(Protocol):
    """Opaque, durable snapshot bytes keyed by ``SnapshotId`` (end offset, epoch)."""

    def write(self, snapshot_id: SnapshotId, data: bytes) -> None:
        """Store a complete snapshot; durable when this returns. ``SnapshotNotStored`` when
        the store is out of space."""
        ...

    def read(self, snapshot_id: SnapshotId) -> bytes | None: ...

    def latest(self) -> SnapshotId | None: ...

    def delete_before(self, snapshot_id: SnapshotId) -> None:
        """Forget snapshots ending before ``snapshot_id``'s end offset."""
        ...


class MemorySnapshotStore:
    """Snapshots kept in a dict (they survive ``crash()`` of the log store: write is durable).

    Setting ``full`` plays a full disk: writes then raise ``SnapshotNotStored``, as
    ``FileSnapshotStore`` does on ENOSPC, and are counted in ``refused``.
    """

    def __init__(self) -> None:
        self.snapshots: dict[SnapshotId, bytes] = {}
        self.full = False
        self.refused = 0

    def write(self, snapshot_id: SnapshotId, data: bytes) -> None:
        if self.full:
            self.refused += 1
            raise SnapshotNotStored(f"snapshot {snapshot_id}: No space left on device")
        self.snapshots[snapshot_id] = bytes(data)

    def read(self, snapshot_id: SnapshotId) -> bytes | None:
        return self.snapshots.get(snapshot_id)

    def latest(self) -> SnapshotId | None:
        if not self.snapshots:
            return None
        return max(self.snapshots, key=lambda s: (s.end_offset, s.epoch))

    def delete_before(self, snapshot_id: SnapshotId) -> None:
        for sid in [s for s in self.snapshots if s.end_offset < snapshot_id.end_offset]:
            del self.snapshots[sid]


__all__ = ["MemorySnapshotStore", "SnapshotNotStored", "SnapshotStore"]
