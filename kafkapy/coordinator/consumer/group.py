"""A KIP-848 consumer group and its members (Kafka's ConsumerGroup and ConsumerGroupMember),
sans-I/O: the state every heartbeat reads and that :meth:`ConsumerGroup.replay` builds from the
group's ``__consumer_offsets`` records.

The coordinator changes a group only by replaying the records it writes, so a group loaded from
the log is the group that was live. Besides the records' contents the group keeps the *partition
epochs*: which member holds each partition (assigned or still being revoked), so reconciliation
never hands a partition to a second member before the first let go of it.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from kafkapy.coordinator import modern_group
from kafkapy.coordinator.consumer import partitions as ps
from kafkapy.coordinator.consumer import records as rec
from kafkapy.coordinator.consumer.partitions import Assignment, TopicId
from kafkapy.coordinator.consumer.reconcile import MemberState, Reconciliation
from kafkapy.protocol.errors import ErrorCode

#: The member epoch of a member leaving for good (and of a fenced one).
LEAVE_GROUP_MEMBER_EPOCH = -1
#: The member epoch of a static member that left for a while and keeps its partitions.
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class ConsumerGroupState(enum.Enum):
    """A consumer group's state, as ListGroups and ConsumerGroupDescribe name it."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class TopicInfo:
    """What the core needs to know of a topic: its id, name, partition count, and whether it is
    internal (regexes never match those)."""

    topic_id: TopicId
    name: str
    partitions: int
    internal: bool = False


