"""Pure-Python produce-path validation: the twin of ``ext/records/_fast.pyx``.

Semantics follow Apache Kafka's leader append for magic 2 (``UnifiedLog.analyzeAndValidateRecords``
then ``LogValidator``), in two phases so that a failure leaves ``buf`` untouched:

1. validate every batch: framing, magic, baseOffset 0, size limit, CRC, codec id (the log's
   checks, for all batches first), then per batch the offset range and count, control and
   sequence rules, a full walk of uncompressed records (with the topic's CreateTime timestamp
   bounds, message.timestamp.before/after.max.ms, and with ``require_keys`` a compacted topic's
   rule that every record has a key), and the LogAppendTime rule;
2. assign: base offsets from ``next_offset``, the partition leader epoch, and the timestamp
   type / maxTimestamp (recomputing the CRC only when those change, as Kafka does).

Deliberate differences from Kafka, both stricter: an uncompressed record whose offsetDelta is not
its index is rejected (Kafka stores it as sent), and bytes after the last whole batch are an
error (Kafka trims them). Compressed batches are checked at the header level only and stored as
sent; their maxTimestamp is taken from the header (the log checks their record timestamps
against the bounds and their keys itself, decompressing, only when the topic sets bounds or is
compacted).
"""

from __future__ import annotations

import struct
from typing import Any

from crc32c import crc32c

from kafkapy.records import format as fmt
from kafkapy.records._validate_common import (
    E_BAD_MAGIC,
    E_BASE_OFFSET,
    E_CODEC,
    E_CONTROL,
    E_COUNT,
    E_COUNT_MISMATCH,
    E_CRC,
    E_LEGACY_MAGIC,
    E_LENGTH_SMALL,
    E_LOG_APPEND_TIME,
    E_NO_BATCHES,
    E_NO_KEY,
    E_OFFSET_RANGE,
    E_OVERRUN,
    E_REC_EOF,
    E_REC_FIELDS,
    E_REC_HEADER_KEY,
    E_REC_HEADERS,
    E_REC_OFFSET,
    E_REC_REMAINING,
    E_REC_SIZE,
    E_REC_VARINT,
    E_SEQUENCE,
    E_TIMESTAMP_RANGE,
    E_TOO_LARGE,
    E_TRUNCATED,
    AppendInfo,
    BatchInfo,
    check_arguments,
    check_offsets_fit,
    check_timestamp_bounds,
    fail,
    not_writable,
)

__all__ = ["AppendInfo", "BatchInfo", "validate_and_assign"]

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")
_HEADER = fmt.HEADER_STRUCT

# Bytes needed to read a batch's magic: baseOffset, batchLength, partitionLeaderEpoch, magic.
_UP_TO_MAGIC = fmt.MAGIC + 1
_MIN_BATCH_LENGTH = fmt.HEADER_SIZE - fmt.LOG_OVERHEAD
# Attribute bits Kafka keeps when it rewrites a batch's timestamp type (computeAttributes drops
# any others).
_KNOWN_ATTRIBUTES = (fmt.COMPRESSION_MASK | fmt.TRANSACTIONAL_MASK | fmt.CONTROL_MASK
                     | fmt.DELETE_HORIZON_MASK)
_MAX_CODEC = fmt.ZSTD

_EOF = -1
_TOO_LONG = -2
_M32 = 0xFFFFFFFF
_M64 = 0xFFFFFFFFFFFFFFFF


def _varint(b: memoryview, p: int, end: int, max_bytes: int, mask: int) -> tuple[int, int]:
    """Decode a zigzag varint; returns (value, new_pos) or (0, _EOF / _TOO_LONG)."""
    raw = 0
    shift = 0
    last = max_bytes - 1
    for i in range(max_bytes):
        if p >= end:
            return 0, _EOF
        c = b[p]
        p += 1
        # The final allowed byte keeps all its bits, which the mask then truncates: that is how
        # Java's fixed-width shifts treat an over-wide last byte.
        raw |= (c if i == last else c & 0x7F) << shift
        if not c & 0x80:
            raw &= mask
            return (raw >> 1) ^ -(raw & 1), p
        shift += 7
    return 0, _TOO_LONG


