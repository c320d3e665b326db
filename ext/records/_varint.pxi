# Varint reading shared by the Cython record modules (textually included: they are separate
# extensions, and these must inline into their nogil loops).

cdef enum:
    VAR_EOF = -1
    VAR_TOO_LONG = -2


cdef inline Py_ssize_t rd_var(const uint8_t* b, Py_ssize_t p, Py_ssize_t end, int max_bytes,
                              uint64_t* raw) noexcept nogil:
    """Decode one varint's raw (still zigzagged) bits; returns the new position or VAR_*."""
    cdef uint64_t r = 0
    cdef int shift = 0
    cdef int i
    cdef uint8_t c
    for i in range(max_bytes):
        if p >= end:
            return VAR_EOF
        c = b[p]
        p += 1
        # The last allowed byte keeps all its bits; the caller's width truncates them, as Java's
        # fixed-width shifts do.
        if i == max_bytes - 1:
            r |= (<uint64_t>c) << shift
        else:
            r |= (<uint64_t>(c & 0x7F)) << shift
        if (c & 0x80) == 0:
            raw[0] = r
            return p
        shift += 7
    return VAR_TOO_LONG


cdef inline int32_t zz32(uint64_t raw) noexcept nogil:
    cdef uint32_t r = <uint32_t>raw
    return <int32_t>((r >> 1) ^ (<uint32_t>0 - (r & 1)))


cdef inline int64_t zz64(uint64_t r) noexcept nogil:
    return <int64_t>((r >> 1) ^ (<uint64_t>0 - (r & 1)))
