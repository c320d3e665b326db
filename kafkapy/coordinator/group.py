"""One ``__consumer_offsets`` partition's groups (Kafka's GroupCoordinatorShard), sans-I/O.

Nothing here reads a clock, sleeps or touches a file: every operation takes ``now_ms`` and
returns an :class:`~kafkapy.coordinator.outcome.Outcome` for the edge
(:mod:`kafkapy.coordinator.service`) to write and answer. The shard routes each request to the
part that owns it and replays the partition's records when it loads:

* :mod:`~kafkapy.coordinator.membership` — JoinGroup, SyncGroup, Heartbeat, LeaveGroup and their
  timers (the classic rebalance state machine);
* :mod:`~kafkapy.coordinator.offsets` — OffsetCommit, TxnOffsetCommit, OffsetFetch, OffsetDelete,
  offset retention; the shard's pending transactional offsets are a
  :class:`~kafkapy.coordinator.txn_offsets.PendingTxnOffsets`;
* :mod:`~kafkapy.coordinator.consumer.heartbeat` — KIP-848 consumer groups (ConsumerGroupHeartbeat,
  their timers), through :meth:`GroupShard.consumer_heartbeat`;
* :mod:`~kafkapy.coordinator.group_migration` — the online migration between the two
  (``group.consumer.migration.policy``): a ConsumerGroupHeartbeat upgrades a live classic group,
  classic requests to a consumer group go to its classic-protocol members
  (:mod:`~kafkapy.coordinator.consumer.classic_members`), and a group left with only those
  turns classic again;
* :mod:`~kafkapy.coordinator.share_group.heartbeat` — KIP-932 share groups, loaded here and served
  through :attr:`GroupShard.share` by the share-group handlers;
* here — the group kinds' one namespace and its type checks, DeleteGroups, which spans
  membership and offsets, the end of transactions, and the replay of the log (transactional
  batches hold pending offsets, their markers complete them; record types 3-16 go to the
  consumer and share cores).

A consumer group's committed offsets are kept, as a classic group's are, in a memberless
:class:`ClassicGroup` of the same id (an *offset holder*: no protocol type, never listed as a
group of its own), so OffsetCommit/Fetch/Delete and retention work the same for every kind.

Any group goes Dead on DeleteGroups, or when its offsets all expired while it was empty.

The request, result and group types are re-exported from here: the broker's handlers and the
tests know the shard by this module.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

from kafkapy.coordinator import group_migration as gm
from kafkapy.coordinator import group_records as gr
from kafkapy.coordinator import migration, schema
from kafkapy.coordinator.classic_group import (
    ClassicGroup,
    CommittedOffset,
    GroupConfig,
    GroupState,
    Member,
    Record,
    live_group,
)
from kafkapy.coordinator.consumer import records as crec
from kafkapy.coordinator.consumer.classic_members import ClassicMembers, ClassicOutcome
from kafkapy.coordinator.consumer.group import ConsumerGroup, TopicInfo
from kafkapy.coordinator.consumer.heartbeat import (
    ConsumerGroupConfig,
    ConsumerGroupMembership,
    HeartbeatOutcome,
    HeartbeatRequest,
    HeartbeatResponse,
)
from kafkapy.coordinator.group_migration import modern_outcome
from kafkapy.coordinator.membership import ClassicGroupMembership
from kafkapy.coordinator.migration import MigrationPolicy
from kafkapy.coordinator.offsets import GroupOffsets
from kafkapy.coordinator.outcome import (
    PARKED_TYPE,
    JoinMember,
    JoinRequest,
    JoinResult,
    Outcome,
    Parked,
    SyncResult,
)
from kafkapy.coordinator.share_group import records as srec
from kafkapy.coordinator.share_group.group import ShareGroup
from kafkapy.coordinator.share_group.heartbeat import (
    DeleteRequest,
    InitializeRequest,
    ShareGroupConfig,
    ShareGroupMembership,
)
from kafkapy.coordinator.txn_offsets import PendingTxnOffsets
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.schema_codec import SchemaError

__all__ = [
    "CLASSIC", "CONSUMER", "SHARE", "ConsumerGroupConfig", "HeartbeatRequest", "HeartbeatResponse",
    "ShareGroupConfig", "TopicInfo", "modern_outcome",
    "PARKED_TYPE", "ClassicGroup", "CommittedOffset", "GroupConfig", "GroupShard", "GroupState",
    "JoinMember", "JoinRequest", "JoinResult", "Member", "Outcome", "Parked", "Record", "SyncResult",
]

E = ErrorCode
log = logging.getLogger(__name__)

CLASSIC, CONSUMER, SHARE = "classic", "consumer", "share"


class GroupShard:
    """The groups whose coordinator partition is ``partition``: classic, consumer (KIP-848) and
    share (KIP-932) groups, in one namespace of group ids."""

    def __init__(self, partition: int, config: GroupConfig, new_uuid: Callable[[], str],
                 consumer_config: ConsumerGroupConfig | None = None,
                 consumer_config_for: Callable[[str], ConsumerGroupConfig] | None = None,
                 share_config: ShareGroupConfig | None = None,
                 migration_policy: MigrationPolicy = MigrationPolicy.BIDIRECTIONAL) -> None:
        self.partition = partition
        self.config = config
        self.groups: dict[str, ClassicGroup] = {}
        self.membership = ClassicGroupMembership(config, self.groups, new_uuid)
        self.pending = PendingTxnOffsets()
        self.offsets = GroupOffsets(config, self.groups, self.pending)
        self.consumer = ConsumerGroupMembership(consumer_config or ConsumerGroupConfig(), new_uuid,
                                                config_for=consumer_config_for)
        #: ``group.consumer.migration.policy``: which online conversions between the classic and
        #: the consumer protocol this shard makes (Kafka's default: both ways).
        self.migration_policy = migration_policy
        #: Classic-protocol members of consumer groups (mixed mode, during a migration).
        self.classic_members = ClassicMembers(self.consumer, migration_policy)
        # The consumer core asks this before removing members: the group may turn classic.
        self.consumer.downgrader = migration.downgrader(migration_policy, config.max_size, self.consumer)
        #: The share groups; their heartbeats are served by the share-group handlers.
        self.share = ShareGroupMembership(share_config)
        #: Share-state initializations and deletions the share timers and the load asked for,
        #: once their records are written: the share-group edge drains this.
        self.share_requests: list[tuple[list[InitializeRequest], list[DeleteRequest]]] = []
        self.offsets.consumer_topics = self._consumer_topics

    # ---------------------------------------------------------------- kinds
    def group_type(self, group_id: str) -> str | None:
        """``classic``, ``consumer`` or ``share``; None when no such group lives here."""
        if group_id in self.consumer.groups:
            return CONSUMER
        if group_id in self.share.groups:
            return SHARE
        return CLASSIC if live_group(self.groups, group_id) is not None else None

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        return self.consumer.groups.get(group_id)

    def share_group(self, group_id: str) -> ShareGroup | None:
        return self.share.groups.get(group_id)

    def _consumer_topics(self, group_id: str) -> set[str] | None:
        g = self.consumer.groups.get(group_id)
        return None if g is None else g.subscribed_topic_names()

    def set_topics(self, topics: Mapping[str, TopicInfo], version: int) -> None:
        """The cluster's topics changed (``version``: the metadata offset)."""
        self.consumer.set_topics(topics, version)
        self.share.set_topics(topics)

    # ---------------------------------------------------------------- membership
    def next_deadline(self) -> int | None:
        """The earliest time ``ticks`` has something to do, or None. (Share groups' timers are run
        by the share-group edge, coordinator.share_group_service, which also makes their
        share-state calls.)"""
        times = [self.membership.next_deadline(), self.consumer.next_deadline(),
                 self.classic_members.next_deadline()]
        return min((t for t in times if t is not None), default=None)

    def _not_classic(self, group_id: str, join: bool) -> int:
        """The error of a classic-protocol request to a share group, NONE when the group is
        (or may become) a classic group or serves classic members (a consumer group with
        members: :meth:`_mixed`)."""
        if self.group_type(group_id) == SHARE:
            return E.INCONSISTENT_GROUP_PROTOCOL if join else E.UNKNOWN_MEMBER_ID
        return E.NONE

    def _mixed(self, group_id: str) -> bool:
        """Whether classic requests for ``group_id`` go to its classic-protocol members inside a
        consumer group (Kafka's mixed mode; with the migration disabled they are refused there
        with Kafka's answers: JoinGroup INCONSISTENT_GROUP_PROTOCOL, the others
        UNKNOWN_MEMBER_ID)."""
        group = self.consumer.groups.get(group_id)
        return group is not None and bool(group.members)

    def join(self, req: JoinRequest, now_ms: int) -> Outcome:
        error = self._not_classic(req.group_id, join=True)
        if error:
            return Outcome(response=JoinResult(error, member_id=""))
        if self._mixed(req.group_id):
            return self._classic_outcome(self.classic_members.join(req, now_ms))
        dropped = self._drop_empty_consumer_group(req.group_id)
        out = self.membership.join(req, now_ms)
        if dropped is not None:
            out.records[:0] = dropped.records
            out.on_write_failure += dropped.on_write_failure
            out.log += dropped.log
        return out

    def _drop_empty_consumer_group(self, group_id: str) -> Outcome | None:
        """A classic member joins an empty consumer group: the consumer group's records are
        deleted and the group becomes a classic one (Kafka's downgrade of an empty group)."""
        group = self.consumer.groups.get(group_id)
        if group is None:
            return None
        out = Outcome()
        for r in group.tombstones():
            out.records.append(gr.encode(r))
            self.consumer.replay(r)
        out.log.append(f"[GroupCoordinator] Converted the empty consumer group {group_id} to a classic group")

        def restore(_code: int, _at: int | None) -> None:
            self.consumer.groups[group_id] = group

        out.on_write_failure.append(restore)
        return out

    def sync(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
             protocol_type: str | None, protocol_name: str | None,
             assignments: Iterable[tuple[str, bytes]], now_ms: int) -> Outcome:
        error = self._not_classic(group_id, join=False)
        if error:
            return Outcome(response=SyncResult(error))
        if self._mixed(group_id):
            return self._classic_outcome(self.classic_members.sync(
                group_id, generation, member_id, instance_id, protocol_type, protocol_name, assignments, now_ms))
        return self.membership.sync(group_id, generation, member_id, instance_id, protocol_type,
                                    protocol_name, assignments, now_ms)

    def heartbeat(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
                  now_ms: int) -> Outcome:
        error = self._not_classic(group_id, join=False)
        if error:
            return Outcome(response=error)
        if self._mixed(group_id):
            return self._classic_outcome(self.classic_members.heartbeat(group_id, generation, member_id,
                                                                        instance_id, now_ms))
        return self.membership.heartbeat(group_id, generation, member_id, instance_id, now_ms)

    def leave(self, group_id: str, leaving: list[tuple[str, str | None]], now_ms: int) -> Outcome:
        """``leaving`` is (member_id, group_instance_id) pairs; the response is one code each.
        Members of a consumer group leave it whatever protocol they speak (Kafka 4.4 does so
        whatever the migration policy); a member it does not know is UNKNOWN_MEMBER_ID."""
        if self.group_type(group_id) == CONSUMER:
            return self._classic_outcome(self.classic_members.leave(group_id, leaving, now_ms))
        error = self._not_classic(group_id, join=False)
        if error:
            return Outcome(response=[error] * len(leaving))
        return self.membership.leave(group_id, leaving, now_ms)

    def _classic_outcome(self, co: ClassicOutcome) -> Outcome:
        return gm.classic_outcome(co, self._modern(co))

    def _modern(self, hb: HeartbeatOutcome) -> Outcome:
        return gm.with_conversions(hb, self.groups, self.classic_members)

    def tick(self, now_ms: int) -> Outcome:
        """Fire the classic rebalance, session and pending-member deadlines due at ``now_ms``."""
        return self.membership.tick(now_ms)

    def ticks(self, now_ms: int) -> list[Outcome]:
        """The classic and consumer groups' due deadlines: the classic outcome, then the
        consumer groups' (their classic-protocol members' join and sync timeouts next)."""
        return [self.membership.tick(now_ms), self._modern(self.consumer.tick(now_ms)),
                self._modern(self.classic_members.tick(now_ms))]

    # ---------------------------------------------------------------- consumer groups (KIP-848)
    def consumer_heartbeat(self, req: HeartbeatRequest, now_ms: int) -> Outcome:
        """One ConsumerGroupHeartbeat; the response is a :class:`HeartbeatResponse`."""
        kind = self.group_type(req.group_id)
        upgrade: Outcome | None = None
        if kind == SHARE:
            return Outcome(response=HeartbeatResponse(
                E.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a consumer group.", req.member_id or None))
        if kind == CLASSIC:
            classic = self.groups[req.group_id]
            if classic.members or classic.state is not GroupState.EMPTY:
                return self._upgrade_classic(classic, req, now_ms)
            if classic.protocol_type is not None:
                upgrade = self._retire_empty_classic(classic)
        out = self._modern(self.consumer.heartbeat(req, now_ms))
        if upgrade is not None:
            ok = isinstance(out.response, HeartbeatResponse) and out.response.error == E.NONE
            if ok:
                out.records[:0] = upgrade.records
                out.on_write_failure += upgrade.on_write_failure
            else:
                upgrade.write_failed(E.NONE)
        return out

    def _upgrade_classic(self, classic: ClassicGroup, req: HeartbeatRequest, now_ms: int) -> Outcome:
        """A consumer-protocol member joins a classic group with members: Kafka's online upgrade
        when ``group.consumer.migration.policy`` allows it (:func:`group_migration.upgrade`)."""
        return gm.upgrade(classic, req, now_ms, self.migration_policy, self.consumer, self._modern)

    def _retire_empty_classic(self, classic: ClassicGroup) -> Outcome:
        """An empty classic group becomes a consumer group: its GroupMetadata is deleted, its
        offsets stay (in the same object, now an offset holder)."""
        out = Outcome(records=[(schema.encode_group_key(classic.group_id), None)])
        saved = (classic.protocol_type, classic.protocol_name, classic.generation, classic.leader)
        classic.protocol_type = classic.protocol_name = classic.leader = None
        classic.generation = 0

        def restore(_code: int, _at: int | None) -> None:
            classic.protocol_type, classic.protocol_name, classic.generation, classic.leader = saved

        out.on_write_failure.append(restore)
        return out

    # ---------------------------------------------------------------- offsets
    def validate_commit(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
                        now_ms: int, api_version: int = 9) -> int:
        """The error for a whole OffsetCommit, NONE when its partitions may be written. A consumer
        group checks the member epoch (``generation``) and wants OffsetCommit v9+ from members."""
        consumer = self.consumer.groups.get(group_id)
        if consumer is not None:
            m = consumer.members.get(member_id)
            if m is not None and m.uses_classic_protocol and generation >= 0:
                # A classic-protocol member (mixed mode) commits with any OffsetCommit version,
                # its generation being its member epoch; a mismatch is ILLEGAL_GENERATION, as
                # Kafka 4.4 answers classic members. (Kafka also takes an older generation for
                # the partitions the member held since then; here the whole commit is refused.)
                return E.NONE if generation == m.member_epoch else E.ILLEGAL_GENERATION
            return consumer.validate_offset_commit(member_id, generation, api_version)
        if group_id in self.share.groups:
            return E.GROUP_ID_NOT_FOUND
        return self.offsets.validate_commit(group_id, generation, member_id, instance_id, now_ms)

    def commit(self, group_id: str, offsets: list[tuple[str, int, int, int, str | None]], now_ms: int,
               expire_timestamp: int = -1) -> Outcome:
        return self.offsets.commit(group_id, offsets, now_ms, expire_timestamp)

    def validate_txn_commit(self, group_id: str, generation: int, member_id: str,
                            instance_id: str | None) -> int:
        """The error for a whole TxnOffsetCommit, NONE when its partitions may be written."""
        consumer = self.consumer.groups.get(group_id)
        if consumer is not None:
            if generation < 0 and not member_id and instance_id is None:
                return E.NONE  # TxnOffsetCommit v0-v2 carries no membership to check
            return consumer.validate_offset_commit(member_id, generation, 9, transactional=True)
        if group_id in self.share.groups:
            return E.GROUP_ID_NOT_FOUND
        return self.offsets.validate_txn_commit(group_id, generation, member_id, instance_id)

    def txn_commit(self, group_id: str, producer_id: int, producer_epoch: int,
                   offsets: list[tuple[str, int, int, int, str | None]], now_ms: int) -> Outcome:
        return self.offsets.txn_commit(group_id, producer_id, producer_epoch, offsets, now_ms)

    def complete_transaction(self, producer_id: int, commit: bool, now_ms: int) -> Outcome:
        """The producer's end-transaction marker is in this partition's log: its pending offsets
        are committed or dropped (nothing to write; the outcome carries log lines)."""
        out = Outcome()
        out.log = self.offsets.complete_txn(producer_id, commit, now_ms)
        return out

    def unstable_partitions(self, group_id: str) -> set[tuple[str, int]]:
        return self.offsets.unstable_partitions(group_id)

    def validate_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> int:
        """OffsetFetch v9+ naming a member: checked against a consumer group's members (other
        kinds have no member epochs to check)."""
        consumer = self.consumer.groups.get(group_id)
        if consumer is None:
            return E.NONE
        m = consumer.members.get(member_id or "")
        if m is not None and m.uses_classic_protocol and member_epoch != m.member_epoch:
            return E.ILLEGAL_GENERATION  # Kafka's validateMemberEpoch for a classic member
        return consumer.validate_offset_fetch(member_id, member_epoch)

    def fetch_offsets(self, group_id: str, partitions: list[tuple[str, int]] | None
                      ) -> list[tuple[str, int, CommittedOffset | None]]:
        """Committed offsets of the listed partitions (None: every partition with one)."""
        return self.offsets.fetch_offsets(group_id, partitions)

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]) -> Outcome:
        consumer = self.consumer.groups.get(group_id)
        if consumer is not None:
            return self.offsets.delete_offsets(group_id, partitions, subscribed_to=consumer.subscribed_topic_names())
        if group_id in self.share.groups:
            return Outcome(response=(E.GROUP_ID_NOT_FOUND, []))
        return self.offsets.delete_offsets(group_id, partitions)

    def expire_offsets(self, now_ms: int) -> Outcome:
        """Offsets past retention removed; then, as Kafka's cleanup, an empty consumer group
        left without offsets is deleted."""
        out = self.offsets.expire_offsets(now_ms)
        for group_id, group in list(self.consumer.groups.items()):
            holder = live_group(self.groups, group_id)
            if group.members or (holder is not None and holder.offsets) or self.pending.has_group(group_id):
                continue
            if holder is not None:
                del self.groups[group_id]
            for r in group.tombstones():
                out.records.append(gr.encode(r))
                self.consumer.replay(r)
            out.log.append(f"[GroupCoordinator] Deleted the empty consumer group {group_id}: no offsets left")
        return out

    # ---------------------------------------------------------------- DeleteGroups (spans both)
    def delete_group(self, group_id: str, now_ms: int) -> Outcome:
        """DeleteGroups of a group of any kind: only an empty one goes, with its offsets."""
        out = Outcome()
        modern: ConsumerGroup | ShareGroup | None = self.consumer.groups.get(group_id) or \
            self.share.groups.get(group_id)
        if modern is not None:
            if modern.members:
                out.response = E.NON_EMPTY_GROUP
                return out
            holder = live_group(self.groups, group_id)
            if holder is not None:
                self._tombstone_group(holder, out, now_ms)
                out.records.pop()  # the holder has no GroupMetadata record of its own
            for r in self._modern_tombstones(modern):
                out.records.append(gr.encode(r))
                if isinstance(modern, ConsumerGroup):
                    self.consumer.replay(r)  # type: ignore[arg-type]
                else:
                    self.share.replay(r)  # type: ignore[arg-type]
            out.response = E.NONE
            return out
        group = live_group(self.groups, group_id)
        if group is None:
            out.response = E.GROUP_ID_NOT_FOUND
            return out
        if group.state is not GroupState.EMPTY:
            out.response = E.NON_EMPTY_GROUP
            return out
        self._tombstone_group(group, out, now_ms)
        out.response = E.NONE
        return out

    @staticmethod
    def _modern_tombstones(group: ConsumerGroup | ShareGroup) -> list[gr.GroupRecord]:
        if isinstance(group, ConsumerGroup):
            return list(group.tombstones())
        gid = group.group_id
        return [srec.Tombstone(t, gid) for t in (srec.StatePartitionMetadata.RECORD_TYPE,
                                                 srec.TargetAssignmentMetadata.RECORD_TYPE,
                                                 srec.GroupMetadata.RECORD_TYPE)]

    def listed_groups(self) -> list[tuple[str, str, str, str]]:
        """(group id, protocol type, state, type) of every live group, as ListGroups shows them."""
        out = []
        for g in self.groups.values():
            if g.state is GroupState.DEAD or g.group_id in self.consumer.groups or g.group_id in self.share.groups:
                continue
            out.append((g.group_id, g.protocol_type or "", g.state.value, CLASSIC))
        out += [(gid, "consumer", g.state().value, CONSUMER) for gid, g in self.consumer.groups.items()]
        out += [(gid, "share", g.state().value, SHARE) for gid, g in self.share.groups.items()]
        return out

    def _tombstone_group(self, group: ClassicGroup, out: Outcome, now_ms: int) -> None:
        # Partitions with only a pending transactional offset are tombstoned too (Kafka's
        # deleteAllOffsets): the transaction's commit then finds nothing to apply.
        for topic, partition in sorted(set(group.offsets) | self.pending.partitions(group.group_id)):
            out.records.append((schema.encode_offset_key(group.group_id, topic, partition), None))
            self.pending.clear_partition(group.group_id, topic, partition)
        out.records.append((schema.encode_group_key(group.group_id), None))
        group.offsets.clear()
        group.transition(GroupState.DEAD, now_ms)
        del self.groups[group.group_id]

    # ---------------------------------------------------------------- loading
    def replay(self, key: bytes, value: bytes | None, now_ms: int, offset: int = -1,
               producer_id: int = -1) -> None:
        """Apply one ``__consumer_offsets`` record read back from the log: ``offset`` is where it
        sits, ``producer_id`` the producer of its batch when that batch is transactional."""
        kind = gr.record_type(key)
        if kind in gr.CONSUMER_TYPES or kind in gr.SHARE_TYPES:
            self._replay_modern(key, value)
            return
        if kind in gr.STREAMS_TYPES:
            log.debug("Skipped a streams group record (type %d) of %s-%d", kind, schema.OFFSETS_TOPIC,
                      self.partition)
            return
        k = schema.decode_key(key)
        if isinstance(k, schema.OffsetKey):
            self._replay_offset(k, value, now_ms, offset, producer_id)
        elif isinstance(k, schema.GroupKey):
            self._replay_group(k, value, now_ms)

    def _replay_modern(self, key: bytes, value: bytes | None) -> None:
        try:
            record = gr.decode(key, value)
        except SchemaError as e:
            log.warning("Skipped an unreadable group record of %s-%d: %s", schema.OFFSETS_TOPIC, self.partition, e)
            return
        if isinstance(record, gr.ObsoleteRecord):
            return
        if isinstance(record, (crec.GroupMetadata, crec.MemberMetadata, crec.TargetAssignmentMetadata,
                               crec.TargetAssignmentMember, crec.CurrentMemberAssignment,
                               crec.RegularExpression, crec.Tombstone)):
            self.consumer.replay(record)
        else:
            self.share.replay(record)

    def replay_marker(self, producer_id: int, commit: bool, now_ms: int) -> None:
        """Apply an end-transaction marker read back from the log (ignored when the producer has
        nothing pending here)."""
        self.offsets.complete_txn(producer_id, commit, now_ms)

    def _replay_offset(self, k: schema.OffsetKey, value: bytes | None, now_ms: int, offset: int,
                       producer_id: int) -> None:
        if value is None:
            g = self.groups.get(k.group)
            if g is not None:
                g.offsets.pop((k.topic, k.partition), None)
            self.pending.clear_partition(k.group, k.topic, k.partition)
            return
        v = schema.decode_offset_value(value)
        g = self.groups.get(k.group)
        if g is None:
            g = self.groups[k.group] = ClassicGroup(k.group, state_timestamp=now_ms)
        c = CommittedOffset(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp,
                            offset)
        if producer_id >= 0:
            self.pending.add(producer_id, k.group, k.topic, k.partition, c)
        else:
            g.offsets[(k.topic, k.partition)] = c

    def _replay_group(self, k: schema.GroupKey, value: bytes | None, now_ms: int) -> None:
        if value is None:
            g = self.groups.get(k.group)
            if g is not None:
                # The group's offsets were tombstoned before it; keep any committed after.
                g.members.clear()
                g.static_members.clear()
                g.protocol_type = g.protocol_name = g.leader = None
                g.generation = 0
                g.state = GroupState.EMPTY
                if not g.offsets and not self.pending.has_group(k.group):
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
        self.consumer.on_loaded(now_ms)
        # Initializations and deletions under way when the log was written are asked again, by
        # the share-group edge once it adopts this shard.
        loaded = self.share.on_loaded(now_ms)
        if loaded.initialize or loaded.delete:
            self.share_requests.append((list(loaded.initialize), list(loaded.delete)))
