"""Online migration between a classic group and a KIP-848 consumer group (Kafka's
convertToConsumerGroup / convertToClassicGroup), sans-I/O.

* :func:`upgrade`: a ConsumerGroupHeartbeat reached a classic group. An empty one is simply
  deleted; otherwise, when ``group.consumer.migration.policy`` allows it, the group uses the
  consumer embedded protocol and fits ``group.consumer.max.size``, its members become consumer
  group members that keep their partitions (group epoch = target epoch = member epochs = the
  classic generation) and remember how they joined (``ClassicMemberMetadata``), so they go on
  speaking JoinGroup/SyncGroup/Heartbeat (:mod:`~kafkapy.coordinator.consumer.classic_members`).
  :func:`install` puts the result into a :class:`ConsumerGroupMembership`.
* :func:`downgrade`: the last consumer-protocol member leaves (or is fenced), or a static classic
  member takes its place, and only classic members remain (:func:`may_downgrade`): the group
  becomes a classic group again, which rebalances unless its target was up to date.
  :func:`downgrader` makes the hook :attr:`ConsumerGroupMembership.downgrader` through which the
  consumer group core asks, so the conversion happens inside the leave or fencing.

Both return the records to append in order: the classic ``(key, value)`` records (bytes, as
:mod:`~kafkapy.coordinator.membership` writes them) and the consumer group records (values,
as :mod:`~kafkapy.coordinator.consumer.heartbeat` writes them). Committed offsets are separate
records, and neither conversion writes one.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from kafkapy.coordinator import schema
from kafkapy.coordinator.classic_group import ClassicGroup, GroupState, Member, Record, group_record
from kafkapy.coordinator.consumer import partitions as ps
from kafkapy.coordinator.consumer import records as rec
from kafkapy.coordinator.consumer.group import ConsumerGroup, ConsumerGroupMember, TopicInfo, metadata_hash
from kafkapy.coordinator.consumer.heartbeat import ConsumerGroupMembership, Downgrader, HeartbeatOutcome
from kafkapy.coordinator.consumer.migration_policy import MigrationPolicy
from kafkapy.coordinator.consumer.reconcile import MemberState, Reconciliation
from kafkapy.coordinator.outcome import JoinResult, SyncResult
from kafkapy.protocol import consumer_protocol as cp
from kafkapy.protocol.errors import ErrorCode

E = ErrorCode

__all__ = ["Downgrade", "MigrationPolicy", "Refusal", "Upgrade", "downgrade", "downgrader", "install",
           "may_downgrade", "upgrade"]


@dataclass
class Upgrade:
    """A classic group converted (or, when it was empty, deleted): the records to append, in this
    order, the consumer group they build, when each member's session ends, and the answers to the
    JoinGroup/SyncGroup requests parked on the classic group (``(group, "join"|"sync", member)``
    keys, as :mod:`~kafkapy.coordinator.membership` parks them; Kafka answers them at once, the
    members rejoin either way)."""

    classic_records: list[Record]
    consumer_records: list[rec.GroupRecord]
    group: ConsumerGroup | None
    session_deadlines: dict[str, int] = field(default_factory=dict)
    completions: list[tuple[tuple[str, str, str], object]] = field(default_factory=list)
    log: list[str] = field(default_factory=list)


@dataclass
class Refusal:
    """The conversion is not allowed: the heartbeat is answered with this error (Kafka's
    messages); the group stays as it is."""

    error: int
    message: str
    log: list[str] = field(default_factory=list)


class _CustomAssignor(Exception):
    """An assignment carries user data: an assignor the server cannot stand in for."""


def upgrade(classic: ClassicGroup, policy: MigrationPolicy, consumer_max_size: int,
            topics: Mapping[str, TopicInfo], now_ms: int) -> Upgrade | Refusal:
    """Convert ``classic`` for a ConsumerGroupHeartbeat (``topics``: topic metadata by name).

    An empty classic group is deleted whatever the policy (only its GroupMetadata record; its
    offsets stay). Otherwise the refusal is GROUP_ID_NOT_FOUND, as Kafka's: the group stays
    classic, and a malformed embedded protocol refuses it the same way."""
    gid = classic.group_id
    tombstone: Record = (schema.encode_group_key(gid), None)
    if not classic.members:
        return Upgrade([tombstone], [], None, log=[f"[GroupId {gid}] Converted the empty classic group to a "
                                                   "consumer group."])
    cannot = f"Cannot upgrade classic group {gid} to consumer group because"
    if not policy.upgrade_enabled:
        return Refusal(E.GROUP_ID_NOT_FOUND, f"{cannot} online upgrade is disabled.")
    if classic.protocol_type != cp.PROTOCOL_TYPE:
        return Refusal(E.GROUP_ID_NOT_FOUND, f"{cannot} the group does not use the consumer embedded protocol.")
    if len(classic.members) > consumer_max_size:
        return Refusal(E.GROUP_ID_NOT_FOUND, f"{cannot} the group size exceeds the consumer group maximum size.")
    try:
        members = [_member_from_classic(classic, m, topics) for m in classic.members.values()]
    except cp.MalformedConsumerProtocol as e:
        return Refusal(E.GROUP_ID_NOT_FOUND, f"{cannot} the embedded consumer protocol is malformed.",
                       [f"{cannot} the embedded consumer protocol is malformed: {e}."])
    except _CustomAssignor:
        return Refusal(E.GROUP_ID_NOT_FOUND, f"{cannot} an unsupported custom assignor is in use. Please refer to "
                       "the documentation or switch to a default assignor before re-attempting the upgrade.")
    epoch = classic.generation
    subscribed = {n for m, _ in members for n in m.subscribed_topic_names}
    out = Upgrade([tombstone], [], None)
    records = out.consumer_records
    records += [m.metadata_record(gid) for m, _ in members]
    records.append(rec.GroupMetadata(gid, epoch, metadata_hash(topics[n] for n in subscribed if n in topics)))
    records += [rec.TargetAssignmentMember(gid, m.member_id, target) for m, target in members]
    # Kafka stamps the converted target with time 0: it was not computed at any time here.
    records.append(rec.TargetAssignmentMetadata(gid, epoch, 0))
    records += [m.assignment_record(gid) for m, _ in members]
    group = ConsumerGroup(gid)
    for r in records:
        group.replay(r)
    out.group = group
    for m, _ in members:
        assert m.classic is not None
        out.session_deadlines[m.member_id] = now_ms + m.classic.session_timeout_ms
    # A rebalance under way is over: the members rejoin and the consumer group assigns them.
    for mid, cm in classic.members.items():
        if cm.awaiting_join:
            out.completions.append(((gid, "join", mid), JoinResult(E.REBALANCE_IN_PROGRESS, member_id=mid)))
        if cm.awaiting_sync:
            out.completions.append(((gid, "sync", mid), SyncResult(E.REBALANCE_IN_PROGRESS)))
    out.log.append(f"[GroupId {gid}] Converted the classic group to a consumer group.")
    return out


def install(membership: ConsumerGroupMembership, up: Upgrade) -> HeartbeatOutcome:
    """Put the converted group of ``up`` into ``membership`` with its members' sessions; the
    outcome's records are ``up.consumer_records`` and its rollback takes the group out again.
    The ConsumerGroupHeartbeat that triggered the upgrade runs next, on the installed group."""
    out = HeartbeatOutcome(records=list(up.consumer_records), log=list(up.log))
    if up.group is None:
        return out
    gid = up.group.group_id
    out.snapshot(membership.groups, up.group)
    membership.groups[gid] = up.group
    for mid, deadline in up.session_deadlines.items():
        out.set_entry(membership.session_deadlines, (gid, mid), deadline)
    return out


def _member_from_classic(classic: ClassicGroup, m: Member, topics: Mapping[str, TopicInfo]
                         ) -> tuple[ConsumerGroupMember, ps.Assignment]:
    """A classic member as a stable consumer group member at the generation, holding (and
    targeted at) the partitions of its last assignment; topics no longer known are dropped."""
    protocol = classic.protocol_name or (m.protocols[0][0] if m.protocols else "")
    sub = cp.decode_subscription(m.metadata(protocol))
    # A member that has not synced yet (a rebalance under way) holds nothing.
    given: Mapping[str, tuple[int, ...]] = {}
    if m.assignment:
        decoded = cp.decode_assignment(m.assignment)
        if decoded.user_data:
            # Kafka refuses: the consumer group's assignor would drop what a custom one shares.
            raise _CustomAssignor()
        given = decoded.partitions
    assigned = ps.normalize({topics[t].topic_id: p for t, p in given.items() if t in topics})
    epoch = classic.generation
    member = ConsumerGroupMember(
        m.member_id, instance_id=m.group_instance_id, rack_id=sub.rack_id, client_id=m.client_id,
        client_host=m.client_host, subscribed_topic_names=tuple(sorted(set(sub.topics))),
        rebalance_timeout_ms=m.rebalance_timeout_ms,
        reconciliation=Reconciliation(MemberState.STABLE, epoch, epoch, assigned),
        classic=rec.ClassicMemberMetadata(m.session_timeout_ms, tuple((n, bytes(b)) for n, b in m.protocols)))
    return member, assigned


# ------------------------------------------------------------------------------- downgrade
@dataclass
class Downgrade:
    """A consumer group converted back: the records to append (the consumer group's tombstones
    first, then the classic group's GroupMetadata) and the classic group, preparing a rebalance."""

    consumer_records: list[rec.GroupRecord]
    classic_records: list[Record]
    group: ClassicGroup
    log: list[str] = field(default_factory=list)


def may_downgrade(group: ConsumerGroup, leaving: Collection[str], policy: MigrationPolicy,
                  classic_max_size: int) -> bool:
    """Whether the members ``leaving`` (leaving, or fenced) turn ``group`` classic again: every
    other member speaks the classic protocol, someone stays, the policy allows it and the rest
    fits ``group.max.size``."""
    leaving = {leaving} if isinstance(leaving, str) else leaving
    others = [m for mid, m in group.members.items() if mid not in leaving]
    return (bool(others) and all(m.uses_classic_protocol for m in others)
            and policy.downgrade_enabled and len(others) <= classic_max_size)


def downgrader(policy: MigrationPolicy, classic_max_size: int, membership: ConsumerGroupMembership
               ) -> Downgrader:
    """The hook for :attr:`ConsumerGroupMembership.downgrader`: the :class:`Downgrade` when the
    members leaving turn their group classic, else None."""
    def check(group: ConsumerGroup, leaving: frozenset[str], now_ms: int, rebalance: bool = True) -> Downgrade | None:
        if not may_downgrade(group, leaving, policy, classic_max_size):
            return None
        return downgrade(group, leaving, membership.topics, now_ms, rebalance)
    return check


def downgrade(group: ConsumerGroup, leaving: Collection[str], topics: Mapping[str, TopicInfo],
              now_ms: int, rebalance: bool = True) -> Downgrade:
    """Convert ``group`` (check :func:`may_downgrade` first) without the members ``leaving``: a
    classic group at generation = group epoch whose members keep their target partitions as
    their assignment, written Stable and then (``rebalance``) preparing a rebalance. Without a
    rebalance it stays Stable: a static member took another's place on an up-to-date target."""
    gid = group.group_id
    leaving = {leaving} if isinstance(leaving, str) else leaving
    names = {t.topic_id: n for n, t in topics.items()}
    classic = ClassicGroup(gid, GroupState.STABLE, now_ms, group.group_epoch, cp.PROTOCOL_TYPE)
    for mid, m in group.members.items():
        if mid in leaving or m.classic is None:
            continue
        classic.members[mid] = Member(
            mid, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
            m.classic.session_timeout_ms, cp.PROTOCOL_TYPE, list(m.classic.supported_protocols))
        if m.instance_id is not None:
            classic.static_members[m.instance_id] = mid
        if classic.leader is None:
            classic.leader = mid
    classic.protocol_name = classic.select_protocol()
    for mid, cm in classic.members.items():
        target = group.target.get(mid, {})
        by_name = {names[t]: sorted(p) for t, p in target.items() if t in names}
        try:
            version = cp.version_of(cm.metadata(classic.protocol_name))
        except cp.MalformedConsumerProtocol:
            version = 0
        cm.assignment = cp.encode_assignment(by_name, None, version)
    out = Downgrade(group.tombstones(), [group_record(classic)], classic,
                    [f"[GroupId {gid}] Converted the consumer group to a classic group."])
    for cm in classic.members.values():
        cm.session_deadline = now_ms + cm.session_timeout_ms
    if not rebalance:
        return out
    # As Kafka's prepareRebalance: the members rejoin within the rebalance timeout.
    why = "for member leaving" if leaving else "with stale assignment"
    out.log.append(f"Preparing to rebalance group {gid} in state {classic.state.value} with old generation "
                   f"{classic.generation} (reason: Downgrade group {gid} from consumer to classic {why}.)")
    classic.transition(GroupState.PREPARING_REBALANCE, now_ms)
    classic.join_deadline = now_ms + classic.max_rebalance_timeout()
    return out
