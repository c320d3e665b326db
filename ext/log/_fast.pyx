# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Cython log-append indexing: the twin of ``kafkapy/log/_pure.py`` (see its docstring).

The index entries are written as big-endian bytes straight into the mmap'ed index files; Python is
touched only to read each batch's four fields and on error.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t

from kafkapy.log.index import IndexOffsetError

__all__ = ["index_batches"]

cdef int64_t INT32_MAX = 0x7FFFFFFF
cdef int64_t NO_TIMESTAMP = -1


cdef inline void _put32(uint8_t* p, int64_t v) noexcept:
    cdef uint32_t u = <uint32_t>(<int32_t>v)
    p[0] = <uint8_t>(u >> 24)
    p[1] = <uint8_t>(u >> 16)
    p[2] = <uint8_t>(u >> 8)
    p[3] = <uint8_t>u


cdef inline void _put64(uint8_t* p, int64_t v) noexcept:
    cdef uint64_t u = <uint64_t>v
    cdef int i
    for i in range(8):
        p[i] = <uint8_t>(u >> (56 - 8 * i))


cdef inline int64_t _get32(const uint8_t* p) noexcept:
    return <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8)
                     | <uint32_t>p[3])


cdef inline int64_t _get64(const uint8_t* p) noexcept:
    cdef uint64_t u = 0
    cdef int i
    for i in range(8):
        u = (u << 8) | p[i]
    return <int64_t>u


cdef int64_t _relative(int64_t offset, int64_t base_offset) except? -1:
    cdef int64_t rel = offset - base_offset
    if rel < 0 or rel > INT32_MAX:
        raise IndexOffsetError(f"offset {offset} is not relative to {base_offset}")
    return rel


def index_batches(batches, int64_t physical, int64_t interval, int64_t bytes_since,
                  int64_t max_ts, int64_t max_ts_offset, int64_t base_offset,
                  offset_buf, int64_t offset_entries, int64_t offset_max,
                  time_buf, int64_t time_entries, int64_t time_max):
    """Index the batches just written at ``physical``; see ``kafkapy.log._pure``."""
    cdef uint8_t[::1] ov
    cdef uint8_t[::1] tv
    cdef uint8_t* op = NULL
    cdef uint8_t* tp = NULL
    cdef int64_t ts, last_offset, prev, rel, position, last_ts, last_off
    cdef bint have_views = False
    for b in batches:
        ts = b.max_timestamp
        last_offset = b.last_offset
        if ts > max_ts:
            max_ts = ts
            max_ts_offset = last_offset
        if bytes_since > interval:
            if not have_views:
                # Only now: most appends add no entry, and need no buffer.
                if offset_max * 8 > len(offset_buf) or time_max * 12 > len(time_buf):
                    raise ValueError("index buffers are smaller than their maximum entries")
                ov = offset_buf
                tv = time_buf
                op = &ov[0] if ov.shape[0] else NULL
                tp = &tv[0] if tv.shape[0] else NULL
                have_views = True
            if offset_entries < offset_max:
                if offset_entries:
                    prev = base_offset + _get32(op + (offset_entries - 1) * 8)
                    if last_offset <= prev:
                        raise IndexOffsetError(f"offset {last_offset} is not larger than the last "
                                               f"index offset {prev}")
                rel = _relative(last_offset, base_offset)
                position = physical + b.position
                if position < 0 or position > INT32_MAX:
                    raise IndexOffsetError(f"position {position} does not fit an index entry")
                _put32(op + offset_entries * 8, rel)
                _put32(op + offset_entries * 8 + 4, position)
                offset_entries += 1
            if time_entries < time_max - 1:
                if time_entries:
                    last_ts = _get64(tp + (time_entries - 1) * 12)
                    last_off = base_offset + _get32(tp + (time_entries - 1) * 12 + 8)
                    if max_ts_offset < last_off:
                        raise IndexOffsetError(f"offset {max_ts_offset} is below the last time "
                                               f"index offset {last_off}")
                    if max_ts < last_ts:
                        raise IndexOffsetError(f"timestamp {max_ts} is below the last time index "
                                               f"timestamp {last_ts}")
                else:
                    last_ts = NO_TIMESTAMP
                if max_ts > last_ts:
                    rel = _relative(max_ts_offset, base_offset)
                    _put64(tp + time_entries * 12, max_ts)
                    _put32(tp + time_entries * 12 + 8, rel)
                    time_entries += 1
            bytes_since = 0
        bytes_since += b.size
    return bytes_since, max_ts, max_ts_offset, offset_entries, time_entries
