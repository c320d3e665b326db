"""Classic-protocol members inside a KIP-848 consumer group (mixed mode, during an online
migration): their JoinGroup, SyncGroup, Heartbeat and LeaveGroup, and the join and sync timeouts
(Kafka's classicGroup*ToConsumerGroup), sans-I/O.

The server assigns: a JoinGroup is answered at once, with generation = the member's epoch, the
member's first protocol and no leader work to do; SyncGroup hands out the member's current
assignment as a ConsumerProtocolAssignment; Heartbeat says REBALANCE_IN_PROGRESS when the member
must rejoin to move on. The entry points take the fields
:class:`~kafkapy.coordinator.membership.ClassicGroupMembership` takes, and answer with the same
result types (JoinResult, SyncResult, an error code, a code per leaving member) in
:attr:`ClassicOutcome.answer`; the records and rollback are those of the consumer group core.
Session timeouts are the membership's (``tick`` fences); join and sync timeouts are here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from kafkapy.coordinator.consumer import partitions as ps
from kafkapy.coordinator.consumer import records as rec
from kafkapy.coordinator.consumer.group import ConsumerGroup, ConsumerGroupMember
from kafkapy.coordinator.consumer.heartbeat import ConsumerGroupMembership, HeartbeatOutcome
from kafkapy.coordinator.consumer.migration_policy import MigrationPolicy
from kafkapy.coordinator.consumer.reconcile import MemberState
from kafkapy.coordinator.modern_group import Refused
from kafkapy.coordinator.outcome import JoinRequest, JoinResult, SyncResult
from kafkapy.protocol import consumer_protocol as cp
from kafkapy.protocol.errors import ErrorCode

E = ErrorCode


@dataclass
class ClassicOutcome(HeartbeatOutcome):
    """A consumer group core outcome whose answer is a classic one (``response`` stays None)."""

    answer: object = None


class ClassicMembers:
    """The classic-protocol members of the consumer groups of ``membership``."""

    def __init__(self, membership: ConsumerGroupMembership,
                 policy: MigrationPolicy = MigrationPolicy.BIDIRECTIONAL) -> None:
        self.ms = membership
        #: ``group.consumer.migration.policy``: ``disabled`` keeps classic members out
        self.policy = policy
        #: (group, member) -> when it must have sent SyncGroup after its JoinGroup
        self.sync_deadlines: dict[tuple[str, str], int] = {}
        #: (group, member) -> when it must have rejoined after being told to
        self.join_deadlines: dict[tuple[str, str], int] = {}

    # ------------------------------------------------------------------ timers
    def next_deadline(self) -> int | None:
        return min([*self.sync_deadlines.values(), *self.join_deadlines.values()], default=None)

    def tick(self, now_ms: int) -> ClassicOutcome:
        """Fence the members that did not sync, or did not rejoin, in time."""
        out = ClassicOutcome()
        for table, what in ((self.sync_deadlines, "sync"), (self.join_deadlines, "rejoin")):
            for (gid, mid), deadline in sorted(table.items()):
                if deadline > now_ms:
                    continue
                out.set_entry(table, (gid, mid), None)
                group = self.ms.groups.get(gid)
                if group is not None and mid in group.members:
                    out.log.append(f"[GroupCoordinator] Member {mid} in group {gid} failed to {what} "
                                   "within the rebalance timeout, removing it from the group")
                    self._remove(group, [mid], now_ms, out)
        return out

    def _remove(self, group: ConsumerGroup, mids: list[str], now_ms: int, out: HeartbeatOutcome) -> None:
        for mid in mids:
            out.set_entry(self.sync_deadlines, (group.group_id, mid), None)
            out.set_entry(self.join_deadlines, (group.group_id, mid), None)
        self.ms._remove_members(group, mids, now_ms, out)

    # ------------------------------------------------------------------ JoinGroup
    def join(self, req: JoinRequest, now_ms: int) -> ClassicOutcome:
        """A JoinGroup to a consumer group (``req.require_known_member_id``: JoinGroup v4+)."""
        out = ClassicOutcome()
        try:
            out.answer = self._join(req, now_ms, out)
        except Refused as r:
            out.rollback()
            # As Kafka's error answers, which carry no member id.
            return ClassicOutcome(answer=JoinResult(r.error, member_id=""), log=[r.message or ""])
        return out

    def _join(self, req: JoinRequest, now_ms: int, out: ClassicOutcome) -> JoinResult:
        ms = self.ms
        group = ms.groups.get(req.group_id)
        if group is None or group.dead:
            raise Refused(E.UNKNOWN_MEMBER_ID, f"Group {req.group_id} not found.")
        if self.policy is MigrationPolicy.DISABLED:
            raise Refused(E.INCONSISTENT_GROUP_PROTOCOL, f"Cannot join the consumer group {group.group_id} with "
                          "the classic protocol because the group migration is disabled.")
        member_id = req.member_id or ms._new_uuid()
        cfg = ms.group_config(group.group_id)
        replacing = req.group_instance_id is not None and req.group_instance_id in group.static_members
        if member_id not in group.members and not replacing and len(group.members) >= cfg.max_size:
            raise Refused(E.GROUP_MAX_SIZE_REACHED,
                          f"The consumer group has reached its maximum capacity of {cfg.max_size} members.")
        if not supports(group, req.protocol_type, [n for n, _ in req.protocols]):
            raise Refused(E.INCONSISTENT_GROUP_PROTOCOL, f"Member {member_id}'s protocols are not supported.")
        if not req.member_id and req.group_instance_id is None and req.require_known_member_id:
            # KIP-394: come back with this id.
            return JoinResult(E.MEMBER_ID_REQUIRED, member_id=member_id)
        try:
            sub = cp.decode_subscription(req.protocols[0][1])
        except cp.MalformedConsumerProtocol as e:
            raise Refused(E.UNKNOWN_SERVER_ERROR, "Malformed embedded consumer protocol in subscription "
                          f"deserialization: {e}.") from e
        old = self._join_member(group, req, member_id, out)
        known = old.member_id in group.members
        updated = replace(
            old, instance_id=req.group_instance_id if req.group_instance_id is not None else old.instance_id,
            rack_id=sub.rack_id if sub.rack_id is not None else old.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1
            else old.rebalance_timeout_ms,
            subscribed_topic_names=tuple(sorted(set(sub.topics))), subscribed_topic_regex=None,
            server_assignor=None, client_id=req.client_id,
            client_host=req.client_host,
            classic=rec.ClassicMemberMetadata(req.session_timeout_ms,
                                              tuple((n, bytes(b)) for n, b in req.protocols)))
        bump = not known
        if not known or not updated.same_metadata(old):
            ms._write(group, updated.metadata_record(group.group_id), out)
            bump = bump or updated.subscribed_topic_names != old.subscribed_topic_names \
                or updated.rack_id != old.rack_id or updated.subscribed_topic_regex != old.subscribed_topic_regex
        if old.subscribed_topic_regex is not None and not group.regex_in_use(old.subscribed_topic_regex):
            ms._write(group, rec.Tombstone(rec.RegularExpression.RECORD_TYPE, group.group_id,
                                           old.subscribed_topic_regex), out)
        new_hash = ms._metadata_hash(group)
        if bump or new_hash != group.metadata_hash:
            ms._bump(group, new_hash, out)
        owned = ps.normalize({ms.topics[t].topic_id: p for t, p in sub.owned_partitions.items() if t in ms.topics})
        gid = group.group_id
        if replacing and ms.downgrader is not None:
            # A static member is back: if every member now speaks the classic protocol, the
            # group may turn classic (Kafka's validateOnlineDowngradeWithReplacedMember); on a
            # stale target it rebalances, else the member is first brought up to the target.
            stale = group.assignment_epoch < group.group_epoch
            if not stale:
                ms._reconcile(group, group.members[member_id], owned, now_ms, out)
            converted = ms.downgrader(group, frozenset(), now_ms, rebalance=stale)
            if converted is not None:
                member = group.members[member_id]
                ms._convert(group, converted, out)
                for key in [k for k in {**self.sync_deadlines, **self.join_deadlines} if k[0] == gid]:
                    out.set_entry(self.sync_deadlines, key, None)
                    out.set_entry(self.join_deadlines, key, None)
                return JoinResult(E.NONE, generation=member.member_epoch, protocol_type=cp.PROTOCOL_TYPE,
                                  protocol_name=req.protocols[0][0], leader="", member_id=member_id)
        if group.group_epoch > group.assignment_epoch:
            ms._assign(group, now_ms, out)
        ms._reconcile(group, group.members[member_id], owned, now_ms, out)
        member = group.members[member_id]
        ms._set_session_deadline(gid, member_id, now_ms + req.session_timeout_ms, out)
        out.set_entry(self.join_deadlines, (gid, member_id), None)
        out.set_entry(self.sync_deadlines, (gid, member_id), now_ms + req.rebalance_timeout_ms)
        return JoinResult(E.NONE, generation=member.member_epoch, protocol_type=cp.PROTOCOL_TYPE,
                          protocol_name=req.protocols[0][0], leader="", member_id=member_id)

    def _join_member(self, group: ConsumerGroup, req: JoinRequest, member_id: str,
                     out: HeartbeatOutcome) -> ConsumerGroupMember:
        """The member joining: known, new, or a static member taking over its instance id."""
        if req.group_instance_id is None:
            # As Kafka, a member id of the consumer protocol joining this way switches protocols.
            return group.members.get(member_id) or ConsumerGroupMember(member_id)
        old_id = group.static_members.get(req.group_instance_id)
        if old_id is None:
            return group.members.get(member_id) or ConsumerGroupMember(member_id, instance_id=req.group_instance_id)
        if old_id == member_id:
            return group.members[member_id]
        if req.member_id:
            raise Refused(E.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id "
                          f"{req.group_instance_id} was fenced by member {old_id}.")
        # A static member back under a new id takes over the old one's partitions.
        self.ms._cancel_timers(group.group_id, old_id, out)
        out.set_entry(self.sync_deadlines, (group.group_id, old_id), None)
        out.set_entry(self.join_deadlines, (group.group_id, old_id), None)
        return self.ms._replace_static(group, group.members[old_id], member_id, out)

    # ------------------------------------------------------------------ SyncGroup / Heartbeat
    def _classic_member(self, group_id: str, member_id: str, instance_id: str | None,
                        generation: int) -> tuple[ConsumerGroup, ConsumerGroupMember]:
        group = self.ms.groups.get(group_id)
        if group is None or group.dead:
            raise Refused(E.UNKNOWN_MEMBER_ID, f"Group {group_id} not found.")
        if instance_id is None:
            m = group.members.get(member_id)
            if m is None:
                raise Refused(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
        else:
            sid = group.static_members.get(instance_id)
            if sid is None:
                raise Refused(E.UNKNOWN_MEMBER_ID,
                              f"Member with instance id {instance_id} is not a member of group {group_id}.")
            if sid != member_id:
                raise Refused(E.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id "
                              f"{instance_id} was fenced by member {sid}.")
            m = group.members[sid]
        if not m.uses_classic_protocol:
            raise Refused(E.UNKNOWN_MEMBER_ID, f"Member {m.member_id} does not use the classic protocol.")
        if generation != m.member_epoch:
            raise Refused(E.ILLEGAL_GENERATION, f"The request generation id {generation} is not equal to the "
                          f"member epoch {m.member_epoch} of member {m.member_id}.")
        return group, m

    def _rejoin_later(self, group: ConsumerGroup, m: ConsumerGroupMember, now_ms: int, out: HeartbeatOutcome) -> None:
        key = (group.group_id, m.member_id)
        if key not in self.join_deadlines:
            out.set_entry(self.join_deadlines, key, now_ms + m.rebalance_timeout_ms)

    def sync(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
             protocol_type: str | None, protocol_name: str | None,
             assignments: Iterable[tuple[str, bytes]], now_ms: int) -> ClassicOutcome:
        """A SyncGroup: the member's assignment, computed by the server (``assignments``, a
        leader's, are ignored)."""
        out = ClassicOutcome()
        try:
            group, m = self._classic_member(group_id, member_id, instance_id, generation)
            assert m.classic is not None
            name = m.classic.supported_protocols[0][0]
            if (protocol_type is not None and protocol_type != cp.PROTOCOL_TYPE) or (
                    protocol_name is not None and protocol_name != name):
                raise Refused(E.INCONSISTENT_GROUP_PROTOCOL, f"The protocol of member {member_id} does not match.")
            if group.group_epoch > m.member_epoch and m.state is not MemberState.UNREVOKED_PARTITIONS:
                self._rejoin_later(group, m, now_ms, out)
                raise Refused(E.REBALANCE_IN_PROGRESS, f"A new rebalance is triggered in group {group_id} and "
                              f"member {member_id} should rejoin to catch up.")
        except Refused as r:
            out.answer = SyncResult(r.error)
            return out
        out.set_entry(self.sync_deadlines, (group_id, m.member_id), None)
        self.ms._set_session_deadline(group_id, m.member_id, now_ms + m.classic.session_timeout_ms, out)
        out.answer = SyncResult(E.NONE, protocol_type, protocol_name, self.assignment_bytes(m))
        return out

    def assignment_bytes(self, m: ConsumerGroupMember) -> bytes:
        """The member's assigned partitions as a ConsumerProtocolAssignment of the version its
        subscription was written in."""
        names = {t.topic_id: n for n, t in self.ms.topics.items()}
        by_name = {names[t]: sorted(p) for t, p in m.assigned.items() if t in names}
        version = 0
        if m.classic is not None and m.classic.supported_protocols:
            try:
                version = cp.version_of(m.classic.supported_protocols[0][1])
            except cp.MalformedConsumerProtocol:
                version = 0
        return cp.encode_assignment(by_name, None, version)

    def heartbeat(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
                  now_ms: int) -> ClassicOutcome:
        """A Heartbeat: REBALANCE_IN_PROGRESS when the member must rejoin (the group epoch moved
        on, it has partitions to revoke, or partitions it waited for are free)."""
        out = ClassicOutcome(answer=E.NONE)
        try:
            group, m = self._classic_member(group_id, member_id, instance_id, generation)
        except Refused as r:
            out.answer = r.error
            return out
        assert m.classic is not None
        self.ms._set_session_deadline(group_id, m.member_id, now_ms + m.classic.session_timeout_ms, out)
        if (m.member_epoch < group.group_epoch or m.state is MemberState.UNREVOKED_PARTITIONS
                or (m.state is MemberState.UNRELEASED_PARTITIONS and not _waiting_on_unreleased(group, m))):
            out.answer = E.REBALANCE_IN_PROGRESS
            self._rejoin_later(group, m, now_ms, out)
        return out

    # ------------------------------------------------------------------ LeaveGroup
    def leave(self, group_id: str, leaving: list[tuple[str, str | None]], now_ms: int) -> ClassicOutcome:
        """``leaving`` is (member_id, group_instance_id) pairs (member id "" with an instance id:
        an admin removal); the answer is one code each. As Kafka 4.x, any member may be removed
        this way, and the group epoch is bumped once; when only classic members remain, the
        group may turn classic (the membership's downgrader)."""
        out = ClassicOutcome()
        codes: list[int] = []
        gone: list[str] = []
        group = self.ms.groups.get(group_id)
        for member_id, instance_id in leaving:
            if group is None or group.dead:
                codes.append(E.UNKNOWN_MEMBER_ID)
                continue
            if instance_id is None:
                mid: str | None = member_id if member_id in group.members else None
            else:
                mid = group.static_members.get(instance_id)
                if mid is not None and member_id and member_id != mid:
                    codes.append(E.FENCED_INSTANCE_ID)
                    continue
            if mid is None:
                codes.append(E.UNKNOWN_MEMBER_ID)
                continue
            out.log.append(f"[GroupId {group_id}] Member {mid} has left group through explicit `LeaveGroup` request")
            if mid not in gone:
                gone.append(mid)
            codes.append(E.NONE)
        if group is not None and gone:
            self._remove(group, gone, now_ms, out)
        out.answer = codes
        return out


def supports(group: ConsumerGroup, protocol_type: str, names: list[str]) -> bool:
    """Kafka's supportsClassicProtocols: in a non-empty group the member must speak the consumer
    protocol type and share one protocol name with every classic member."""
    if not group.members:
        return bool(protocol_type) and bool(names)
    if protocol_type != cp.PROTOCOL_TYPE:
        return False
    classic = [m.classic for m in group.members.values() if m.classic is not None]
    return any(all(any(n == p for p, _ in c.supported_protocols) for c in classic) for n in names)


def _waiting_on_unreleased(group: ConsumerGroup, m: ConsumerGroupMember) -> bool:
    """Whether a partition of the member's target it does not have yet is still held by another."""
    missing = ps.minus(group.target.get(m.member_id, {}), m.assigned)
    return any(group.owner(t, p) not in (None, m.member_id) for t, p in ps.pairs(missing))
