# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Cython produce-path validation: the twin of ``kafkapy/records/_pure.py``.

Same rules, same order of checks and the same errors (raised through ``_validate_common.fail``);
``_pure``'s docstring is the description of both. The record walk runs over a raw pointer into
the request buffer without creating Python objects and without the GIL; Python is touched once per
batch (CRC-32C through the ``crc32c`` package, which uses the CPU's CRC instruction) and on error.
"""

from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t

from crc32c import crc32c as _crc32c

from kafkapy.records import _validate_common as _common
from kafkapy.records._validate_common import (
    AppendInfo,
    BatchInfo,
    check_arguments,
    check_offsets_fit,
    check_timestamp_bounds,
    fail,
    not_writable,
)

__all__ = ["AppendInfo", "BatchInfo", "validate_and_assign"]

# Error ids, mirrored as C constants so the nogil walk can return them; checked against
# _validate_common at import so the two lists cannot drift.
cdef enum:
    E_NO_BATCHES = 0
    E_TRUNCATED = 1
    E_LEGACY_MAGIC = 2
    E_BAD_MAGIC = 3
    E_LENGTH_SMALL = 4
    E_OVERRUN = 5
    E_BASE_OFFSET = 6
    E_TOO_LARGE = 7
    E_CRC = 8
    E_CODEC = 9
    E_OFFSET_RANGE = 10
    E_COUNT = 11
    E_COUNT_MISMATCH = 12
    E_CONTROL = 13
    E_SEQUENCE = 14
    E_LOG_APPEND_TIME = 15
    E_REC_EOF = 16
    E_REC_SIZE = 17
    E_REC_VARINT = 18
    E_REC_FIELDS = 19
    E_REC_OFFSET = 20
    E_REC_HEADERS = 21
    E_REC_HEADER_KEY = 22
    E_REC_REMAINING = 23
    E_TIMESTAMP_RANGE = 24
    E_NO_KEY = 25

_MIRRORED = {
    "E_NO_BATCHES": E_NO_BATCHES, "E_TRUNCATED": E_TRUNCATED, "E_LEGACY_MAGIC": E_LEGACY_MAGIC,
    "E_BAD_MAGIC": E_BAD_MAGIC, "E_LENGTH_SMALL": E_LENGTH_SMALL, "E_OVERRUN": E_OVERRUN,
    "E_BASE_OFFSET": E_BASE_OFFSET, "E_TOO_LARGE": E_TOO_LARGE, "E_CRC": E_CRC,
    "E_CODEC": E_CODEC, "E_OFFSET_RANGE": E_OFFSET_RANGE, "E_COUNT": E_COUNT,
    "E_COUNT_MISMATCH": E_COUNT_MISMATCH, "E_CONTROL": E_CONTROL, "E_SEQUENCE": E_SEQUENCE,
    "E_LOG_APPEND_TIME": E_LOG_APPEND_TIME, "E_REC_EOF": E_REC_EOF, "E_REC_SIZE": E_REC_SIZE,
    "E_REC_VARINT": E_REC_VARINT, "E_REC_FIELDS": E_REC_FIELDS, "E_REC_OFFSET": E_REC_OFFSET,
    "E_REC_HEADERS": E_REC_HEADERS, "E_REC_HEADER_KEY": E_REC_HEADER_KEY,
    "E_REC_REMAINING": E_REC_REMAINING, "E_TIMESTAMP_RANGE": E_TIMESTAMP_RANGE,
    "E_NO_KEY": E_NO_KEY,
}
for _name, _value in _MIRRORED.items():
    if getattr(_common, _name) != _value:
        raise ImportError(f"kafkapy.records._fast: {_name} differs from _validate_common")

# Batch header layout (kafkapy.records.format).
cdef enum:
    BASE_OFFSET = 0
    BATCH_LENGTH = 8
    PARTITION_LEADER_EPOCH = 12
    MAGIC = 16
    CRC = 17
    ATTRIBUTES = 21
    LAST_OFFSET_DELTA = 23
    BASE_TIMESTAMP = 27
    MAX_TIMESTAMP = 35
    PRODUCER_ID = 43
    PRODUCER_EPOCH = 51
    BASE_SEQUENCE = 53
    RECORD_COUNT = 57
    HEADER_SIZE = 61
    LOG_OVERHEAD = 12
    UP_TO_MAGIC = 17
    MIN_BATCH_LENGTH = 49
    COMPRESSION_MASK = 0x07
    TIMESTAMP_TYPE_MASK = 0x08
    TRANSACTIONAL_MASK = 0x10
    CONTROL_MASK = 0x20
    # Bits Kafka keeps when it rewrites the timestamp type (computeAttributes drops others).
    KNOWN_ATTRIBUTES = 0x77
    MAX_CODEC = 4

cdef enum:
    NO_ERROR = -1

cdef int64_t NO_TIMESTAMP = -1


cdef inline uint32_t rd_u32(const uint8_t* p) noexcept nogil:
    return ((<uint32_t>p[0]) << 24) | ((<uint32_t>p[1]) << 16) | ((<uint32_t>p[2]) << 8) | p[3]


cdef inline int32_t rd_i32(const uint8_t* p) noexcept nogil:
    return <int32_t>rd_u32(p)


cdef inline int16_t rd_i16(const uint8_t* p) noexcept nogil:
    return <int16_t>(((<uint16_t>p[0]) << 8) | p[1])


cdef inline int64_t rd_i64(const uint8_t* p) noexcept nogil:
    return <int64_t>(((<uint64_t>rd_u32(p)) << 32) | rd_u32(p + 4))


cdef inline void wr_u32(uint8_t* p, uint32_t v) noexcept nogil:
    p[0] = <uint8_t>(v >> 24)
    p[1] = <uint8_t>(v >> 16)
    p[2] = <uint8_t>(v >> 8)
    p[3] = <uint8_t>v


cdef inline void wr_i64(uint8_t* p, int64_t v) noexcept nogil:
    cdef uint64_t u = <uint64_t>v
    wr_u32(p, <uint32_t>(u >> 32))
    wr_u32(p + 4, <uint32_t>u)


include "_varint.pxi"


cdef int walk_records(const uint8_t* b, Py_ssize_t pos, int32_t count, int64_t base_ts,
                      bint lat, int64_t lat_ts, int64_t floor, int64_t ceiling,
                      bint require_keys, int64_t* out_max, int64_t* args) noexcept nogil:
    """Check every record of the uncompressed batch at ``pos``.

    Returns NO_ERROR and the batch's max record timestamp in ``out_max``, or an error id with
    its message arguments (batch position, record index, detail) in ``args``. Record timestamps
    outside [``floor``, ``ceiling``] (other than -1, "none") are an error, and with
    ``require_keys`` (a compacted topic) so are records whose key is null.
    """
    cdef Py_ssize_t p = pos + HEADER_SIZE
    cdef Py_ssize_t bend = pos + LOG_OVERHEAD + rd_i32(b + pos + BATCH_LENGTH)
    cdef Py_ssize_t rend, q
    cdef uint64_t raw
    cdef int32_t i, length, n, n_headers, h, f
    cdef int64_t ts, ts_delta
    cdef int64_t batch_max = NO_TIMESTAMP
    cdef bint missing_key
    args[0] = pos
    args[1] = 0
    args[2] = 0
    for i in range(count):
        args[1] = i
        q = rd_var(b, p, bend, 5, &raw)
        if q < 0:
            return E_REC_EOF if q == VAR_EOF else E_REC_VARINT
        p = q
        length = zz32(raw)
        args[2] = length
        if length < 0:
            return E_REC_SIZE
        rend = p + length
        if rend > bend:
            return E_REC_EOF
        if p >= rend:
            return E_REC_FIELDS
        p += 1  # per-record attributes: unused
        q = rd_var(b, p, rend, 10, &raw)
        if q < 0:
            return E_REC_FIELDS if q == VAR_EOF else E_REC_VARINT
        p = q
        ts_delta = zz64(raw)
        q = rd_var(b, p, rend, 5, &raw)
        if q < 0:
            return E_REC_FIELDS if q == VAR_EOF else E_REC_VARINT
        p = q
        n = zz32(raw)
        if n != i:
            args[2] = n
            return E_REC_OFFSET
        missing_key = False
        for f in range(2):  # key, then value; a negative length means null
            q = rd_var(b, p, rend, 5, &raw)
            if q < 0:
                return E_REC_FIELDS if q == VAR_EOF else E_REC_VARINT
            p = q
            n = zz32(raw)
            if n > 0:
                p += n
                if p > rend:
                    return E_REC_FIELDS
            elif n < 0 and require_keys and f == 0:
                missing_key = True
        q = rd_var(b, p, rend, 5, &raw)
        if q < 0:
            return E_REC_FIELDS if q == VAR_EOF else E_REC_VARINT
        p = q
        n_headers = zz32(raw)
        if n_headers < 0:
            args[2] = n_headers
            return E_REC_HEADERS
        for h in range(n_headers):
            q = rd_var(b, p, rend, 5, &raw)
            if q < 0:
                return E_REC_FIELDS if q == VAR_EOF else E_REC_VARINT
            p = q
            n = zz32(raw)
            if n < 0:
                return E_REC_HEADER_KEY
            p += n
            if p > rend:
                return E_REC_FIELDS
            q = rd_var(b, p, rend, 5, &raw)
            if q < 0:
                return E_REC_FIELDS if q == VAR_EOF else E_REC_VARINT
            p = q
            n = zz32(raw)
            if n > 0:
                p += n
                if p > rend:
                    return E_REC_FIELDS
        if p != rend:
            return E_REC_FIELDS
        if missing_key:  # once the record is known whole, and before its timestamp
            return E_NO_KEY
        if lat:
            ts = lat_ts
        else:
            # Java's long addition wraps; unsigned arithmetic gives the same bits without UB.
            ts = <int64_t>(<uint64_t>base_ts + <uint64_t>ts_delta)
        if (ts < floor or ts > ceiling) and ts != NO_TIMESTAMP:
            args[2] = ts
            return E_TIMESTAMP_RANGE
        if ts > batch_max:
            batch_max = ts
    if p != bend:
        args[1] = count
        return E_REC_REMAINING
    out_max[0] = batch_max
    return NO_ERROR


def validate_and_assign(
    buf,
    *,
    next_offset,
    now_ms,
    partition_leader_epoch,
    max_batch_bytes,
    log_append_time=False,
    timestamp_floor=-(1 << 63),
    timestamp_ceiling=(1 << 63) - 1,
    require_keys=False,
):
    """Validate every batch in ``buf`` and assign offsets in place; see ``_pure``."""
    # Checked as Python ints first so a bad argument fails exactly as in _pure, not with
    # Cython's own conversion error.
    check_arguments(next_offset, now_ms, partition_leader_epoch, max_batch_bytes)
    check_timestamp_bounds(timestamp_floor, timestamp_ceiling)
    if log_append_time:  # the broker's own clock stamps the records: nothing to bound
        timestamp_floor, timestamp_ceiling = -(1 << 63), (1 << 63) - 1
    return _validate(buf, next_offset, now_ms, partition_leader_epoch, max_batch_bytes,
                     bool(log_append_time), timestamp_floor, timestamp_ceiling,
                     bool(require_keys))


cdef object _validate(object buf, int64_t next_offset, int64_t now_ms,
                      int32_t partition_leader_epoch, int64_t max_batch_bytes,
                      bint log_append_time, int64_t floor, int64_t ceiling,
                      bint require_keys):
    mv = memoryview(buf)
    if mv.readonly:
        not_writable(buf)
    mv = mv.cast("B")
    cdef Py_ssize_t end = len(mv)
    if end == 0:
        fail(E_NO_BATCHES)
    cdef uint8_t[::1] view = mv
    cdef uint8_t* b = &view[0]
    cdef Py_ssize_t pos = 0, remaining, size
    cdef int8_t magic
    cdef int32_t length, last_delta, count, base_sequence
    cdef int64_t base_offset, base_ts, header_max, producer_id, batch_max, new_max
    cdef int64_t offset, max_timestamp, offset_of_max, total = 0
    cdef uint32_t stored, computed
    cdef int attributes, new_attributes, codec, err
    cdef bint is_lat
    cdef int64_t args[3]

    # Phase 1a: the log's checks, on every batch before any other rule.
    while pos < end:
        remaining = end - pos
        if remaining < UP_TO_MAGIC:
            fail(E_TRUNCATED, pos, remaining)
        magic = <int8_t>b[pos + MAGIC]
        if magic != 2:
            fail(E_LEGACY_MAGIC if (magic == 0 or magic == 1) else E_BAD_MAGIC, pos, magic)
        length = rd_i32(b + pos + BATCH_LENGTH)
        if length < MIN_BATCH_LENGTH:
            fail(E_LENGTH_SMALL, pos, length)
        if length > remaining - LOG_OVERHEAD:
            fail(E_OVERRUN, pos, length, remaining - LOG_OVERHEAD)
        size = length + LOG_OVERHEAD
        base_offset = rd_i64(b + pos + BASE_OFFSET)
        if base_offset != 0:
            fail(E_BASE_OFFSET, pos, base_offset)
        if size > max_batch_bytes:
            fail(E_TOO_LARGE, pos, size, max_batch_bytes)
        stored = rd_u32(b + pos + CRC)
        computed = _crc32c(mv[pos + ATTRIBUTES : pos + size])
        if stored != computed:
            fail(E_CRC, pos, stored, computed)
        codec = b[pos + ATTRIBUTES + 1] & COMPRESSION_MASK
        if codec > MAX_CODEC:
            fail(E_CODEC, pos, codec)
        pos += size

    # Phase 1b: per-batch rules and the record walk. One tuple per batch, none per record.
    plan = []
    pos = 0
    while pos < end:
        size = rd_i32(b + pos + BATCH_LENGTH) + LOG_OVERHEAD
        attributes = <uint16_t>rd_i16(b + pos + ATTRIBUTES)
        last_delta = rd_i32(b + pos + LAST_OFFSET_DELTA)
        base_ts = rd_i64(b + pos + BASE_TIMESTAMP)
        header_max = rd_i64(b + pos + MAX_TIMESTAMP)
        producer_id = rd_i64(b + pos + PRODUCER_ID)
        base_sequence = rd_i32(b + pos + BASE_SEQUENCE)
        count = rd_i32(b + pos + RECORD_COUNT)
        if <int64_t>last_delta + 1 <= 0:
            fail(E_OFFSET_RANGE, pos, last_delta)
        if count <= 0:
            fail(E_COUNT, pos, count)
        if <int64_t>last_delta + 1 != count:
            fail(E_COUNT_MISMATCH, pos, last_delta, count)
        if attributes & CONTROL_MASK:
            fail(E_CONTROL, pos)
        if producer_id >= 0 and base_sequence < 0:
            fail(E_SEQUENCE, pos, producer_id, base_sequence)
        is_lat = (attributes & TIMESTAMP_TYPE_MASK) != 0
        if attributes & COMPRESSION_MASK:
            batch_max = header_max
        else:
            with nogil:
                err = walk_records(b, pos, count, base_ts, is_lat, header_max, floor, ceiling,
                                   require_keys, &batch_max, args)
            if err == E_TIMESTAMP_RANGE:
                fail(err, args[0], args[1], args[2], floor, ceiling)
            if err != NO_ERROR:
                fail(err, args[0], args[1], args[2])
        if is_lat and (log_append_time or header_max == NO_TIMESTAMP):
            fail(E_LOG_APPEND_TIME, pos)
        if log_append_time:
            new_attributes = (attributes & KNOWN_ATTRIBUTES) | TIMESTAMP_TYPE_MASK
            new_max = now_ms
        else:
            new_attributes = attributes & KNOWN_ATTRIBUTES
            new_max = batch_max
        if new_max == header_max and is_lat == log_append_time:
            new_attributes = -1  # Kafka leaves the batch (and its CRC) alone in this case
        plan.append((pos, size, new_attributes, new_max, count))
        total += count
        pos += size
    check_offsets_fit(next_offset, total)

    # Phase 2: everything is valid; write.
    offset = next_offset
    max_timestamp = NO_TIMESTAMP
    offset_of_max = -1
    batches = []
    for pos, size, new_attributes, new_max, count in plan:
        base_offset = offset
        offset += count
        wr_i64(b + pos + BASE_OFFSET, base_offset)
        wr_u32(b + pos + PARTITION_LEADER_EPOCH, <uint32_t>partition_leader_epoch)
        if new_attributes >= 0:
            b[pos + ATTRIBUTES] = <uint8_t>(new_attributes >> 8)
            b[pos + ATTRIBUTES + 1] = <uint8_t>new_attributes
            wr_i64(b + pos + MAX_TIMESTAMP, new_max)
            wr_u32(b + pos + CRC, <uint32_t>_crc32c(mv[pos + ATTRIBUTES : pos + size]))
            attributes = new_attributes
        else:
            attributes = <uint16_t>rd_i16(b + pos + ATTRIBUTES)
        # Kafka 3.8+: the last offset of the first batch holding the maximum timestamp.
        if new_max > max_timestamp:
            max_timestamp = new_max
            offset_of_max = offset - 1
        batches.append(BatchInfo(
            pos,
            size,
            base_offset,
            offset - 1,
            new_max,
            rd_i64(b + pos + PRODUCER_ID),
            rd_i16(b + pos + PRODUCER_EPOCH),
            rd_i32(b + pos + BASE_SEQUENCE),
            count,
            (attributes & TRANSACTIONAL_MASK) != 0,
            (attributes & CONTROL_MASK) != 0,
        ))
    if log_append_time:
        max_timestamp = now_ms
        offset_of_max = offset - 1
    return AppendInfo(
        next_offset,
        offset - 1,
        max_timestamp,
        offset_of_max,
        offset - next_offset,
        batches,
    )
