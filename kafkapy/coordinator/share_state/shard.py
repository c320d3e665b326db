"""One ``__share_group_state`` partition's share-partition states (Kafka's ShareCoordinatorShard),
sans-I/O.

Each (group, topic id, partition) has a state: its state epoch (bumped by Initialize, e.g. when an
admin alters the start offset), the leader epoch of the last leader that read or wrote it, the
start offset and the state batches. Initialize writes a :class:`ShareSnapshot`; Write appends a
:class:`ShareUpdate` holding only what the write carried, and every
``share.coordinator.snapshot.update.records.per.snapshot`` updates a write folds the state into a
new snapshot instead, so loading a key never replays more than that many updates. Delete writes a
tombstone.

Every operation builds its records and applies them through :meth:`ShareStateShard.replay`, so a
shard loaded from the log equals the live one. When the append fails the edge calls
:meth:`ShareStateOutcome.rollback`; once it succeeds, :meth:`ShareStateShard.appended` tells the
shard where the records went, which is what :meth:`ShareStateShard.prunable_offset` needs.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import TypeVar

from kafkapy.coordinator.share_state.batches import combine
from kafkapy.coordinator.share_state.records import ShareSnapshot, ShareStateRecord, ShareUpdate, Tombstone
from kafkapy.protocol.errors import ErrorCode
from kafkapy.share.partition import PartitionState, StateBatch
from kafkapy.share.persister import StateResult

E = ErrorCode
_V = TypeVar("_V")

#: (group id, topic id, partition): Kafka's SharePartitionKey.
SharePartitionKey = tuple[str, uuid.UUID, int]


@dataclass(frozen=True)
class ShareStateConfig:
    """The ``share.coordinator.*`` settings the core uses (Kafka's names and defaults)."""

    snapshot_update_records_per_snapshot: int = 500


@dataclass(frozen=True)
class ShareGroupOffset:
    """The stored state of one share partition (Kafka's ShareGroupOffset)."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[StateBatch, ...] = ()
    delivery_complete_count: int = -1
    create_timestamp_ms: int = -1
    write_timestamp_ms: int = -1

    def partition_state(self) -> PartitionState:
        return PartitionState(self.state_epoch, self.leader_epoch, self.start_offset, self.state_batches,
                              self.delivery_complete_count)


@dataclass
class ShareStateOutcome:
    """An operation's answer and the records to append before giving it."""

    response: StateResult = field(default_factory=StateResult)
    records: list[ShareStateRecord] = field(default_factory=list)
    _undo: list[Callable[[], None]] = field(default_factory=list, repr=False)

    def rollback(self) -> None:
        """Undo the state change: the records could not be appended."""
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()


def _put(table: dict[SharePartitionKey, _V], key: SharePartitionKey, value: _V | None) -> None:
    if value is None:
        table.pop(key, None)
    else:
        table[key] = value


def _refused(error: int, message: str | None = None) -> ShareStateOutcome:
    return ShareStateOutcome(StateResult(error, message))


class ShareStateShard:
    """The share-partition states kept in one ``__share_group_state`` partition."""

    def __init__(self, config: ShareStateConfig | None = None) -> None:
        self.config = config or ShareStateConfig()
        self.states: dict[SharePartitionKey, ShareGroupOffset] = {}
        #: updates replayed since each key's last snapshot
        self._updates: dict[SharePartitionKey, int] = {}
        #: log offset of each key's last snapshot (once known)
        self._snapshot_offsets: dict[SharePartitionKey, int] = {}
        #: the offset just past the last record known to be in the log
        self._end_offset = 0

    # ------------------------------------------------------------------ reads
    def get(self, group_id: str, topic_id: uuid.UUID, partition: int) -> ShareGroupOffset | None:
        return self.states.get((group_id, topic_id, partition))

    def updates_since_snapshot(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int:
        return self._updates.get((group_id, topic_id, partition), 0)

    # ------------------------------------------------------------------ operations
    def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                   start_offset: int, now_ms: int) -> ShareStateOutcome:
        """InitializeShareGroupState: a fresh state at ``state_epoch`` starting at ``start_offset``
        (-1: the leader resolves ``share.auto.offset.reset``). A lower state epoch than the stored
        one is fenced; an equal one re-initializes (a retried request)."""
        if partition < 0:
            return _refused(E.INVALID_REQUEST, "The partition id cannot be a negative number.")
        if state_epoch < 0:
            return _refused(E.INVALID_REQUEST, "The state epoch cannot be a negative number.")
        key = (group_id, topic_id, partition)
        cur = self.states.get(key)
        if cur is not None and cur.state_epoch > state_epoch:
            return _refused(E.FENCED_STATE_EPOCH, f"Initialize request state epoch is smaller than last "
                            f"recorded current: {cur.state_epoch}, requested: {state_epoch}.")
        out = ShareStateOutcome()
        # As Kafka 4.4 writes it: leader epoch 0, and nothing delivered yet once the start offset
        # is known (-1, unknown, while the leader has still to resolve it).
        self._emit(ShareSnapshot(
            group_id, topic_id, partition, 0 if cur is None else cur.snapshot_epoch + 1, state_epoch, 0,
            start_offset, (), now_ms, now_ms, 0 if start_offset >= 0 else -1), out)
        return out

    def read(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int) -> ShareStateOutcome:
        """ReadShareGroupState by a partition leader. A newer leader epoch is remembered (written
        as an update) so that writes of older leaders are fenced from now on."""
        key = (group_id, topic_id, partition)
        if partition < 0:
            return _refused(E.INVALID_REQUEST, "The partition id cannot be a negative number.")
        if leader_epoch < 0:
            return _refused(E.INVALID_REQUEST, "The leader epoch cannot be a negative number.")
        cur = self.states.get(key)
        if cur is None:
            return _refused(E.INVALID_REQUEST, "Read operation on uninitialized share partition not allowed.")
        if cur.leader_epoch > leader_epoch:
            return _refused(E.FENCED_LEADER_EPOCH, f"Read request leader epoch is smaller than last recorded "
                            f"current: {cur.leader_epoch}, requested: {leader_epoch}.")
        out = ShareStateOutcome(StateResult(state=cur.partition_state()))
        if leader_epoch > cur.leader_epoch:
            self._emit(ShareUpdate(group_id, topic_id, partition, cur.snapshot_epoch, leader_epoch, -1, ()), out)
            out.response = StateResult(state=self.states[key].partition_state())
        return out

    def read_summary(self, group_id: str, topic_id: uuid.UUID, partition: int,
                     leader_epoch: int = -1) -> ShareStateOutcome:
        """ReadShareGroupStateSummary (DescribeShareGroupOffsets): the epochs, start offset and
        delivery-complete count, without batches and without changing anything."""
        if partition < 0:
            return _refused(E.INVALID_REQUEST, "The partition id cannot be a negative number.")
        cur = self.states.get((group_id, topic_id, partition))
        if cur is None:
            return ShareStateOutcome(StateResult(state=PartitionState(0, -1, -1)))
        if leader_epoch >= 0 and cur.leader_epoch > leader_epoch:
            return _refused(E.FENCED_LEADER_EPOCH)
        return ShareStateOutcome(StateResult(state=replace(cur.partition_state(), state_batches=())))

    def write(self, group_id: str, topic_id: uuid.UUID, partition: int, state: PartitionState,
              now_ms: int) -> ShareStateOutcome:
        """WriteShareGroupState from the partition leader: fenced when its leader or state epoch is
        older than the stored one. Appends an update, or a snapshot every
        ``snapshot_update_records_per_snapshot`` updates."""
        key = (group_id, topic_id, partition)
        if partition < 0:
            return _refused(E.INVALID_REQUEST, "The partition id cannot be a negative number.")
        cur = self.states.get(key)
        if cur is None:
            return _refused(E.INVALID_REQUEST, "Write operation on uninitialized share partition not allowed.")
        if cur.leader_epoch > state.leader_epoch:
            return _refused(E.FENCED_LEADER_EPOCH, f"Write request leader epoch is smaller than last recorded "
                            f"current: {cur.leader_epoch}, requested: {state.leader_epoch}.")
        if cur.state_epoch > state.state_epoch:
            return _refused(E.FENCED_STATE_EPOCH, f"Write request state epoch is smaller than last recorded "
                            f"current: {cur.state_epoch}, requested: {state.state_epoch}.")
        out = ShareStateOutcome()
        if self._updates.get(key, 0) >= self.config.snapshot_update_records_per_snapshot:
            self._emit(self._snapshot_after(key, cur, state, now_ms), out)
        else:
            self._emit(ShareUpdate(
                group_id, topic_id, partition, cur.snapshot_epoch, state.leader_epoch, state.start_offset,
                combine((), state.state_batches, state.start_offset), state.delivery_complete_count), out)
        return out

    def _snapshot_after(self, key: SharePartitionKey, cur: ShareGroupOffset, state: PartitionState,
                        now_ms: int) -> ShareSnapshot:
        start = cur.start_offset if state.start_offset == -1 else state.start_offset
        complete = (cur.delivery_complete_count if state.delivery_complete_count == -1
                    else state.delivery_complete_count)
        return ShareSnapshot(
            key[0], key[1], key[2], cur.snapshot_epoch + 1,
            cur.state_epoch if state.state_epoch == -1 else state.state_epoch,
            cur.leader_epoch if state.leader_epoch == -1 else state.leader_epoch,
            start, combine(cur.state_batches, state.state_batches, start), cur.create_timestamp_ms, now_ms,
            complete)

    def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> ShareStateOutcome:
        """DeleteShareGroupState: the state goes (deleting an unknown one succeeds)."""
        if partition < 0:
            return _refused(E.INVALID_REQUEST, "The partition id cannot be a negative number.")
        out = ShareStateOutcome()
        if (group_id, topic_id, partition) in self.states:
            self._emit(Tombstone(ShareSnapshot.RECORD_TYPE, group_id, topic_id, partition), out)
        return out

    def snapshot_cold_partitions(self, now_ms: int) -> ShareStateOutcome:
        """Fold every key with pending updates into a snapshot (every
        ``share.coordinator.cold.partition.snapshot.interval.ms``, timed by the edge), so keys
        written rarely do not pin old log segments."""
        out = ShareStateOutcome()
        for key in sorted(k for k, n in self._updates.items() if n > 0):
            cur = self.states[key]
            self._emit(ShareSnapshot(
                key[0], key[1], key[2], cur.snapshot_epoch + 1, cur.state_epoch, cur.leader_epoch,
                cur.start_offset, cur.state_batches, cur.create_timestamp_ms, now_ms,
                cur.delivery_complete_count), out)
        return out

    # ------------------------------------------------------------------ log
    def _emit(self, record: ShareStateRecord, out: ShareStateOutcome) -> None:
        key = (record.group_id, record.topic_id, record.partition)
        state, updates, at = self.states.get(key), self._updates.get(key), self._snapshot_offsets.get(key)

        def undo() -> None:
            _put(self.states, key, state)
            _put(self._updates, key, updates)
            _put(self._snapshot_offsets, key, at)

        out._undo.append(undo)
        out.records.append(record)
        self.replay(record)

    def replay(self, record: ShareStateRecord, offset: int | None = None) -> None:
        """Apply one record (read from the log at ``offset``, or just generated: None)."""
        key = (record.group_id, record.topic_id, record.partition)
        if isinstance(record, Tombstone):
            # Either key type's tombstone deletes the whole state.
            self.states.pop(key, None)
            self._updates.pop(key, None)
            self._snapshot_offsets.pop(key, None)
        elif isinstance(record, ShareSnapshot):
            self.states[key] = ShareGroupOffset(
                record.snapshot_epoch, record.state_epoch, record.leader_epoch, record.start_offset,
                tuple(record.state_batches), record.delivery_complete_count, record.create_timestamp_ms,
                record.write_timestamp_ms)
            self._updates[key] = 0
            self._snapshot_offsets.pop(key, None)
            if offset is not None:
                self._snapshot_offsets[key] = offset
        elif isinstance(record, ShareUpdate):
            cur = self.states.get(key)
            if cur is None or record.snapshot_epoch != cur.snapshot_epoch:
                return  # an update of a deleted state, or of a snapshot we never saw
            start = cur.start_offset if record.start_offset == -1 else record.start_offset
            self.states[key] = replace(
                cur, start_offset=start,
                leader_epoch=cur.leader_epoch if record.leader_epoch == -1 else record.leader_epoch,
                state_batches=combine(cur.state_batches, record.state_batches, start),
                delivery_complete_count=(cur.delivery_complete_count if record.delivery_complete_count == -1
                                         else record.delivery_complete_count))
            self._updates[key] = self._updates.get(key, 0) + 1
        if offset is not None:
            self._end_offset = max(self._end_offset, offset + 1)

    def appended(self, records: Iterable[ShareStateRecord], base_offset: int) -> None:
        """``records`` (an outcome's, in order) are in the log from ``base_offset`` on."""
        for i, record in enumerate(records):
            offset = base_offset + i
            key = (record.group_id, record.topic_id, record.partition)
            if isinstance(record, ShareSnapshot) and self.states.get(key) is not None \
                    and self.states[key].snapshot_epoch == record.snapshot_epoch:
                self._snapshot_offsets[key] = offset
            self._end_offset = max(self._end_offset, offset + 1)

    def prunable_offset(self) -> int:
        """Records below this log offset are no longer needed to load the shard: every live key's
        last snapshot is at or after it (Kafka's lastRedundantOffset; the edge deletes below it
        with DeleteRecords). A key whose snapshot offset is not known yet holds pruning at 0."""
        if not self.states:
            return self._end_offset
        return min(self._snapshot_offsets.get(key, 0) for key in self.states)
