"""One share-partition's record states on the leader (Kafka's SharePartition), sans-I/O.

The share-partition start offset (SPSO) is the first offset not yet finished; everything below it
is ACKNOWLEDGED or ARCHIVED and forgotten. From the SPSO up to the end offset (SPEO) every offset
has a state, kept as contiguous *runs*: ranges whose offsets share state, delivery count, holder
and lock deadline. A run is split when an acknowledgement covers part of it and merged back with
its neighbours when they agree again, so a partition acknowledged batch by batch stays a handful of
runs. Nothing here reads record bytes: the edge hands in batch headers (:class:`FetchedBatch`) and
sends the batches it read, with the acquired ranges beside them.

Record states and the only transitions Kafka allows::

    AVAILABLE --acquire--> ACQUIRED --accept--> ACKNOWLEDGED
                            ACQUIRED --reject / gap--> ARCHIVED
                            ACQUIRED --release / lock expiry / member gone--> AVAILABLE
                                                   (ARCHIVED once delivery count >= the limit)

Time comes in as ``now_ms``: :meth:`SharePartition.tick` releases the records whose acquisition
lock expired and :meth:`SharePartition.next_deadline` tells the edge when to call it. Each change
that matters is persisted by the edge with :meth:`SharePartition.to_write_state` (the shape of
WriteShareGroupState and of the ``__share_group_state`` ShareSnapshot/ShareUpdate values) before it
answers.
"""

from __future__ import annotations

import bisect
import copy
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum

from kafkapy.protocol.errors import ErrorCode


class RecordState(IntEnum):
    """A record's state in a share partition (Kafka's RecordState ids, as persisted)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(IntEnum):
    """ShareFetch / ShareAcknowledge AcknowledgeTypes (Renew, KIP-1222, from v2 on)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


TERMINAL = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


@dataclass(frozen=True)
class SharePartitionConfig:
    """The group's share settings (``group.share.*`` broker defaults, overridable per group)."""

    record_lock_duration_ms: int = 30_000  # share.record.lock.duration.ms
    delivery_count_limit: int = 5  # share.delivery.count.limit
    max_record_locks: int = 2000  # share.partition.max.record.locks
    read_committed: bool = False  # share.isolation.level=read_committed


@dataclass(frozen=True)
class FetchedBatch:
    """The header fields of one record batch read from the log: all acquisition looks at."""

    base_offset: int
    last_offset: int
    producer_id: int = -1
    is_transactional: bool = False
    is_control: bool = False


@dataclass(frozen=True)
class AbortedTransaction:
    """An aborted transaction overlapping a read (Fetch's AbortedTransactions)."""

    producer_id: int
    first_offset: int


@dataclass(frozen=True)
class AcquiredRecords:
    """One AcquiredRecords entry of a ShareFetch answer."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True)
class AcknowledgementBatch:
    """One AcknowledgementBatches entry: one type for the whole range, or one per offset."""

    first_offset: int
    last_offset: int
    acknowledge_types: tuple[int, ...]


@dataclass(frozen=True)
class StateBatch:
    """A persisted range (the StateBatches of WriteShareGroupState and ShareSnapshotValue)."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True)
class PartitionState:
    """A share partition's durable state: what WriteShareGroupState carries for one partition and
    what ReadShareGroupState answers (ShareSnapshotValue without its coordinator-side fields).

    ``start_offset`` -1 means the coordinator knows no start yet: the leader picks one from
    ``share.auto.offset.reset``."""

    state_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[StateBatch, ...] = ()
    # WriteShareGroupState v1: finished offsets at or past the start offset (-1: not known).
    delivery_complete_count: int = -1


@dataclass(slots=True)
class _Run:
    """Offsets ``first..last`` sharing one state. ``member`` and ``deadline`` only while ACQUIRED."""

    first: int
    last: int
    state: RecordState
    count: int
    member: str | None = None
    deadline: int | None = None

    def cut(self, first: int, last: int) -> _Run:
        return _Run(first, last, self.state, self.count, self.member, self.deadline)

    def same_as(self, other: _Run) -> bool:
        return (self.state == other.state and self.count == other.count
                and self.member == other.member and self.deadline == other.deadline)


