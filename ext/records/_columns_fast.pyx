# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Cython twin of ``kafkapy/records/_columns_pure.py``: one batch's records into columns.

One walk over the records section records where each wanted key and value lies, without the GIL
and without a Python object per record; then every column buffer grows once and is filled with
memcpy. Same results and errors as the pure twin (``kafkapy.records.columns`` documents both).
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize

from kafkapy.protocol.errors import ErrorCode, KafkaError

__all__ = ["append_batch"]


cdef struct Found:
    int64_t offset
    int64_t ts
    Py_ssize_t key_pos
    int32_t key_len
    Py_ssize_t value_pos
    int32_t value_len


include "_varint.pxi"


cdef inline void put_i64(char* p, int64_t v) noexcept nogil:
    cdef uint64_t u = <uint64_t>v
    cdef int i
    for i in range(8):
        p[i] = <char>(u & 0xFF)
        u >>= 8


cdef inline void put_i32(char* p, int32_t v) noexcept nogil:
    cdef uint32_t u = <uint32_t>v
    cdef int i
    for i in range(4):
        p[i] = <char>(u & 0xFF)
        u >>= 8


cdef inline Py_ssize_t rd_field(const uint8_t* b, Py_ssize_t p, Py_ssize_t rend,
                                Py_ssize_t* pos, int32_t* length) noexcept nogil:
    """A length-prefixed key or value: where it starts and its length (-1: null); the position
    after it, or -1 when it does not fit in its record."""
    cdef uint64_t raw
    cdef Py_ssize_t q = rd_var(b, p, rend, 5, &raw)
    cdef int32_t n
    if q < 0:
        return -1
    n = zz32(raw)
    pos[0] = q
    length[0] = -1
    if n >= 0:
        if n > rend - q:
            return -1
        length[0] = n
        q += n
    return q


cdef int walk(const uint8_t* b, Py_ssize_t end, int32_t count, int64_t base_offset,
              int64_t base_timestamp, int64_t log_append_time, int64_t start, int64_t until,
              Found* found, Py_ssize_t* n_found) noexcept nogil:
    """0, or -1 for a malformed record."""
    cdef Py_ssize_t p = 0, q, rend
    cdef uint64_t raw
    cdef int64_t length, ts_delta, off_delta, offset
    cdef Py_ssize_t key_pos, value_pos
    cdef int32_t key_len, value_len
    cdef int32_t i
    cdef Py_ssize_t m = 0
    for i in range(count):
        q = rd_var(b, p, end, 5, &raw)
        if q < 0:
            return -1
        length = zz32(raw)
        p = q
        if length < 1 or length > end - p:
            return -1
        rend = p + length
        p += 1  # attributes
        q = rd_var(b, p, rend, 10, &raw)
        if q < 0:
            return -1
        ts_delta = zz64(raw)
        p = q
        q = rd_var(b, p, rend, 5, &raw)
        if q < 0:
            return -1
        off_delta = zz32(raw)
        p = q
        p = rd_field(b, p, rend, &key_pos, &key_len)
        if p < 0:
            return -1
        p = rd_field(b, p, rend, &value_pos, &value_len)
        if p < 0:
            return -1
        p = rend  # headers are not decoded here
        offset = base_offset + off_delta
        if start <= offset < until:
            found[m].offset = offset
            if log_append_time >= 0:
                found[m].ts = log_append_time
            else:
                found[m].ts = <int64_t>(<uint64_t>base_timestamp + <uint64_t>ts_delta)
            found[m].key_pos = key_pos
            found[m].key_len = key_len
            found[m].value_pos = value_pos
            found[m].value_len = value_len
            m += 1
    n_found[0] = m
    return 0


cdef char* grow(bytearray buf, Py_ssize_t extra) except NULL:
    """Make room for ``extra`` more bytes; a pointer to the first of them."""
    cdef Py_ssize_t old = PyByteArray_GET_SIZE(buf)
    PyByteArray_Resize(buf, old + extra)
    return PyByteArray_AS_STRING(buf) + old


cdef Py_ssize_t fill_binary(bytearray offsets, bytearray data, bytearray validity,
                            Py_ssize_t first_index, const uint8_t* b, Found* found,
                            Py_ssize_t m, bint keys) except -1:
    """Append m keys (or values); returns the number of nulls."""
    cdef Py_ssize_t total = 0, i, nulls = 0, index, old_bits
    cdef int32_t length
    for i in range(m):
        length = found[i].key_len if keys else found[i].value_len
        if length > 0:
            total += length
    cdef Py_ssize_t base = PyByteArray_GET_SIZE(data)
    if base + total > 0x7FFFFFFF:
        raise ValueError("more than 2 GiB of keys or values in one set of columns")
    cdef char* d = grow(data, total)
    cdef char* o = grow(offsets, 4 * m)
    old_bits = PyByteArray_GET_SIZE(validity)
    cdef Py_ssize_t need = (first_index + m + 7) // 8
    if need > old_bits:
        memset(grow(validity, need - old_bits), 0, need - old_bits)
    cdef char* v = PyByteArray_AS_STRING(validity)
    cdef Py_ssize_t at = 0
    for i in range(m):
        index = first_index + i
        length = found[i].key_len if keys else found[i].value_len
        if length < 0:
            nulls += 1
        else:
            if length:
                memcpy(d + at, b + (found[i].key_pos if keys else found[i].value_pos), length)
                at += length
            v[index >> 3] = <char>(<uint8_t>v[index >> 3] | (1 << (index & 7)))
        put_i32(o + 4 * i, <int32_t>(base + at))
    return nulls


def append_batch(columns, records, int32_t count, int64_t base_offset, int64_t base_timestamp,
                 int64_t log_append_time, int64_t start, int64_t until):
    """Append the records of one batch whose offsets are in [start, until); see ``columns``."""
    cdef const uint8_t[::1] view = memoryview(records).cast("B")
    cdef Py_ssize_t end = view.shape[0]
    cdef const uint8_t* b = &view[0] if end else <const uint8_t*>b""
    if count < 0:
        count = 0
    cdef Found* found = <Found*>malloc(sizeof(Found) * (count if count else 1))
    if found == NULL:
        raise MemoryError()
    cdef Py_ssize_t m = 0, i, first
    cdef int err
    cdef char* p
    try:
        with nogil:
            err = walk(b, end, count, base_offset, base_timestamp, log_append_time, start, until,
                       found, &m)
        if err:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE,
                             f"malformed record in batch at offset {base_offset}")
        if m == 0:
            return 0
        first = columns.count
        p = grow(columns.offsets, 8 * m)
        for i in range(m):
            put_i64(p + 8 * i, found[i].offset)
        p = grow(columns.timestamps_us, 8 * m)
        for i in range(m):
            put_i64(p + 8 * i, <int64_t>(<uint64_t>found[i].ts * 1000))
        p = grow(columns.timestamp_types, 4 * m)
        for i in range(m):
            put_i32(p + 4 * i, 1 if log_append_time >= 0 else 0)
        columns.key_nulls += fill_binary(columns.key_offsets, columns.key_data,
                                         columns.key_validity, first, b, found, m, True)
        columns.value_nulls += fill_binary(columns.value_offsets, columns.value_data,
                                           columns.value_validity, first, b, found, m, False)
        columns.count = first + m
        return m
    finally:
        free(found)
