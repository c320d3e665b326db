"""The ``__consumer_offsets`` records of a share group (record types 10 to 15), as plain values:
what the share-group core writes and what :meth:`ShareGroup.replay` reads back.

The narrow interface to the log, as for consumer groups: an edge binds each class to the byte
codec of its record type (key = the group id plus the member id where there is one) and a
:class:`Tombstone` to a key with a null value. Field names follow Kafka's JSON schemas.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kafkapy.coordinator.consumer.partitions import Assignment, TopicId
from kafkapy.coordinator.modern_group import GroupEpochRecord, TargetMemberRecord, TombstoneRecord


@dataclass(frozen=True)
class MemberMetadata:
    """ShareGroupMemberMetadataValue (type 10): what a member subscribed to."""

    RECORD_TYPE = 10
    group_id: str
    member_id: str
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]


class GroupMetadata(GroupEpochRecord):
    """ShareGroupMetadataValue (type 11): the group epoch and the subscribed topics' hash."""

    RECORD_TYPE = 11


@dataclass(frozen=True)
class TargetAssignmentMetadata:
    """ShareGroupTargetAssignmentMetadataValue (type 12)."""

    RECORD_TYPE = 12
    group_id: str
    assignment_epoch: int
    assignment_timestamp_ms: int = 0


class TargetAssignmentMember(TargetMemberRecord):
    """ShareGroupTargetAssignmentMemberValue (type 13)."""

    RECORD_TYPE = 13


@dataclass(frozen=True)
class CurrentMemberAssignment:
    """ShareGroupCurrentMemberAssignmentValue (type 14). Share members have nothing to revoke,
    so ``state`` is always 0 (stable)."""

    RECORD_TYPE = 14
    group_id: str
    member_id: str
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: Assignment


@dataclass(frozen=True)
class StatePartitionMetadata:
    """ShareGroupStatePartitionMetadataValue (type 15): which share partitions have state at the
    share coordinator. ``initializing`` and ``initialized`` map a topic id to (name, partitions);
    ``deleting`` maps a topic id to its name."""

    RECORD_TYPE = 15
    group_id: str
    initializing: Mapping[TopicId, tuple[str, frozenset[int]]] = field(default_factory=dict)
    initialized: Mapping[TopicId, tuple[str, frozenset[int]]] = field(default_factory=dict)
    deleting: Mapping[TopicId, str] = field(default_factory=dict)


class Tombstone(TombstoneRecord):
    """A key with a null value for ``record_type`` (``sub_key``: the member id for 10, 13, 14)."""


ShareGroupRecord = (
    MemberMetadata | GroupMetadata | TargetAssignmentMetadata | TargetAssignmentMember
    | CurrentMemberAssignment | StatePartitionMetadata | Tombstone
)
