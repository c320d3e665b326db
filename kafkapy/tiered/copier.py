"""The leader's copy step for one partition: closed, committed segments into remote storage.

Kafka's RemoteLogManager copy task, one pass: find the highest offset already remote along this
log's leader-epoch lineage, pick the segments :func:`tiering_rules.copy_candidates` allows, and for
each one announce the copy (COPY_SEGMENT_STARTED), upload it (log, indexes, the producer snapshot
taken when the next segment started, and the leader epochs covering it), then announce it done
(COPY_SEGMENT_FINISHED). Each copy gets a fresh segment id: a copy interrupted by a crash stays
STARTED and invisible to readers, and the next pass (on this or a new leader) uploads the segment
again under a new id, so a segment becomes visible exactly once.

Blocking (file reads, uploads): the broker runs it off its event loop. Metadata events go through
``publish``, which in the broker writes them to ``__remote_log_metadata`` and applies them to the
partition's cache once they are durable.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kafkapy.log import files
from kafkapy.log.leader_epoch import EpochEntry
from kafkapy.log.partition_log import PartitionLog
from kafkapy.tiered.metadata_cache import RemoteLogMetadataCache
from kafkapy.tiered.remote_metadata import (
    RemoteLogMetadata,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    TopicIdPartition,
)
from kafkapy.tiered.storage import LogSegmentData, RemoteStorageManager
from kafkapy.tiered.tiering_rules import LocalSegment, copy_candidates

log = logging.getLogger(__name__)


def highest_copied_offset(cache: RemoteLogMetadataCache, epochs: Sequence[EpochEntry]) -> int:
    """The highest offset in remote storage along this log's epochs (-1 when none), looked up
    from the newest epoch back, as Kafka does: copies made under epochs this log does not have
    (a diverged former leader's) do not count."""
    for entry in reversed(epochs):
        found = cache.highest_offset_for_epoch(entry.epoch)
        if found is not None:
            return found
    return -1


def segment_epochs(epochs: Sequence[EpochEntry], start: int, end: int) -> dict[int, int]:
    """The leader epochs covering offsets [start, end] as {epoch: first offset in the segment}."""
    out: dict[int, int] = {}
    for i, entry in enumerate(epochs):
        next_start = epochs[i + 1].start_offset if i + 1 < len(epochs) else end + 1
        if next_start <= start or entry.start_offset > end:
            continue
        out[entry.epoch] = max(entry.start_offset, start)
    return out


def epoch_checkpoint_bytes(epochs: dict[int, int]) -> bytes:
    """The leader-epoch-checkpoint file format (version 0, count, "epoch offset" lines)."""
    lines = ["0", str(len(epochs))] + [f"{e} {o}" for e, o in sorted(epochs.items())]
    return ("\n".join(lines) + "\n").encode()


@dataclass(frozen=True)
class CopyResult:
    """What one pass copied: the segments' metadata as they ended (FINISHED)."""

    copied: tuple[RemoteLogSegmentMetadata, ...]


def copy_pass(plog: PartitionLog, partition: TopicIdPartition, rsm: RemoteStorageManager,
              cache: RemoteLogMetadataCache, publish: Callable[[RemoteLogMetadata], None], *,
              broker_id: int, now_ms: Callable[[], int], local_log_start: int | None = None,
              last_stable_offset: int | None = None) -> CopyResult:
    """Copy every segment that may go to remote storage now; see the module docstring."""
    epochs = plog.leader_epoch_cache.entries
    copied_up_to = highest_copied_offset(cache, epochs)
    local = [LocalSegment(s.base_offset, nxt.base_offset if nxt is not None else plog.log_end_offset,
                          s.size, s.largest_timestamp)
             for s, nxt in zip(plog.segments, [*plog.segments[1:], None])]
    lso = plog.last_stable_offset if last_stable_offset is None else last_stable_offset
    start = plog.local_log_start_offset if local_log_start is None else local_log_start
    by_base = {s.base_offset: s for s in plog.segments}
    done: list[RemoteLogSegmentMetadata] = []
    for candidate in copy_candidates(local, copied_up_to, start, lso):
        seg = by_base[candidate.base_offset]
        end = candidate.next_offset - 1
        seg_epochs = segment_epochs(epochs, candidate.base_offset, end)
        if not seg_epochs:
            log.warning("%s: no leader epoch covers [%d, %d]; not copying", partition,
                        candidate.base_offset, end)
            break
        sid = RemoteLogSegmentId.generate_new(partition)
        started = RemoteLogSegmentMetadata(
            sid, candidate.base_offset, end, candidate.largest_timestamp, broker_id, now_ms(),
            candidate.size, seg_epochs, RemoteLogSegmentState.COPY_SEGMENT_STARTED)
        publish(started)
        txn = files.txn_index_file(plog.dir, candidate.base_offset)
        rsm.copy_log_segment_data(sid, LogSegmentData(
            log_segment=seg.log_path,
            offset_index=seg.offset_index.path,
            time_index=seg.time_index.path,
            transaction_index=txn if os.path.exists(txn) else None,
            producer_snapshot=files.snapshot_file(plog.dir, candidate.next_offset),
            leader_epoch_index=epoch_checkpoint_bytes(seg_epochs),
        ))
        update = RemoteLogSegmentMetadataUpdate(sid, now_ms(), RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
                                                broker_id)
        publish(update)
        done.append(started.create_with_updates(update))
        log.info("%s: copied segment [%d, %d] (%d bytes) to remote storage as %s", partition,
                 candidate.base_offset, end, candidate.size, sid.id)
    return CopyResult(tuple(done))
