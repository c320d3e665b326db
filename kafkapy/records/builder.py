"""Builds record batches (magic 2) from Python values.

Used by tests, by the broker for batches it writes itself (control markers, internal topics) and by
our client. Not the produce hot path: that only validates and patches batches clients built.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import NamedTuple

from kafkapy.records import format as fmt
from kafkapy.records.compression import compress
from kafkapy.records.varint import encode_varint

_CRC = struct.Struct(">I")


class Record(NamedTuple):
    """One record to put in a batch; ``timestamp=-1`` means "use the builder's ``now_ms``"."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp: int = -1


def _write_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        encode_varint(-1, out.append)
    else:
        encode_varint(len(data), out.append)
        out += data


def encode_record(offset_delta: int, timestamp_delta: int, record: Record) -> bytes:
    """One record's bytes in batch v2 framing, its length varint included."""
    body = bytearray(b"\x00")  # per-record attributes: unused by Kafka, always 0
    encode_varint(timestamp_delta, body.append)
    encode_varint(offset_delta, body.append)
    _write_bytes(body, record.key)
    _write_bytes(body, record.value)
    encode_varint(len(record.headers), body.append)
    for hkey, hvalue in record.headers:
        _write_bytes(body, hkey.encode("utf-8"))
        _write_bytes(body, hvalue)
    out = bytearray()
    encode_varint(len(body), out.append)
    out += body
    return bytes(out)


def build_batch(
    records: Iterable[Record],
    *,
    base_offset: int = 0,
    compression: int = fmt.NO_COMPRESSION,
    timestamp_type: int = 0,
    producer_id: int = fmt.NO_PRODUCER_ID,
    producer_epoch: int = fmt.NO_PRODUCER_EPOCH,
    base_sequence: int = fmt.NO_SEQUENCE,
    partition_leader_epoch: int = fmt.NO_PARTITION_LEADER_EPOCH,
    transactional: bool = False,
    control: bool = False,
    max_timestamp: int | None = None,
    now_ms: int | None = None,
) -> bytes:
    """Encode ``records`` as one v2 batch with a correct CRC.

    The batch's base timestamp is the first record's; ``max_timestamp`` overrides the computed
    maximum (a broker writing LogAppendTime batches sets it to its clock). An empty ``records``
    gives a batch with recordCount 0 and lastOffsetDelta -1 (only useful to test rejection).
    """
    recs = list(records)
    if not 0 <= compression <= fmt.ZSTD:
        raise ValueError(f"unknown compression codec {compression}")
    timestamps: list[int] = []
    for r in recs:
        if r.timestamp == fmt.NO_TIMESTAMP:
            if now_ms is None:
                raise ValueError("a record has no timestamp and now_ms was not given")
            timestamps.append(now_ms)
        else:
            timestamps.append(r.timestamp)
    base_ts = timestamps[0] if timestamps else fmt.NO_TIMESTAMP
    if max_timestamp is None:
        max_timestamp = max(timestamps) if timestamps else fmt.NO_TIMESTAMP

    body = b"".join(
        encode_record(i, ts - base_ts, r) for i, (r, ts) in enumerate(zip(recs, timestamps))
    )
    if compression != fmt.NO_COMPRESSION:
        body = compress(compression, body)

    attributes = compression
    if timestamp_type:
        attributes |= fmt.TIMESTAMP_TYPE_MASK
    if transactional:
        attributes |= fmt.TRANSACTIONAL_MASK
    if control:
        attributes |= fmt.CONTROL_MASK

    buf = bytearray(fmt.HEADER_SIZE + len(body))
    fmt.HEADER_STRUCT.pack_into(
        buf, 0,
        base_offset,
        len(buf) - fmt.LOG_OVERHEAD,
        partition_leader_epoch,
        fmt.CURRENT_MAGIC,
        0,  # crc, filled below once everything it covers is in place
        attributes,
        len(recs) - 1,
        base_ts,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(recs),
    )
    buf[fmt.HEADER_SIZE:] = body
    _CRC.pack_into(buf, fmt.CRC, fmt.compute_crc(buf, 0, len(buf)))
    return bytes(buf)
