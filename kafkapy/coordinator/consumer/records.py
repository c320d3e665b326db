"""The ``__consumer_offsets`` records of a consumer group (record types 3, 5, 6, 7, 8 and 16), as
plain values: what the core writes and what :meth:`ConsumerGroup.replay` reads back.

This is the narrow interface to the log: an edge binds each class to the byte codec of its
record type (key = the group id plus the member id or regex, value = the other fields) and a
:class:`Tombstone` to a key with a null value. Field names follow Kafka's JSON schemas.
Type 4 (ConsumerGroupPartitionMetadata) is not written: the metadata hash in type 3 replaced it.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkapy.coordinator.consumer.partitions import Assignment
from kafkapy.coordinator.modern_group import GroupEpochRecord, TargetMemberRecord, TombstoneRecord


class GroupMetadata(GroupEpochRecord):
    """ConsumerGroupMetadataValue (type 3): the group epoch, bumped on every change of
    membership, subscriptions or subscribed topics' metadata."""

    RECORD_TYPE = 3


@dataclass(frozen=True)
class ClassicMemberMetadata:
    """The ``ClassicMemberMetadata`` of a type-5 record: set on a member that speaks the classic
    protocol inside a consumer group (JoinGroup's session timeout and its (name, metadata)
    protocols, in the member's order of preference)."""

    session_timeout_ms: int
    supported_protocols: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class MemberMetadata:
    """ConsumerGroupMemberMetadataValue (type 5): what a member asked for (``classic``: None for
    a member of the consumer protocol)."""

    RECORD_TYPE = 5
    group_id: str
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic: ClassicMemberMetadata | None = None


@dataclass(frozen=True)
class TargetAssignmentMetadata:
    """ConsumerGroupTargetAssignmentMetadataValue (type 6): the epoch of the target assignment,
    written after the members' target records of that epoch."""

    RECORD_TYPE = 6
    group_id: str
    assignment_epoch: int
    assignment_timestamp_ms: int = -1


class TargetAssignmentMember(TargetMemberRecord):
    """ConsumerGroupTargetAssignmentMemberValue (type 7): one member's target partitions."""

    RECORD_TYPE = 7


@dataclass(frozen=True)
class CurrentMemberAssignment:
    """ConsumerGroupCurrentMemberAssignmentValue (type 8): where a member's reconciliation stands."""

    RECORD_TYPE = 8
    group_id: str
    member_id: str
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: Assignment
    partitions_pending_revocation: Assignment


@dataclass(frozen=True)
class RegularExpression:
    """ConsumerGroupRegularExpressionValue (type 16): the topics a subscribed regex matched, as of
    the metadata ``version`` (the image offset) and ``timestamp_ms``."""

    RECORD_TYPE = 16
    group_id: str
    regex: str
    topics: tuple[str, ...]
    version: int
    timestamp_ms: int


class Tombstone(TombstoneRecord):
    """A key with a null value: deletes the record of ``record_type`` for ``group_id`` and ``sub_key``
    (the member id for types 5, 7, 8; the regex for 16; empty for 3 and 6)."""


GroupRecord = (
    GroupMetadata | MemberMetadata | TargetAssignmentMetadata | TargetAssignmentMember
    | CurrentMemberAssignment | RegularExpression | Tombstone
)
