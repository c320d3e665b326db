"""The classic group protocol and committed offsets of one ``__consumer_offsets`` partition, sans-I/O.

This module owns the group state machine. Nothing here reads a clock, sleeps or touches a file:

* every operation takes ``now_ms``;
* an operation returns an :class:`Outcome`: its answer (or :data:`PARKED` when the answer must
  wait for the rebalance), the ``__consumer_offsets`` records to append before answering, and the
  answers of *other* parked requests that this operation completed;
* deadlines (rebalance, session, pending sync) are data; :meth:`GroupShard.tick` fires the due ones
  and :meth:`GroupShard.next_deadline` tells the edge when to call it.

States, as in Kafka's classic protocol::

    Empty --join--> PreparingRebalance --all joined / timeout--> CompletingRebalance
    CompletingRebalance --leader's SyncGroup--> Stable --join / leave / expiry--> PreparingRebalance
    PreparingRebalance --nobody left--> Empty;  any --DeleteGroups / offsets all expired--> Dead

Parked requests are keyed ``(group_id, "join" | "sync", member_id)``; the edge waits on that key.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kafkapy.coordinator import schema
from kafkapy.protocol.errors import ErrorCode

E = ErrorCode


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


# -- requests and results -----------------------------------------------------------------------------

@dataclass
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str = ""
    client_host: str = ""
    require_known_member_id: bool = True  # JoinGroup v4+
    supports_skip_assignment: bool = True  # JoinGroup v9+ (KIP-814)
    reason: str | None = None


@dataclass
class JoinMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass
class JoinResult:
    error: int
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: list[JoinMember] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass
class SyncResult:
    error: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


class _Parked:
    """The answer to this request comes later, as a completion under ``key``."""

    __slots__ = ("key",)

    def __init__(self, key: tuple[str, str, str]) -> None:
        self.key = key

    def __repr__(self) -> str:
        return f"PARKED{self.key}"


Record = tuple[bytes, bytes | None]  # (key, value); value None is a tombstone


@dataclass
class Outcome:
    response: object = None
    records: list[Record] = field(default_factory=list)
    completions: list[tuple[tuple[str, str, str], object]] = field(default_factory=list)
    #: State changes that only hold once ``records`` are in the log (committed offsets): the
    #: edge calls them after a successful append, so a failed write changes nothing. The
    #: argument is when that happened (None: the time of the request itself).
    after_write: list[Callable[[int | None], None]] = field(default_factory=list)

    #: What to do instead when appending ``records`` failed (the error code, and when).
    on_write_failure: list[Callable[[int, int | None], None]] = field(default_factory=list)

    #: Hold ``after_write`` until the records are committed (every in-sync replica has them),
    #: not merely appended here; a failed replication calls ``on_write_failure`` instead.
    after_commit: bool = False

    #: Lines for the broker log: rebalances, members removed, generations, as Kafka's
    #: coordinator logs them (the edge writes them at INFO).
    log: list[str] = field(default_factory=list)

    def written(self, now_ms: int | None = None) -> None:
        for apply in self.after_write:
            apply(now_ms)
        self.after_write.clear()
        self.on_write_failure.clear()

    def write_failed(self, error: int, now_ms: int | None = None) -> None:
        for apply in self.on_write_failure:
            apply(error, now_ms)
        self.on_write_failure.clear()
        self.after_write.clear()


# -- group state ---------------------------------------------------------------------------------------

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


# -- the shard ----------------------------------------------------------------------------------------

class GroupShard:
    """The groups whose coordinator partition is ``partition``."""

    def __init__(self, partition: int, config: GroupConfig, new_uuid: Callable[[], str]) -> None:
        self.partition = partition
        self.config = config
        self._new_uuid = new_uuid
        self.groups: dict[str, ClassicGroup] = {}

    # ---------------------------------------------------------------- helpers
    def _group_record(self, group: ClassicGroup) -> Record:
        return (schema.encode_group_key(group.group_id), schema.encode_group_value(group.to_value()))

    def _new_member_id(self, prefix: str) -> str:
        return f"{prefix}-{self._new_uuid()}"

    def _live(self, group_id: str) -> ClassicGroup | None:
        g = self.groups.get(group_id)
        return None if g is None or g.state is GroupState.DEAD else g

    def next_deadline(self) -> int | None:
        """The earliest time ``tick`` has something to do, or None."""
        best: int | None = None

        def consider(t: int | None) -> None:
            nonlocal best
            if t is not None and (best is None or t < best):
                best = t

        for g in self.groups.values():
            consider(g.join_deadline)
            consider(g.sync_deadline)
            for t in g.pending_members.values():
                consider(t)
            for m in g.members.values():
                if not (m.awaiting_join or m.awaiting_sync):
                    consider(m.session_deadline)
        return best

    # ---------------------------------------------------------------- JoinGroup
    def join(self, req: JoinRequest, now_ms: int) -> Outcome:
        out = Outcome()
        if not req.group_id:
            out.response = JoinResult(E.INVALID_GROUP_ID, member_id=req.member_id)
            return out
        if not (self.config.min_session_timeout_ms <= req.session_timeout_ms <= self.config.max_session_timeout_ms):
            out.response = JoinResult(E.INVALID_SESSION_TIMEOUT, member_id=req.member_id)
            return out
        unknown = req.member_id == ""
        group = self._live(req.group_id)
        if group is None:
            if not unknown:
                out.response = JoinResult(E.UNKNOWN_MEMBER_ID, member_id=req.member_id)
                return out
            group = self.groups[req.group_id] = ClassicGroup(req.group_id, state_timestamp=now_ms)
        if not group.supports(req.protocol_type, req.protocols):
            out.response = JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id=req.member_id)
            return out
        if unknown:
            self._join_unknown(group, req, now_ms, out)
        else:
            self._join_known(group, req, now_ms, out)
        return out

    def _join_unknown(self, group: ClassicGroup, req: JoinRequest, now_ms: int, out: Outcome) -> None:
        if req.group_instance_id is not None:
            old_id = group.static_members.get(req.group_instance_id)
            new_id = self._new_member_id(req.group_instance_id)
            if old_id is not None and old_id in group.members:
                self._replace_static(group, old_id, new_id, req, now_ms, out)
                return
            self._add_and_rebalance(group, new_id, req, now_ms, out)
            return
        if len(group.members) + len(group.pending_members) >= self.config.max_size:
            out.response = JoinResult(E.GROUP_MAX_SIZE_REACHED)
            return
        new_id = self._new_member_id(req.client_id)
        if req.require_known_member_id:
            # KIP-394: the member must come back with this id; until then it only holds a place.
            group.pending_members[new_id] = now_ms + req.session_timeout_ms
            out.response = JoinResult(E.MEMBER_ID_REQUIRED, member_id=new_id)
            return
        self._add_and_rebalance(group, new_id, req, now_ms, out)

    def _join_known(self, group: ClassicGroup, req: JoinRequest, now_ms: int, out: Outcome) -> None:
        member_id = req.member_id
        if group.is_static_fenced(member_id, req.group_instance_id):
            out.response = JoinResult(E.FENCED_INSTANCE_ID, member_id=member_id)
            return
        if member_id in group.pending_members:
            del group.pending_members[member_id]
            self._add_and_rebalance(group, member_id, req, now_ms, out)
            return
        member = group.members.get(member_id)
        if member is None or group.state is GroupState.EMPTY:
            out.response = JoinResult(E.UNKNOWN_MEMBER_ID, member_id=member_id)
            return
        if group.state is GroupState.PREPARING_REBALANCE:
            self._update_member(group, member, req, now_ms)
            out.response = self._park_join(group, member)
            self._maybe_complete_join(group, now_ms, out)
        elif group.state is GroupState.COMPLETING_REBALANCE:
            if member.same_protocols(req.protocols):
                # A retried JoinGroup: answer with the current generation again.
                out.response = self._join_result(group, member)
                member.session_deadline = now_ms + member.session_timeout_ms
            else:
                self._update_member(group, member, req, now_ms)
                self._prepare_rebalance(group, now_ms, out, f"{member_id} changed its protocols")
                out.response = self._park_join(group, member)
                self._maybe_complete_join(group, now_ms, out)
        else:  # STABLE
            if member_id == group.leader or not member.same_protocols(req.protocols):
                self._update_member(group, member, req, now_ms)
                self._prepare_rebalance(group, now_ms, out, f"{member_id} rejoined")
                out.response = self._park_join(group, member)
                self._maybe_complete_join(group, now_ms, out)
            else:
                member.session_deadline = now_ms + member.session_timeout_ms
                out.response = self._join_result(group, member)

    def _update_member(self, group: ClassicGroup, member: Member, req: JoinRequest, now_ms: int) -> None:
        member.protocols = list(req.protocols)
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        member.client_id, member.client_host = req.client_id, req.client_host
        member.session_deadline = now_ms + req.session_timeout_ms

    def _add_and_rebalance(self, group: ClassicGroup, member_id: str, req: JoinRequest, now_ms: int,
                           out: Outcome) -> None:
        if len(group.members) >= self.config.max_size:
            out.response = JoinResult(E.GROUP_MAX_SIZE_REACHED, member_id=member_id)
            return
        member = Member(member_id, req.group_instance_id, req.client_id, req.client_host,
                        req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type,
                        list(req.protocols), is_new=True,
                        session_deadline=now_ms + req.session_timeout_ms)
        if not group.members:
            group.protocol_type = req.protocol_type
        group.members[member_id] = member
        if req.group_instance_id is not None:
            group.static_members[req.group_instance_id] = member_id
        if group.leader is None:
            group.leader = member_id
        out.response = self._park_join(group, member)
        if group.state is GroupState.PREPARING_REBALANCE:
            if group.initial_join_limit is not None:
                # Another member arrived during the initial delay: wait a little longer.
                group.join_deadline = min(now_ms + self.config.initial_rebalance_delay_ms,
                                          group.initial_join_limit)
        else:
            self._prepare_rebalance(group, now_ms, out, f"{member_id} joined")
        self._maybe_complete_join(group, now_ms, out)

    def _replace_static(self, group: ClassicGroup, old_id: str, new_id: str, req: JoinRequest,
                        now_ms: int, out: Outcome) -> None:
        """KIP-345: a static member came back with a new member id; the old id is fenced."""
        old = group.members.pop(old_id)
        if old.awaiting_join:
            out.completions.append(((group.group_id, "join", old_id), JoinResult(E.FENCED_INSTANCE_ID, member_id=old_id)))
        if old.awaiting_sync:
            out.completions.append(((group.group_id, "sync", old_id), SyncResult(E.FENCED_INSTANCE_ID)))
        old.member_id = new_id
        old.awaiting_sync = False
        group.members[new_id] = old
        group.static_members[req.group_instance_id or ""] = new_id
        if group.leader == old_id:
            group.leader = new_id
        old.client_id, old.client_host = req.client_id, req.client_host
        old.session_timeout_ms, old.rebalance_timeout_ms = req.session_timeout_ms, req.rebalance_timeout_ms
        old.session_deadline = now_ms + req.session_timeout_ms
        if group.state is GroupState.STABLE:
            if old.same_protocols(req.protocols):
                # Same subscription: no rebalance, the member gets its old assignment on SyncGroup.
                out.records.append(self._group_record(group))
                result = self._join_result(group, old)
                result.members = []
                if new_id == group.leader:
                    # KIP-814: a returning static leader keeps the group's assignment. A v9+
                    # client is told it leads but must skip assigning; an older one is given the
                    # old leader id, so it acts as a follower and simply syncs.
                    if req.supports_skip_assignment:
                        result.skip_assignment = True
                        result.members = self._join_members(group)
                    else:
                        result.leader = old_id
                out.response = result
                return
            old.protocols = list(req.protocols)
            self._prepare_rebalance(group, now_ms, out, f"static member {req.group_instance_id} changed its protocols")
            out.response = self._park_join(group, old)
            self._maybe_complete_join(group, now_ms, out)
        elif group.state is GroupState.COMPLETING_REBALANCE:
            old.protocols = list(req.protocols)
            self._prepare_rebalance(group, now_ms, out, f"static member {req.group_instance_id} rejoined")
            out.response = self._park_join(group, old)
            self._maybe_complete_join(group, now_ms, out)
        else:  # PREPARING_REBALANCE
            old.protocols = list(req.protocols)
            out.response = self._park_join(group, old)
            self._maybe_complete_join(group, now_ms, out)

    def _park_join(self, group: ClassicGroup, member: Member) -> _Parked:
        member.awaiting_join = True
        return _Parked((group.group_id, "join", member.member_id))

    def _join_members(self, group: ClassicGroup) -> list[JoinMember]:
        return [JoinMember(m.member_id, m.group_instance_id, m.metadata(group.protocol_name or ""))
                for m in group.members.values()]

    def _join_result(self, group: ClassicGroup, member: Member) -> JoinResult:
        return JoinResult(
            E.NONE, generation=group.generation, protocol_type=group.protocol_type,
            protocol_name=group.protocol_name, leader=group.leader or "", member_id=member.member_id,
            members=self._join_members(group) if member.member_id == group.leader else [],
        )

    def _prepare_rebalance(self, group: ClassicGroup, now_ms: int, out: Outcome, reason: str) -> None:
        if group.state is GroupState.COMPLETING_REBALANCE:
            # Syncs waiting for the leader's assignment are told to rejoin.
            for m in group.members.values():
                if m.awaiting_sync:
                    self._answer_sync(group, m, SyncResult(E.REBALANCE_IN_PROGRESS), now_ms, out)
        group.sync_deadline = None
        was_empty = group.state is GroupState.EMPTY
        out.log.append(f"Preparing to rebalance group {group.group_id} in state {group.state.value} "
                       f"with old generation {group.generation} (reason: {reason})")
        group.transition(GroupState.PREPARING_REBALANCE, now_ms)
        if was_empty and self.config.initial_rebalance_delay_ms > 0:
            group.initial_join_limit = now_ms + max(group.max_rebalance_timeout(), self.config.initial_rebalance_delay_ms)
            group.join_deadline = min(now_ms + self.config.initial_rebalance_delay_ms, group.initial_join_limit)
        else:
            group.initial_join_limit = None
            group.join_deadline = now_ms + group.max_rebalance_timeout()

    @staticmethod
    def _answer_sync(group: ClassicGroup, m: Member, result: SyncResult, now_ms: int, out: Outcome) -> None:
        """Answer a member's parked SyncGroup. As Kafka's propagateAssignment, the member's
        session starts afresh from the answer: while it waited its session was not checked,
        and its deadline still dates from its request (or its join), so a wait on a slow
        commit or on a leader that never synced would expire it the moment it is answered."""
        m.awaiting_sync = False
        # Never earlier than it was (a caller without the answer time passes the leader's
        # request time, which may precede this member's own SyncGroup).
        m.session_deadline = max(m.session_deadline, now_ms + m.session_timeout_ms)
        out.completions.append(((group.group_id, "sync", m.member_id), result))

    def _maybe_complete_join(self, group: ClassicGroup, now_ms: int, out: Outcome) -> None:
        if group.state is not GroupState.PREPARING_REBALANCE:
            return
        if group.initial_join_limit is None and group.all_joined():
            self._complete_join(group, now_ms, out)

    def _complete_join(self, group: ClassicGroup, now_ms: int, out: Outcome) -> None:
        group.join_deadline = None
        group.initial_join_limit = None
        # Dynamic members that did not rejoin in time are gone; static ones keep their place.
        gone = [m.member_id for m in group.members.values() if not m.awaiting_join and m.group_instance_id is None]
        for mid in gone:
            self._remove_member(group, mid)
        if gone:
            out.log.append(f"Group {group.group_id} removed dynamic members who did not rejoin: {', '.join(gone)}")
        group.pending_members.clear()
        group.generation += 1
        if not group.members:
            group.protocol_name = None
            group.leader = None
            group.transition(GroupState.EMPTY, now_ms)
            out.records.append(self._group_record(group))
            out.log.append(f"Group {group.group_id} with generation {group.generation} is now empty")
            return
        group.protocol_name = group.select_protocol()
        if group.leader not in group.members:
            group.leader = next(iter(group.members))
        group.transition(GroupState.COMPLETING_REBALANCE, now_ms)
        group.sync_deadline = now_ms + group.max_rebalance_timeout()
        out.log.append(f"Stabilized group {group.group_id} generation {group.generation} "
                       f"with {len(group.members)} members (leader {group.leader})")
        for m in group.members.values():
            m.assignment = b""
            m.is_new = False
            m.session_deadline = now_ms + m.session_timeout_ms
            if m.awaiting_join:
                m.awaiting_join = False
                out.completions.append(((group.group_id, "join", m.member_id), self._join_result(group, m)))

    def _remove_member(self, group: ClassicGroup, member_id: str) -> Member | None:
        m = group.members.pop(member_id, None)
        if m is None:
            return None
        if m.group_instance_id is not None and group.static_members.get(m.group_instance_id) == member_id:
            del group.static_members[m.group_instance_id]
        if group.leader == member_id:
            group.leader = next(iter(group.members), None)
        return m

    def _member_gone(self, group: ClassicGroup, member_id: str, now_ms: int, out: Outcome, reason: str,
                     error: int) -> None:
        """Remove a member (left, expired, or removed by an admin) and rebalance what is left."""
        m = self._remove_member(group, member_id)
        if m is None:
            return
        out.log.append(f"Group {group.group_id}: {reason}")
        if m.awaiting_join:
            out.completions.append(((group.group_id, "join", member_id), JoinResult(error, member_id=member_id)))
        if m.awaiting_sync:
            out.completions.append(((group.group_id, "sync", member_id), SyncResult(error)))
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, now_ms, out, reason)
            if not group.members:
                self._complete_join(group, now_ms, out)
            else:
                self._maybe_complete_join(group, now_ms, out)
        elif group.state is GroupState.PREPARING_REBALANCE:
            if not group.members:
                self._complete_join(group, now_ms, out)
            else:
                self._maybe_complete_join(group, now_ms, out)

    # ---------------------------------------------------------------- SyncGroup
    def sync(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
             protocol_type: str | None, protocol_name: str | None,
             assignments: Iterable[tuple[str, bytes]], now_ms: int) -> Outcome:
        out = Outcome()
        group = self._live(group_id)
        if group is None or member_id not in group.members:
            if group is not None and group.is_static_fenced(member_id, instance_id):
                out.response = SyncResult(E.FENCED_INSTANCE_ID)
            else:
                out.response = SyncResult(E.UNKNOWN_MEMBER_ID)
            return out
        if group.is_static_fenced(member_id, instance_id):
            out.response = SyncResult(E.FENCED_INSTANCE_ID)
            return out
        if generation != group.generation:
            out.response = SyncResult(E.ILLEGAL_GENERATION)
            return out
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
                protocol_name is not None and protocol_name != group.protocol_name):
            out.response = SyncResult(E.INCONSISTENT_GROUP_PROTOCOL)
            return out
        member = group.members[member_id]
        if group.state is GroupState.PREPARING_REBALANCE:
            out.response = SyncResult(E.REBALANCE_IN_PROGRESS)
        elif group.state is GroupState.COMPLETING_REBALANCE:
            member.awaiting_sync = True
            member.session_deadline = now_ms + member.session_timeout_ms
            out.response = _Parked((group_id, "sync", member_id))
            if member_id == group.leader:
                # The group is stored with the leader's assignment first; as in Kafka, it becomes
                # Stable, and every waiting sync (the leader's too) is answered, only once that
                # record is committed; if it cannot be, all of them get the error and the group
                # rebalances.
                given = {mid: bytes(a) for mid, a in assignments}
                generation = group.generation
                out.records.append((schema.encode_group_key(group_id), schema.encode_group_value(
                    group.to_value(assignments=given, state_timestamp=now_ms))))

                def stored(at_ms: int | None) -> None:
                    if group.state is not GroupState.COMPLETING_REBALANCE or group.generation != generation:
                        return
                    at = now_ms if at_ms is None else at_ms
                    for m in group.members.values():
                        m.assignment = given.get(m.member_id, b"")
                    group.transition(GroupState.STABLE, now_ms)  # as in the record just written
                    group.sync_deadline = None
                    for m in group.members.values():
                        if m.awaiting_sync:
                            self._answer_sync(group, m, self._sync_result(group, m), at, out)

                def not_stored(error: int, at_ms: int | None) -> None:
                    # As Kafka: everyone waiting is told, and the group rebalances.
                    if group.state is not GroupState.COMPLETING_REBALANCE or group.generation != generation:
                        return
                    at = now_ms if at_ms is None else at_ms
                    for m in group.members.values():
                        m.assignment = b""
                        if m.awaiting_sync:
                            self._answer_sync(group, m, SyncResult(error), at, out)
                    self._prepare_rebalance(group, at, out, "storing the group's assignment failed")

                out.after_write.append(stored)
                out.on_write_failure.append(not_stored)
                out.after_commit = True
        elif group.state is GroupState.STABLE:
            member.session_deadline = now_ms + member.session_timeout_ms
            out.response = self._sync_result(group, member)
        else:
            out.response = SyncResult(E.UNKNOWN_MEMBER_ID)
        return out

    def _sync_result(self, group: ClassicGroup, member: Member) -> SyncResult:
        return SyncResult(E.NONE, group.protocol_type, group.protocol_name, member.assignment)

    # ---------------------------------------------------------------- Heartbeat
    def heartbeat(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
                  now_ms: int) -> Outcome:
        out = Outcome(response=E.NONE)
        group = self._live(group_id)
        if group is None:
            out.response = E.UNKNOWN_MEMBER_ID
            return out
        if group.is_static_fenced(member_id, instance_id):
            out.response = E.FENCED_INSTANCE_ID
            return out
        member = group.members.get(member_id)
        if member is None or group.state is GroupState.EMPTY:
            out.response = E.UNKNOWN_MEMBER_ID
            return out
        if generation != group.generation:
            out.response = E.ILLEGAL_GENERATION
            return out
        member.session_deadline = now_ms + member.session_timeout_ms
        if group.state is GroupState.PREPARING_REBALANCE:
            out.response = E.REBALANCE_IN_PROGRESS
        return out

    # ---------------------------------------------------------------- LeaveGroup
    def leave(self, group_id: str, leaving: list[tuple[str, str | None]], now_ms: int) -> Outcome:
        """``leaving`` is (member_id, group_instance_id) pairs; the response is one code each."""
        out = Outcome()
        group = self._live(group_id)
        codes: list[int] = []
        for member_id, instance_id in leaving:
            if group is None:
                codes.append(E.UNKNOWN_MEMBER_ID)
                continue
            if instance_id is not None:
                known = group.static_members.get(instance_id)
                if known is None:
                    codes.append(E.UNKNOWN_MEMBER_ID)
                    continue
                if member_id and member_id != known:
                    codes.append(E.FENCED_INSTANCE_ID)
                    continue
                member_id = known
            if member_id in group.pending_members:
                del group.pending_members[member_id]
                codes.append(E.NONE)
                self._maybe_complete_join(group, now_ms, out)
                continue
            if member_id not in group.members:
                codes.append(E.UNKNOWN_MEMBER_ID)
                continue
            self._member_gone(group, member_id, now_ms, out, f"removing member {member_id} on LeaveGroup", E.UNKNOWN_MEMBER_ID)
            codes.append(E.NONE)
        out.response = codes
        return out

    # ---------------------------------------------------------------- timers
    def tick(self, now_ms: int) -> Outcome:
        out = Outcome()
        for group in list(self.groups.values()):
            if group.state is GroupState.DEAD:
                continue
            for mid, deadline in list(group.pending_members.items()):
                if deadline <= now_ms:
                    del group.pending_members[mid]
                    self._maybe_complete_join(group, now_ms, out)
            if group.state is GroupState.PREPARING_REBALANCE and group.join_deadline is not None \
                    and group.join_deadline <= now_ms:
                self._complete_join(group, now_ms, out)
            if group.sync_deadline is not None and group.sync_deadline <= now_ms \
                    and group.state is GroupState.COMPLETING_REBALANCE:
                # Members that never sent SyncGroup within the rebalance timeout are dropped.
                late = [m.member_id for m in group.members.values() if not m.awaiting_sync]
                group.sync_deadline = None
                for mid in late:
                    self._member_gone(group, mid, now_ms, out, f"removing member {mid}: no SyncGroup within the rebalance timeout",
                                      E.UNKNOWN_MEMBER_ID)
            for m in list(group.members.values()):
                if m.awaiting_join or m.awaiting_sync:
                    continue
                if m.session_deadline <= now_ms and m.member_id in group.members:
                    self._member_gone(group, m.member_id, now_ms, out,
                                      f"removing member {m.member_id} on heartbeat expiration "
                                      f"(session timeout {m.session_timeout_ms} ms)", E.UNKNOWN_MEMBER_ID)
        return out

    # ---------------------------------------------------------------- offsets
    def validate_commit(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
                        now_ms: int) -> int:
        """The error for a whole OffsetCommit, NONE when its partitions may be written."""
        group = self._live(group_id)
        if group is None:
            return E.NONE if generation < 0 else E.ILLEGAL_GENERATION
        if generation < 0 and group.state is GroupState.EMPTY:
            return E.NONE  # admin tools and consumers that only store offsets
        if generation >= 0 or member_id or instance_id is not None:
            if group.is_static_fenced(member_id, instance_id):
                return E.FENCED_INSTANCE_ID
            member = group.members.get(member_id)
            if member is None:
                return E.UNKNOWN_MEMBER_ID
            if generation != group.generation:
                return E.ILLEGAL_GENERATION
            if group.state is GroupState.COMPLETING_REBALANCE:
                return E.REBALANCE_IN_PROGRESS
            member.session_deadline = now_ms + member.session_timeout_ms
            return E.NONE
        if group.state is not GroupState.EMPTY:
            # Offsets without membership are only accepted while nobody is in the group.
            return E.UNKNOWN_MEMBER_ID
        return E.NONE

    def commit(self, group_id: str, offsets: list[tuple[str, int, int, int, str | None]], now_ms: int,
               expire_timestamp: int = -1) -> Outcome:
        """Store (topic, partition, offset, leader_epoch, metadata) entries already validated as a
        whole; the response is one error code per entry (OFFSET_METADATA_TOO_LARGE per partition)."""
        out = Outcome()
        codes = []
        updates: dict[tuple[str, int], CommittedOffset] = {}
        for topic, partition, offset, epoch, metadata in offsets:
            metadata = metadata or ""
            if len(metadata.encode("utf-8")) > self.config.offset_metadata_max_bytes:
                codes.append(E.OFFSET_METADATA_TOO_LARGE)
                continue
            updates[(topic, partition)] = CommittedOffset(offset, epoch, metadata, now_ms, expire_timestamp)
            out.records.append((schema.encode_offset_key(group_id, topic, partition),
                                schema.encode_offset_value(schema.OffsetValue(
                                    offset, epoch, metadata, now_ms, expire_timestamp))))
            codes.append(E.NONE)
        out.response = codes

        def store(_at_ms: int | None) -> None:
            group = self._live(group_id)
            if group is None:
                group = self.groups[group_id] = ClassicGroup(group_id, state_timestamp=now_ms)
            group.offsets.update(updates)

        if updates:
            out.after_write.append(store)
        return out

    def fetch_offsets(self, group_id: str, partitions: list[tuple[str, int]] | None
                      ) -> list[tuple[str, int, CommittedOffset | None]]:
        """Committed offsets of the listed partitions (None: every partition with one)."""
        group = self._live(group_id)
        stored = group.offsets if group is not None else {}
        if partitions is None:
            return [(t, p, c) for (t, p), c in sorted(stored.items())]
        return [(t, p, stored.get((t, p))) for t, p in partitions]

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]) -> Outcome:
        """OffsetDelete: top-level error code, then one code per partition."""
        out = Outcome()
        group = self._live(group_id)
        if group is None:
            out.response = (E.GROUP_ID_NOT_FOUND, [])
            return out
        subscribed: set[str] | None = set()
        if group.state is not GroupState.EMPTY:
            if group.protocol_type != "consumer":
                out.response = (E.NON_EMPTY_GROUP, [])
                return out
            # Unreadable subscriptions count as subscribed to everything.
            subscribed = group.subscribed_topics()
        codes = []
        for topic, partition in partitions:
            if subscribed is None or topic in subscribed:
                codes.append(E.GROUP_SUBSCRIBED_TO_TOPIC)
                continue
            if group.offsets.pop((topic, partition), None) is not None:
                out.records.append((schema.encode_offset_key(group_id, topic, partition), None))
            codes.append(E.NONE)
        out.response = (E.NONE, codes)
        return out

    def delete_group(self, group_id: str, now_ms: int) -> Outcome:
        out = Outcome()
        group = self._live(group_id)
        if group is None:
            out.response = E.GROUP_ID_NOT_FOUND
            return out
        if group.state is not GroupState.EMPTY:
            out.response = E.NON_EMPTY_GROUP
            return out
        self._tombstone_group(group, out, now_ms)
        out.response = E.NONE
        return out

    def _tombstone_group(self, group: ClassicGroup, out: Outcome, now_ms: int) -> None:
        for topic, partition in sorted(group.offsets):
            out.records.append((schema.encode_offset_key(group.group_id, topic, partition), None))
        out.records.append((schema.encode_group_key(group.group_id), None))
        group.offsets.clear()
        group.transition(GroupState.DEAD, now_ms)
        del self.groups[group.group_id]

    def expire_offsets(self, now_ms: int) -> Outcome:
        """Drop offsets past ``offsets.retention.minutes`` (KIP-211 rules); empty groups with no
        offsets left are deleted."""
        out = Outcome()
        retention = self.config.offsets_retention_ms
        for group in list(self.groups.values()):
            if group.state is GroupState.DEAD:
                continue
            expired: list[tuple[str, int]] = []
            if group.protocol_type and group.state is GroupState.EMPTY:
                base = group.state_timestamp
                for tp, c in group.offsets.items():
                    if (c.expire_timestamp >= 0 and c.expire_timestamp <= now_ms) or (
                            c.expire_timestamp < 0 and max(base, c.commit_timestamp) + retention <= now_ms):
                        expired.append(tp)
            elif not group.protocol_type:
                for tp, c in group.offsets.items():
                    limit = c.expire_timestamp if c.expire_timestamp >= 0 else c.commit_timestamp + retention
                    if limit <= now_ms:
                        expired.append(tp)
            elif group.state is GroupState.STABLE:
                subscribed = group.subscribed_topics()
                if subscribed is not None:
                    for tp, c in group.offsets.items():
                        if tp[0] not in subscribed and c.commit_timestamp + retention <= now_ms:
                            expired.append(tp)
            for topic, partition in expired:
                del group.offsets[(topic, partition)]
                out.records.append((schema.encode_offset_key(group.group_id, topic, partition), None))
            if group.state is GroupState.EMPTY and not group.offsets and (expired or not group.protocol_type):
                out.records.append((schema.encode_group_key(group.group_id), None))
                group.transition(GroupState.DEAD, now_ms)
                del self.groups[group.group_id]
        return out

    # ---------------------------------------------------------------- loading
    def replay(self, key: bytes, value: bytes | None, now_ms: int) -> None:
        """Apply one ``__consumer_offsets`` record read back from the log."""
        k = schema.decode_key(key)
        if isinstance(k, schema.OffsetKey):
            if value is None:
                g = self.groups.get(k.group)
                if g is not None:
                    g.offsets.pop((k.topic, k.partition), None)
                return
            v = schema.decode_offset_value(value)
            g = self.groups.get(k.group)
            if g is None:
                g = self.groups[k.group] = ClassicGroup(k.group, state_timestamp=now_ms)
            g.offsets[(k.topic, k.partition)] = CommittedOffset(
                v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp)
        elif isinstance(k, schema.GroupKey):
            if value is None:
                g = self.groups.get(k.group)
                if g is not None:
                    # The group's offsets were tombstoned before it; keep any committed after.
                    g.members.clear()
                    g.static_members.clear()
                    g.protocol_type = g.protocol_name = g.leader = None
                    g.generation = 0
                    g.state = GroupState.EMPTY
                    if not g.offsets:
                        del self.groups[k.group]
                return
            v = schema.decode_group_value(value)
            g = self.groups.get(k.group)
            if g is None:
                g = self.groups[k.group] = ClassicGroup(k.group)
            g.protocol_type = v.protocol_type or None
            g.generation = v.generation
            g.protocol_name = v.protocol
            g.leader = v.leader
            g.members.clear()
            g.static_members.clear()
            for mv in v.members:
                g.members[mv.member_id] = Member(
                    mv.member_id, mv.group_instance_id, mv.client_id, mv.client_host,
                    mv.rebalance_timeout_ms, mv.session_timeout_ms, v.protocol_type,
                    [(v.protocol or "", mv.subscription)], mv.assignment)
                if mv.group_instance_id is not None:
                    g.static_members[mv.group_instance_id] = mv.member_id
            g.state = GroupState.STABLE if g.members else GroupState.EMPTY
            g.state_timestamp = v.current_state_timestamp if v.current_state_timestamp >= 0 else now_ms

    def finish_load(self, now_ms: int) -> None:
        """After the log is replayed: loaded members must heartbeat within their session from now."""
        for g in self.groups.values():
            for m in g.members.values():
                m.session_deadline = now_ms + m.session_timeout_ms


PARKED_TYPE = _Parked
