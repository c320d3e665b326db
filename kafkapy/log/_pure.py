"""Pure-Python log-append indexing: the twin of ``ext/log/_fast.pyx``.

After an append's bytes are written, :func:`index_batches` walks the appended batches once and
does what Kafka's ``LogSegment.append`` does per batch: track the segment's largest timestamp (and
the last offset of the batch that carried it), and every time more than ``index.interval.bytes``
have accumulated since the last index entry, add an offset index entry for the batch (its last
offset relative to the segment base, and its file position) and, when the largest timestamp grew
past the time index's last entry, a time index entry (largest timestamp, relative offset of its
batch). Entries go straight into the mmap'ed index files, in Kafka's big-endian layouts
(``.index``: int32 relative offset, int32 position; ``.timeindex``: int64 timestamp, int32
relative offset). A full index gets no more entries (lookups then scan further); the time index
keeps one slot free for the entry written when the segment becomes inactive.

Both twins take and return the same values and raise the same ``IndexOffsetError`` messages.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from kafkapy.log.index import IndexOffsetError

__all__ = ["index_batches"]

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_INT32_MAX = 0x7FFFFFFF
_NO_TIMESTAMP = -1


def index_batches(batches: Sequence[Any], physical: int, interval: int, bytes_since: int,
                  max_ts: int, max_ts_offset: int, base_offset: int,
                  offset_buf: Any, offset_entries: int, offset_max: int,
                  time_buf: Any, time_entries: int, time_max: int
                  ) -> tuple[int, int, int, int, int]:
    """Index the batches just written at ``physical`` (the segment size before the append).

    ``batches`` have ``position`` (relative to ``physical``), ``size``, ``last_offset`` and
    ``max_timestamp``. ``bytes_since`` is the segment's bytes since its last index entry,
    ``max_ts``/``max_ts_offset`` its largest timestamp so far and that batch's last offset.
    ``offset_buf``/``time_buf`` are the writable index mappings holding ``*_entries`` entries of
    at most ``*_max``. Returns the new (bytes_since, max_ts, max_ts_offset, offset_entries,
    time_entries).
    """
    checked = False
    for b in batches:
        ts = b.max_timestamp
        last_offset = b.last_offset
        if ts > max_ts:
            max_ts = ts
            max_ts_offset = last_offset
        if bytes_since > interval:
            if not checked:
                if offset_max * 8 > len(offset_buf) or time_max * 12 > len(time_buf):
                    raise ValueError("index buffers are smaller than their maximum entries")
                checked = True
            if offset_entries < offset_max:
                if offset_entries:
                    prev = base_offset + _OFFSET_ENTRY.unpack_from(
                        offset_buf, (offset_entries - 1) * 8)[0]
                    if last_offset <= prev:
                        raise IndexOffsetError(f"offset {last_offset} is not larger than the last "
                                               f"index offset {prev}")
                rel = _relative(last_offset, base_offset)
                position = physical + b.position
                if not 0 <= position <= _INT32_MAX:
                    raise IndexOffsetError(f"position {position} does not fit an index entry")
                _OFFSET_ENTRY.pack_into(offset_buf, offset_entries * 8, rel, position)
                offset_entries += 1
            if time_entries < time_max - 1:
                if time_entries:
                    last_ts, last_rel = _TIME_ENTRY.unpack_from(time_buf, (time_entries - 1) * 12)
                    last_off = base_offset + last_rel
                    if max_ts_offset < last_off:
                        raise IndexOffsetError(f"offset {max_ts_offset} is below the last time "
                                               f"index offset {last_off}")
                    if max_ts < last_ts:
                        raise IndexOffsetError(f"timestamp {max_ts} is below the last time index "
                                               f"timestamp {last_ts}")
                else:
                    last_ts = _NO_TIMESTAMP
                if max_ts > last_ts:
                    _TIME_ENTRY.pack_into(time_buf, time_entries * 12, max_ts,
                                          _relative(max_ts_offset, base_offset))
                    time_entries += 1
            bytes_since = 0
        bytes_since += b.size
    return bytes_since, max_ts, max_ts_offset, offset_entries, time_entries


def _relative(offset: int, base_offset: int) -> int:
    rel = offset - base_offset
    if not 0 <= rel <= _INT32_MAX:
        raise IndexOffsetError(f"offset {offset} is not relative to {base_offset}")
    return rel