def _walk_records(b: memoryview, pos: int, count: int, base_ts: int, lat_ts: int | None,
                  floor: int, ceiling: int, require_keys: bool = False) -> int:
    """Check every record of the uncompressed batch at ``pos``; return its max timestamp.

    ``lat_ts`` is the batch's maxTimestamp when the batch says LogAppendTime: then, as in
    Kafka's reader, every record's timestamp is that value. A record timestamp outside
    [``floor``, ``ceiling``] (other than "none", -1) is refused, and with ``require_keys`` (a
    compacted topic) so is a record whose key is null.
    """
    p = pos + fmt.HEADER_SIZE
    bend = pos + fmt.LOG_OVERHEAD + _I32.unpack_from(b, pos + fmt.BATCH_LENGTH)[0]
    batch_max = fmt.NO_TIMESTAMP
    for i in range(count):
        # Most varints are one byte; decoding those inline roughly halves the walk's cost.
        if p < bend and b[p] < 0x80:
            c = b[p]
            length = (c >> 1) ^ -(c & 1)
            p += 1
        else:
            length, p = _varint(b, p, bend, 5, _M32)
            if p < 0:
                fail(E_REC_EOF if p == _EOF else E_REC_VARINT, pos, i)
        if length < 0:
            fail(E_REC_SIZE, pos, i, length)
        rend = p + length
        if rend > bend:
            fail(E_REC_EOF, pos, i)
        if p >= rend:  # no room for the attributes byte
            fail(E_REC_FIELDS, pos, i, length)
        p += 1
        ts_delta, p = _varint(b, p, rend, 10, _M64)
        if p < 0:
            fail(E_REC_FIELDS if p == _EOF else E_REC_VARINT, pos, i, length)
        if p < rend and b[p] < 0x80:
            c = b[p]
            off_delta = (c >> 1) ^ -(c & 1)
            p += 1
        else:
            off_delta, p = _varint(b, p, rend, 5, _M32)
            if p < 0:
                fail(E_REC_FIELDS if p == _EOF else E_REC_VARINT, pos, i, length)
        if off_delta != i:
            fail(E_REC_OFFSET, pos, i, off_delta)
        missing_key = False
        for _field in (0, 1):  # key, then value; a negative length means null
            if p < rend and b[p] < 0x80:
                c = b[p]
                n = (c >> 1) ^ -(c & 1)
                p += 1
            else:
                n, p = _varint(b, p, rend, 5, _M32)
                if p < 0:
                    fail(E_REC_FIELDS if p == _EOF else E_REC_VARINT, pos, i, length)
            if n > 0:
                p += n
                if p > rend:
                    fail(E_REC_FIELDS, pos, i, length)
            elif n < 0 and require_keys and not _field:
                missing_key = True
        if p < rend and b[p] < 0x80:
            c = b[p]
            n_headers = (c >> 1) ^ -(c & 1)
            p += 1
        else:
            n_headers, p = _varint(b, p, rend, 5, _M32)
            if p < 0:
                fail(E_REC_FIELDS if p == _EOF else E_REC_VARINT, pos, i, length)
        if n_headers < 0:
            fail(E_REC_HEADERS, pos, i, n_headers)
        for _h in range(n_headers):
            n, p = _varint(b, p, rend, 5, _M32)
            if p < 0:
                fail(E_REC_FIELDS if p == _EOF else E_REC_VARINT, pos, i, length)
            if n < 0:
                fail(E_REC_HEADER_KEY, pos, i)
            p += n
            if p > rend:
                fail(E_REC_FIELDS, pos, i, length)
            n, p = _varint(b, p, rend, 5, _M32)
            if p < 0:
                fail(E_REC_FIELDS if p == _EOF else E_REC_VARINT, pos, i, length)
            if n > 0:
                p += n
                if p > rend:
                    fail(E_REC_FIELDS, pos, i, length)
        if p != rend:
            fail(E_REC_FIELDS, pos, i, length)
        if missing_key:  # checked once the record is known whole, and before its timestamp
            fail(E_NO_KEY, pos, i)
        if lat_ts is not None:
            ts = lat_ts
        else:
            # Java adds two longs with wrap-around; do the same so both agree on hostile input.
            ts = ((base_ts + ts_delta + (1 << 63)) & _M64) - (1 << 63)
        if (ts < floor or ts > ceiling) and ts != fmt.NO_TIMESTAMP:
            fail(E_TIMESTAMP_RANGE, pos, i, ts, floor, ceiling)
        if ts > batch_max:
            batch_max = ts
    if p != bend:
        fail(E_REC_REMAINING, pos, count)
    return batch_max


