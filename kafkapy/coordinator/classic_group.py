"""A classic-protocol consumer group's state, and its members' (Kafka's ClassicGroup and
ClassicGroupMember), sans-I/O.

The data both halves of a shard work on: :mod:`~kafkapy.coordinator.membership` moves a group
through its states, :mod:`~kafkapy.coordinator.offsets` keeps its committed offsets. The group's
``__consumer_offsets`` record (GroupMetadataValue) is rendered here.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from kafkapy.coordinator import schema

#: A ``__consumer_offsets`` record: (key, value); value None is a tombstone.
Record = tuple[bytes, bytes | None]


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class GroupConfig:
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2**31 - 1
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    #: how long a member that got MEMBER_ID_REQUIRED (or a new member) may take to come back
    new_member_join_timeout_ms: int = 300_000



@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    awaiting_join: bool = False
    awaiting_sync: bool = False
    is_new: bool = False
    session_deadline: int = 0

    def metadata(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def same_protocols(self, protocols: list[tuple[str, bytes]]) -> bool:
        return [(n, bytes(m)) for n, m in self.protocols] == [(n, bytes(m)) for n, m in protocols]


@dataclass
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1
    #: Where its record sits in ``__consumer_offsets`` (-1: not known). A transactional commit
    #: that completes later replaces the committed offset only if its record is the newer one.
    record_offset: int = -1


@dataclass
class ClassicGroup:
    group_id: str
    state: GroupState = GroupState.EMPTY
    state_timestamp: int = -1
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_members: dict[str, int] = field(default_factory=dict)  # member id -> join deadline
    offsets: dict[tuple[str, int], CommittedOffset] = field(default_factory=dict)
    join_deadline: int | None = None  # when the join phase completes at the latest
    initial_join_limit: int | None = None  # while the initial rebalance delay runs: its cap
    sync_deadline: int | None = None

    def transition(self, state: GroupState, now_ms: int) -> None:
        self.state = state
        self.state_timestamp = now_ms

    def is_static_fenced(self, member_id: str, instance_id: str | None) -> bool:
        if instance_id is None:
            return False
        known = self.static_members.get(instance_id)
        return known is not None and known != member_id

    def all_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def max_rebalance_timeout(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def candidate_protocols(self) -> list[str]:
        members = list(self.members.values())
        if not members:
            return []
        common = [n for n, _ in members[0].protocols]
        for m in members[1:]:
            names = {n for n, _ in m.protocols}
            common = [n for n in common if n in names]
        return common

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        if protocol_type != self.protocol_type:
            return False
        names = {n for n, _ in protocols}
        return any(n in names for n in self.candidate_protocols())

    def select_protocol(self) -> str:
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            for name, _ in m.protocols:
                if name in candidates:
                    votes[name] = votes.get(name, 0) + 1
                    break
        # Most votes wins; ties go to the candidate listed first.
        return max(candidates, key=lambda n: (votes.get(n, 0), -candidates.index(n)))

    def subscribed_topics(self) -> set[str] | None:
        """Topics some member subscribes to; None when the members' metadata cannot be read."""
        if self.protocol_type != "consumer" or not self.protocol_name:
            return None if self.members else set()
        topics: set[str] = set()
        for m in self.members.values():
            got = schema.subscribed_topics("consumer", m.metadata(self.protocol_name))
            if got is None:
                return None
            topics |= got
        return topics

    def to_value(self, assignments: dict[str, bytes] | None = None, state_timestamp: int | None = None
                 ) -> schema.GroupValue:
        """The GroupMetadataValue of this group (optionally with the assignments about to be set)."""
        return schema.GroupValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation,
            protocol=self.protocol_name,
            leader=self.leader,
            current_state_timestamp=self.state_timestamp if state_timestamp is None else state_timestamp,
            members=tuple(
                schema.MemberValue(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                   m.rebalance_timeout_ms, m.session_timeout_ms,
                                   m.metadata(self.protocol_name or ""),
                                   m.assignment if assignments is None else assignments.get(m.member_id, b""))
                for m in self.members.values()),
        )


def live_group(groups: dict[str, ClassicGroup], group_id: str) -> ClassicGroup | None:
    """The group ``group_id`` unless it is unknown or Dead."""
    g = groups.get(group_id)
    return None if g is None or g.state is GroupState.DEAD else g


def group_record(group: ClassicGroup) -> Record:
    """The group's GroupMetadata record as it stands."""
    return (schema.encode_group_key(group.group_id), schema.encode_group_value(group.to_value()))