@dataclass
class _Acquisition:
    """The ranges one acquire hands out, merged where contiguous with equal delivery counts."""

    ranges: list[AcquiredRecords] = field(default_factory=list)
    records: int = 0
    strict: bool = False  # max_records is a hard limit (record_limit mode)

    def add(self, first: int, last: int, count: int) -> None:
        prev = self.ranges[-1] if self.ranges else None
        if prev is not None and prev.last_offset + 1 == first and prev.delivery_count == count:
            self.ranges[-1] = AcquiredRecords(prev.first_offset, last, count)
        else:
            self.ranges.append(AcquiredRecords(first, last, count))
        self.records += last - first + 1


class SharePartition:
    """The in-flight records of one (group, topic, partition) on its leader.

    Every method that changes durable state returns whether it did, so the edge knows when to
    write :meth:`to_write_state` to the share coordinator."""

    def __init__(self, config: SharePartitionConfig, start_offset: int, *, state_epoch: int = 0,
                 leader_epoch: int = -1) -> None:
        if start_offset < 0:
            raise ValueError("resolve share.auto.offset.reset before building a share partition")
        self.config = config
        self.state_epoch = state_epoch
        self.leader_epoch = leader_epoch
        self._start = start_offset
        self._end = start_offset - 1  # the last offset with a state; start - 1 when nothing is
        self._runs: list[_Run] = []

    def copy(self) -> SharePartition:
        """An independent copy of the whole state: what the edge rolls back to when a change
        could not be persisted."""
        clone = copy.copy(self)
        clone._runs = [run.cut(run.first, run.last) for run in self._runs]
        return clone

    # -- reading the state --------------------------------------------------------------------

    @property
    def start_offset(self) -> int:
        """SPSO: every offset below it is finished."""
        return self._start

    @property
    def end_offset(self) -> int:
        """SPEO: the last offset that has a state (``start_offset - 1`` when none has)."""
        return self._end

    def in_flight_records(self) -> int:
        return self._end - self._start + 1

    def next_fetch_offset(self) -> int:
        """Where the edge should read from: the first AVAILABLE offset, else past the SPEO."""
        for run in self._runs:
            if run.state is RecordState.AVAILABLE:
                return run.first
        return self._end + 1

    def can_acquire(self) -> bool:
        """Whether a fetch could acquire anything: released records wait, or the in-flight
        window (``share.partition.max.record.locks``) has room for new ones."""
        if any(run.state is RecordState.AVAILABLE for run in self._runs):
            return True
        return self.in_flight_records() < self.config.max_record_locks

    def record_state(self, offset: int) -> tuple[RecordState, int, str | None]:
        """(state, delivery count, holder) of one offset; below the SPSO it is finished."""
        if offset < self._start:
            return RecordState.ARCHIVED, 0, None
        if offset > self._end:
            return RecordState.AVAILABLE, 0, None
        run = self._runs[self._find(offset)]
        return run.state, run.count, run.member

    def runs(self) -> list[tuple[int, int, RecordState, int, str | None]]:
        """The in-flight state as (first, last, state, delivery count, holder) ranges."""
        return [(r.first, r.last, r.state, r.count, r.member) for r in self._runs]

    def next_deadline(self) -> int | None:
        """The earliest acquisition-lock expiry, or None when nothing is acquired."""
        deadlines = [r.deadline for r in self._runs if r.deadline is not None]
        return min(deadlines) if deadlines else None

    # -- acquiring ----------------------------------------------------------------------------

    def acquire(self, member_id: str, batches: Sequence[FetchedBatch], now_ms: int, *,
                max_records: int, end_offset: int | None = None,
                aborted: Sequence[AbortedTransaction] = (), strict: bool = False) -> list[AcquiredRecords]:
        """Acquire records of ``batches`` (read from :meth:`next_fetch_offset`) for ``member_id``.

        Released records are taken first, then new ones past the SPEO while the in-flight window
        has room. ``max_records`` is soft, as in Kafka: acquisition stops at the end of the batch
        holding the last record it allows, so whole batches go to one member; ``strict`` (the
        record_limit ShareAcquireMode, KIP-1206) makes it a hard limit that may cut a batch. ``end_offset``
        (exclusive: the high watermark, or the LSO under read_committed) bounds new records.
        Offsets inside the read range that no batch covers (compacted away) are archived; under
        read_committed, so are the batches of ``aborted`` transactions."""
        if not batches or max_records <= 0:
            return []
        out = _Acquisition(strict=strict)
        deadline = now_ms + self.config.record_lock_duration_ms
        read_last = batches[-1].last_offset
        if end_offset is not None:
            read_last = min(read_last, end_offset - 1)
        self._acquire_released(member_id, batches, read_last, max_records, deadline, out)
        if out.records < max_records and self.in_flight_records() < self.config.max_record_locks:
            self._acquire_new(member_id, batches, read_last, max_records, deadline, aborted, out)
        self._normalize()
        return out.ranges

    def _quota_end(self, batches: Sequence[FetchedBatch], first: int, allowed: int, strict: bool) -> int:
        """The last offset to acquire from ``first`` when ``allowed`` more records may be taken:
        rounded up to the end of the batch that holds the last allowed offset unless ``strict``."""
        target = first + allowed - 1
        if strict:
            return target
        i = bisect.bisect_right(batches, target, key=lambda b: b.base_offset) - 1
        if i >= 0 and batches[i].last_offset >= target:
            return batches[i].last_offset
        return target

    def _acquire_released(self, member_id: str, batches: Sequence[FetchedBatch], read_last: int,
                          max_records: int, deadline: int, out: _Acquisition) -> None:
        read_first = batches[0].base_offset
        self._archive_stale(read_first)
        for run in list(self._runs):
            if out.records >= max_records or run.first > read_last:
                return
            if run.state is not RecordState.AVAILABLE or run.last < read_first:
                continue
            first = max(run.first, read_first)
            last = min(run.last, read_last,
                       self._quota_end(batches, first, max_records - out.records, out.strict))
            for piece in self._isolate(first, last):
                self._take(piece, member_id, deadline)
                out.add(piece.first, piece.last, piece.count)

    def _archive_stale(self, read_first: int) -> None:
        """Released records below the first batch read from :meth:`next_fetch_offset` are gone
        from the log (compacted): archive them, or the fetch offset would never move past them."""
        for run in list(self._runs):
            if run.first >= read_first:
                return
            if run.state is RecordState.AVAILABLE:
                for piece in self._isolate(run.first, min(run.last, read_first - 1)):
                    piece.state = RecordState.ARCHIVED

    def _acquire_new(self, member_id: str, batches: Sequence[FetchedBatch], read_last: int,
                     max_records: int, deadline: int, aborted: Sequence[AbortedTransaction],
                     out: _Acquisition) -> None:
        window = self.config.max_record_locks - self.in_flight_records()
        allowed = min(max_records - out.records, window)
        first_new = self._end + 1
        limit: int | None = None
        aborting = _AbortedFilter(aborted) if self.config.read_committed else None
        for batch in batches:
            if batch.last_offset < first_new:
                if aborting is not None:
                    aborting.archive(batch)  # keeps the set of open aborted producers current
                continue
            first = max(batch.base_offset, first_new)
            if limit is None:  # counted from the first record there is, not from a gap
                limit = self._quota_end(batches, first, allowed, out.strict)
            last = min(batch.last_offset, read_last, limit)
            if first > last:
                return
            if first > self._end + 1:  # nothing in the log between: compacted or never written
                self._append(_Run(self._end + 1, first - 1, RecordState.ARCHIVED, 0))
            if aborting is not None and aborting.archive(batch):
                self._append(_Run(first, last, RecordState.ARCHIVED, 1))
            else:
                self._append(_Run(first, last, RecordState.ACQUIRED, 1, member_id, deadline))
                out.add(first, last, 1)

    def _append(self, run: _Run) -> None:
        self._runs.append(run)
        self._end = run.last

    @staticmethod
    def _take(run: _Run, member_id: str, deadline: int) -> None:
        run.state = RecordState.ACQUIRED
        run.count += 1
        run.member = member_id
        run.deadline = deadline

    # -- acknowledging and releasing ----------------------------------------------------------

    def acknowledge(self, member_id: str, batches: Sequence[AcknowledgementBatch],
                    now_ms: int = 0, *, renew: bool = False) -> ErrorCode:
        """Apply one request's acknowledgements for this partition, all or nothing.

        With ``renew`` (v2 requests), RENEW keeps a record acquired by ``member_id`` with a
        fresh lock from ``now_ms``; without it RENEW is an unknown type.

        Malformed batches give INVALID_REQUEST; a range not ACQUIRED by ``member_id`` (or past
        the SPEO) gives INVALID_RECORD_STATE and changes nothing. Ranges below the SPSO were
        archived when the log start moved and are skipped."""
        error = validate_acknowledgements(batches, renew=renew)
        if error is not ErrorCode.NONE:
            return error
        saved = [run.cut(run.first, run.last) for run in self._runs]
        for batch in batches:
            if batch.last_offset < self._start:
                continue
            if batch.last_offset > self._end:
                self._runs = saved
                return ErrorCode.INVALID_RECORD_STATE
            for first, last, ack in _segments(batch, self._start):
                pieces = self._isolate(first, last)
                if any(p.state is not RecordState.ACQUIRED or p.member != member_id
                       for p in pieces):
                    self._runs = saved
                    return ErrorCode.INVALID_RECORD_STATE
                for piece in pieces:
                    if ack == AcknowledgeType.RENEW:
                        piece.deadline = now_ms + self.config.record_lock_duration_ms
                    else:
                        self._finish(piece, AcknowledgeType(ack))
        self._normalize()
        return ErrorCode.NONE

    def _finish(self, run: _Run, ack: AcknowledgeType) -> None:
        if ack is AcknowledgeType.RELEASE:
            self._release(run)
            return
        run.state = (RecordState.ACKNOWLEDGED if ack is AcknowledgeType.ACCEPT
                     else RecordState.ARCHIVED)
        run.member = run.deadline = None

    def _release(self, run: _Run) -> None:
        # The poison-message limit: a record delivered the maximum number of times is archived
        # instead of being offered again.
        limit = self.config.delivery_count_limit
        run.state = RecordState.ARCHIVED if run.count >= limit else RecordState.AVAILABLE
        run.member = run.deadline = None

    def release_member(self, member_id: str) -> bool:
        """Release every record ``member_id`` holds (it left the group or closed its session)."""
        return self._release_where(lambda run: run.member == member_id)

    def tick(self, now_ms: int) -> bool:
        """Release the records whose acquisition lock expired by ``now_ms``."""
        return self._release_where(lambda run: run.deadline is not None and run.deadline <= now_ms)

    def _release_where(self, pred: Callable[[_Run], bool]) -> bool:
        hit = [run for run in self._runs if run.state is RecordState.ACQUIRED and pred(run)]
        for run in hit:
            self._release(run)
        if hit:
            self._normalize()
        return bool(hit)

    # -- the log moving underneath ------------------------------------------------------------

    def update_log_start(self, log_start_offset: int) -> bool:
        """The log start moved (retention, DeleteRecords): offsets below it are gone, so their
        records are archived, acquired ones included, and the SPSO moves up to it."""
        if log_start_offset <= self._start:
            return False
        if log_start_offset > self._end:
            self._runs = []
            self._end = log_start_offset - 1
        else:
            i = self._split(log_start_offset)
            del self._runs[:i]
        self._start = log_start_offset
        self._normalize()
        return True

    # -- persistence --------------------------------------------------------------------------

    def to_write_state(self) -> PartitionState:
        """The state to persist: the SPSO and every range with a state worth remembering.

        ACQUIRED is written as AVAILABLE with its delivery count: a new leader forgets who held
        what, but the count survives, so a poison message still reaches the limit."""
        out: list[StateBatch] = []
        complete = 0
        for run in self._runs:
            if run.state in TERMINAL:
                complete += run.last - run.first + 1
            state = RecordState.AVAILABLE if run.state is RecordState.ACQUIRED else run.state
            if state is RecordState.AVAILABLE and run.count == 0:
                continue
            prev = out[-1] if out else None
            if (prev is not None and prev.last_offset + 1 == run.first
                    and prev.delivery_state == state and prev.delivery_count == run.count):
                out[-1] = StateBatch(prev.first_offset, run.last, state, run.count)
            else:
                out.append(StateBatch(run.first, run.last, int(state), run.count))
        return PartitionState(self.state_epoch, self.leader_epoch, self._start, tuple(out),
                              complete)

    @classmethod
    def from_read_state(cls, state: PartitionState, config: SharePartitionConfig, *,
                        default_start_offset: int, leader_epoch: int = -1) -> SharePartition:
        """Rebuild a partition from ReadShareGroupState's answer. ``default_start_offset`` (from
        ``share.auto.offset.reset``) applies when the coordinator has no start (-1). Ranges read as
        ACQUIRED are AVAILABLE again; offsets between ranges were never delivered."""
        start = state.start_offset if state.start_offset >= 0 else default_start_offset
        part = cls(config, start, state_epoch=state.state_epoch, leader_epoch=leader_epoch)
        for batch in sorted(state.state_batches, key=lambda b: b.first_offset):
            first = max(batch.first_offset, part._end + 1)
            if batch.last_offset < first:
                continue
            if first > part._end + 1:
                part._append(_Run(part._end + 1, first - 1, RecordState.AVAILABLE, 0))
            known = RecordState(batch.delivery_state)
            kind = RecordState.AVAILABLE if known is RecordState.ACQUIRED else known
            part._append(_Run(first, batch.last_offset, kind, batch.delivery_count))
        part._normalize()
        return part

    # -- runs ---------------------------------------------------------------------------------

    def _find(self, offset: int) -> int:
        return bisect.bisect_right(self._runs, offset, key=lambda r: r.first) - 1

    def _split(self, offset: int) -> int:
        """Make a run start at ``offset`` (within ``start..end + 1``); return its index."""
        if offset > self._end:
            return len(self._runs)
        i = self._find(offset)
        run = self._runs[i]
        if run.first == offset:
            return i
        self._runs.insert(i + 1, run.cut(offset, run.last))
        run.last = offset - 1
        return i + 1

    def _isolate(self, first: int, last: int) -> list[_Run]:
        """The runs covering exactly ``first..last`` (inside the SPSO..SPEO window)."""
        i = self._split(first)
        j = self._split(last + 1)
        return self._runs[i:j]

    def _normalize(self) -> None:
        """Merge equal neighbours, then move the SPSO past the finished prefix."""
        merged: list[_Run] = []
        for run in self._runs:
            if merged and merged[-1].same_as(run):
                merged[-1].last = run.last
            else:
                merged.append(run)
        done = 0
        while done < len(merged) and merged[done].state in TERMINAL:
            done += 1
        if done:
            self._start = merged[done - 1].last + 1
            del merged[:done]
        self._runs = merged


