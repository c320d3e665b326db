"""Pure-Python twin of ``ext/records/_columns_fast.pyx``: records of one batch into columns.

See :mod:`kafkapy.records.columns` for the layout. The batch is decoded completely before
anything is appended, so a malformed record leaves the columns as they were.
"""

from __future__ import annotations

import struct
from typing import Any

from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.records.varint import VarintError, decode_varint, decode_varlong

__all__ = ["append_batch"]

_Q = struct.Struct("<q")
_I = struct.Struct("<i")
_M64 = (1 << 64) - 1


def _skip_bytes(buf: memoryview, pos: int, end: int) -> tuple[int, int]:
    """(start, length) of a length-prefixed field; length -1 for null."""
    n, pos = decode_varint(buf, pos, end)
    if n < 0:
        return pos, -1
    if pos + n > end:
        raise VarintError("field overruns its record")
    return pos, n


def append_batch(columns: Any, records: bytes | bytearray | memoryview, count: int,
                 base_offset: int, base_timestamp: int, log_append_time: int, start: int,
                 until: int) -> int:
    """Append the records of one batch whose offsets are in [start, until); see ``columns``."""
    buf = memoryview(records).cast("B")
    end = len(buf)
    pos = 0
    found: list[tuple[int, int, int, int, int, int]] = []
    try:
        for _ in range(count):
            length, pos = decode_varint(buf, pos, end)
            rec_end = pos + length
            if length < 0 or rec_end > end:
                raise VarintError("record overruns its batch")
            pos += 1  # attributes
            ts_delta, pos = decode_varlong(buf, pos, rec_end)
            off_delta, pos = decode_varint(buf, pos, rec_end)
            key_pos, key_len = _skip_bytes(buf, pos, rec_end)
            pos = key_pos + max(key_len, 0)
            value_pos, value_len = _skip_bytes(buf, pos, rec_end)
            pos = rec_end  # headers are not decoded here
            offset = base_offset + off_delta
            if start <= offset < until:
                if log_append_time >= 0:
                    ts = log_append_time
                else:
                    # Java's long addition wraps; the Cython twin does the same.
                    ts = ((base_timestamp + ts_delta + (1 << 63)) & _M64) - (1 << 63)
                found.append((offset, ts, key_pos, key_len, value_pos, value_len))
    except (VarintError, IndexError) as exc:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE,
                         f"malformed record in batch at offset {base_offset}: {exc}") from exc
    ts_type = 1 if log_append_time >= 0 else 0
    c = columns
    for offset, ts, key_pos, key_len, value_pos, value_len in found:
        c.offsets += _Q.pack(offset)
        # Microseconds for Arrow; wraps like the Cython twin's int64 arithmetic.
        c.timestamps_us += _Q.pack(((ts * 1000 + (1 << 63)) & _M64) - (1 << 63))
        c.timestamp_types += _I.pack(ts_type)
        c.key_nulls += _add_binary(c.key_offsets, c.key_data, c.key_validity, c.count,
                                   buf, key_pos, key_len)
        c.value_nulls += _add_binary(c.value_offsets, c.value_data, c.value_validity, c.count,
                                     buf, value_pos, value_len)
        c.count += 1
    return len(found)


def _add_binary(offsets: bytearray, data: bytearray, validity: bytearray, index: int,
                buf: memoryview, pos: int, length: int) -> int:
    """Append one value (None when ``length`` is -1); returns 1 for a null."""
    if index // 8 >= len(validity):
        validity.append(0)
    if length >= 0:
        data += buf[pos:pos + length]
        validity[index // 8] |= 1 << (index % 8)
    offsets += _I.pack(len(data))
    return 1 if length < 0 else 0
