"""Committed offsets of the groups of one shard (Kafka's OffsetMetadataManager), sans-I/O.

OffsetCommit (validated against the group's membership first), TxnOffsetCommit (pending until
its transaction's marker, see :mod:`~kafkapy.coordinator.txn_offsets`), OffsetFetch, OffsetDelete,
and the retention of ``offsets.retention.minutes`` (KIP-211), which also removes empty groups left
without offsets. A commit's offsets take effect only once its records are written (the
outcome's ``after_write``), so a failed append changes nothing.

Each committed offset remembers the log offset of its record: when a transaction commits, its
offset for a partition replaces the committed one only if its record is the later of the two
(Kafka's rule, which also makes a compacted log load to the same state).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from kafkapy.coordinator import schema
from kafkapy.coordinator.classic_group import (
    ClassicGroup,
    CommittedOffset,
    GroupConfig,
    GroupState,
    live_group,
)
from kafkapy.coordinator.outcome import Outcome
from kafkapy.coordinator.txn_offsets import PendingTxnOffsets
from kafkapy.protocol.errors import ErrorCode

E = ErrorCode


class GroupOffsets:
    """The committed offsets kept in the shard's groups (``groups`` is shared with membership)."""

    def __init__(self, config: GroupConfig, groups: dict[str, ClassicGroup],
                 pending: PendingTxnOffsets | None = None) -> None:
        self.config = config
        self.groups = groups
        self.pending = pending if pending is not None else PendingTxnOffsets()
        #: The subscribed topics of the consumer group whose offsets a memberless group holds,
        #: None when it holds none: retention keeps a consumer group's offsets of subscribed
        #: topics and leaves deleting the group to the shard.
        self.consumer_topics: Callable[[str], set[str] | None] = lambda _group_id: None

    def validate_commit(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
                        now_ms: int) -> int:
        """The error for a whole OffsetCommit, NONE when its partitions may be written."""
        group = live_group(self.groups, group_id)
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
        out, updates = self._offset_records(group_id, offsets, now_ms, expire_timestamp)

        def store(_at_ms: int | None) -> None:
            group = self._group_or_simple(group_id, now_ms)
            for tp, (index, c) in updates.items():
                group.offsets[tp] = _at(c, out.base_offset, index)

        if updates:
            out.after_write.append(store)
        return out

    def _offset_records(self, group_id: str, offsets: list[tuple[str, int, int, int, str | None]],
                        now_ms: int, expire_timestamp: int
                        ) -> tuple[Outcome, dict[tuple[str, int], tuple[int, CommittedOffset]]]:
        """The records of a commit and one code per entry; the offsets by partition with the
        index of their record."""
        out = Outcome()
        codes = []
        updates: dict[tuple[str, int], tuple[int, CommittedOffset]] = {}
        for topic, partition, offset, epoch, metadata in offsets:
            metadata = metadata or ""
            if len(metadata.encode("utf-8")) > self.config.offset_metadata_max_bytes:
                codes.append(E.OFFSET_METADATA_TOO_LARGE)
                continue
            updates[(topic, partition)] = (len(out.records), CommittedOffset(
                offset, epoch, metadata, now_ms, expire_timestamp))
            out.records.append((schema.encode_offset_key(group_id, topic, partition),
                                schema.encode_offset_value(schema.OffsetValue(
                                    offset, epoch, metadata, now_ms, expire_timestamp))))
            codes.append(E.NONE)
        out.response = codes
        return out, updates

    def _group_or_simple(self, group_id: str, now_ms: int) -> ClassicGroup:
        """The group, created as a simple (memberless) group when it does not exist."""
        group = live_group(self.groups, group_id)
        if group is None:
            group = self.groups[group_id] = ClassicGroup(group_id, state_timestamp=now_ms)
        return group

    # ------------------------------------------------------------ transactional offsets
    def validate_txn_commit(self, group_id: str, generation: int, member_id: str,
                            instance_id: str | None) -> int:
        """The error for a whole TxnOffsetCommit (KIP-447 checks for v3+), NONE when it may be
        written. Unlike OffsetCommit, the group's state does not matter (no REBALANCE_IN_PROGRESS)
        and a request without member id and generation (v0-v2) is accepted into any group."""
        group = live_group(self.groups, group_id)
        if group is None:
            return E.NONE if generation < 0 else E.ILLEGAL_GENERATION
        if generation < 0 and group.state is GroupState.EMPTY:
            return E.NONE
        if generation >= 0 or member_id or instance_id is not None:
            if instance_id is not None:
                known = group.static_members.get(instance_id)
                if known is None:
                    return E.UNKNOWN_MEMBER_ID
                if known != member_id:
                    return E.FENCED_INSTANCE_ID
            elif member_id not in group.members:
                return E.UNKNOWN_MEMBER_ID
            if generation != group.generation:
                return E.ILLEGAL_GENERATION
        return E.NONE

    def txn_commit(self, group_id: str, producer_id: int, producer_epoch: int,
                   offsets: list[tuple[str, int, int, int, str | None]], now_ms: int) -> Outcome:
        """TxnOffsetCommit of entries already validated as a whole: the records go out as one
        transactional batch of the producer; once written the offsets are pending for it."""
        out, updates = self._offset_records(group_id, offsets, now_ms, -1)
        out.producer_id, out.producer_epoch = producer_id, producer_epoch

        def hold(_at_ms: int | None) -> None:
            self._group_or_simple(group_id, now_ms)
            for (topic, partition), (index, c) in updates.items():
                self.pending.add(producer_id, group_id, topic, partition, _at(c, out.base_offset, index))

        if updates:
            out.after_write.append(hold)
        return out

    def complete_txn(self, producer_id: int, commit: bool, now_ms: int) -> list[str]:
        """The producer's transaction ended in this partition: its pending offsets become
        committed (commit) or are dropped (abort). Returns the log lines of skipped offsets."""
        lines = []
        for (group_id, topic, partition), c in sorted(self.pending.take(producer_id).items()):
            if not commit:
                continue
            group = self._group_or_simple(group_id, now_ms)
            current = group.offsets.get((topic, partition))
            if current is None or c.record_offset > current.record_offset:
                group.offsets[(topic, partition)] = c
            else:
                lines.append(f"Skipped the transactional offset {c.offset} of producer {producer_id} for "
                             f"{topic}-{partition} in group {group_id}: its record (offset {c.record_offset}) "
                             f"is older than the committed one's ({current.record_offset})")
        return lines

    def unstable_partitions(self, group_id: str) -> set[tuple[str, int]]:
        """Partitions of the group with a pending transactional offset (UNSTABLE_OFFSET_COMMIT
        to an OffsetFetch that requires stable offsets)."""
        return self.pending.partitions(group_id)

    def fetch_offsets(self, group_id: str, partitions: list[tuple[str, int]] | None
                      ) -> list[tuple[str, int, CommittedOffset | None]]:
        """Committed offsets of the listed partitions (None: every partition with one)."""
        group = live_group(self.groups, group_id)
        stored = group.offsets if group is not None else {}
        if partitions is None:
            return [(t, p, c) for (t, p), c in sorted(stored.items())]
        return [(t, p, stored.get((t, p))) for t, p in partitions]

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]],
                       subscribed_to: set[str] | None = None) -> Outcome:
        """OffsetDelete: top-level error code, then one code per partition. ``subscribed_to``:
        the topics of a consumer group, whose offsets are kept here in a memberless holder."""
        out = Outcome()
        group = live_group(self.groups, group_id)
        subscribed: set[str] | None = set()
        if subscribed_to is not None:
            subscribed = subscribed_to
        elif group is None:
            out.response = (E.GROUP_ID_NOT_FOUND, [])
            return out
        elif group.state is not GroupState.EMPTY:
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
            # Pending transactional offsets are tombstoned too: their commit will not revive them.
            had = group is not None and group.offsets.pop((topic, partition), None) is not None
            if had or self.pending.has(group_id, topic, partition):
                self.pending.clear_partition(group_id, topic, partition)
                out.records.append((schema.encode_offset_key(group_id, topic, partition), None))
            codes.append(E.NONE)
        out.response = (E.NONE, codes)
        return out

    def expire_offsets(self, now_ms: int) -> Outcome:
        """Drop offsets past ``offsets.retention.minutes`` (KIP-211 rules); empty groups with no
        offsets left are deleted."""
        out = Outcome()
        retention = self.config.offsets_retention_ms
        for group in list(self.groups.values()):
            if group.state is GroupState.DEAD:
                continue
            expired: list[tuple[str, int]] = []
            consumer_topics = self.consumer_topics(group.group_id)
            if consumer_topics is not None:
                for tp, c in group.offsets.items():
                    limit = c.expire_timestamp if c.expire_timestamp >= 0 else c.commit_timestamp + retention
                    if tp[0] not in consumer_topics and limit <= now_ms:
                        expired.append(tp)
            elif group.protocol_type and group.state is GroupState.EMPTY:
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
            # An offset with a transaction pending on its partition waits for the transaction.
            expired = [tp for tp in expired if not self.pending.has(group.group_id, *tp)]
            for topic, partition in expired:
                del group.offsets[(topic, partition)]
                out.records.append((schema.encode_offset_key(group.group_id, topic, partition), None))
            if group.state is GroupState.EMPTY and not group.offsets and (expired or not group.protocol_type) \
                    and not self.pending.has_group(group.group_id) and consumer_topics is None:
                out.records.append((schema.encode_group_key(group.group_id), None))
                group.transition(GroupState.DEAD, now_ms)
                del self.groups[group.group_id]
        return out


def _at(c: CommittedOffset, base_offset: int, index: int) -> CommittedOffset:
    """``c`` with the log offset of its record (index ``index`` of a batch at ``base_offset``)."""
    return dataclasses.replace(c, record_offset=base_offset + index if base_offset >= 0 else -1)
