"""A share group and its members (Kafka's ShareGroup and ShareGroupMember), sans-I/O: the state
every ShareGroupHeartbeat reads and that :meth:`ShareGroup.replay` builds from the group's records.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from kafkapy.coordinator import modern_group
from kafkapy.coordinator.consumer import partitions as ps
from kafkapy.coordinator.consumer.partitions import Assignment
from kafkapy.coordinator.share_group import records as rec


class ShareGroupState(enum.Enum):
    """A share group's state, as ListGroups and ShareGroupDescribe name it."""

    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class ShareGroupMember:
    """One member: its subscription (type 10) and its assignment at its epoch (type 14)."""

    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    member_epoch: int = 0
    previous_member_epoch: int = 0
    assigned: Assignment = field(default_factory=dict)

    def metadata_record(self, group_id: str) -> rec.MemberMetadata:
        return rec.MemberMetadata(group_id, self.member_id, self.rack_id, self.client_id, self.client_host,
                                  self.subscribed_topic_names)

    def assignment_record(self, group_id: str) -> rec.CurrentMemberAssignment:
        return rec.CurrentMemberAssignment(group_id, self.member_id, self.member_epoch,
                                           self.previous_member_epoch, 0, self.assigned)


class ShareGroup(modern_group.ModernGroup[ShareGroupMember]):
    """A share group's members, epochs, target assignment and share-partition initialization
    state. Mutated only through :meth:`replay`."""

    EPOCH_TYPE = rec.GroupMetadata.RECORD_TYPE
    TARGET_MEMBER_TYPE = rec.TargetAssignmentMember.RECORD_TYPE

    def __init__(self, group_id: str) -> None:
        super().__init__(group_id)
        # Kafka 4.4 starts a group at group and assignment epoch 1, without a record (as consumer
        # groups): a first subscribing member gets epoch 2.
        self.group_epoch = self.assignment_epoch = 1
        self.partition_metadata = rec.StatePartitionMetadata(group_id)

    def state(self) -> ShareGroupState:
        if self.dead:
            return ShareGroupState.DEAD
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def subscribed_topic_names(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed_topic_names}

    def initialized(self) -> Assignment:
        """The share partitions whose state exists at the share coordinator: the assignable ones."""
        return ps.normalize({t: p for t, (_, p) in self.partition_metadata.initialized.items()})

    def initializing(self) -> Assignment:
        return ps.normalize({t: p for t, (_, p) in self.partition_metadata.initializing.items()})

    def replay(self, record: rec.ShareGroupRecord) -> None:
        if self.replay_shared(record):
            return
        if isinstance(record, rec.Tombstone):
            self._replay_tombstone(record)
        elif isinstance(record, rec.MemberMetadata):
            old = self.members.get(record.member_id) or ShareGroupMember(record.member_id)
            self.members[record.member_id] = replace(
                old, rack_id=record.rack_id, client_id=record.client_id, client_host=record.client_host,
                subscribed_topic_names=tuple(record.subscribed_topic_names))
        elif isinstance(record, rec.TargetAssignmentMetadata):
            self.assignment_epoch = record.assignment_epoch
        elif isinstance(record, rec.CurrentMemberAssignment):
            old = self.members.get(record.member_id) or ShareGroupMember(record.member_id)
            self.members[record.member_id] = replace(
                old, member_epoch=record.member_epoch, previous_member_epoch=record.previous_member_epoch,
                assigned=ps.normalize(record.assigned_partitions))
        elif isinstance(record, rec.StatePartitionMetadata):
            self.partition_metadata = record
        else:  # pragma: no cover - the union is exhaustive
            raise TypeError(f"not a share group record: {record!r}")

    def _replay_tombstone(self, t: rec.Tombstone) -> None:
        if t.record_type == rec.MemberMetadata.RECORD_TYPE:
            self.members.pop(t.sub_key, None)
        elif t.record_type == rec.TargetAssignmentMetadata.RECORD_TYPE:
            self.assignment_epoch = 0
        elif t.record_type == rec.StatePartitionMetadata.RECORD_TYPE:
            self.partition_metadata = rec.StatePartitionMetadata(self.group_id)
        elif t.record_type == rec.CurrentMemberAssignment.RECORD_TYPE:
            m = self.members.get(t.sub_key)
            if m is not None:
                self.members[t.sub_key] = replace(m, member_epoch=-1, previous_member_epoch=-1, assigned={})


def member_tombstones(group_id: str, member_id: str) -> list[rec.ShareGroupRecord]:
    """A member's records deleted, in Kafka's order: current assignment, target, metadata."""
    return list(modern_group.member_tombstones(
        rec.Tombstone, group_id, member_id, rec.CurrentMemberAssignment.RECORD_TYPE,
        rec.TargetAssignmentMember.RECORD_TYPE, rec.MemberMetadata.RECORD_TYPE))
