"""Serve a fetch below the local log start from remote storage (Kafka's RemoteLogReader).

The partition's metadata cache names the remote segment holding the fetch offset under its
leader epoch; that segment's offset index (fetched once, then cached) gives the byte position of
the nearest indexed batch at or before the offset; the log bytes from there are read in fixed-size
chunks, also cached, and whole batches are returned from the first one holding the offset, up to
``max_bytes`` (at least one batch, as a local fetch does). Consumers see the same batches a local
read of that segment would give them.

Blocking (remote storage calls): the broker runs it off its event loop.
"""

from __future__ import annotations

import bisect
import struct
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Protocol

from kafkapy.records import format as fmt
from kafkapy.tiered.remote_metadata import RemoteLogSegmentId, RemoteLogSegmentMetadata
from kafkapy.tiered.storage import IndexType, RemoteStorageManager

_ENTRY = struct.Struct(">ii")  # offset index entry: relative offset, position


class ChunkCache:
    """A bounded LRU of bytes fetched from remote storage (indexes whole, log data in chunks),
    shared by a broker's fetches; thread-safe, as remote reads run on worker threads."""

    def __init__(self, max_bytes: int = 64 << 20, chunk_size: int = 1 << 20) -> None:
        self.max_bytes = max_bytes
        self.chunk_size = chunk_size
        self._items: OrderedDict[tuple[object, ...], bytes] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: tuple[object, ...]) -> bytes | None:
        with self._lock:
            value = self._items.get(key)
            if value is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return value

    def put(self, key: tuple[object, ...], value: bytes) -> None:
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._size -= len(old)
            self._items[key] = value
            self._size += len(value)
            while self._size > self.max_bytes and len(self._items) > 1:
                _, dropped = self._items.popitem(last=False)
                self._size -= len(dropped)

    def forget(self, segment: RemoteLogSegmentId) -> None:
        """Drop everything of a deleted segment."""
        with self._lock:
            for key in [k for k in self._items if k[0] == segment]:
                self._size -= len(self._items.pop(key))

    @property
    def size(self) -> int:
        return self._size


@dataclass(frozen=True)
class RemoteRead:
    """Whole batches from one remote segment, starting with the one holding the fetch offset."""

    records: bytes
    segment: RemoteLogSegmentMetadata
    # The offset just past the returned batches: the next batch's base offset when the read
    # stopped inside the segment, else the segment's end + 1 (a read_committed fetch's upper
    # bound for the aborted transactions it lists).
    next_offset: int = -1


class SegmentLookup(Protocol):
    """What :meth:`RemoteReader.read` asks of a partition's remote metadata: a
    ``RemoteLogMetadataCache``, or one segment resolved beforehand (``remote_fetch.OneSegment``)."""

    def remote_log_segment_metadata(self, leader_epoch: int, offset: int) -> RemoteLogSegmentMetadata | None: ...


class RemoteReader:
    """Reads of one broker's remote segments through a shared :class:`ChunkCache`."""

    def __init__(self, rsm: RemoteStorageManager, chunks: ChunkCache | None = None) -> None:
        self.rsm = rsm
        self.chunks = chunks or ChunkCache()

    def read(self, cache: SegmentLookup, leader_epoch: int, offset: int, max_bytes: int,
             *, min_one_batch: bool = True) -> RemoteRead | None:
        """Batches from ``offset`` (under ``leader_epoch``) up to ``max_bytes``; None when no
        remote segment holds the offset (the caller answers OFFSET_OUT_OF_RANGE)."""
        meta = cache.remote_log_segment_metadata(leader_epoch, offset)
        if meta is None:
            return None
        sid = meta.remote_log_segment_id
        size = meta.segment_size_in_bytes
        pos = self._start_position(sid, meta.start_offset, offset)
        out = bytearray()
        next_offset = meta.end_offset + 1
        while pos + fmt.HEADER_SIZE <= size:
            header = fmt.parse_header(self._bytes(sid, size, pos, fmt.HEADER_SIZE))
            batch_size = header.size
            if pos + batch_size > size:
                break  # a torn tail cannot be in a copied segment; stop rather than guess
            if header.last_offset >= offset:
                if out and len(out) + batch_size > max_bytes:
                    next_offset = header.base_offset
                    break
                if not out and batch_size > max_bytes and not min_one_batch:
                    next_offset = header.base_offset
                    break
                out += self._bytes(sid, size, pos, batch_size)
            pos += batch_size
        return RemoteRead(bytes(out), meta, next_offset)

    def _start_position(self, sid: RemoteLogSegmentId, base_offset: int, offset: int) -> int:
        key = (sid, "index")
        index = self.chunks.get(key)
        if index is None:
            with self.rsm.fetch_index(sid, IndexType.OFFSET) as f:
                index = f.read()
            # Entries past the last written one are zero-filled (a preallocated index).
            n = len(index) // _ENTRY.size
            count = n
            for i in range(1, n):
                if _ENTRY.unpack_from(index, i * _ENTRY.size) == (0, 0):
                    count = i
                    break
            index = index[:count * _ENTRY.size]
            self.chunks.put(key, index)
        # Binary search over the entries in place: no per-read list of the whole index.
        i = bisect.bisect_right(range(len(index) // _ENTRY.size), offset - base_offset,
                                key=lambda j: _ENTRY.unpack_from(index, j * _ENTRY.size)[0]) - 1
        return _ENTRY.unpack_from(index, i * _ENTRY.size)[1] if i >= 0 else 0

    def _bytes(self, sid: RemoteLogSegmentId, size: int, pos: int, n: int) -> bytes:
        """``n`` log bytes at ``pos``, assembled from cached chunks."""
        chunk = self.chunks.chunk_size
        out = bytearray()
        while n > 0:
            index, within = divmod(pos, chunk)
            data = self._chunk(sid, size, index)
            piece = data[within:within + n]
            if not piece:
                raise EOFError(f"remote segment {sid} ends before byte {pos}")
            out += piece
            pos += len(piece)
            n -= len(piece)
        return bytes(out)

    def _chunk(self, sid: RemoteLogSegmentId, size: int, index: int) -> bytes:
        key = (sid, "log", index)
        data = self.chunks.get(key)
        if data is None:
            start = index * self.chunks.chunk_size
            end = min(size, start + self.chunks.chunk_size) - 1
            with self.rsm.fetch_log_segment(sid, start, end) as f:
                data = f.read()
            self.chunks.put(key, data)
        return data
