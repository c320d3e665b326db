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
* here — DeleteGroups, which spans both, the end of transactions, and the replay of the log
  (transactional batches hold pending offsets, their markers complete them).

Any group goes Dead on DeleteGroups, or when its offsets all expired while it was empty.

The request, result and group types are re-exported from here: the broker's handlers and the
tests know the shard by this module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kafkapy.coordinator import schema
from kafkapy.coordinator.classic_group import (
    ClassicGroup,
    CommittedOffset,
    GroupConfig,
    GroupState,
    Member,
    Record,
    live_group,
)
from kafkapy.coordinator.membership import ClassicGroupMembership
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
from kafkapy.coordinator.txn_offsets import PendingTxnOffsets
from kafkapy.protocol.errors import ErrorCode

__all__ = [
    "PARKED_TYPE", "ClassicGroup", "CommittedOffset", "GroupConfig", "GroupShard", "GroupState",
    "JoinMember", "JoinRequest", "JoinResult", "Member", "Outcome", "Parked", "Record", "SyncResult",
]

E = ErrorCode


class GroupShard:
    """The groups whose coordinator partition is ``partition``."""

    def __init__(self, partition: int, config: GroupConfig, new_uuid: Callable[[], str]) -> None:
        self.partition = partition
        self.config = config
        self.groups: dict[str, ClassicGroup] = {}
        self.membership = ClassicGroupMembership(config, self.groups, new_uuid)
        self.pending = PendingTxnOffsets()
        self.offsets = GroupOffsets(config, self.groups, self.pending)

    # ---------------------------------------------------------------- membership
    def next_deadline(self) -> int | None:
        """The earliest time ``tick`` has something to do, or None."""
        return self.membership.next_deadline()

    def join(self, req: JoinRequest, now_ms: int) -> Outcome:
        return self.membership.join(req, now_ms)

    def sync(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
             protocol_type: str | None, protocol_name: str | None,
             assignments: Iterable[tuple[str, bytes]], now_ms: int) -> Outcome:
        return self.membership.sync(group_id, generation, member_id, instance_id, protocol_type,
                                    protocol_name, assignments, now_ms)

    def heartbeat(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
                  now_ms: int) -> Outcome:
        return self.membership.heartbeat(group_id, generation, member_id, instance_id, now_ms)

    def leave(self, group_id: str, leaving: list[tuple[str, str | None]], now_ms: int) -> Outcome:
        """``leaving`` is (member_id, group_instance_id) pairs; the response is one code each."""
        return self.membership.leave(group_id, leaving, now_ms)

    def tick(self, now_ms: int) -> Outcome:
        """Fire the rebalance, session and pending-member deadlines due at ``now_ms``."""
        return self.membership.tick(now_ms)

    # ---------------------------------------------------------------- offsets
    def validate_commit(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
                        now_ms: int) -> int:
        """The error for a whole OffsetCommit, NONE when its partitions may be written."""
        return self.offsets.validate_commit(group_id, generation, member_id, instance_id, now_ms)

    def commit(self, group_id: str, offsets: list[tuple[str, int, int, int, str | None]], now_ms: int,
               expire_timestamp: int = -1) -> Outcome:
        return self.offsets.commit(group_id, offsets, now_ms, expire_timestamp)

    def validate_txn_commit(self, group_id: str, generation: int, member_id: str,
                            instance_id: str | None) -> int:
        """The error for a whole TxnOffsetCommit, NONE when its partitions may be written."""
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

    def fetch_offsets(self, group_id: str, partitions: list[tuple[str, int]] | None
                      ) -> list[tuple[str, int, CommittedOffset | None]]:
        """Committed offsets of the listed partitions (None: every partition with one)."""
        return self.offsets.fetch_offsets(group_id, partitions)

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]) -> Outcome:
        return self.offsets.delete_offsets(group_id, partitions)

    def expire_offsets(self, now_ms: int) -> Outcome:
        return self.offsets.expire_offsets(now_ms)

    # ---------------------------------------------------------------- DeleteGroups (spans both)
    def delete_group(self, group_id: str, now_ms: int) -> Outcome:
        out = Outcome()
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
        k = schema.decode_key(key)
        if isinstance(k, schema.OffsetKey):
            self._replay_offset(k, value, now_ms, offset, producer_id)
        elif isinstance(k, schema.GroupKey):
            self._replay_group(k, value, now_ms)

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
