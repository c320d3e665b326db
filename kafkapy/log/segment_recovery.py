"""Checking and recovering a segment's ``.log`` file (Kafka's LogSegment.recover and the
loader's sanity checks), as pure scans over its bytes.

:func:`check_tail` verifies what a clean close leaves at the end of the file; :func:`scan_valid`
walks the file from the start and stops at the first batch recovery would not keep, reporting
each valid batch so the segment can rebuild its indexes in the same pass. Why a batch is
invalid (:func:`invalid_batch`) and roughly which offsets a cut drops (:func:`probe_last_offset`)
feed the loader's one WARN line per cut. Nothing here changes a file or a segment.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable
from typing import NamedTuple

from kafkapy.records import format as fmt

__all__ = [
    "RecoveryResult", "check_tail", "invalid_batch", "probe_last_offset", "scan_file", "scan_valid",
]

_INT32_MAX = 0x7FFFFFFF


class RecoveryResult(NamedTuple):
    """What ``LogSegment.recover`` found: bytes kept and cut, and why."""

    valid_bytes: int
    truncated_bytes: int
    next_offset: int  # the offset after the last batch kept
    reason: str  # "" when nothing was cut
    # The last offset the cut bytes seem to hold (headers walked without trusting them), or None.
    dropped_last_offset: int | None


def check_tail(tail: bytes, *, start: int, base_offset: int,
               entry_offset: int | None) -> tuple[str | None, int]:
    """Check the batches of ``tail`` (the file from byte ``start``, where the offset index's
    last entry, naming ``entry_offset``, points): each whole, magic 2, CRC-valid, in offset
    order, ending exactly at the end. Returns (what is wrong or None, the offset after the
    last batch)."""
    pos, next_offset = 0, base_offset
    while pos < len(tail):
        problem = invalid_batch(tail, pos, len(tail), next_offset, base_offset)
        if problem is not None:
            return f"{problem} at byte {start + pos}", next_offset
        h = fmt.parse_header(tail, pos)
        if entry_offset is not None and pos == 0 and h.last_offset != entry_offset:
            return (f"the offset index's last entry names offset {entry_offset}, the batch "
                    f"at byte {start} ends at {h.last_offset}"), next_offset
        next_offset = h.next_offset
        pos += h.batch_length + fmt.LOG_OVERHEAD
    return None, next_offset


def scan_file(fd: int, file_size: int, base_offset: int,
              on_batch: Callable[[fmt.BatchHeader, int, int], None]) -> RecoveryResult:
    """:func:`scan_valid` over the first ``file_size`` bytes of the open file ``fd`` (mapped
    read-only: recovery reads every byte once)."""
    if file_size == 0:
        return RecoveryResult(0, 0, base_offset, "", None)
    with mmap.mmap(fd, file_size, access=mmap.ACCESS_READ) as mm:
        view = memoryview(mm)
        try:
            return scan_valid(view, file_size, base_offset, on_batch)
        finally:
            view.release()


def scan_valid(view: memoryview, file_size: int, base_offset: int,
               on_batch: Callable[[fmt.BatchHeader, int, int], None]) -> RecoveryResult:
    """Walk the batches from byte 0 while each is one recovery keeps: its header parses, its
    size fits the file, its magic is 2, its CRC matches and its offsets are in the segment's
    range and follow the previous batch. ``on_batch(header, position, size)`` sees each."""
    valid = 0
    next_offset = base_offset
    while file_size - valid >= fmt.HEADER_SIZE:
        h = fmt.parse_header(view, valid)
        size = h.batch_length + fmt.LOG_OVERHEAD
        if (size < fmt.HEADER_SIZE or valid + size > file_size
                or h.magic != fmt.CURRENT_MAGIC
                or h.base_offset < next_offset
                or h.last_offset_delta < -1
                or not 0 <= h.last_offset - base_offset <= _INT32_MAX
                or fmt.compute_crc(view, valid, size) != h.crc):
            break
        on_batch(h, valid, size)
        next_offset = h.next_offset
        valid += size
    if valid == file_size:
        return RecoveryResult(valid, 0, next_offset, "", None)
    reason = invalid_batch(view, valid, file_size, next_offset, base_offset) or "invalid batch"
    return RecoveryResult(valid, file_size - valid, next_offset, reason,
                          probe_last_offset(view, valid, file_size, next_offset))


def _all_zero(buf: bytes | memoryview, start: int, end: int) -> bool:
    chunk = 1 << 20
    for pos in range(start, end, chunk):
        piece = bytes(buf[pos:min(end, pos + chunk)])
        if piece.count(0) != len(piece):
            return False
    return True


def invalid_batch(buf: bytes | memoryview, pos: int, end: int, next_offset: int,
                   base_offset: int) -> str | None:
    """Why the batch at ``pos`` is not one recovery would keep, or None when it is."""
    left = end - pos
    if left < fmt.HEADER_SIZE:
        if _all_zero(buf, pos, end):
            return f"zero-filled tail of {left} bytes"
        return f"incomplete batch header ({left} bytes, torn write)"
    h = fmt.parse_header(buf, pos)
    size = h.batch_length + fmt.LOG_OVERHEAD
    if size < fmt.HEADER_SIZE:
        if _all_zero(buf, pos, end):
            return f"zero-filled tail of {left} bytes"
        return f"batch size {size} is below the minimum {fmt.HEADER_SIZE}"
    if size > left:
        return f"incomplete batch ({size} bytes, {left} in the file, torn write)"
    if h.magic != fmt.CURRENT_MAGIC:
        return f"unsupported magic {h.magic}"
    if h.base_offset < next_offset:
        return f"batch offset {h.base_offset} below the expected {next_offset}"
    if h.last_offset_delta < -1 or not 0 <= h.last_offset - base_offset <= _INT32_MAX:
        return f"batch offsets {h.base_offset}..{h.last_offset} out of the segment's range"
    crc = fmt.compute_crc(buf, pos, size)
    if crc != h.crc:
        return f"CRC mismatch (stored {h.crc:#010x}, computed {crc:#010x})"
    return None


def probe_last_offset(buf: bytes | memoryview, pos: int, end: int, floor: int) -> int | None:
    """Best guess of the last offset held in [pos, end), so a log line can say which offsets a
    cut drops: walk the headers whose sizes fit, without trusting their CRCs. When the header
    at ``pos`` is itself damaged, first look (within _RESYNC_BYTES) for the next batch that is
    whole and CRC-valid."""
    last = None
    if not _plausible(buf, pos, end, floor):
        pos = _resync(buf, pos + 1, end, floor)
    while end - pos >= fmt.HEADER_SIZE and _plausible(buf, pos, end, floor):
        h = fmt.parse_header(buf, pos)
        last = floor = h.last_offset
        pos += h.batch_length + fmt.LOG_OVERHEAD
    return last


_RESYNC_BYTES = 1 << 20
_MAGIC_AT = 16  # baseOffset(8) + batchLength(4) + partitionLeaderEpoch(4)


def _plausible(buf: bytes | memoryview, pos: int, end: int, floor: int) -> bool:
    if end - pos < fmt.HEADER_SIZE:
        return False
    h = fmt.parse_header(buf, pos)
    size = h.batch_length + fmt.LOG_OVERHEAD
    return (fmt.HEADER_SIZE <= size <= end - pos and h.magic == fmt.CURRENT_MAGIC
            and h.last_offset >= floor)


def _resync(buf: bytes | memoryview, pos: int, end: int, floor: int) -> int:
    window = bytes(buf[pos:min(end, pos + _RESYNC_BYTES + fmt.HEADER_SIZE)])
    i = window.find(b"\x02", _MAGIC_AT)
    while i >= 0:
        start = i - _MAGIC_AT
        if _plausible(window, start, len(window), floor):
            size = fmt.parse_header(window, start).batch_length + fmt.LOG_OVERHEAD
            if fmt.compute_crc(window, start, size) == fmt.parse_header(window, start).crc:
                return pos + start
        i = window.find(b"\x02", i + 1)
    return end
