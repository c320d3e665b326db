"""The leader's remote expiration pass for one partition (Kafka's RLM expiration task).

Total retention (``retention.ms`` / ``retention.bytes`` over remote + local-only data, and the log
start offset moved by DeleteRecords) picks remote segments, oldest first
(:func:`tiering_rules.remote_segments_to_delete`); each one is announced DELETE_SEGMENT_STARTED,
removed from remote storage, and announced DELETE_SEGMENT_FINISHED. Segments whose copy never
finished (COPY_SEGMENT_STARTED, from a crash mid-upload) and are older than the newest finished
copy of the same offsets are cleaned up the same way, so an interrupted upload leaves no objects
behind for long. A crash between the steps leaves DELETE_SEGMENT_STARTED, which the next pass
finishes (remote deletion is idempotent).

Blocking (remote storage calls): the broker runs it off its event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from kafkapy.tiered.metadata_cache import RemoteLogMetadataCache
from kafkapy.tiered.remote_metadata import (
    RemoteLogMetadata,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
)
from kafkapy.tiered.storage import RemoteStorageManager
from kafkapy.tiered.tiering_rules import remote_segments_to_delete

log = logging.getLogger(__name__)

_STARTED = RemoteLogSegmentState.COPY_SEGMENT_STARTED
_FINISHED = RemoteLogSegmentState.COPY_SEGMENT_FINISHED
_DELETING = RemoteLogSegmentState.DELETE_SEGMENT_STARTED


@dataclass(frozen=True)
class ExpiryResult:
    """The remote segments one pass deleted."""

    deleted: tuple[RemoteLogSegmentMetadata, ...]

    @property
    def new_log_start_offset(self) -> int | None:
        """Where the log now starts if retention removed its oldest data (None if nothing went)."""
        return max(s.end_offset for s in self.deleted) + 1 if self.deleted else None


def expire_pass(cache: RemoteLogMetadataCache, rsm: RemoteStorageManager,
                publish: Callable[[RemoteLogMetadata], None], *, broker_id: int,
                now_ms: Callable[[], int], retention_ms: int, retention_bytes: int,
                local_only_bytes: int, log_start_offset: int) -> ExpiryResult:
    """Delete what total retention removes; see the module docstring."""
    finished = cache.segments_in_state(_FINISHED)
    doomed = remote_segments_to_delete(finished, now_ms(), retention_ms, retention_bytes,
                                       local_only_bytes, log_start_offset)
    newest_copy_start = max((s.start_offset for s in finished), default=-1)
    abandoned = [s for s in cache.segments_in_state(_STARTED)
                 if s.start_offset < newest_copy_start]
    unfinished = cache.segments_in_state(_DELETING)
    for seg in [*unfinished, *abandoned, *doomed]:
        sid = seg.remote_log_segment_id
        if seg.state != _DELETING:
            publish(RemoteLogSegmentMetadataUpdate(sid, now_ms(), _DELETING, broker_id))
        rsm.delete_log_segment_data(sid)
        publish(RemoteLogSegmentMetadataUpdate(sid, now_ms(),
                                               RemoteLogSegmentState.DELETE_SEGMENT_FINISHED, broker_id))
        log.info("%s: deleted remote segment [%d, %d] (%s)", cache.topic_id_partition,
                 seg.start_offset, seg.end_offset, "retention" if seg in doomed else "cleanup")
    return ExpiryResult(tuple(doomed))
