"""What the log cleaner needs to know about transactions and producers (Kafka's
CleanedTransactionMetadata, the cleaner's batch retention and KIP-534's delete horizon).

- Batches of an *aborted* transaction are discarded; the offset map is built without them, so an
  aborted write never shadows the committed value of its key.
- A transaction's end marker stays while any batch of its transaction was seen in this pass (an
  ABORT marker then keeps its ``.txnindex`` entry in the rewritten segment). Once its data is gone
  it is stamped with a delete horizon (now + ``delete.retention.ms``) and removed by the first
  clean after the horizon, as tombstones are.
- The last batch of every active producer is kept, emptied of its records if they all go, so its
  producer id, epoch and last sequence survive a restart (duplicates are still detected).

The delete horizon is Kafka's: attribute bit 6 of a v2 batch, with the horizon in the batch's base
timestamp (record timestamp deltas stay relative to it).
"""

from __future__ import annotations

import heapq
import struct
from typing import NamedTuple

from kafkapy.log.producer_state import ProducerStateManager
from kafkapy.log.transaction_index import AbortedTxn
from kafkapy.records import format as fmt
from kafkapy.records.builder import Record, encode_record
from kafkapy.records.compression import compress
from kafkapy.records.control import read_marker
from kafkapy.records.reader import DecodedRecord

__all__ = ["CleanedTransactions", "LastRecord", "delete_horizon", "encode_batch", "empty_batch",
           "is_last_batch_of_producer", "last_records_of_producers"]

_CRC = struct.Struct(">I")


class LastRecord(NamedTuple):
    """Where an active producer's state lives in the log: its last data batch (None when the
    producer has none, e.g. only a marker bumped its epoch) and its epoch."""

    last_data_offset: int | None
    producer_epoch: int


def last_records_of_producers(psm: ProducerStateManager) -> dict[int, LastRecord]:
    """A copy of what the cleaner must keep per producer (taken before the log is read)."""
    out = {}
    for pid, entry in list(psm.producers.items()):
        offset = entry.last_data_offset
        out[pid] = LastRecord(offset if offset >= 0 else None, entry.producer_epoch)
    return out


def is_last_batch_of_producer(header: fmt.BatchHeader, last: dict[int, LastRecord]) -> bool:
    """True for the batch holding a producer's last sequence, or (no data) its last marker."""
    rec = last.get(header.producer_id)
    if rec is None:
        return False
    if rec.last_data_offset is not None:
        return header.last_offset == rec.last_data_offset
    return header.is_control and header.producer_epoch == rec.producer_epoch


def delete_horizon(header: fmt.BatchHeader) -> int | None:
    """The delete horizon stamped in a batch by an earlier clean, or None."""
    if header.attributes & fmt.DELETE_HORIZON_MASK:
        return header.base_timestamp
    return None


class _Aborted:
    __slots__ = ("txn", "seen_data")

    def __init__(self, txn: AbortedTxn) -> None:
        self.txn = txn
        self.seen_data = False


