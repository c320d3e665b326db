"""The classic group protocol's membership and rebalance state machine (the classic half of
Kafka's GroupMetadataManager), sans-I/O.

JoinGroup, SyncGroup, Heartbeat and LeaveGroup, and the deadlines they leave behind (rebalance,
session, pending member, pending sync): :meth:`ClassicGroupMembership.tick` fires the due ones
and :meth:`ClassicGroupMembership.next_deadline` tells the edge when to call it. Every operation
takes ``now_ms`` and returns an :class:`~kafkapy.coordinator.outcome.Outcome`.

States, as in Kafka's classic protocol::

    Empty --join--> PreparingRebalance --all joined / timeout--> CompletingRebalance
    CompletingRebalance --leader's SyncGroup--> Stable --join / leave / expiry--> PreparingRebalance
    PreparingRebalance --nobody left--> Empty

Parked requests are keyed ``(group_id, "join" | "sync", member_id)``; the edge waits on that key.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kafkapy.coordinator import schema
from kafkapy.coordinator.classic_group import (
    ClassicGroup,
    GroupConfig,
    GroupState,
    Member,
    group_record,
    live_group,
)
from kafkapy.coordinator.outcome import (
    JoinMember,
    JoinRequest,
    JoinResult,
    Outcome,
    Parked,
    SyncResult,
)
from kafkapy.protocol.errors import ErrorCode

E = ErrorCode


class ClassicGroupMembership:
    """Members joining, syncing, heartbeating and leaving the classic groups of one shard.

    ``groups`` is the shard's table, shared with its committed offsets."""

    def __init__(self, config: GroupConfig, groups: dict[str, ClassicGroup],
                 new_uuid: Callable[[], str]) -> None:
        self.config = config
        self.groups = groups
        self._new_uuid = new_uuid

    def _new_member_id(self, prefix: str) -> str:
        return f"{prefix}-{self._new_uuid()}"

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
        group = live_group(self.groups, req.group_id)
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
            out.completions.append(
                ((group.group_id, "join", old_id), JoinResult(E.FENCED_INSTANCE_ID, member_id=old_id)))
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
                out.records.append(group_record(group))
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

    def _park_join(self, group: ClassicGroup, member: Member) -> Parked:
        member.awaiting_join = True
        return Parked((group.group_id, "join", member.member_id))

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
            group.initial_join_limit = now_ms + max(group.max_rebalance_timeout(),
                                                    self.config.initial_rebalance_delay_ms)
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
            out.records.append(group_record(group))
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
        group = live_group(self.groups, group_id)
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
            out.response = Parked((group_id, "sync", member_id))
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
        group = live_group(self.groups, group_id)
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
        group = live_group(self.groups, group_id)
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
            self._member_gone(group, member_id, now_ms, out, f"removing member {member_id} on LeaveGroup",
                              E.UNKNOWN_MEMBER_ID)
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
                    self._member_gone(group, mid, now_ms, out,
                                      f"removing member {mid}: no SyncGroup within the rebalance timeout",
                                      E.UNKNOWN_MEMBER_ID)
            for m in list(group.members.values()):
                if m.awaiting_join or m.awaiting_sync:
                    continue
                if m.session_deadline <= now_ms and m.member_id in group.members:
                    self._member_gone(group, m.member_id, now_ms, out,
                                      f"removing member {m.member_id} on heartbeat expiration "
                                      f"(session timeout {m.session_timeout_ms} ms)", E.UNKNOWN_MEMBER_ID)
        return out