def validate_and_assign(
    buf: bytearray | memoryview,  # any writable buffer: offsets are assigned in place
    *,
    next_offset: int,
    now_ms: int,
    partition_leader_epoch: int,
    max_batch_bytes: int,
    log_append_time: bool = False,
    timestamp_floor: int = -(1 << 63),
    timestamp_ceiling: int = (1 << 63) - 1,
    require_keys: bool = False,
) -> AppendInfo:
    """Validate every batch in ``buf`` and assign offsets in place; see the module docstring."""
    check_arguments(next_offset, now_ms, partition_leader_epoch, max_batch_bytes)
    check_timestamp_bounds(timestamp_floor, timestamp_ceiling)
    log_append_time = bool(log_append_time)
    if log_append_time:  # the broker's own clock stamps the records: nothing to bound
        timestamp_floor, timestamp_ceiling = -(1 << 63), (1 << 63) - 1
    b = memoryview(buf)
    if b.readonly:
        not_writable(buf)
    b = b.cast("B")
    end = len(b)
    if end == 0:
        fail(E_NO_BATCHES)

    # Phase 1a: what the log checks on every batch before the validator runs.
    positions: list[int] = []
    pos = 0
    while pos < end:
        remaining = end - pos
        if remaining < _UP_TO_MAGIC:
            fail(E_TRUNCATED, pos, remaining)
        magic = b[pos + fmt.MAGIC]
        if magic != fmt.CURRENT_MAGIC:
            if magic >= 128:
                magic -= 256
            fail(E_LEGACY_MAGIC if magic in (0, 1) else E_BAD_MAGIC, pos, magic)
        length = _I32.unpack_from(b, pos + fmt.BATCH_LENGTH)[0]
        if length < _MIN_BATCH_LENGTH:
            fail(E_LENGTH_SMALL, pos, length)
        if length > remaining - fmt.LOG_OVERHEAD:
            fail(E_OVERRUN, pos, length, remaining - fmt.LOG_OVERHEAD)
        size = length + fmt.LOG_OVERHEAD
        base_offset = _I64.unpack_from(b, pos)[0]
        if base_offset != 0:
            fail(E_BASE_OFFSET, pos, base_offset)
        if size > max_batch_bytes:
            fail(E_TOO_LARGE, pos, size, max_batch_bytes)
        stored = _U32.unpack_from(b, pos + fmt.CRC)[0]
        computed = crc32c(b[pos + fmt.CRC_START : pos + size])
        if stored != computed:
            fail(E_CRC, pos, stored, computed)
        codec = b[pos + fmt.ATTRIBUTES + 1] & fmt.COMPRESSION_MASK
        if codec > _MAX_CODEC:
            fail(E_CODEC, pos, codec)
        positions.append(pos)
        pos += size

    # Phase 1b: the validator's per-batch rules and the record walk.
    plan: list[tuple[int, tuple[Any, ...], int, int, int]] = []
    for pos in positions:
        h = _HEADER.unpack_from(b, pos)
        (_, length, _, _, _, attributes, last_delta, base_ts, header_max,
         producer_id, _, base_sequence, count) = h
        attributes &= 0xFFFF
        if last_delta + 1 <= 0:
            fail(E_OFFSET_RANGE, pos, last_delta)
        if count <= 0:
            fail(E_COUNT, pos, count)
        if last_delta + 1 != count:
            fail(E_COUNT_MISMATCH, pos, last_delta, count)
        if attributes & fmt.CONTROL_MASK:
            fail(E_CONTROL, pos)
        if producer_id >= 0 and base_sequence < 0:
            fail(E_SEQUENCE, pos, producer_id, base_sequence)
        is_lat = attributes & fmt.TIMESTAMP_TYPE_MASK
        if attributes & fmt.COMPRESSION_MASK:
            batch_max = header_max
        else:
            batch_max = _walk_records(b, pos, count, base_ts, header_max if is_lat else None,
                                      timestamp_floor, timestamp_ceiling, require_keys)
        # Kafka rejects a LogAppendTime batch from a producer whenever the record timestamps it
        # reports (all equal to maxTimestamp) are not validated as CreateTime ones.
        if is_lat and (log_append_time or header_max == fmt.NO_TIMESTAMP):
            fail(E_LOG_APPEND_TIME, pos)
        if log_append_time:
            new_attributes = (attributes & _KNOWN_ATTRIBUTES) | fmt.TIMESTAMP_TYPE_MASK
            new_max = now_ms
        else:
            new_attributes = attributes & _KNOWN_ATTRIBUTES
            new_max = batch_max
        if new_max == header_max and bool(is_lat) == log_append_time:
            new_attributes = -1  # Kafka leaves the batch (and its CRC) alone in this case
        plan.append((pos, h, new_attributes, new_max, count))
    check_offsets_fit(next_offset, sum(p[4] for p in plan))

    # Phase 2: everything valid; now write.
    offset = next_offset
    max_timestamp = fmt.NO_TIMESTAMP
    offset_of_max = -1
    batches: list[BatchInfo] = []
    for pos, h, new_attributes, new_max, count in plan:
        size = h[1] + fmt.LOG_OVERHEAD
        base = offset
        offset += count
        _I64.pack_into(b, pos, base)
        _I32.pack_into(b, pos + fmt.PARTITION_LEADER_EPOCH, partition_leader_epoch)
        if new_attributes >= 0:
            _I16.pack_into(b, pos + fmt.ATTRIBUTES, new_attributes)
            _I64.pack_into(b, pos + fmt.MAX_TIMESTAMP, new_max)
            _U32.pack_into(b, pos + fmt.CRC, crc32c(b[pos + fmt.CRC_START : pos + size]))
            attributes = new_attributes
        else:
            attributes = h[5] & 0xFFFF
        # Kafka 3.8+ reports the last offset of the first batch holding the maximum timestamp
        # (its "shallow" offset of max timestamp), the same thing follower appends and log
        # recovery can compute without decompressing.
        if new_max > max_timestamp:
            max_timestamp = new_max
            offset_of_max = offset - 1
        batches.append(BatchInfo(
            position=pos,
            size=size,
            base_offset=base,
            last_offset=offset - 1,
            max_timestamp=new_max,
            producer_id=h[9],
            producer_epoch=h[10],
            base_sequence=h[11],
            record_count=count,
            transactional=bool(attributes & fmt.TRANSACTIONAL_MASK),
            control=bool(attributes & fmt.CONTROL_MASK),
        ))
    if log_append_time:
        max_timestamp = now_ms
        offset_of_max = offset - 1
    return AppendInfo(
        first_offset=next_offset,
        last_offset=offset - 1,
        max_timestamp=max_timestamp,
        offset_of_max_timestamp=offset_of_max,
        record_count=offset - next_offset,
        batches=batches,
    )
