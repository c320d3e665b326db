"""Idempotent-producer state of one partition (Kafka's ProducerStateManager).

Per producer id we keep the current epoch and the metadata of the last five data batches it
wrote, which is what duplicate detection and sequence checks need. ``prepare`` checks a request's
batches *before* anything is written and returns either the updated entries or the duplicate
batch; ``commit`` applies the updates once the write succeeded.

Snapshots (``<offset>.snapshot``) use Kafka's version-1 layout, big-endian::

    int16  version (1)
    uint32 crc           CRC-32C of every byte after this field
    int32  entry count
    entries, each:
        int64 producer_id, int16 epoch, int32 last_sequence, int64 last_offset,
        int32 offset_delta, int64 timestamp, int32 coordinator_epoch,
        int64 current_txn_first_offset (-1 when no transaction is open)

Only the last batch of each producer is stored (as Kafka does), so after a restart duplicate
detection covers that batch, and sequence checks continue from its last sequence.

Transactions: a producer's first transactional batch opens its transaction, an end marker closes
it (a ``CompletedTxn``); ``txns`` (``transactions.TransactionTracker``) keeps the open and the
not yet replicated ones, from which the partition log computes its last stable offset, and an
aborted transaction's ``.txnindex`` entry is written when its marker is committed.
"""

from __future__ import annotations

import logging
import os
import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

import crc32c as _crc32c

from kafkapy.durable import atomic_write
from kafkapy.log import files
from kafkapy.log.transaction_index import AbortedTxn, TransactionIndex
from kafkapy.log.transactions import CompletedTxn, TransactionTracker
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.records import format as fmt
from kafkapy.records.control import EndTxnMarker

_log = logging.getLogger(__name__)

NUM_BATCHES_TO_RETAIN = 5
SNAPSHOT_VERSION = 1
INT32_MAX = 0x7FFFFFFF
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms

_HEAD = struct.Struct(">hIi")
_ENTRY = struct.Struct(">qhiqiqiq")
_CRC_START = 6  # version (2) + crc (4)


@dataclass
class Verification:
    """A transaction's first write to this partition, being verified with its coordinator
    (Kafka's VerificationStateEntry): the guard an append must still hold, and the lowest
    sequence any verified request of this epoch began with. A batch starting above that
    sequence waits (OUT_OF_ORDER_SEQUENCE_NUMBER, which clients retry) until the lower one is
    in, so a failed first batch cannot be overtaken by a later one of the same transaction and
    then be out of sequence for good."""

    epoch: int
    guard: object
    since_ms: int
    lowest_sequence: int


class CorruptSnapshotError(ValueError):
    """A producer snapshot is unreadable (bad version, CRC or length)."""


def increment_sequence(seq: int, delta: int) -> int:
    """``seq + delta`` wrapping past int32 max back to 0 (DefaultRecordBatch.incrementSequence)."""
    if seq > INT32_MAX - delta:
        return delta - (INT32_MAX - seq) - 1
    return seq + delta


def decrement_sequence(seq: int, delta: int) -> int:
    if seq < delta:
        return INT32_MAX - (delta - seq) + 1
    return seq - delta


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class BatchMetadata(NamedTuple):
    """What we remember of one data batch of a producer."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass
class ProducerStateEntry:
    """State of one producer id: epoch, last batches, open transaction."""

    producer_id: int
    producer_epoch: int = fmt.NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    coordinator_epoch: int = -1
    last_timestamp: int = fmt.NO_TIMESTAMP
    current_txn_first_offset: int = -1

    def copy(self, *, with_batches: bool = True) -> ProducerStateEntry:
        return ProducerStateEntry(
            self.producer_id, self.producer_epoch,
            deque(self.batches if with_batches else (), maxlen=NUM_BATCHES_TO_RETAIN),
            self.coordinator_epoch, self.last_timestamp, self.current_txn_first_offset)

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else fmt.NO_SEQUENCE

    @property
    def first_seq(self) -> int:
        return self.batches[0].first_seq if self.batches else fmt.NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batches[-1].offset_delta if self.batches else 0

    def maybe_update_epoch(self, epoch: int) -> None:
        if self.producer_epoch != epoch:
            # A new epoch starts a fresh sequence space: forget the old batches.
            self.batches.clear()
            self.producer_epoch = epoch

    def add_batch(self, epoch: int, last_seq: int, last_offset: int, offset_delta: int,
                  timestamp: int) -> None:
        self.maybe_update_epoch(epoch)
        self.batches.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None


class ProducerBatch(NamedTuple):
    """The producer-relevant facts of one batch about to be appended (or replayed)."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    transactional: bool
    control: bool
    marker: EndTxnMarker | None = None  # what a control batch says (None: no readable marker)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == fmt.NO_SEQUENCE:
            return fmt.NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset - self.base_offset)

    @classmethod
    def from_header(cls, h: fmt.BatchHeader, marker: EndTxnMarker | None = None) -> ProducerBatch:
        return cls(h.producer_id, h.producer_epoch, h.base_sequence, h.base_offset,
                   h.last_offset, h.max_timestamp, h.is_transactional, h.is_control, marker)


