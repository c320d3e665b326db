"""ShareGroupHeartbeat, leaving, session timeouts and the share-partition initialization
lifecycle of KIP-932 share groups (the share half of Kafka's GroupMetadataManager), sans-I/O.

A share member has nothing to revoke (records, not partitions, are what members hold), so each
heartbeat moves it straight to its target at the assignment epoch. Only partitions whose state the
share coordinator has *initialized* are assigned: the first time a group subscribes to a partition
it is recorded as initializing (record type 15) and handed to the edge in
:attr:`ShareHeartbeatOutcome.initialize`; the edge calls InitializeShareGroupState and then
:meth:`ShareGroupMembership.initialized`. Unanswered initializations are handed out again every
``group.share.initialize.retry.interval.ms``. Topics nobody subscribes to any more move to
``deleting`` and out in :attr:`ShareHeartbeatOutcome.delete` (DeleteShareGroupState).

Operations apply their records as they generate them (replay), so a loaded group equals the live
one; :meth:`ShareHeartbeatOutcome.rollback` undoes an operation whose append failed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TypeVar

from kafkapy.coordinator.consumer import partitions as ps
from kafkapy.coordinator.consumer.group import TopicInfo, metadata_hash
from kafkapy.coordinator.consumer.heartbeat import HeartbeatResponse
from kafkapy.coordinator.consumer.partitions import Assignment, TopicId
from kafkapy.coordinator.modern_group import Refused, Undoable
from kafkapy.coordinator.share_group import assignor
from kafkapy.coordinator.share_group import records as rec
from kafkapy.coordinator.share_group.group import ShareGroup, ShareGroupMember, member_tombstones
from kafkapy.protocol.errors import ErrorCode

E = ErrorCode
LEAVE_GROUP_MEMBER_EPOCH = -1
_K = TypeVar("_K")


@dataclass(frozen=True)
class ShareGroupConfig:
    """The ``group.share.*`` settings the core uses (Kafka's names and defaults)."""

    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    max_size: int = 200
    initialize_retry_interval_ms: int = 30_000


@dataclass
class ShareHeartbeatRequest:
    """A ShareGroupHeartbeat request (v1); None fields mean "unchanged"."""

    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: list[str] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True)
class InitializeRequest:
    """Share partitions to initialize (InitializeShareGroupState; start offset -1 lets the leader
    apply ``share.auto.offset.reset``)."""

    group_id: str
    topic_id: TopicId
    partitions: frozenset[int]
    state_epoch: int
    start_offset: int = -1


@dataclass(frozen=True)
class DeleteRequest:
    """Share partitions whose state goes (DeleteShareGroupState)."""

    group_id: str
    topic_id: TopicId
    partitions: frozenset[int]


@dataclass
class ShareHeartbeatOutcome(Undoable):
    """An operation's answer, the records to append first, and the share-coordinator calls the
    edge should make once they are appended; :meth:`rollback` when the append failed."""

    response: HeartbeatResponse | None = None
    records: list[rec.ShareGroupRecord] = field(default_factory=list)
    initialize: list[InitializeRequest] = field(default_factory=list)
    delete: list[DeleteRequest] = field(default_factory=list)
    log: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ShareMemberDescription:
    member_id: str
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    assignment: Assignment


@dataclass(frozen=True)
class ShareGroupDescription:
    """A group as ShareGroupDescribe shows it; ``error`` GROUP_ID_NOT_FOUND when absent."""

    group_id: str
    error: int = 0
    state: str = "Dead"
    group_epoch: int = -1
    assignment_epoch: int = -1
    assignor_name: str = assignor.NAME
    members: tuple[ShareMemberDescription, ...] = ()


_Refused = Refused