@dataclass(frozen=True)
class ConsumerGroupMember:
    """One member: what it subscribed to (its MemberMetadata record) and where its
    reconciliation stands (its CurrentMemberAssignment record)."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    reconciliation: Reconciliation = field(default_factory=Reconciliation)
    #: set when the member speaks the classic protocol (JoinGroup/SyncGroup) in this group
    classic: rec.ClassicMemberMetadata | None = None

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    @property
    def member_epoch(self) -> int:
        return self.reconciliation.member_epoch

    @property
    def previous_member_epoch(self) -> int:
        return self.reconciliation.previous_member_epoch

    @property
    def state(self) -> MemberState:
        return self.reconciliation.state

    @property
    def assigned(self) -> Assignment:
        return self.reconciliation.assigned

    @property
    def pending_revocation(self) -> Assignment:
        return self.reconciliation.pending_revocation

    def metadata_record(self, group_id: str) -> rec.MemberMetadata:
        return rec.MemberMetadata(
            group_id, self.member_id, self.instance_id, self.rack_id, self.client_id,
            self.client_host, self.subscribed_topic_names, self.subscribed_topic_regex,
            self.rebalance_timeout_ms, self.server_assignor, self.classic)

    def assignment_record(self, group_id: str) -> rec.CurrentMemberAssignment:
        r = self.reconciliation
        return rec.CurrentMemberAssignment(
            group_id, self.member_id, r.member_epoch, r.previous_member_epoch, int(r.state),
            r.assigned, r.pending_revocation)

    def same_metadata(self, other: ConsumerGroupMember) -> bool:
        return self.metadata_record("") == other.metadata_record("")


def metadata_hash(topics: Iterable[TopicInfo]) -> int:
    """A stable 63-bit digest of the subscribed topics' ids and partition counts: when it changes,
    the group epoch is bumped and the assignment recomputed. (Kafka's murmur-based hash differs;
    only this coordinator reads ours.) No topics hash to 0, as in Kafka, so a group that
    subscribes to nothing keeps the epoch it was created with."""
    ordered = sorted(topics, key=lambda t: t.name)
    if not ordered:
        return 0
    h = hashlib.blake2b(digest_size=8)
    for t in ordered:
        h.update(f"{t.name}\0{t.topic_id}\0{t.partitions}\n".encode())
    return int.from_bytes(h.digest(), "big") >> 1


class ConsumerGroup(modern_group.ModernGroup[ConsumerGroupMember]):
    """A consumer group's membership, epochs, target assignment, resolved regexes and partition
    epochs. Mutated only through :meth:`replay`."""

    EPOCH_TYPE = rec.GroupMetadata.RECORD_TYPE
    TARGET_MEMBER_TYPE = rec.TargetAssignmentMember.RECORD_TYPE

    def __init__(self, group_id: str) -> None:
        super().__init__(group_id)
        # Kafka 4.4 starts a group at group and assignment epoch 1, without a record: its first
        # member gets epoch 1 when joining with nothing to assign, 2 when it subscribes to topics.
        self.group_epoch = self.assignment_epoch = 1
        self.assignment_timestamp_ms = -1
        #: instance id -> member id, for static members
        self.static_members: dict[str, str] = {}
        #: regex -> its last resolution
        self.regexes: dict[str, rec.RegularExpression] = {}
        self._partition_epochs: dict[tuple[TopicId, int], tuple[str, int]] = {}
        #: regex -> (topics version, time) it was last resolved at; not a record, a cache
        self.regex_checked: dict[str, tuple[int, int]] = {}

    # ----------------------------------------------------------------- queries
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.reconciliation.reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def owner_epoch(self, topic_id: TopicId, partition: int) -> int:
        """The epoch of the member holding the partition (assigned or pending revocation), -1
        when nobody holds it."""
        held = self._partition_epochs.get((topic_id, partition))
        return -1 if held is None else held[1]

    def owner(self, topic_id: TopicId, partition: int) -> str | None:
        held = self._partition_epochs.get((topic_id, partition))
        return None if held is None else held[0]

    def subscribed_topic_names(self, exclude_member: str | None = None) -> set[str]:
        """Every topic some member subscribes to, by name or through a resolved regex."""
        names: set[str] = set()
        for m in self.members.values():
            if m.member_id == exclude_member:
                continue
            names.update(m.subscribed_topic_names)
            if m.subscribed_topic_regex is not None and m.subscribed_topic_regex in self.regexes:
                names.update(self.regexes[m.subscribed_topic_regex].topics)
        return names

    def member_topic_names(self, member: ConsumerGroupMember) -> set[str]:
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex is not None and member.subscribed_topic_regex in self.regexes:
            names.update(self.regexes[member.subscribed_topic_regex].topics)
        return names

    def regex_in_use(self, regex: str, exclude_member: str | None = None) -> bool:
        return any(m.subscribed_topic_regex == regex for m in self.members.values()
                   if m.member_id != exclude_member)

    # ----------------------------------------------------------------- offsets
    def validate_offset_commit(self, member_id: str, member_epoch: int, api_version: int,
                               transactional: bool = False) -> int:
        """The error of an OffsetCommit (or TxnOffsetCommit) against this group, 0 when allowed.

        A negative epoch is an admin or ``assign()`` commit: allowed only while nobody is a
        member. A member must commit at its current epoch, with OffsetCommit v9+ (older versions
        cannot carry a member epoch)."""
        if member_epoch < 0 and not self.members:
            return 0
        m = self.members.get(member_id)
        if m is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if not transactional and api_version < 9:
            return ErrorCode.UNSUPPORTED_VERSION
        if member_epoch != m.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return 0

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> int:
        """The error of an OffsetFetch v9+ naming a member, 0 when allowed (no member id and
        epoch -1: an admin fetch, always allowed)."""
        if member_id is None and member_epoch < 0:
            return 0
        m = self.members.get(member_id or "")
        if m is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != m.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return 0

    def validate_delete(self) -> int:
        """DeleteGroups: only an empty group may go."""
        return 0 if self.state() is ConsumerGroupState.EMPTY else ErrorCode.NON_EMPTY_GROUP

    def subscribes_to(self, topic: str) -> bool:
        """OffsetDelete refuses (GROUP_SUBSCRIBED_TO_TOPIC) a topic the group subscribes to."""
        return topic in self.subscribed_topic_names()

    def tombstones(self) -> list[rec.GroupRecord]:
        """The records deleting this group from the log (DeleteGroups, or expiry of an empty
        group): every member's, then the regexes', then the group's own."""
        out: list[rec.GroupRecord] = []
        for mid in sorted(self.members):
            out += member_tombstones(self.group_id, mid)
        out += [rec.Tombstone(rec.RegularExpression.RECORD_TYPE, self.group_id, r) for r in sorted(self.regexes)]
        out.append(rec.Tombstone(rec.TargetAssignmentMetadata.RECORD_TYPE, self.group_id))
        out.append(rec.Tombstone(rec.GroupMetadata.RECORD_TYPE, self.group_id))
        return out

    # ----------------------------------------------------------------- replay
    def replay(self, record: rec.GroupRecord) -> None:
        """Apply one record of this group (its type-3 tombstone marks the group dead)."""
        if self.replay_shared(record):
            return
        if isinstance(record, rec.Tombstone):
            self._replay_tombstone(record)
        elif isinstance(record, rec.MemberMetadata):
            old = self.members.get(record.member_id) or ConsumerGroupMember(record.member_id)
            new = replace(
                old, instance_id=record.instance_id, rack_id=record.rack_id,
                client_id=record.client_id, client_host=record.client_host,
                subscribed_topic_names=tuple(record.subscribed_topic_names),
                subscribed_topic_regex=record.subscribed_topic_regex,
                rebalance_timeout_ms=record.rebalance_timeout_ms, server_assignor=record.server_assignor,
                classic=record.classic)
            self._set_member(old if record.member_id in self.members else None, new)
        elif isinstance(record, rec.TargetAssignmentMetadata):
            self.assignment_epoch = record.assignment_epoch
            self.assignment_timestamp_ms = record.assignment_timestamp_ms
        elif isinstance(record, rec.CurrentMemberAssignment):
            old_m = self.members.get(record.member_id)
            base = old_m or ConsumerGroupMember(record.member_id)
            recon = Reconciliation(
                MemberState(record.state), record.member_epoch, record.previous_member_epoch,
                ps.normalize(record.assigned_partitions), ps.normalize(record.partitions_pending_revocation))
            self._set_member(old_m, replace(base, reconciliation=recon))
        elif isinstance(record, rec.RegularExpression):
            self.regexes[record.regex] = record
        else:  # pragma: no cover - the union is exhaustive
            raise TypeError(f"not a consumer group record: {record!r}")

    def _replay_tombstone(self, t: rec.Tombstone) -> None:
        if t.record_type == rec.MemberMetadata.RECORD_TYPE:
            old = self.members.pop(t.sub_key, None)
            if old is not None:
                self._drop_epochs(old)
                if old.instance_id is not None and self.static_members.get(old.instance_id) == old.member_id:
                    del self.static_members[old.instance_id]
        elif t.record_type == rec.TargetAssignmentMetadata.RECORD_TYPE:
            self.assignment_epoch = 0
            self.assignment_timestamp_ms = -1
        elif t.record_type == rec.CurrentMemberAssignment.RECORD_TYPE:
            old_m = self.members.get(t.sub_key)
            if old_m is not None:
                gone = Reconciliation(MemberState.STABLE, LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_MEMBER_EPOCH)
                self._set_member(old_m, replace(old_m, reconciliation=gone))
        elif t.record_type == rec.RegularExpression.RECORD_TYPE:
            self.regexes.pop(t.sub_key, None)

    def _set_member(self, old: ConsumerGroupMember | None, new: ConsumerGroupMember) -> None:
        if old is not None:
            self._drop_epochs(old)
            if old.instance_id is not None and self.static_members.get(old.instance_id) == old.member_id:
                del self.static_members[old.instance_id]
        self.members[new.member_id] = new
        if new.instance_id is not None:
            self.static_members[new.instance_id] = new.member_id
        for t, p in ps.pairs(ps.union(new.assigned, new.pending_revocation)):
            self._partition_epochs[(t, p)] = (new.member_id, new.member_epoch)

    def _drop_epochs(self, m: ConsumerGroupMember) -> None:
        for t, p in ps.pairs(ps.union(m.assigned, m.pending_revocation)):
            if self._partition_epochs.get((t, p), ("",))[0] == m.member_id:
                del self._partition_epochs[(t, p)]

    def partition_owners(self) -> Mapping[tuple[TopicId, int], tuple[str, int]]:
        """(topic id, partition) -> (member id, epoch) of every held partition."""
        return dict(self._partition_epochs)


def member_tombstones(group_id: str, member_id: str) -> list[rec.GroupRecord]:
    """A member's records deleted, in Kafka's order: current assignment, target, metadata."""
    return list(modern_group.member_tombstones(
        rec.Tombstone, group_id, member_id, rec.CurrentMemberAssignment.RECORD_TYPE,
        rec.TargetAssignmentMember.RECORD_TYPE, rec.MemberMetadata.RECORD_TYPE))
