"""End-transaction markers: the control records that close a transaction in a partition.

A transaction coordinator ends a transaction by having each partition's leader append one control
batch (attributes: control and transactional) holding one record, with the producer's id and epoch
in the batch header. Its layout is Kafka's:

    key   int16 version (0), int16 type (0 ABORT, 1 COMMIT)
    value int16 version (0), int32 coordinator epoch

Readers accept a longer value (a later version may add fields) and refuse a shorter one, as Kafka
does. The other control key types (2 and up) belong to the KRaft metadata log, not to data logs.
"""

from __future__ import annotations

import struct
from typing import Final, NamedTuple

from kafkapy.protocol.errors import KafkaError
from kafkapy.records import format as fmt
from kafkapy.records import reader
from kafkapy.records.builder import Record, build_batch

__all__ = ["ABORT", "COMMIT", "EndTxnMarker", "marker_batch", "read_marker"]

ABORT: Final = 0
COMMIT: Final = 1
_KEY = struct.Struct(">hh")     # version, type
_VALUE = struct.Struct(">hi")   # version, coordinator epoch
_VERSION: Final = 0


class EndTxnMarker(NamedTuple):
    """What one end-transaction marker says."""

    commit: bool
    coordinator_epoch: int


def encode_marker(marker: EndTxnMarker) -> Record:
    """The marker as the one record of its control batch (timestamp from the batch's builder)."""
    return Record(_KEY.pack(_VERSION, COMMIT if marker.commit else ABORT),
                  _VALUE.pack(_VERSION, marker.coordinator_epoch))


def decode_marker(key: bytes | memoryview | None, value: bytes | memoryview | None) -> EndTxnMarker:
    """The marker in one control record; ValueError when it is not an end-transaction marker."""
    if key is None or len(key) < _KEY.size:
        raise ValueError("control record key too short")
    _, kind = _KEY.unpack_from(key)
    if kind not in (ABORT, COMMIT):
        raise ValueError(f"control record type {kind} is not an end-transaction marker")
    if value is None or len(value) < _VALUE.size:
        raise ValueError("end-transaction marker value too short")
    version, epoch = _VALUE.unpack_from(value)
    if version < 0:
        raise ValueError(f"end-transaction marker version {version}")
    return EndTxnMarker(kind == COMMIT, epoch)


def marker_batch(*, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                 now_ms: int, partition_leader_epoch: int = fmt.NO_PARTITION_LEADER_EPOCH) -> bytes:
    """A control batch closing ``producer_id``'s transaction; the leader assigns its offset."""
    return build_batch([encode_marker(EndTxnMarker(commit, coordinator_epoch))],
                       producer_id=producer_id, producer_epoch=producer_epoch,
                       partition_leader_epoch=partition_leader_epoch,
                       transactional=True, control=True, now_ms=now_ms)


def read_marker(batch: bytes | bytearray | memoryview) -> EndTxnMarker | None:
    """The marker of one whole control batch (None when it holds no readable marker)."""
    try:
        for rec in reader.iter_records(batch):
            return decode_marker(rec.key, rec.value)
    except (KafkaError, ValueError, struct.error):
        return None
    return None
