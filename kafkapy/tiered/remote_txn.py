"""Aborted transactions for READ_COMMITTED fetches served from remote storage (Kafka's
RemoteLogManager.collectAbortedTransactions, with the TRANSACTION entries of its RemoteIndexCache).

Each remote segment carries the ``.txnindex`` it had locally (uploaded with it when the segment
had one; Kafka's optional ``transactionIndex``). A read_committed fetch answered from a remote
segment lists the aborted transactions overlapping [fetch offset, upper bound): searched in that
segment's index, then in the indexes of the remote segments after it, then in the local log's
segments, until an entry's last stable offset reaches the upper bound (nothing later can overlap).

Indexes are fetched once and kept in the broker's chunk cache (an absent one as empty bytes, so a
segment without a transaction index costs one remote call, not one per fetch). Fetching and
searching run on worker threads; :func:`following_segments` reads the metadata cache and so runs on
the event loop.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterable, Sequence

from kafkapy.log.transaction_index import AbortedTxn, TxnIndexSearch, parse_entries, search_entries
from kafkapy.tiered.metadata_cache import RemoteLogMetadataCache
from kafkapy.tiered.remote_metadata import RemoteLogSegmentMetadata, RemoteLogSegmentState
from kafkapy.tiered.remote_reader import ChunkCache
from kafkapy.tiered.storage import IndexType, RemoteResourceNotFoundError, RemoteStorageManager

__all__ = ["RemoteTxnIndexes", "following_segments", "merge_aborted"]

log = logging.getLogger(__name__)

class RemoteTxnIndexes:
    """Remote segments' transaction indexes, fetched once through the shared chunk cache."""

    def __init__(self, rsm: RemoteStorageManager, chunks: ChunkCache) -> None:
        self.rsm = rsm
        self.chunks = chunks

    def entries(self, segment: RemoteLogSegmentMetadata) -> list[AbortedTxn]:
        """The segment's aborted transactions (none when it was uploaded without an index)."""
        sid = segment.remote_log_segment_id
        key = (sid, "txnindex")
        data = self.chunks.get(key)
        if data is None:
            try:
                with self.rsm.fetch_index(sid, IndexType.TRANSACTION) as f:
                    data = f.read()
            except RemoteResourceNotFoundError:
                # Kafka's RemoteIndexCache does the same: no index object means no aborted
                # transactions in the segment.
                data = b""
            self.chunks.put(key, data)
        return parse_entries(data, f"transaction index of remote segment {sid}")

    def collect(self, segments: Sequence[RemoteLogSegmentMetadata], fetch_offset: int,
                upper_bound_offset: int) -> TxnIndexSearch:
        """The aborted transactions overlapping the range from ``segments`` (the one read, then
        those after it, in offset order), stopping once a search is complete."""
        found: list[AbortedTxn] = []
        for seg in segments:
            result = search_entries(self.entries(seg), fetch_offset, upper_bound_offset)
            found.extend(result.aborted)
            if result.complete:
                return TxnIndexSearch(found, True)
        return TxnIndexSearch(found, False)


def following_segments(cache: RemoteLogMetadataCache, first: RemoteLogSegmentMetadata,
                       stop_offset: int) -> list[RemoteLogSegmentMetadata]:
    """``first`` and the readable remote segments after it, each holding the offset after the
    previous one's end, until one reaches ``stop_offset`` (the local log start: from there the
    local segments answer) or the remote log has no segment for the next offset.

    Of several copies of the same offsets (a new leader re-copying) the cache's per-epoch lookup
    decides, newest listed first, as ``remote_fetch.segment_for_offset`` does; one sorted listing
    serves the whole walk."""
    listed = cache.segments_in_state(RemoteLogSegmentState.COPY_SEGMENT_FINISHED)
    starts = [s.start_offset for s in listed]
    out = [first]
    offset = first.end_offset + 1
    while offset < stop_offset:
        nxt = None
        for i in range(bisect.bisect_right(starts, offset) - 1, -1, -1):
            seg = listed[i]
            if seg.end_offset < offset:
                continue
            epochs = [e for e, start in seg.segment_leader_epochs.items() if start <= offset]
            epoch = max(epochs) if epochs else min(seg.segment_leader_epochs)
            if cache.remote_log_segment_metadata(epoch, offset) is not None:
                nxt = seg
                break
        if nxt is None:
            break
        out.append(nxt)
        offset = nxt.end_offset + 1
    return out


def merge_aborted(*found: Iterable[AbortedTxn]) -> list[tuple[int, int]]:
    """(producer id, first offset) of each aborted transaction, first seen first, once: a
    segment both remote and still local lists the same entries twice (Kafka keeps a set)."""
    seen: dict[tuple[int, int], None] = {}
    for txns in found:
        for txn in txns:
            seen.setdefault((txn.producer_id, txn.first_offset), None)
    return list(seen)
