"""``LocalQuorum``: a single-voter quorum that commits on append.

It has the shape the multi-voter Raft will fill: records go in through ``append``, get packed
into one record batch (null key, the encoded record as value, the raft epoch as the batch's
partition leader epoch), land in a ``RaftLogStore``, and reach registered listeners only once
committed — here, immediately after the flush, since the only voter is ourselves. On start the
voter elects itself for the epoch after the one in ``quorum-state`` and persists that, as a
Kafka voter does after winning an election.

The quorum does not know what records mean: the caller's ``RecordCodec`` turns them into bytes
and back (the node passes ``kafkapy.metadata.records.MetadataRecordCodec``). Raft sits below
metadata, so it never imports the metadata codec itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from kafkapy.raft.quorum_state import QuorumState, QuorumStateStore
from kafkapy.raft.store import RaftLogStore
from kafkapy.records.builder import Record, build_batch
from kafkapy.records.reader import iter_batches, iter_records

CommitListener = Callable[[list[tuple[Any, int]]], None]


class RecordCodec(Protocol):
    """Turns the records a quorum carries into a batch's record values and back."""

    def encode(self, record: Any) -> bytes: ...

    def decode(self, data: bytes) -> Any: ...


class NotLeaderError(RuntimeError):
    """Appending on a quorum member that is not the leader (never for a single voter)."""


class LocalQuorum:
    """A single voter: leader of its own epoch, commits every append at once.

    ``epoch``: the current leader epoch. ``high_watermark``: one past the last committed
    offset (== ``end_offset`` for a single voter). Listeners get ``[(record, offset), ...]``
    per committed batch, in log order; control batches are skipped.
    """

    def __init__(
        self,
        store: RaftLogStore,
        node_id: int,
        *,
        state_store: QuorumStateStore | None = None,
        cluster_id: str = "",
        codec: RecordCodec,
    ) -> None:
        self.store = store
        self.node_id = node_id
        self.cluster_id = cluster_id
        self._state_store = state_store
        self._codec = codec
        self._listeners: list[CommitListener] = []
        self._epoch = -1
        self._high_watermark = 0
        self._started = False

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """Elect ourselves for the next epoch and persist it; everything already in the store
        counts as committed (a single voter's log holds only entries it committed)."""
        if self._started:
            return
        previous = self._state_store.read() if self._state_store is not None else None
        last_epoch = previous.leader_epoch if previous is not None else -1
        # Batches may carry a later epoch than the state file if we crashed between the two.
        for _, batch in self.store.read(0):
            last_epoch = max(last_epoch, int.from_bytes(batch[12:16], "big", signed=True))
        self._epoch = max(last_epoch, 0) + 1  # a fresh voter's first leader epoch is 1
        if self._state_store is not None:
            self._state_store.write(QuorumState(
                leader_id=self.node_id, leader_epoch=self._epoch, voted_id=-1,
                cluster_id=self.cluster_id, applied_offset=0,
                current_voters=(self.node_id,), data_version=0))
        self._high_watermark = self.store.end_offset
        self._started = True

    @property
    def epoch(self) -> int:
        return self._epoch

    @property
    def leader_id(self) -> int:
        return self.node_id if self._started else -1

    def is_leader(self) -> bool:
        return self._started

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def end_offset(self) -> int:
        return self.store.end_offset

    # -- listeners -----------------------------------------------------------------------------

    def register_listener(self, on_commit: CommitListener, *, from_offset: int = 0) -> None:
        """Deliver every committed record at or after ``from_offset`` now, then each new commit."""
        self._deliver(on_commit, from_offset, self._high_watermark)
        self._listeners.append(on_commit)

    def _deliver(self, listener: CommitListener, start: int, end: int) -> None:
        for _, batch in self.store.read(start):
            for header, view in iter_batches(batch):
                if header.is_control:
                    continue
                recs = [(self._codec.decode(r.value), r.offset) for r in iter_records(view)
                        if start <= r.offset < end and r.value is not None]
                if recs:
                    listener(recs)

    # -- appends -------------------------------------------------------------------------------

    def append(self, records: Sequence[Any], *, now_ms: int) -> int:
        """Write ``records`` as one batch, commit, notify listeners; return the last offset.

        An empty ``records`` writes nothing and returns ``end_offset - 1``.
        """
        if not self._started:
            raise NotLeaderError("the quorum has not started")
        if not records:
            return self.store.end_offset - 1
        base = self.store.end_offset
        batch = build_batch(
            [Record(None, self._codec.encode(r), (), now_ms) for r in records],
            base_offset=base, partition_leader_epoch=self._epoch, now_ms=now_ms)
        self.store.append(batch)
        self.store.flush()
        # Single voter: flushed on the only voter means committed.
        self._high_watermark = self.store.end_offset
        committed = [(r, base + i) for i, r in enumerate(records)]
        for listener in list(self._listeners):
            listener(committed)
        return base + len(records) - 1


__all__ = ["CommitListener", "LocalQuorum", "NotLeaderError", "RecordCodec"]
