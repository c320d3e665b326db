"""ConsumerGroupHeartbeat, leaving, and the session and rebalance timeouts of KIP-848 consumer
groups (the consumer half of Kafka's GroupMetadataManager), sans-I/O.

Every operation takes ``now_ms`` and returns a :class:`HeartbeatOutcome`: the answer and the
records to append before answering. The records are already applied to the groups (each is
generated, then replayed, so a loaded group equals the live one); when the append fails the
edge calls :meth:`HeartbeatOutcome.rollback`. Deadlines are not records: :meth:`tick` fires the
due ones and :meth:`next_deadline` says when.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Set
from dataclasses import dataclass, field, replace
from typing import Protocol

from kafkapy.coordinator.consumer import partitions as ps
from kafkapy.coordinator.consumer import records as rec
from kafkapy.coordinator.consumer import regex as rx
from kafkapy.coordinator.consumer.assignors import ASSIGNORS, MemberSpec
from kafkapy.coordinator.consumer.group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerGroupMember,
    TopicInfo,
    member_tombstones,
    metadata_hash,
)
from kafkapy.coordinator.consumer.partitions import Assignment
from kafkapy.coordinator.consumer.reconcile import MemberState, Reconciliation, next_step
from kafkapy.coordinator.modern_group import Refused, Undoable
from kafkapy.protocol.errors import ErrorCode

E = ErrorCode


@dataclass(frozen=True)
class ConsumerGroupConfig:
    """The ``group.consumer.*`` settings the core uses (Kafka's names and defaults)."""

    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    max_size: int = 2**31 - 1
    #: ``group.consumer.assignors``: the first is the default
    assignors: tuple[str, ...] = ("uniform", "range")
    regex_refresh_interval_ms: int = 600_000


@dataclass
class HeartbeatRequest:
    """A ConsumerGroupHeartbeat request; None (or -1) fields mean "unchanged"."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    #: the partitions the member owns, by topic id; None when not sent
    owned: Mapping[ps.TopicId, frozenset[int]] | None = None
    client_id: str = ""
    client_host: str = ""
    version: int = 1
    #: the topics among those given that the sender may DESCRIBE (None: all); regexes resolved
    #: on this heartbeat keep only those, as Kafka 4.4 filters them by the caller's ACLs
    may_describe: Callable[[Iterable[str]], Set[str]] | None = None


@dataclass
class HeartbeatResponse:
    error: int = 0
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    #: the member's whole assignment, when sent (None: unchanged since the last answer)
    assignment: Assignment | None = None


class Downgrader(Protocol):
    """Whether ``group`` becomes classic once the members ``leaving`` are gone, and if so the
    conversion (an object for the edge); ``rebalance``: whether the classic group then rebalances."""

    def __call__(self, group: ConsumerGroup, leaving: frozenset[str], now_ms: int,
                 rebalance: bool = True) -> object | None: ...


@dataclass
class HeartbeatOutcome(Undoable):
    """What an operation hands the edge: its answer, the records to append first, log lines;
    :meth:`rollback` when the records could not be appended."""

    response: HeartbeatResponse | None = None
    records: list[rec.GroupRecord] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    #: groups this operation turned classic (online downgrade): what :attr:`ConsumerGroupMembership.downgrader`
    #: answered for each; the edge writes their classic records after ``records`` and swaps the group
    converted: list[object] = field(default_factory=list)


@dataclass(frozen=True)
class MemberDescription:
    """A member as ConsumerGroupDescribe shows it (partitions by topic id)."""

    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: Assignment
    target_assignment: Assignment
    #: ConsumerGroupDescribe v1's MemberType (KIP-1099): 0 a classic-protocol member, 1 a consumer one
    member_type: int = 1


@dataclass(frozen=True)
class GroupDescription:
    """A group as ConsumerGroupDescribe shows it; ``error`` GROUP_ID_NOT_FOUND when absent."""

    group_id: str
    error: int = 0
    state: str = "Dead"
    group_epoch: int = -1
    assignment_epoch: int = -1
    assignor_name: str = ""
    members: tuple[MemberDescription, ...] = ()


_Refused = Refused


def _blank(value: str | None) -> bool:
    """Java's ``value != null && value.trim().isEmpty()`` (trim drops every char up to U+0020)."""
    return value is not None and not value.lstrip("".join(map(chr, range(33))))


def request_refusal(req: HeartbeatRequest, assignors: tuple[str, ...]) -> Refused | None:
    """Kafka 4.4's checks of a heartbeat before any group is looked at (GroupCoordinatorService,
    ahead of routing to the coordinator), in its order and words; None when it passes. An empty
    subscription list is a valid join, a null one (with a null regex) is not."""
    epoch = req.member_epoch
    if (req.version >= 1 or epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH) and _blank(req.member_id):
        return _Refused(E.INVALID_REQUEST, "MemberId can't be empty.")
    for value, name in ((req.group_id, "GroupId"), (req.instance_id, "InstanceId"), (req.rack_id, "RackId")):
        if _blank(value):
            return _Refused(E.INVALID_REQUEST, f"{name} can't be empty.")
    if epoch == 0:
        if req.rebalance_timeout_ms == -1:
            return _Refused(E.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
        if req.owned is None or req.owned:
            return _Refused(E.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining.")
        if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
            return _Refused(E.INVALID_REQUEST, "Either SubscribedTopicNames or SubscribedTopicRegex must be "
                            "non-null when (re-)joining.")
    elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if req.instance_id is None:
            return _Refused(E.INVALID_REQUEST, "InstanceId can't be null.")
    elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        return _Refused(E.INVALID_REQUEST, "MemberEpoch is invalid.")
    if req.server_assignor is not None and req.server_assignor not in assignors:
        return _Refused(E.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {req.server_assignor} is not supported. "
                        f"Supported assignors: {', '.join(assignors)}.")
    return None


def _error(error: int, message: str | None = None, member_id: str | None = None) -> HeartbeatOutcome:
    return HeartbeatOutcome(HeartbeatResponse(error, message, member_id))


class ConsumerGroupMembership:
    """The consumer groups of one ``__consumer_offsets`` partition: heartbeats, leaves, timers,
    replay and describe. ``topics`` is the current view of topic metadata by name (set it with
    :meth:`set_topics`), ``new_uuid`` makes member ids for v0 clients."""

    def __init__(self, config: ConsumerGroupConfig, new_uuid: Callable[[], str],
                 groups: dict[str, ConsumerGroup] | None = None,
                 config_for: Callable[[str], ConsumerGroupConfig] | None = None) -> None:
        self.config = config
        self.groups: dict[str, ConsumerGroup] = {} if groups is None else groups
        self._new_uuid = new_uuid
        self._config_for = config_for
        self.topics: Mapping[str, TopicInfo] = {}
        self.topics_version = -1
        #: Online downgrade (``coordinator.migration.downgrader`` makes one): asked before a member
        #: is removed (leave with epoch -1, or fenced); a non-None answer means the group becomes
        #: classic instead: its records are all deleted and the answer goes to ``converted``.
        self.downgrader: Downgrader | None = None
        #: (group, member) -> when its session ends
        self.session_deadlines: dict[tuple[str, str], int] = {}
        #: (group, member) -> (when its revocation must be done, at which member epoch)
        self.rebalance_deadlines: dict[tuple[str, str], tuple[int, int]] = {}

    def group_config(self, group_id: str) -> ConsumerGroupConfig:
        return self.config if self._config_for is None else self._config_for(group_id)

    def set_topics(self, topics: Mapping[str, TopicInfo], version: int) -> None:
        """The topic metadata changed (``version``: the image offset). Groups notice on their next
        heartbeat: a changed subscription bumps their epoch then."""
        self.topics = dict(topics)
        self.topics_version = version

    # ------------------------------------------------------------------ timers
    def next_deadline(self) -> int | None:
        times = list(self.session_deadlines.values())
        times += [t for t, _ in self.rebalance_deadlines.values()]
        return min(times, default=None)

    def tick(self, now_ms: int) -> HeartbeatOutcome:
        """Fence the members whose session or rebalance timeout passed."""
        out = HeartbeatOutcome()
        for key, deadline in sorted(self.session_deadlines.items()):
            if deadline <= now_ms and key in self.session_deadlines:
                gid, mid = key
                group = self.groups.get(gid)
                if group is not None and mid in group.members:
                    out.log.append(f"[GroupCoordinator] Member {mid} in group {gid} has failed, "
                                   "removing it from the group (session timeout)")
                    self._remove_member(group, mid, now_ms, out)
                else:
                    self._cancel_timers(gid, mid, out)
        for key, (deadline, epoch) in sorted(self.rebalance_deadlines.items()):
            if deadline <= now_ms and key in self.rebalance_deadlines:
                gid, mid = key
                group = self.groups.get(gid)
                m = None if group is None else group.members.get(mid)
                if (group is not None and m is not None and m.member_epoch == epoch
                        and m.state is MemberState.UNREVOKED_PARTITIONS):
                    out.log.append(f"[GroupCoordinator] Member {mid} in group {gid} did not revoke "
                                   "its partitions in time, removing it from the group (rebalance timeout)")
                    self._remove_member(group, mid, now_ms, out)
                else:
                    self._set_rebalance_deadline(gid, mid, None, out)
        return out

    def _set_session_deadline(self, gid: str, mid: str, when: int | None, out: HeartbeatOutcome) -> None:
        out.set_entry(self.session_deadlines, (gid, mid), when)

    def _set_rebalance_deadline(self, gid: str, mid: str, when: tuple[int, int] | None,
                                out: HeartbeatOutcome) -> None:
        out.set_entry(self.rebalance_deadlines, (gid, mid), when)

    def _cancel_timers(self, gid: str, mid: str, out: HeartbeatOutcome) -> None:
        self._set_session_deadline(gid, mid, None, out)
        self._set_rebalance_deadline(gid, mid, None, out)

    # ------------------------------------------------------------------ records
    def replay(self, record: rec.GroupRecord) -> None:
        """Apply one consumer group record read from the log."""
        group = self.groups.get(record.group_id)
        if group is None or group.dead:
            if isinstance(record, rec.Tombstone):
                return
            group = self.groups[record.group_id] = ConsumerGroup(record.group_id)
        group.replay(record)
        if group.dead:
            del self.groups[record.group_id]

    def on_loaded(self, now_ms: int) -> None:
        """After replaying the log: every member gets a fresh session, and members in the middle
        of a revocation a fresh rebalance timeout (Kafka does the same on load)."""
        for gid, group in self.groups.items():
            session = self.group_config(gid).session_timeout_ms
            for mid, m in group.members.items():
                self.session_deadlines[(gid, mid)] = now_ms + session
                if m.state is MemberState.UNREVOKED_PARTITIONS:
                    self.rebalance_deadlines[(gid, mid)] = (now_ms + m.rebalance_timeout_ms, m.member_epoch)

    def _write(self, group: ConsumerGroup, record: rec.GroupRecord, out: HeartbeatOutcome) -> None:
        self._ensure_snapshot(group, out)
        out.records.append(record)
        self.replay(record)

    def _ensure_snapshot(self, group: ConsumerGroup, out: HeartbeatOutcome) -> None:
        """Remember the group as it was before this operation first changes it, for rollback."""
        out.snapshot(self.groups, group)

    # ------------------------------------------------------------------ heartbeat
    def heartbeat(self, req: HeartbeatRequest, now_ms: int) -> HeartbeatOutcome:
        """One ConsumerGroupHeartbeat: join (epoch 0), heartbeat, or leave (-1, static -2)."""
        try:
            self._validate(req)
            if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(req, now_ms)
            return self._heartbeat(req, now_ms)
        except _Refused as r:
            return _error(r.error, r.message, req.member_id or None)

    def _validate(self, req: HeartbeatRequest) -> None:
        refused = request_refusal(req, self.group_config(req.group_id).assignors)
        if refused is not None:
            raise refused

    @staticmethod
    def _validate_regex(group: ConsumerGroup, regex: str | None) -> None:
        """A regex no member of the group uses yet must compile (Kafka checks it then, after the
        member is found; one in use was checked when it came)."""
        if regex and not group.regex_in_use(regex):
            reason = rx.invalid_reason(regex)
            if reason is not None:
                raise _Refused(E.INVALID_REGULAR_EXPRESSION,
                               f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {reason}.")

    def _lookup(self, group: ConsumerGroup, req: HeartbeatRequest, member_id: str) -> ConsumerGroupMember:
        """The member this heartbeat speaks for, or the refusal (Kafka's error per case)."""
        if req.instance_id is None:
            m = group.members.get(member_id)
            if m is None:
                if req.member_epoch != 0:
                    raise _Refused(E.UNKNOWN_MEMBER_ID,
                                   f"Member {member_id} is not a member of group {group.group_id}.")
                return ConsumerGroupMember(member_id)
            return m
        old_id = group.static_members.get(req.instance_id)
        if req.member_epoch == 0:
            if old_id is None:
                return group.members.get(member_id) or ConsumerGroupMember(member_id, instance_id=req.instance_id)
            old = group.members[old_id]
            if old.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise _Refused(E.UNRELEASED_INSTANCE_ID,
                               f"Static member {old_id} with instance id {req.instance_id} is present in "
                               f"group {group.group_id}.")
            return old
        if old_id is None:
            raise _Refused(E.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
        if old_id != member_id:
            raise _Refused(E.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id "
                           f"{req.instance_id} was fenced by member {old_id}.")
        return group.members[member_id]

    @staticmethod
    def _check_epoch(m: ConsumerGroupMember, req: HeartbeatRequest) -> None:
        if req.member_epoch > m.member_epoch:
            raise _Refused(E.FENCED_MEMBER_EPOCH, f"The consumer group member has a greater member epoch "
                           f"({req.member_epoch}) than the one known by the group coordinator ({m.member_epoch}).")
        if req.member_epoch < m.member_epoch:
            # The answer that moved it on may have been lost: its previous epoch is still fine
            # if it owns nothing it should not.
            if (req.member_epoch != m.previous_member_epoch or req.owned is None
                    or not ps.is_subset(ps.normalize(req.owned), m.assigned)):
                raise _Refused(E.FENCED_MEMBER_EPOCH, f"The consumer group member has a smaller member epoch "
                               f"({req.member_epoch}) than the one known by the group coordinator ({m.member_epoch}).")

    def _heartbeat(self, req: HeartbeatRequest, now_ms: int) -> HeartbeatOutcome:
        cfg = self.group_config(req.group_id)
        out = HeartbeatOutcome()
        group = self.groups.get(req.group_id)
        if group is None:
            if req.member_epoch != 0:
                raise _Refused(E.GROUP_ID_NOT_FOUND, f"Consumer group {req.group_id} not found.")
            group = ConsumerGroup(req.group_id)
        member_id = req.member_id or self._new_uuid()
        if len(group.members) >= cfg.max_size and member_id not in group.members:
            raise _Refused(E.GROUP_MAX_SIZE_REACHED,
                           f"The consumer group has reached its maximum capacity of {cfg.max_size} members.")
        old = self._lookup(group, req, member_id)
        known = old.member_id in group.members
        if known and req.member_epoch != 0:
            self._check_epoch(old, req)
        self._validate_regex(group, req.subscribed_topic_regex)
        if req.group_id not in self.groups:
            self._ensure_snapshot(group, out)
            self.groups[req.group_id] = group
        # Kafka bumps the group epoch when the subscriptions or the group's preferred assignor
        # change, or the subscribed topics' metadata does; a member joining or changing its rack
        # with the same subscription does not.
        bump = False
        assignor_before = self._assignor_name(group)
        if known and req.member_epoch == 0:
            if old.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                # A static member is back: it takes up its partitions again, no rebalance.
                old = self._replace_static(group, old, member_id, out)
            else:
                # A rejoin: the member gave up its partitions and starts over towards its target.
                self._write(group, replace(old, reconciliation=Reconciliation()).assignment_record(
                    group.group_id), out)
                old = group.members[member_id]
        updated = self._updated_member(old, req)
        if not known or not updated.same_metadata(old):
            self._write(group, updated.metadata_record(group.group_id), out)
            if (updated.subscribed_topic_names != old.subscribed_topic_names
                    or updated.subscribed_topic_regex != old.subscribed_topic_regex
                    or self._assignor_name(group) != assignor_before):
                bump = True
        if old.subscribed_topic_regex is not None and old.subscribed_topic_regex != updated.subscribed_topic_regex \
                and not group.regex_in_use(old.subscribed_topic_regex):
            self._write(group, rec.Tombstone(rec.RegularExpression.RECORD_TYPE, group.group_id,
                                             old.subscribed_topic_regex), out)
        if self._refresh_regexes(group, now_ms, out, req.may_describe):
            bump = True
        new_hash = self._metadata_hash(group)
        if bump or new_hash != group.metadata_hash:
            self._bump(group, new_hash, out)
        if group.group_epoch > group.assignment_epoch:
            self._assign(group, now_ms, out)
        member = group.members[member_id]
        before = member.assigned if known else None
        self._reconcile(group, member, req.owned, now_ms, out)
        member = group.members[member_id]
        self._set_session_deadline(group.group_id, member_id, now_ms + cfg.session_timeout_ms, out)
        full = req.member_epoch == 0 or (
            req.rebalance_timeout_ms != -1 and req.subscribed_topic_names is not None and req.owned is not None)
        out.response = HeartbeatResponse(
            member_id=member_id, member_epoch=member.member_epoch,
            heartbeat_interval_ms=cfg.heartbeat_interval_ms,
            assignment=dict(member.assigned) if full or before != member.assigned else None)
        return out

    def _bump(self, group: ConsumerGroup, new_hash: int, out: HeartbeatOutcome) -> None:
        self._write(group, rec.GroupMetadata(group.group_id, group.group_epoch + 1, new_hash), out)
        out.log.append(f"[GroupCoordinator] Bumped epoch of group {group.group_id} to {group.group_epoch}")

    def _replace_static(self, group: ConsumerGroup, old: ConsumerGroupMember, new_id: str,
                        out: HeartbeatOutcome) -> ConsumerGroupMember:
        """A static member came back (under a new member id, or its old one): it takes over the
        old member's partitions and target, at epoch 0."""
        target = group.target.get(old.member_id, {})
        if old.member_id != new_id:
            for t in member_tombstones(group.group_id, old.member_id):
                self._write(group, t, out)
            self._cancel_timers(group.group_id, old.member_id, out)
        new = replace(old, member_id=new_id, reconciliation=replace(
            old.reconciliation, member_epoch=0, previous_member_epoch=0))
        self._write(group, new.metadata_record(group.group_id), out)
        self._write(group, rec.TargetAssignmentMember(group.group_id, new_id, target), out)
        self._write(group, new.assignment_record(group.group_id), out)
        out.log.append(f"[GroupCoordinator] Static member {old.member_id} of group {group.group_id} "
                       f"with instance id {old.instance_id} replaced by {new_id}")
        return group.members[new_id]

    @staticmethod
    def _updated_member(m: ConsumerGroupMember, req: HeartbeatRequest) -> ConsumerGroupMember:
        regex = m.subscribed_topic_regex
        if req.subscribed_topic_regex is not None:
            regex = req.subscribed_topic_regex or None
        return replace(
            m,
            instance_id=req.instance_id if req.instance_id is not None else m.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else m.rack_id,
            client_id=req.client_id, client_host=req.client_host,
            subscribed_topic_names=(tuple(sorted(req.subscribed_topic_names))
                                    if req.subscribed_topic_names is not None else m.subscribed_topic_names),
            subscribed_topic_regex=regex,
            rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1 else m.rebalance_timeout_ms,
            server_assignor=req.server_assignor if req.server_assignor is not None else m.server_assignor)

    def _refresh_regexes(self, group: ConsumerGroup, now_ms: int, out: HeartbeatOutcome,
                         may_describe: Callable[[Iterable[str]], Set[str]] | None = None) -> bool:
        """Resolve the members' regexes that are new, or stale (topics changed, or older than
        ``group.consumer.regex.refresh.interval.ms``), keeping the topics ``may_describe`` allows:
        like Kafka 4.4, under the ACLs of whoever's heartbeat does the refresh. True when a
        resolution changed."""
        interval = self.group_config(group.group_id).regex_refresh_interval_ms
        checked = group.regex_checked
        changed = False
        wanted = {m.subscribed_topic_regex for m in group.members.values() if m.subscribed_topic_regex}
        for pattern in sorted(p for p in wanted if p is not None):
            last = group.regexes.get(pattern)
            seen = checked.get(pattern)
            if last is not None and seen is not None and seen[0] == self.topics_version \
                    and now_ms - seen[1] < interval:
                continue
            internal = [n for n, t in self.topics.items() if t.internal]
            topics = rx.resolve(pattern, self.topics, internal)
            if may_describe is not None and topics:
                allowed = may_describe(topics)
                topics = tuple(t for t in topics if t in allowed)
            self._ensure_snapshot(group, out)
            checked[pattern] = (self.topics_version, now_ms)
            if last is None or last.topics != topics:
                self._write(group, rec.RegularExpression(group.group_id, pattern, topics,
                                                         self.topics_version, now_ms), out)
                changed = True
        for pattern in [p for p in checked if p not in wanted]:
            self._ensure_snapshot(group, out)
            del checked[pattern]
        return changed

    def _metadata_hash(self, group: ConsumerGroup) -> int:
        names = group.subscribed_topic_names()
        return metadata_hash(self.topics[n] for n in names if n in self.topics)

    def _assignor_name(self, group: ConsumerGroup) -> str:
        cfg = self.group_config(group.group_id)
        asked = Counter(m.server_assignor for m in group.members.values() if m.server_assignor)
        if not asked:
            return cfg.assignors[0]
        top = max(asked.values())
        return next(a for a in cfg.assignors if asked.get(a) == top)

    def _assign(self, group: ConsumerGroup, now_ms: int, out: HeartbeatOutcome) -> None:
        """Compute the target assignment of the group epoch and write what changed."""
        specs: dict[str, MemberSpec] = {}
        for mid, m in group.members.items():
            ids = frozenset(self.topics[n].topic_id for n in group.member_topic_names(m) if n in self.topics)
            specs[mid] = MemberSpec(ids, group.target.get(mid, {}), m.rack_id)
        counts = {t.topic_id: t.partitions for n, t in self.topics.items()
                  if n in group.subscribed_topic_names()}
        name = self._assignor_name(group)
        target = ASSIGNORS[name](specs, counts)
        for mid in sorted(target):
            if mid not in group.target or group.target[mid] != target[mid]:
                self._write(group, rec.TargetAssignmentMember(group.group_id, mid, target[mid]), out)
        self._write(group, rec.TargetAssignmentMetadata(group.group_id, group.group_epoch, now_ms), out)
        out.log.append(f"[GroupCoordinator] Computed target assignment of group {group.group_id} "
                       f"at epoch {group.group_epoch} with the {name} assignor")

    def _reconcile(self, group: ConsumerGroup, m: ConsumerGroupMember,
                   owned: Mapping[ps.TopicId, frozenset[int]] | None, now_ms: int, out: HeartbeatOutcome) -> None:
        if m.reconciliation.reconciled_to(group.assignment_epoch) and self._consistent(group, m):
            return
        subscribed = frozenset(self.topics[n].topic_id for n in group.member_topic_names(m) if n in self.topics)
        step = next_step(m.reconciliation, group.assignment_epoch, group.target.get(m.member_id, {}),
                         group.owner_epoch, None if owned is None else ps.normalize(owned), subscribed)
        if step == m.reconciliation:
            return
        self._write(group, replace(m, reconciliation=step).assignment_record(group.group_id), out)
        if step.state is MemberState.UNREVOKED_PARTITIONS:
            self._set_rebalance_deadline(group.group_id, m.member_id,
                                         (now_ms + m.rebalance_timeout_ms, step.member_epoch), out)
        else:
            self._set_rebalance_deadline(group.group_id, m.member_id, None, out)

    def _consistent(self, group: ConsumerGroup, m: ConsumerGroupMember) -> bool:
        """Whether every topic the member is assigned is one it still subscribes to."""
        names = group.member_topic_names(m)
        ids = {self.topics[n].topic_id for n in names if n in self.topics}
        return all(t in ids for t in m.assigned)

    # ------------------------------------------------------------------ describe
    def describe(self, group_id: str) -> GroupDescription:
        group = self.groups.get(group_id)
        if group is None or group.dead:
            return GroupDescription(group_id, E.GROUP_ID_NOT_FOUND)
        members = tuple(
            MemberDescription(
                m.member_id, m.instance_id, m.rack_id, m.member_epoch, m.client_id, m.client_host,
                m.subscribed_topic_names, m.subscribed_topic_regex, dict(m.assigned),
                dict(group.target.get(m.member_id, {})), 0 if m.uses_classic_protocol else 1)
            for m in sorted(group.members.values(), key=lambda m: m.member_id))
        return GroupDescription(group_id, 0, group.state().value, group.group_epoch, group.assignment_epoch,
                                self._assignor_name(group), members)

    # ------------------------------------------------------------------ leaving
    def _leave(self, req: HeartbeatRequest, now_ms: int) -> HeartbeatOutcome:
        out = HeartbeatOutcome()
        group = self.groups.get(req.group_id)
        if group is None:
            raise _Refused(E.GROUP_ID_NOT_FOUND, f"Group {req.group_id} not found.")
        if req.instance_id is not None:
            old_id = group.static_members.get(req.instance_id)
            if old_id is None:
                raise _Refused(E.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
            if old_id != req.member_id:
                raise _Refused(E.FENCED_INSTANCE_ID, f"Static member {req.member_id} with instance id "
                               f"{req.instance_id} was fenced by member {old_id}.")
        m = group.members.get(req.member_id)
        if m is None:
            raise _Refused(E.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {group.group_id}.")
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # It will be back: it keeps its partitions until its session runs out.
            gone = replace(m, reconciliation=replace(
                m.reconciliation, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, pending_revocation={}))
            self._write(group, gone.assignment_record(group.group_id), out)
            self._set_rebalance_deadline(group.group_id, m.member_id, None, out)
            out.log.append(f"[GroupCoordinator] Static member {m.member_id} of group {group.group_id} "
                           "left temporarily")
        else:
            out.log.append(f"[GroupCoordinator] Member {m.member_id} left group {group.group_id}")
            self._remove_member(group, m.member_id, now_ms, out)
        out.response = HeartbeatResponse(member_id=req.member_id, member_epoch=req.member_epoch)
        return out

    def _convert(self, group: ConsumerGroup, converted: object, out: HeartbeatOutcome) -> None:
        """The group becomes classic: every record of it deleted, its timers cancelled, and the
        conversion handed to the edge."""
        for mid in list(group.members):
            self._cancel_timers(group.group_id, mid, out)
        for t in group.tombstones():
            self._write(group, t, out)
        out.converted.append(converted)

    def _remove_member(self, group: ConsumerGroup, member_id: str, now_ms: int, out: HeartbeatOutcome) -> None:
        """Leave or fencing of one member (see :meth:`_remove_members`)."""
        self._remove_members(group, [member_id], now_ms, out)

    def _remove_members(self, group: ConsumerGroup, member_ids: list[str], now_ms: int,
                        out: HeartbeatOutcome) -> None:
        """Leave or fencing: the members' records deleted, the group epoch bumped once; or, when
        the downgrader says so, the whole group deleted to become a classic group."""
        converted = self.downgrader(group, frozenset(member_ids), now_ms) if self.downgrader else None
        if converted is not None:
            out.log.append(f"[GroupCoordinator] Members {', '.join(member_ids)} leaving turn group "
                           f"{group.group_id} into a classic group")
            self._convert(group, converted, out)
            return
        for member_id in member_ids:
            m = group.members[member_id]
            for t in member_tombstones(group.group_id, member_id):
                self._write(group, t, out)
            if m.subscribed_topic_regex is not None and not group.regex_in_use(m.subscribed_topic_regex):
                self._write(group, rec.Tombstone(rec.RegularExpression.RECORD_TYPE, group.group_id,
                                                 m.subscribed_topic_regex), out)
            self._cancel_timers(group.group_id, member_id, out)
        self._write(group, rec.GroupMetadata(group.group_id, group.group_epoch + 1, self._metadata_hash(group)), out)
        if not group.members:
            # The empty group's (empty) target moves to the new epoch at once, as Kafka 4.4's
            # does: a described empty group shows equal group and assignment epochs.
            self._assign(group, now_ms, out)