class PreparedUpdate(NamedTuple):
    """Result of ``prepare``: entries to commit, or the batch a duplicate request repeats, and
    the transactions the batches open ((producer id, first offset)) and close."""

    updates: dict[int, ProducerStateEntry]
    duplicate: BatchMetadata | None
    started: tuple[tuple[int, int], ...] = ()
    completed: tuple[CompletedTxn, ...] = ()


class ProducerStateManager:
    """Producer entries of one partition plus its snapshot files."""

    def __init__(self, dir: str | None, *,
                 producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS) -> None:
        self.dir = dir
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        # Offset after the last batch reflected in ``producers``.
        self.map_end_offset = 0
        self.txns = TransactionTracker()
        # KIP-890 part 1: producer id -> the write being verified with the transaction
        # coordinator; any later write of the producer (its first transactional batch, a marker)
        # drops it, so an append carrying a stale guard is refused.
        self.verifications: dict[int, Verification] = {}

    # ------------------------------------------------------------------ checks and updates
    def prepare(self, batches: Iterable[ProducerBatch], *, from_client: bool,
                as_leader: bool | None = None) -> PreparedUpdate:
        """Check ``batches`` against the current state without changing it.

        Client appends get duplicate detection and sequence checks. Leader appends
        (``as_leader``, by default ``from_client``; the broker's own writes such as transaction
        markers are leader appends not from a client) get Kafka's epoch checks; replicated
        (follower) and recovery appends are taken as they are, a stale epoch only logged.
        Raises KafkaError(INVALID_PRODUCER_EPOCH / OUT_OF_ORDER_SEQUENCE_NUMBER /
        TRANSACTION_COORDINATOR_FENCED / INVALID_TXN_STATE).
        """
        leader = from_client if as_leader is None else as_leader
        updates: dict[int, ProducerStateEntry] = {}
        started: list[tuple[int, int]] = []
        completed: list[CompletedTxn] = []
        for b in batches:
            pid = b.producer_id
            if pid == fmt.NO_PRODUCER_ID or (b.control and b.marker is None):
                # A control batch without its marker (the cleaner removed it) changes nothing.
                continue
            current = self.producers.get(pid)
            if current is None:
                current = ProducerStateEntry(pid)
            if from_client and not b.control:
                dup = current.find_duplicate(b.producer_epoch, b.base_sequence, b.last_sequence)
                if dup is not None:
                    return PreparedUpdate({}, dup)
            updated = updates.get(pid)
            if updated is None:
                # Start from the current epoch/transaction but no batches: the request's own
                # batches are checked against each other first, then against the stored ones.
                updated = current.copy(with_batches=False)
                updates[pid] = updated
            self._check_epoch(updated, b, leader)
            if b.marker is not None:
                self._check_coordinator_epoch(updated, b, b.marker, leader)
                # Only a transaction with data completes: a marker closing nothing moves no LSO
                # and needs no index entry (Kafka since 3.x).
                if updated.current_txn_first_offset >= 0:
                    completed.append(CompletedTxn(pid, updated.current_txn_first_offset,
                                                  b.base_offset, not b.marker.commit))
                updated.maybe_update_epoch(b.producer_epoch)
                updated.current_txn_first_offset = -1
                updated.coordinator_epoch = b.marker.coordinator_epoch
                updated.last_timestamp = b.max_timestamp
                continue
            if from_client:
                if b.transactional and updated.current_txn_first_offset < 0:
                    self._check_verified_sequence(b)
                self._check_sequence(current, updated, b)
            updated.add_batch(b.producer_epoch, b.last_sequence, b.last_offset,
                              b.last_offset - b.base_offset, b.max_timestamp)
            if updated.current_txn_first_offset >= 0 and not b.transactional and leader:
                raise KafkaError(ErrorCode.INVALID_TXN_STATE,
                                 f"Expected transactional write from producer {pid} at offset "
                                 f"{b.base_offset}")
            if b.transactional and updated.current_txn_first_offset < 0:
                updated.current_txn_first_offset = b.base_offset
                started.append((pid, b.base_offset))
        # Re-attach the batches remembered before this request so the last-5 window survives.
        for pid, updated in updates.items():
            current = self.producers.get(pid)
            if current is not None and current.producer_epoch == updated.producer_epoch:
                merged = deque(current.batches, maxlen=NUM_BATCHES_TO_RETAIN)
                merged.extend(updated.batches)
                updated.batches = merged
        return PreparedUpdate(updates, None, tuple(started), tuple(completed))

    @staticmethod
    def _check_epoch(updated: ProducerStateEntry, b: ProducerBatch, leader: bool) -> None:
        if b.producer_epoch >= updated.producer_epoch:
            return
        message = (f"Epoch of producer {b.producer_id} at offset {b.base_offset} is "
                   f"{b.producer_epoch}, which is smaller than the last seen epoch "
                   f"{updated.producer_epoch}")
        if leader:
            raise KafkaError(ErrorCode.INVALID_PRODUCER_EPOCH, message)
        if b.control:
            _log.warning("%s", message)  # replicated or recovered: the leader already took it

    @staticmethod
    def _check_coordinator_epoch(updated: ProducerStateEntry, b: ProducerBatch,
                                 marker: EndTxnMarker, leader: bool) -> None:
        if marker.coordinator_epoch >= updated.coordinator_epoch:
            return
        if leader:
            raise KafkaError(
                ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                f"Invalid coordinator epoch for producerId {b.producer_id} at offset "
                f"{b.base_offset}: {marker.coordinator_epoch} (zombie), "
                f"{updated.coordinator_epoch} (current)")
        _log.info("Detected invalid coordinator epoch for producerId %d at offset %d: %d is "
                  "older than previously known coordinator epoch %d", b.producer_id,
                  b.base_offset, marker.coordinator_epoch, updated.coordinator_epoch)

    def _check_verified_sequence(self, b: ProducerBatch) -> None:
        v = self.verifications.get(b.producer_id)
        if v is not None and v.epoch == b.producer_epoch and b.base_sequence > v.lowest_sequence:
            raise KafkaError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"Out of order sequence number for producer {b.producer_id} at offset "
                f"{b.base_offset}: {b.base_sequence} (incoming seq. number), "
                f"{v.lowest_sequence} (earliest seen sequence)")

    @staticmethod
    def _check_sequence(current: ProducerStateEntry, updated: ProducerStateEntry,
                        b: ProducerBatch) -> None:
        first_seq = b.base_sequence
        if b.producer_epoch != updated.producer_epoch:
            # A bumped epoch restarts sequences at 0; a producer we know nothing about (no epoch
            # yet, e.g. its state expired or was removed with the log) may start anywhere.
            if first_seq != 0 and updated.producer_epoch != fmt.NO_PRODUCER_EPOCH:
                raise KafkaError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"Invalid sequence number for new epoch of producer {b.producer_id} at "
                    f"offset {b.base_offset}: {b.producer_epoch} (request epoch), {first_seq} "
                    f"(seq. number), {updated.producer_epoch} (current producer epoch)")
            return
        if updated.batches:
            last_seq = updated.last_seq
        elif b.producer_epoch == current.producer_epoch:
            last_seq = current.last_seq
        else:
            last_seq = fmt.NO_SEQUENCE
        if current.producer_epoch == fmt.NO_PRODUCER_EPOCH or in_sequence(last_seq, first_seq):
            return
        raise KafkaError(
            ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
            f"Out of order sequence number for producer {b.producer_id} at offset "
            f"{b.base_offset}: {first_seq} (incoming seq. number), {last_seq} "
            f"(current end sequence number)")

    def commit(self, prepared: PreparedUpdate, end_offset: int,
               txn_index: TransactionIndex | None = None) -> None:
        """Apply a successful append's updates; ``end_offset`` is the new log end offset.

        The transactions the append closed complete, in Kafka's order: each aborted one first
        gets its entry in ``txn_index`` (the index of the segment holding its marker; None when
        replaying a log whose index already has it), with the LSO of that moment.
        """
        for pid, entry in prepared.updates.items():
            self.producers[pid] = entry
            if self.verifications:
                self.verifications.pop(pid, None)
        for pid, first in prepared.started:
            self.txns.start(pid, first)
        for txn in prepared.completed:
            if txn.aborted and txn_index is not None:
                txn_index.append(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset,
                                            self.txns.last_stable_offset(txn)))
            self.txns.complete(txn)
        self.map_end_offset = end_offset

    def replay(self, batch: ProducerBatch, txn_index: TransactionIndex | None = None) -> None:
        """Rebuild state from a batch read back from the log (recovery, follower appends);
        ``txn_index``: the index to rebuild (a segment being recovered), else None."""
        if batch.producer_id != fmt.NO_PRODUCER_ID:
            self.commit(self.prepare((batch,), from_client=False), batch.last_offset + 1,
                        txn_index)
        else:
            self.map_end_offset = batch.last_offset + 1

    def first_undecided_offset(self) -> int | None:
        """First offset of the oldest open transaction (None when none is open)."""
        return self.txns.first_undecided_offset()

    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest open transaction, or of a completed one whose marker is
        not below the high watermark yet (None when there is neither)."""
        return self.txns.first_unstable_offset()

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        self.txns.on_high_watermark_updated(high_watermark)

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        self.txns.remove_unreplicated_below(log_start_offset)

    def clear(self, map_end_offset: int) -> None:
        """Forget every producer and transaction; the state now reflects the log below
        ``map_end_offset`` (nothing, as far as producers go)."""
        self.producers.clear()
        self.txns.clear()
        self.verifications.clear()
        self.map_end_offset = map_end_offset

    def has_ongoing_transaction(self, producer_id: int, epoch: int) -> bool:
        e = self.producers.get(producer_id)
        return e is not None and e.current_txn_first_offset >= 0 and e.producer_epoch == epoch

    def start_verification(self, producer_id: int, epoch: int, now_ms: int,
                           sequence: int = INT32_MAX) -> object:
        """The guard a transactional write of ``producer_id`` starting at ``sequence`` must still
        hold when appended: the current one for this epoch (its lowest sequence lowered to
        ``sequence``), or a new one (a new epoch replaces the old guard)."""
        held = self.verifications.get(producer_id)
        if held is not None and held.epoch == epoch:
            held.lowest_sequence = min(held.lowest_sequence, sequence)
            return held.guard
        guard = object()
        self.verifications[producer_id] = Verification(epoch, guard, now_ms, sequence)
        return guard

    def verification_holds(self, producer_id: int, epoch: int, guard: object) -> bool:
        """Whether a verified write may be appended: its transaction is open here already, or
        nothing replaced or cleared its guard since verification started."""
        if self.has_ongoing_transaction(producer_id, epoch):
            return True
        held = self.verifications.get(producer_id)
        return held is not None and held.guard is guard

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def remove_expired(self, now_ms: int) -> int:
        """Forget producers idle longer than producer.id.expiration.ms with no open txn; the
        number forgotten. Snapshots are left as they are: loading one filters on the same rule."""
        expired = [pid for pid, e in self.producers.items()
                   if e.current_txn_first_offset < 0
                   and now_ms - e.last_timestamp >= self.producer_id_expiration_ms]
        for pid in expired:
            del self.producers[pid]
        # Guards of verifications that never led to a write go after the same idle time.
        for pid in [pid for pid, v in self.verifications.items()
                    if now_ms - v.since_ms >= self.producer_id_expiration_ms]:
            del self.verifications[pid]
        return len(expired)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.clear(offset)
        for off in self.snapshot_offsets():
            self._delete_snapshot(off)

    # ------------------------------------------------------------------ snapshots
    def snapshot_offsets(self) -> list[int]:
        if not self.dir:
            return []
        out = []
        for name in os.listdir(self.dir):
            if name.endswith(files.PRODUCER_SNAPSHOT_SUFFIX):
                try:
                    out.append(files.offset_from_filename(name))
                except ValueError:
                    continue
        return sorted(out)

    def _delete_snapshot(self, offset: int) -> None:
        assert self.dir
        try:
            os.remove(files.snapshot_file(self.dir, offset))
        except FileNotFoundError:
            pass

    def take_snapshot(self, *, sync: bool = True) -> str | None:
        """Write ``<map_end_offset>.snapshot`` (unless one exists for that offset)."""
        if not self.dir:
            return None
        path = files.snapshot_file(self.dir, self.map_end_offset)
        if os.path.exists(path):
            return path
        atomic_write(path, encode_snapshot(self.producers.values()), sync=sync)
        return path

    def delete_snapshots_outside(self, log_start_offset: int, log_end_offset: int) -> None:
        """Drop snapshots above the log end (stale after truncation) or below the log start."""
        for off in self.snapshot_offsets():
            if off > log_end_offset or off < log_start_offset:
                self._delete_snapshot(off)

    def delete_snapshots_before(self, offset: int) -> None:
        for off in self.snapshot_offsets():
            if off < offset:
                self._delete_snapshot(off)

    def load_latest_snapshot(self, upto: int, now_ms: int) -> int | None:
        """Load the newest readable snapshot at or below ``upto``; its offset or None.

        Unreadable snapshots are deleted and the next older one tried, as Kafka does.
        """
        self.producers.clear()
        self.txns.clear()
        for off in reversed(self.snapshot_offsets()):
            if off > upto:
                continue
            assert self.dir
            try:
                with open(files.snapshot_file(self.dir, off), "rb") as f:
                    entries = decode_snapshot(f.read())
            except (CorruptSnapshotError, OSError):
                self._delete_snapshot(off)
                continue
            for e in entries:
                if (e.current_txn_first_offset < 0
                        and now_ms - e.last_timestamp >= self.producer_id_expiration_ms):
                    continue
                self.producers[e.producer_id] = e
                if e.current_txn_first_offset >= 0:
                    # An open transaction comes back with its producer (Kafka's loadProducerEntry).
                    self.txns.start(e.producer_id, e.current_txn_first_offset)
            self.map_end_offset = off
            return off
        return None


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    items = list(entries)
    buf = bytearray(_HEAD.size + _ENTRY.size * len(items))
    _HEAD.pack_into(buf, 0, SNAPSHOT_VERSION, 0, len(items))
    pos = _HEAD.size
    for e in items:
        _ENTRY.pack_into(buf, pos, e.producer_id, e.producer_epoch, e.last_seq,
                         e.last_data_offset, e.last_offset_delta, e.last_timestamp,
                         e.coordinator_epoch, e.current_txn_first_offset)
        pos += _ENTRY.size
    struct.pack_into(">I", buf, 2, _crc32c.crc32c(memoryview(buf)[_CRC_START:]))
    return bytes(buf)


def decode_snapshot(data: bytes) -> list[ProducerStateEntry]:
    if len(data) < _HEAD.size:
        raise CorruptSnapshotError("snapshot shorter than its header")
    version, crc, count = _HEAD.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"snapshot has version {version}, expected {SNAPSHOT_VERSION}")
    if _crc32c.crc32c(memoryview(data)[_CRC_START:]) != crc:
        raise CorruptSnapshotError("snapshot CRC mismatch")
    if count < 0 or len(data) != _HEAD.size + count * _ENTRY.size:
        raise CorruptSnapshotError("snapshot length does not match its entry count")
    out = []
    for i in range(count):
        (pid, epoch, last_seq, last_offset, offset_delta, ts, coord_epoch,
         txn_first) = _ENTRY.unpack_from(data, _HEAD.size + i * _ENTRY.size)
        e = ProducerStateEntry(pid, epoch, coordinator_epoch=coord_epoch, last_timestamp=ts,
                               current_txn_first_offset=txn_first)
        if last_offset >= 0:
            e.batches.append(BatchMetadata(last_seq, last_offset, offset_delta, ts))
        out.append(e)
    return out