class CleanedTransactions:
    """Transaction state while the cleaner walks the log in offset order.

    Fed with the aborted transactions of the range (from the ``.txnindex`` files); tells for each
    batch whether it may be discarded, and collects the ``.txnindex`` entries of the ABORT
    markers that stay."""

    def __init__(self, aborted: list[AbortedTxn]) -> None:
        seen: set[tuple[int, int]] = set()
        self._pending: list[tuple[int, int, AbortedTxn]] = []
        for i, txn in enumerate(aborted):
            if (txn.producer_id, txn.first_offset) not in seen:
                seen.add((txn.producer_id, txn.first_offset))
                self._pending.append((txn.first_offset, i, txn))
        heapq.heapify(self._pending)
        self._ongoing_aborted: dict[int, _Aborted] = {}
        self._ongoing_committed: set[int] = set()
        self.kept_index_entries: list[AbortedTxn] = []

    def _start_aborted_up_to(self, offset: int) -> None:
        while self._pending and self._pending[0][0] <= offset:
            txn = heapq.heappop(self._pending)[2]
            self._ongoing_aborted.setdefault(txn.producer_id, _Aborted(txn))

    def on_data_batch(self, header: fmt.BatchHeader) -> bool:
        """A data batch read; True when it belongs to an aborted transaction (discard it)."""
        self._start_aborted_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        aborted = self._ongoing_aborted.get(header.producer_id)
        if aborted is not None:
            aborted.seen_data = True
            return True
        self._ongoing_committed.add(header.producer_id)
        return False

    def on_control_batch(self, header: fmt.BatchHeader, data: bytes) -> bool:
        """A control batch read; True when it may be discarded (its transaction has no data left
        in the log, or it is empty: an earlier clean already emptied it)."""
        self._start_aborted_up_to(header.last_offset)
        if header.record_count == 0:
            return True
        marker = read_marker(data)
        if marker is None:
            return False  # not an end marker we understand: keep it
        pid = header.producer_id
        if marker.commit:
            had_data = pid in self._ongoing_committed
            self._ongoing_committed.discard(pid)
            return not had_data
        aborted = self._ongoing_aborted.pop(pid, None)
        if aborted is not None and aborted.seen_data:
            self.kept_index_entries.append(aborted.txn)
            return False
        return True


def encode_batch(header: fmt.BatchHeader, records: list[DecodedRecord],
                 horizon: int | None) -> bytes:
    """A v2 batch of the retained ``records``, shaped like the source batch: its base and last
    offset (so a producer's last sequence is unchanged), producer id, epoch, base sequence,
    leader epoch, codec and timestamp type; with ``horizon`` stamped as the delete horizon."""
    base = header.base_offset
    log_append = bool(header.attributes & fmt.TIMESTAMP_TYPE_MASK)
    attributes = header.attributes & ~fmt.DELETE_HORIZON_MASK
    if horizon is not None:
        base_ts = horizon
        attributes |= fmt.DELETE_HORIZON_MASK
    elif log_append:
        base_ts = header.max_timestamp
    else:
        base_ts = records[0].timestamp
    body = b"".join(
        encode_record(r.offset - base, 0 if log_append and horizon is None else r.timestamp - base_ts,
                      Record(r.key, r.value, r.headers, r.timestamp))
        for r in records)
    codec = header.attributes & fmt.COMPRESSION_MASK
    if codec != fmt.NO_COMPRESSION:
        body = compress(codec, body)
    max_ts = header.max_timestamp if log_append else max(r.timestamp for r in records)
    return _pack(header, attributes, base_ts, max_ts, len(records), body)


def empty_batch(header: fmt.BatchHeader) -> bytes:
    """The header of ``header``'s batch without records: kept for the producer state it holds
    (Kafka's empty batch: no codec, both timestamps the source's max timestamp)."""
    attributes = header.attributes & (fmt.TIMESTAMP_TYPE_MASK | fmt.TRANSACTIONAL_MASK
                                      | fmt.CONTROL_MASK)
    return _pack(header, attributes, header.max_timestamp, header.max_timestamp, 0, b"")


def _pack(header: fmt.BatchHeader, attributes: int, base_ts: int, max_ts: int, count: int,
          body: bytes) -> bytes:
    buf = bytearray(fmt.HEADER_SIZE + len(body))
    fmt.HEADER_STRUCT.pack_into(
        buf, 0, header.base_offset, len(buf) - fmt.LOG_OVERHEAD, header.partition_leader_epoch,
        fmt.CURRENT_MAGIC, 0, attributes, header.last_offset - header.base_offset, base_ts, max_ts,
        header.producer_id, header.producer_epoch, header.base_sequence, count)
    buf[fmt.HEADER_SIZE:] = body
    _CRC.pack_into(buf, fmt.CRC, fmt.compute_crc(buf, 0, len(buf)))
    return bytes(buf)