class _AbortedFilter:
    """Kafka's read_committed rule over batch headers: a transactional batch of a producer whose
    aborted transaction has started (by its first offset) is aborted data, until that producer's
    next control batch (its abort marker)."""

    def __init__(self, aborted: Iterable[AbortedTransaction]) -> None:
        self._pending = sorted(aborted, key=lambda a: a.first_offset)
        self._open: set[int] = set()

    def archive(self, batch: FetchedBatch) -> bool:
        while self._pending and self._pending[0].first_offset <= batch.last_offset:
            self._open.add(self._pending.pop(0).producer_id)
        if batch.is_control:
            self._open.discard(batch.producer_id)
            return False
        return batch.is_transactional and batch.producer_id in self._open


def validate_acknowledgements(batches: Sequence[AcknowledgementBatch], *, renew: bool = False) -> ErrorCode:
    """INVALID_REQUEST for what Kafka refuses before looking at any state: an empty or reversed
    range, a type list neither one long nor one per offset, an unknown type (RENEW unless
    ``renew``), overlapping or unordered batches."""
    known = _ACK_TYPES if renew else _V1_ACK_TYPES
    prev_last = -1
    for batch in batches:
        if batch.first_offset < 0 or batch.last_offset < batch.first_offset:
            return ErrorCode.INVALID_REQUEST
        if batch.first_offset <= prev_last:
            return ErrorCode.INVALID_REQUEST
        n = len(batch.acknowledge_types)
        if n != 1 and n != batch.last_offset - batch.first_offset + 1:
            return ErrorCode.INVALID_REQUEST
        if any(t not in known for t in batch.acknowledge_types):
            return ErrorCode.INVALID_REQUEST
        prev_last = batch.last_offset
    return ErrorCode.NONE


_ACK_TYPES = frozenset(int(t) for t in AcknowledgeType)
_V1_ACK_TYPES = _ACK_TYPES - {AcknowledgeType.RENEW}


def _segments(batch: AcknowledgementBatch, floor: int) -> list[tuple[int, int, int]]:
    """``batch`` as (first, last, type) ranges of one type each, from ``floor`` up."""
    types = batch.acknowledge_types
    if len(types) == 1:
        return [(max(batch.first_offset, floor), batch.last_offset, types[0])]
    out: list[tuple[int, int, int]] = []
    for i, ack in enumerate(types):
        offset = batch.first_offset + i
        if offset < floor:
            continue
        if out and out[-1][2] == ack:
            out[-1] = (out[-1][0], offset, ack)
        else:
            out.append((offset, offset, ack))
    return out
