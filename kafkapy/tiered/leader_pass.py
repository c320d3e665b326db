"""One leader pass of the RemoteLogManager over a partition, on a worker thread: the copy task
(Kafka's RLMCopyTask: ``copier``), then the expiration task (RLMExpirationTask: ``expiry``),
with the partition's counters and the local log told what is remote now."""

from __future__ import annotations

import threading
from collections.abc import Callable

import trio

from kafkapy.tiered.copier import copy_pass, highest_copied_offset
from kafkapy.tiered.expiry import expire_pass
from kafkapy.tiered.metadata_cache import RemoteLogMetadataCache
from kafkapy.tiered.remote_metadata import RemoteLogMetadata
from kafkapy.tiered.remote_reader import ChunkCache
from kafkapy.tiered.replicas import TieredPartition
from kafkapy.tiered.storage import RemoteStorageManager
from kafkapy.tiered.tracking import TrackedPartition


def copy_then_expire(tracked: TrackedPartition, hosted: TieredPartition, cache: RemoteLogMetadataCache,
                     publish: Callable[[RemoteLogMetadata], None], *, rsm: RemoteStorageManager,
                     broker_id: int, now_ms: Callable[[], int], chunks: ChunkCache,
                     stats_lock: threading.Lock) -> None:
    """Copy, then expire; on a worker thread. ``publish`` appends an event durably (it fails
    once this broker stopped leading the partition)."""
    plog = hosted.log
    config = plog.config
    stats = tracked.stats
    if not config.remote_log_copy_disable:
        result = copy_pass(plog, tracked.tip, rsm, cache, publish, broker_id=broker_id,
                           now_ms=now_ms, local_log_start=plog.local_log_start_offset)
        with stats_lock:
            stats.copied_segments += len(result.copied)
            stats.copied_bytes += sum(s.segment_size_in_bytes for s in result.copied)
    highest = highest_copied_offset(cache, plog.leader_epoch_cache.entries)
    plog.update_remote_state(highest_offset=highest)
    segments = plog.segments
    lag = [s for s in segments[:-1] if s.base_offset > highest]
    local_only = sum(s.size for s in segments if s.base_offset > highest)
    with stats_lock:
        stats.copy_lag_segments = len(lag)
        stats.copy_lag_bytes = sum(s.size for s in lag)
    if not config.delete:
        return
    expired = expire_pass(cache, rsm, publish, broker_id=broker_id, now_ms=now_ms,
                          retention_ms=config.retention_ms, retention_bytes=config.retention_bytes,
                          local_only_bytes=local_only, log_start_offset=hosted.log.log_start_offset)
    for seg in expired.deleted:
        chunks.forget(seg.remote_log_segment_id)
    with stats_lock:
        stats.expired_segments += len(expired.deleted)
        stats.expired_bytes += sum(s.segment_size_in_bytes for s in expired.deleted)
    new_start = expired.new_log_start_offset
    if new_start is not None and new_start > plog.local_log_start_offset:
        # Total retention reached data that is still local too: the local log follows.
        trio.from_thread.run_sync(lambda: plog.maybe_increment_log_start_offset(
            min(new_start, plog.high_watermark)))
