"""Fetches below the local log start, served from remote storage (Kafka's RemoteLogReader and
its remote offset-for-timestamp lookup), for the broker's RemoteLogManager.

The remote metadata cache changes on the event loop: every lookup in it happens there, and the
worker threads (``remote.log.reader.threads`` at a time) only read the segments it found.
"""

from __future__ import annotations

import bisect
import logging
import struct
import threading
from collections.abc import Callable, Sequence

import trio

from kafkapy.log.transaction_index import TxnIndexSearch
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.records.reader import iter_batches, iter_records
from kafkapy.tiered.metadata_cache import RemoteLogMetadataCache
from kafkapy.tiered.remote_metadata import (
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
)
from kafkapy.tiered.remote_reader import RemoteReader
from kafkapy.tiered.remote_txn import RemoteTxnIndexes, following_segments, merge_aborted
from kafkapy.tiered.replicas import TieredPartition
from kafkapy.tiered.storage import IndexType, RemoteStorageManager
from kafkapy.tiered.tracking import TrackedPartition

# Logged as the manager it serves (its lines kept their logger name when it moved out).
log = logging.getLogger("kafkapy.tiered.manager")

FINISHED = RemoteLogSegmentState.COPY_SEGMENT_FINISHED
#: A time index entry: timestamp, offset relative to the segment's base (Kafka's layout).
TIME_ENTRY = struct.Struct(">qi")


def segment_for_offset(cache: RemoteLogMetadataCache,
                       offset: int) -> tuple[RemoteLogSegmentMetadata, int] | None:
    """The readable remote segment holding ``offset`` and the leader epoch that wrote it.

    Several copies of the same offsets (a new leader re-copying) are resolved by the cache's
    per-epoch lookup; the newest listed segment is tried first."""
    for seg in reversed(cache.segments_in_state(FINISHED)):
        if not seg.start_offset <= offset <= seg.end_offset:
            continue
        epochs = [e for e, start in seg.segment_leader_epochs.items() if start <= offset]
        epoch = max(epochs) if epochs else min(seg.segment_leader_epochs)
        if cache.remote_log_segment_metadata(epoch, offset) is not None:
            return seg, epoch
    return None


class OneSegment:
    """What ``RemoteReader.read`` asks of a cache, answered with one segment resolved on the
    event loop: worker threads never walk a cache the loop may be changing."""

    def __init__(self, segment: RemoteLogSegmentMetadata) -> None:
        self.segment = segment

    def remote_log_segment_metadata(self, leader_epoch: int, offset: int) -> RemoteLogSegmentMetadata | None:
        seg = self.segment
        return seg if seg.start_offset <= offset <= seg.end_offset else None


