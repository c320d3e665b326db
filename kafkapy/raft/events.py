"""What a ``RaftReplica`` hands its state machine: committed batches, or a snapshot to load."""

from __future__ import annotations

from typing import NamedTuple

from kafkapy.raft.messages import SnapshotId
from kafkapy.records import format as fmt


class CommittedBatch(NamedTuple):
    """A committed batch, delivered once and in offset order (control batches included)."""

    base_offset: int
    batch: bytes

    @property
    def is_control(self) -> bool:
        return bool(fmt.parse_header(memoryview(self.batch)).attributes & fmt.CONTROL_MASK)


class SnapshotLoad(NamedTuple):
    """Replace the state machine with this snapshot; batches that follow start at its end."""

    snapshot_id: SnapshotId
    data: bytes


CommitEvent = CommittedBatch | SnapshotLoad


__all__ = ["CommitEvent", "CommittedBatch", "SnapshotLoad"]
