"""Committed offsets of the groups of one shard (Kafka's OffsetMetadataManager), sans-I/O.

OffsetCommit (validated against the group's membership first), OffsetFetch, OffsetDelete, and
the retention of ``offsets.retention.minutes`` (KIP-211), which also removes empty groups left
without offsets. A commit's offsets take effect only once its records are written (the
outcome's ``after_write``), so a failed append changes nothing.
"""

from __future__ import annotations

from kafkapy.coordinator import schema
from kafkapy.coordinator.classic_group import (
    ClassicGroup,
    CommittedOffset,
    GroupConfig,
    GroupState,
    live_group,
)
from kafkapy.coordinator.outcome import Outcome
from kafkapy.protocol.errors import ErrorCode

E = ErrorCode


class GroupOffsets:
    """The committed offsets kept in the shard's groups (``groups`` is shared with membership)."""

    def __init__(self, config: GroupConfig, groups: dict[str, ClassicGroup]) -> None:
        self.config = config
        self.groups = groups

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
            group = live_group(self.groups, group_id)
            if group is None:
                group = self.groups[group_id] = ClassicGroup(group_id, state_timestamp=now_ms)
            group.offsets.update(updates)

        if updates:
            out.after_write.append(store)
        return out

    def fetch_offsets(self, group_id: str, partitions: list[tuple[str, int]] | None
                      ) -> list[tuple[str, int, CommittedOffset | None]]:
        """Committed offsets of the listed partitions (None: every partition with one)."""
        group = live_group(self.groups, group_id)
        stored = group.offsets if group is not None else {}
        if partitions is None:
            return [(t, p, c) for (t, p), c in sorted(stored.items())]
        return [(t, p, stored.get((t, p))) for t, p in partitions]

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]) -> Outcome:
        """OffsetDelete: top-level error code, then one code per partition."""
        out = Outcome()
        group = live_group(self.groups, group_id)
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