class RemoteFetcher:
    """Reads records and timestamp lookups out of remote storage, off the event loop.

    ``lookup`` gives a hosted partition's tracking entry and caught-up metadata cache, or None
    when this broker does not (yet) know what of it is remote."""

    def __init__(self, rsm: RemoteStorageManager, reader: RemoteReader, threads: int,
                 stats_lock: threading.Lock,
                 lookup: Callable[[TieredPartition], tuple[TrackedPartition, RemoteLogMetadataCache] | None]) -> None:
        self.rsm = rsm
        self.reader = reader
        self._limiter = trio.CapacityLimiter(threads)
        self._stats_lock = stats_lock
        self._lookup = lookup
        self.txn_indexes = RemoteTxnIndexes(rsm, reader.chunks)

    async def read(self, hosted: TieredPartition, offset: int, max_bytes: int, *, min_one: bool) -> bytes | None:
        """Whole batches from ``offset`` out of remote storage (off the event loop), or None when
        no remote segment holds it (the caller answers OFFSET_OUT_OF_RANGE)."""
        got = await self._read(hosted, offset, max_bytes, min_one=min_one, read_committed=False)
        return None if got is None else got[0]

    async def read_committed(self, hosted: TieredPartition, offset: int, max_bytes: int, *,
                             min_one: bool) -> tuple[bytes, Sequence[tuple[int, int]]] | None:
        """As :meth:`read`, for a READ_COMMITTED consumer: the batches and (producer id, first
        offset) of each aborted transaction overlapping them, from the remote segments'
        transaction indexes and then the local log's (Kafka's addAbortedTransactions)."""
        return await self._read(hosted, offset, max_bytes, min_one=min_one, read_committed=True)

    async def _read(self, hosted: TieredPartition, offset: int, max_bytes: int, *, min_one: bool,
                    read_committed: bool) -> tuple[bytes, Sequence[tuple[int, int]]] | None:
        found_partition = self._lookup(hosted)
        if found_partition is None:
            return None
        tracked, cache = found_partition

        # The lookup runs here, where the cache changes; the thread sees only its answer.
        found = segment_for_offset(cache, offset)
        if found is None:
            return None
        seg, epoch = found
        plog = hosted.log
        chain = following_segments(cache, seg, plog.local_log_start_offset) if read_committed else []

        def work() -> tuple[bytes, int, TxnIndexSearch] | None:
            got = self.reader.read(OneSegment(seg), epoch, offset, max_bytes, min_one_batch=min_one)
            if got is None:
                return None
            if not read_committed or not got.records:
                return got.records, got.next_offset, TxnIndexSearch([], True)
            return got.records, got.next_offset, self.txn_indexes.collect(chain, offset, got.next_offset)

        try:
            result = await trio.to_thread.run_sync(work, limiter=self._limiter)
            if result is None:
                data = None
                aborted: Sequence[tuple[int, int]] = ()
            else:
                data, upper, remote = result
                # The upper bound lies past the remote segments read: the local log goes on.
                local = [] if remote.complete else plog.collect_aborted_transactions(offset, upper)
                aborted = merge_aborted(remote.aborted, local)
        except Exception as exc:
            with self._stats_lock:
                tracked.stats.remote_fetch_errors += 1
            log.warning("%s: remote read at offset %d failed: %s", tracked.tip, offset, exc)
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"remote read failed: {exc}") from exc
        with self._stats_lock:
            tracked.stats.remote_fetch_requests += 1
            tracked.stats.remote_fetch_bytes += len(data or b"")
        return None if data is None else (data, aborted)

    async def offset_for_timestamp(self, hosted: TieredPartition, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first remote record with timestamp >= ``timestamp``, or
        None when no remote record is that late (then the local log answers)."""
        found_partition = self._lookup(hosted)
        if found_partition is None:
            return None
        _tracked, cache = found_partition
        local_start = hosted.log.local_log_start_offset
        # Records below the whole log's start (DeleteRecords) are gone even while their segment
        # is still remote, as in Kafka's remote timestamp lookup.
        start = hosted.log.log_start_offset
        # Listed here, where the cache changes; the thread reads only these segments.
        candidates = [seg for seg in cache.segments_in_state(FINISHED)
                      if seg.max_timestamp_ms >= timestamp and start <= seg.end_offset
                      and seg.start_offset < local_start]

        def work() -> tuple[int, int] | None:
            for seg in candidates:
                offset = max(start, self._time_index_floor(seg, timestamp))
                while offset <= seg.end_offset:
                    epochs = [e for e, start in seg.segment_leader_epochs.items() if start <= offset]
                    epoch = max(epochs) if epochs else min(seg.segment_leader_epochs)
                    got = self.reader.read(OneSegment(seg), epoch, offset, 1 << 20, min_one_batch=True)
                    if got is None or not got.records:
                        break
                    for header, view in iter_batches(got.records):
                        if header.max_timestamp >= timestamp:
                            for rec in iter_records(view):
                                if rec.offset >= offset and rec.timestamp >= timestamp:
                                    return rec.offset, rec.timestamp
                        offset = header.last_offset + 1
            return None

        try:
            return await trio.to_thread.run_sync(work, limiter=self._limiter)
        except Exception as exc:
            log.warning("%s: remote timestamp lookup failed: %s", hosted.topic, exc)
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"remote timestamp lookup failed: {exc}") from exc

    def _time_index_floor(self, seg: RemoteLogSegmentMetadata, timestamp: int) -> int:
        """Where to start looking for ``timestamp`` in a remote segment: the offset of the last
        time index entry older than it (Kafka's TimeIndex.lookup), else the segment's start.
        The index is fetched once and kept in the chunk cache; on a worker thread."""
        sid = seg.remote_log_segment_id
        key = (sid, "timeindex")
        index = self.reader.chunks.get(key)
        if index is None:
            with self.rsm.fetch_index(sid, IndexType.TIMESTAMP) as f:
                index = f.read()
            n = len(index) // TIME_ENTRY.size
            # A zero-filled tail (a preallocated index) is not entries.
            while n > 1 and TIME_ENTRY.unpack_from(index, (n - 1) * TIME_ENTRY.size) == (0, 0):
                n -= 1
            index = index[:n * TIME_ENTRY.size]
            self.reader.chunks.put(key, index)
        entries = len(index) // TIME_ENTRY.size
        i = bisect.bisect_left(range(entries), timestamp,
                               key=lambda j: TIME_ENTRY.unpack_from(index, j * TIME_ENTRY.size)[0]) - 1
        if i < 0:
            return seg.start_offset
        relative: int = TIME_ENTRY.unpack_from(index, i * TIME_ENTRY.size)[1]
        return max(seg.start_offset, seg.start_offset + relative)