class ShareGroupMembership:
    """The share groups of one ``__consumer_offsets`` partition."""

    def __init__(self, config: ShareGroupConfig | None = None,
                 groups: dict[str, ShareGroup] | None = None,
                 config_for: Callable[[str], ShareGroupConfig] | None = None) -> None:
        self.config = config or ShareGroupConfig()
        self.groups: dict[str, ShareGroup] = {} if groups is None else groups
        self._config_for = config_for
        self.topics: Mapping[str, TopicInfo] = {}
        #: (group, member) -> when its session ends
        self.session_deadlines: dict[tuple[str, str], int] = {}
        #: (group, topic id) -> when to hand its initializing partitions out again
        self.initialize_deadlines: dict[tuple[str, TopicId], int] = {}

    def group_config(self, group_id: str) -> ShareGroupConfig:
        return self.config if self._config_for is None else self._config_for(group_id)

    def set_topics(self, topics: Mapping[str, TopicInfo]) -> None:
        """The topic metadata changed; groups notice on their next heartbeat."""
        self.topics = dict(topics)

    # ------------------------------------------------------------------ records
    def replay(self, record: rec.ShareGroupRecord) -> None:
        group = self.groups.get(record.group_id)
        if group is None or group.dead:
            if isinstance(record, rec.Tombstone):
                return
            group = self.groups[record.group_id] = ShareGroup(record.group_id)
        group.replay(record)
        if group.dead:
            del self.groups[record.group_id]

    def on_loaded(self, now_ms: int) -> ShareHeartbeatOutcome:
        """After replaying the log: fresh sessions, and the initializations and deletions that
        were under way handed out again."""
        out = ShareHeartbeatOutcome()
        for gid, group in self.groups.items():
            for mid in group.members:
                self.session_deadlines[(gid, mid)] = now_ms + self.group_config(gid).session_timeout_ms
            self._hand_out(group, group.initializing(), now_ms, out)
            for t in group.partition_metadata.deleting:
                out.delete.append(DeleteRequest(gid, t, frozenset(self._partitions_of(t))))
        return out

    def _write(self, group: ShareGroup, record: rec.ShareGroupRecord, out: ShareHeartbeatOutcome) -> None:
        gid = group.group_id
        out.snapshot(self.groups, group)
        if gid not in self.groups:
            self.groups[gid] = group
        out.records.append(record)
        self.replay(record)

    @staticmethod
    def _set_deadline(table: dict[tuple[str, _K], int], key: tuple[str, _K], when: int | None,
                      out: ShareHeartbeatOutcome) -> None:
        out.set_entry(table, key, when)

    # ------------------------------------------------------------------ timers
    def next_deadline(self) -> int | None:
        return min([*self.session_deadlines.values(), *self.initialize_deadlines.values()], default=None)

    def tick(self, now_ms: int) -> ShareHeartbeatOutcome:
        """Remove the members whose session ran out; hand out unanswered initializations again."""
        out = ShareHeartbeatOutcome()
        for (gid, mid), deadline in sorted(self.session_deadlines.items()):
            if deadline > now_ms:
                continue
            group = self.groups.get(gid)
            if group is not None and mid in group.members:
                out.log.append(f"[GroupCoordinator] Member {mid} in share group {gid} has failed, "
                               "removing it from the group (session timeout)")
                self._remove_member(group, mid, now_ms, out)
            else:
                self._set_deadline(self.session_deadlines, (gid, mid), None, out)
        for (gid, t), deadline in sorted(self.initialize_deadlines.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
            if deadline > now_ms:
                continue
            group = self.groups.get(gid)
            pending = None if group is None else group.initializing().get(t)
            if group is None or not pending:
                self._set_deadline(self.initialize_deadlines, (gid, t), None, out)
            else:
                self._hand_out(group, {t: pending}, now_ms, out)
        return out

    # ------------------------------------------------------------------ heartbeat
    def heartbeat(self, req: ShareHeartbeatRequest, now_ms: int) -> ShareHeartbeatOutcome:
        """One ShareGroupHeartbeat: join (epoch 0), heartbeat, or leave (-1)."""
        try:
            self._validate(req)
            if req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
                return self._leave(req, now_ms)
            return self._heartbeat(req, now_ms)
        except _Refused as r:
            return ShareHeartbeatOutcome(HeartbeatResponse(r.error, r.message, req.member_id or None))

    @staticmethod
    def _validate(req: ShareHeartbeatRequest) -> None:
        if not req.group_id:
            raise _Refused(E.INVALID_REQUEST, "GroupId can't be empty.")
        if not req.member_id:
            raise _Refused(E.INVALID_REQUEST, "MemberId can't be empty.")
        if req.rack_id is not None and not req.rack_id:
            raise _Refused(E.INVALID_REQUEST, "RackId can't be empty.")
        if req.member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
            raise _Refused(E.INVALID_REQUEST, "MemberEpoch is invalid.")
        if req.member_epoch == 0 and not req.subscribed_topic_names:
            raise _Refused(E.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")

    def _heartbeat(self, req: ShareHeartbeatRequest, now_ms: int) -> ShareHeartbeatOutcome:
        cfg = self.group_config(req.group_id)
        out = ShareHeartbeatOutcome()
        group = self.groups.get(req.group_id)
        if group is None:
            if req.member_epoch != 0:
                raise _Refused(E.GROUP_ID_NOT_FOUND, f"Share group {req.group_id} not found.")
            group = ShareGroup(req.group_id)
        old = group.members.get(req.member_id)
        if old is None:
            if req.member_epoch != 0:
                raise _Refused(E.UNKNOWN_MEMBER_ID,
                               f"Member {req.member_id} is not a member of group {req.group_id}.")
            if len(group.members) >= cfg.max_size:
                raise _Refused(E.GROUP_MAX_SIZE_REACHED,
                               f"The share group has reached its maximum capacity of {cfg.max_size} members.")
        elif req.member_epoch != 0:
            # Kafka 4.4's messages (GroupMetadataManager.throwIfShareGroupMemberEpochIsInvalid).
            if req.member_epoch > old.member_epoch:
                raise _Refused(E.FENCED_MEMBER_EPOCH, f"The share group member has a greater member epoch "
                               f"({req.member_epoch}) than the one known by the group coordinator "
                               f"({old.member_epoch}). The member must abandon all its partitions and rejoin.")
            if req.member_epoch < old.member_epoch and req.member_epoch != old.previous_member_epoch:
                raise _Refused(E.FENCED_MEMBER_EPOCH, f"The share group member has a smaller member epoch "
                               f"({req.member_epoch}) than the one known by the group coordinator "
                               f"({old.member_epoch}), and it does not match the previous member epoch "
                               f"({old.previous_member_epoch}). The member must abandon all its partitions "
                               "and rejoin.")
        base = old or ShareGroupMember(req.member_id)
        updated = replace(
            base, rack_id=req.rack_id if req.rack_id is not None else base.rack_id,
            client_id=req.client_id, client_host=req.client_host,
            subscribed_topic_names=(tuple(sorted(set(req.subscribed_topic_names)))
                                    if req.subscribed_topic_names is not None else base.subscribed_topic_names))
        bump = old is None
        if old is None or updated.metadata_record("") != old.metadata_record(""):
            self._write(group, updated.metadata_record(group.group_id), out)
            bump = bump or updated.subscribed_topic_names != base.subscribed_topic_names
        self._update_partition_metadata(group, now_ms, out)
        new_hash = self._metadata_hash(group)
        if bump or new_hash != group.metadata_hash:
            self._bump(group, new_hash, out)
        if group.group_epoch > group.assignment_epoch:
            self._assign(group, now_ms, out)
        member = group.members[req.member_id]
        before = member.assigned
        target = group.target.get(member.member_id, {})
        if member.member_epoch != group.assignment_epoch or member.assigned != target:
            self._write(group, replace(member, member_epoch=group.assignment_epoch,
                                       previous_member_epoch=member.member_epoch,
                                       assigned=target).assignment_record(group.group_id), out)
            member = group.members[req.member_id]
        self._set_deadline(self.session_deadlines, (group.group_id, member.member_id),
                           now_ms + cfg.session_timeout_ms, out)
        out.response = HeartbeatResponse(
            member_id=member.member_id, member_epoch=member.member_epoch,
            heartbeat_interval_ms=cfg.heartbeat_interval_ms,
            assignment=dict(member.assigned) if req.member_epoch == 0 or before != member.assigned else None)
        return out

    def _bump(self, group: ShareGroup, new_hash: int, out: ShareHeartbeatOutcome) -> None:
        self._write(group, rec.GroupMetadata(group.group_id, group.group_epoch + 1, new_hash), out)
        out.log.append(f"[GroupCoordinator] Bumped epoch of share group {group.group_id} to {group.group_epoch}")

    def _metadata_hash(self, group: ShareGroup) -> int:
        return metadata_hash(self.topics[n] for n in group.subscribed_topic_names() if n in self.topics)

    def _partitions_of(self, topic_id: TopicId) -> range:
        for t in self.topics.values():
            if t.topic_id == topic_id:
                return range(t.partitions)
        return range(0)

    def _assign(self, group: ShareGroup, now_ms: int, out: ShareHeartbeatOutcome) -> None:
        """The target assignment of the group epoch, over the initialized partitions only."""
        ready = group.initialized()
        subs = {mid: frozenset(self.topics[n].topic_id for n in m.subscribed_topic_names
                               if n in self.topics and self.topics[n].topic_id in ready)
                for mid, m in group.members.items()}
        counts = {t: max(ready[t]) + 1 for t in ready}
        target = assignor.assign(subs, counts, group.target)
        # Only initialized partitions may be handed out, even inside the counted range.
        target = {m: ps.intersect(a, ready) for m, a in target.items()}
        for mid in sorted(target):
            if group.target.get(mid) != target[mid]:
                self._write(group, rec.TargetAssignmentMember(group.group_id, mid, target[mid]), out)
        self._write(group, rec.TargetAssignmentMetadata(group.group_id, group.group_epoch, now_ms), out)

    # ------------------------------------------------------------------ share-partition state
    def _update_partition_metadata(self, group: ShareGroup, now_ms: int, out: ShareHeartbeatOutcome) -> None:
        """Record newly subscribed partitions as initializing, and topics left behind as deleting."""
        names = {t.topic_id: t.name for t in self.topics.values()}
        wanted: Assignment = ps.normalize({self.topics[n].topic_id: range(self.topics[n].partitions)
                                           for n in group.subscribed_topic_names() if n in self.topics})
        meta = group.partition_metadata
        known = ps.union(group.initialized(), group.initializing())
        new = ps.minus(wanted, known)
        gone = {t: n for t, (n, _) in {**meta.initializing, **meta.initialized}.items() if t not in wanted}
        if not new and not gone:
            return
        initializing = {t: v for t, v in meta.initializing.items() if t not in gone}
        for t, parts in new.items():
            prev = initializing.get(t, (names[t], frozenset()))[1]
            initializing[t] = (names[t], prev | parts)
        initialized = {t: v for t, v in meta.initialized.items() if t not in gone}
        deleting = {**meta.deleting, **gone}
        self._write(group, rec.StatePartitionMetadata(group.group_id, initializing, initialized, deleting), out)
        self._hand_out(group, new, now_ms, out)
        for t in sorted(gone, key=str):
            parts = ps.union(group_parts(meta.initializing, t), group_parts(meta.initialized, t)).get(t, frozenset())
            out.delete.append(DeleteRequest(group.group_id, t, parts))
            self._set_deadline(self.initialize_deadlines, (group.group_id, t), None, out)
        if gone:
            self._bump(group, self._metadata_hash(group), out)

    def _hand_out(self, group: ShareGroup, parts: Mapping[TopicId, frozenset[int]], now_ms: int,
                  out: ShareHeartbeatOutcome) -> None:
        retry = self.group_config(group.group_id).initialize_retry_interval_ms
        for t in sorted(parts, key=str):
            # (verify) Kafka's state epoch for a first initialization; the group epoch here.
            out.initialize.append(InitializeRequest(group.group_id, t, frozenset(parts[t]), group.group_epoch))
            self._set_deadline(self.initialize_deadlines, (group.group_id, t), now_ms + retry, out)

    def initialized(self, group_id: str, topic_id: TopicId, partitions: frozenset[int],
                    now_ms: int) -> ShareHeartbeatOutcome:
        """InitializeShareGroupState succeeded for ``partitions``: they become assignable, and the
        group epoch is bumped so the next heartbeat hands them out."""
        out = ShareHeartbeatOutcome()
        group = self.groups.get(group_id)
        if group is None or topic_id not in group.partition_metadata.initializing:
            return out
        meta = group.partition_metadata
        name, pending = meta.initializing[topic_id]
        done = pending & partitions
        if not done:
            return out
        initializing = dict(meta.initializing)
        if pending - done:
            initializing[topic_id] = (name, pending - done)
        else:
            del initializing[topic_id]
            self._set_deadline(self.initialize_deadlines, (group_id, topic_id), None, out)
        initialized = dict(meta.initialized)
        initialized[topic_id] = (name, initialized.get(topic_id, (name, frozenset()))[1] | done)
        self._write(group, rec.StatePartitionMetadata(group_id, initializing, initialized, meta.deleting), out)
        self._bump(group, group.metadata_hash, out)
        return out

    def deleted(self, group_id: str, topic_id: TopicId) -> ShareHeartbeatOutcome:
        """DeleteShareGroupState succeeded for the topic: it leaves ``deleting``."""
        out = ShareHeartbeatOutcome()
        group = self.groups.get(group_id)
        if group is None or topic_id not in group.partition_metadata.deleting:
            return out
        meta = group.partition_metadata
        deleting = {t: n for t, n in meta.deleting.items() if t != topic_id}
        self._write(group, rec.StatePartitionMetadata(group_id, meta.initializing, meta.initialized, deleting), out)
        return out

    # ------------------------------------------------------------------ offsets admin
    def _empty_group(self, group_id: str, create: bool = False) -> ShareGroup:
        group = self.groups.get(group_id)
        if group is None or group.dead:
            if not create:
                raise _Refused(E.GROUP_ID_NOT_FOUND, f"Share group {group_id} not found.")
            group = ShareGroup(group_id)
        if group.members:
            raise _Refused(E.NON_EMPTY_GROUP, "The group is not empty.")
        return group

    def alter_offsets(self, group_id: str, starts: Mapping[TopicId, tuple[str, Mapping[int, int]]],
                      now_ms: int) -> tuple[int, ShareHeartbeatOutcome]:
        """AlterShareGroupOffsets of an empty group (created if missing, as Kafka does): the
        partitions go back to initializing under a new state epoch (the bumped group epoch), and
        :attr:`ShareHeartbeatOutcome.initialize`
        carries one request per partition with its new start offset; the edge calls
        :meth:`initialized` once the share coordinator took it."""
        out = ShareHeartbeatOutcome()
        try:
            group = self._empty_group(group_id, create=True)
        except _Refused as r:
            return r.error, out
        self._bump(group, group.metadata_hash, out)
        meta = group.partition_metadata
        initializing = dict(meta.initializing)
        initialized = dict(meta.initialized)
        for t, (name, offsets) in starts.items():
            parts = frozenset(offsets)
            initializing[t] = (name, initializing.get(t, (name, frozenset()))[1] | parts)
            left = initialized.get(t, (name, frozenset()))[1] - parts
            if left:
                initialized[t] = (name, left)
            else:
                initialized.pop(t, None)
        deleting = {t: n for t, n in meta.deleting.items() if t not in starts}
        self._write(group, rec.StatePartitionMetadata(group_id, initializing, initialized, deleting), out)
        retry = self.group_config(group_id).initialize_retry_interval_ms
        for t in sorted(starts, key=str):
            for p, offset in sorted(starts[t][1].items()):
                out.initialize.append(InitializeRequest(group_id, t, frozenset({p}), group.group_epoch, offset))
            self._set_deadline(self.initialize_deadlines, (group_id, t), now_ms + retry, out)
        return E.NONE, out

    def delete_offsets(self, group_id: str, topic_ids: list[TopicId]) -> tuple[int, ShareHeartbeatOutcome]:
        """DeleteShareGroupOffsets of an empty group: the topics' partitions move to deleting and
        out in :attr:`ShareHeartbeatOutcome.delete` (the edge calls :meth:`deleted` after
        DeleteShareGroupState). Topics the group holds no state for are left out."""
        out = ShareHeartbeatOutcome()
        try:
            group = self._empty_group(group_id)
        except _Refused as r:
            return r.error, out
        meta = group.partition_metadata
        gone = {t: n for t, (n, _) in {**meta.initializing, **meta.initialized}.items() if t in topic_ids}
        if not gone:
            return E.NONE, out
        initializing = {t: v for t, v in meta.initializing.items() if t not in gone}
        initialized = {t: v for t, v in meta.initialized.items() if t not in gone}
        self._write(group, rec.StatePartitionMetadata(group_id, initializing, initialized,
                                                      {**meta.deleting, **gone}), out)
        for t in sorted(gone, key=str):
            parts = ps.union(group_parts(meta.initializing, t), group_parts(meta.initialized, t)).get(t, frozenset())
            out.delete.append(DeleteRequest(group_id, t, parts))
            self._set_deadline(self.initialize_deadlines, (group_id, t), None, out)
        return E.NONE, out

    # ------------------------------------------------------------------ leaving
    def _leave(self, req: ShareHeartbeatRequest, now_ms: int) -> ShareHeartbeatOutcome:
        out = ShareHeartbeatOutcome()
        group = self.groups.get(req.group_id)
        if group is None:
            raise _Refused(E.GROUP_ID_NOT_FOUND, f"Share group {req.group_id} not found.")
        if req.member_id not in group.members:
            raise _Refused(E.UNKNOWN_MEMBER_ID,
                           f"Member {req.member_id} is not a member of group {req.group_id}.")
        out.log.append(f"[GroupCoordinator] Member {req.member_id} left share group {group.group_id}")
        self._remove_member(group, req.member_id, now_ms, out)
        out.response = HeartbeatResponse(member_id=req.member_id, member_epoch=LEAVE_GROUP_MEMBER_EPOCH)
        return out

    def _remove_member(self, group: ShareGroup, member_id: str, now_ms: int, out: ShareHeartbeatOutcome) -> None:
        for t in member_tombstones(group.group_id, member_id):
            self._write(group, t, out)
        self._bump(group, self._metadata_hash(group), out)
        if not group.members:
            # The empty group's (empty) target moves to the new epoch at once, as Kafka 4.4's
            # does: a described empty group shows equal group and assignment epochs.
            self._assign(group, now_ms, out)
        self._set_deadline(self.session_deadlines, (group.group_id, member_id), None, out)

    # ------------------------------------------------------------------ describe
    def describe(self, group_id: str) -> ShareGroupDescription:
        group = self.groups.get(group_id)
        if group is None or group.dead:
            return ShareGroupDescription(group_id, E.GROUP_ID_NOT_FOUND)
        members = tuple(
            ShareMemberDescription(m.member_id, m.rack_id, m.member_epoch, m.client_id, m.client_host,
                                   m.subscribed_topic_names, dict(m.assigned))
            for m in sorted(group.members.values(), key=lambda m: m.member_id))
        return ShareGroupDescription(group_id, 0, group.state().value, group.group_epoch, group.assignment_epoch,
                                     assignor.NAME, members)


def group_parts(table: Mapping[TopicId, tuple[str, frozenset[int]]], t: TopicId) -> Assignment:
    return ps.normalize({t: table[t][1]}) if t in table else {}

