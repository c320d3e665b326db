"""Transactional offset commits not yet decided (Kafka's pending transactional offsets), sans-I/O.

A TxnOffsetCommit's offsets are written to ``__consumer_offsets`` inside the producer's
transaction; until the transaction's marker reaches that partition they are *pending*: OffsetFetch
does not return them (and answers UNSTABLE_OFFSET_COMMIT to a ``require_stable`` fetch), retention
does not expire the partition, and the group is not removed as empty. The marker then either
commits them (each becomes the committed offset unless a commit written later in the log already
replaced it) or drops them.

One instance per shard: pending offsets are kept per producer id across the shard's groups, and
indexed by (group, topic, partition) so the per-partition questions are cheap.
"""

from __future__ import annotations

from kafkapy.coordinator.classic_group import CommittedOffset

#: (group id, topic, partition)
GroupPartition = tuple[str, str, int]


class PendingTxnOffsets:
    """Pending transactional offsets of one shard, by producer id and by group partition."""

    def __init__(self) -> None:
        self.by_producer: dict[int, dict[GroupPartition, CommittedOffset]] = {}
        # group -> (topic, partition) -> producer ids with a pending offset there
        self._open: dict[str, dict[tuple[str, int], set[int]]] = {}

    def add(self, producer_id: int, group_id: str, topic: str, partition: int,
            committed: CommittedOffset) -> None:
        """Record (or replace) ``producer_id``'s pending offset for the partition."""
        self.by_producer.setdefault(producer_id, {})[(group_id, topic, partition)] = committed
        self._open.setdefault(group_id, {}).setdefault((topic, partition), set()).add(producer_id)

    def has(self, group_id: str, topic: str, partition: int) -> bool:
        """Whether some open transaction holds an offset for this group partition."""
        return (topic, partition) in self._open.get(group_id, {})

    def has_group(self, group_id: str) -> bool:
        """Whether some open transaction holds an offset of this group."""
        return group_id in self._open

    def partitions(self, group_id: str) -> set[tuple[str, int]]:
        """The (topic, partition) pairs of the group with pending offsets."""
        return set(self._open.get(group_id, {}))

    def clear_partition(self, group_id: str, topic: str, partition: int) -> None:
        """A tombstone of the partition's offset drops every transaction's pending offset for it."""
        by_tp = self._open.get(group_id)
        if by_tp is None:
            return
        for pid in by_tp.pop((topic, partition), set()):
            mine = self.by_producer.get(pid)
            if mine is not None:
                mine.pop((group_id, topic, partition), None)
                if not mine:
                    del self.by_producer[pid]
        if not by_tp:
            del self._open[group_id]

    def take(self, producer_id: int) -> dict[GroupPartition, CommittedOffset]:
        """Remove and return ``producer_id``'s pending offsets (its transaction ended)."""
        taken = self.by_producer.pop(producer_id, {})
        for group_id, topic, partition in taken:
            by_tp = self._open.get(group_id)
            if by_tp is None:
                continue
            pids = by_tp.get((topic, partition))
            if pids is not None:
                pids.discard(producer_id)
                if not pids:
                    del by_tp[(topic, partition)]
            if not by_tp:
                del self._open[group_id]
        return taken
