"""One partition's remote log metadata, rebuilt from its __remote_log_metadata events.

Kafka's RemoteLogMetadataCache and RemoteLogLeaderEpochState, per user partition: segments are
announced (COPY_SEGMENT_STARTED), then move through their states by updates; the cache answers
which remote segment holds an offset of a leader epoch, how far each epoch has been copied, and
which segments exist for cleanup. What each state makes visible:

    state                     read lookups   listings (cleanup)   highest offset for epoch
    COPY_SEGMENT_STARTED      no             yes                  no
    COPY_SEGMENT_FINISHED     yes            yes                  yes
    DELETE_SEGMENT_STARTED    no             yes                  stays where it was
    DELETE_SEGMENT_FINISHED   gone           gone                 stays where it was

A crash mid-upload leaves a segment in COPY_SEGMENT_STARTED for good: listed, so a cleaner can
delete its objects, but never served to a reader.

Events must be applied in the order of the metadata partition. Replaying them from the start
(what a new leader does) gives the same cache as applying them live. An event already applied to
a segment - a producer retry, or a re-read after a restart - changes nothing. An illegal
transition raises ``InvalidRemoteLogMetadataTransition``; an update for a segment never announced
raises ``RemoteSegmentNotFound``. (Kafka logs and drops both; the consumer at the edge decides.)
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field

from kafkapy.tiered.remote_metadata import (
    RemoteLogMetadata,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
)

_STARTED = RemoteLogSegmentState.COPY_SEGMENT_STARTED
_FINISHED = RemoteLogSegmentState.COPY_SEGMENT_FINISHED
_DELETE_STARTED = RemoteLogSegmentState.DELETE_SEGMENT_STARTED
_DELETE_FINISHED = RemoteLogSegmentState.DELETE_SEGMENT_FINISHED


class RemoteLogMetadataError(Exception):
    """An event the cache cannot apply."""


class InvalidRemoteLogMetadataTransition(RemoteLogMetadataError):
    """The event asks for a state change the state machine does not allow."""


class RemoteSegmentNotFound(RemoteLogMetadataError):
    """An update names a segment that was never announced with COPY_SEGMENT_STARTED."""


@dataclass
class _EpochState:
    """Segments of one leader epoch (Kafka's RemoteLogLeaderEpochState).

    ``starts``/``by_start`` map the epoch's first offset inside each readable (COPY_SEGMENT_FINISHED)
    segment to that segment, kept sorted for floor lookups. ``unreferenced`` holds the epoch's
    other live segments: still copying, being deleted, or superseded by a later copy of the same
    offsets - listed for cleanup, never read.
    """

    starts: list[int] = field(default_factory=list)
    by_start: dict[int, RemoteLogSegmentId] = field(default_factory=dict)
    unreferenced: set[RemoteLogSegmentId] = field(default_factory=set)
    highest_log_offset: int | None = None

    def copy_started(self, sid: RemoteLogSegmentId) -> None:
        self.unreferenced.add(sid)

    def copy_finished(self, start: int, sid: RemoteLogSegmentId, epoch_end: int) -> None:
        # A new leader that lagged in copying may upload a segment covering offsets an older copy
        # already covers (same epoch, start at or below theirs). The newer copy wins: older entries
        # from its start onwards stop being readable and go to the cleanup set.
        while (self.starts and self.starts[-1] >= start
               and self.highest_log_offset is not None and self.highest_log_offset <= epoch_end):
            last = self.starts.pop()
            self.unreferenced.add(self.by_start.pop(last))
        if start not in self.by_start:
            bisect.insort(self.starts, start)
        else:
            self.unreferenced.add(self.by_start[start])
        self.by_start[start] = sid
        self.unreferenced.discard(sid)
        if self.highest_log_offset is None or epoch_end > self.highest_log_offset:
            self.highest_log_offset = epoch_end

    def delete_started(self, start: int, sid: RemoteLogSegmentId) -> None:
        if self.by_start.get(start) == sid:
            del self.by_start[start]
            self.starts.remove(start)
        self.unreferenced.add(sid)

    def delete_finished(self, sid: RemoteLogSegmentId) -> None:
        self.unreferenced.discard(sid)

    def floor(self, offset: int) -> RemoteLogSegmentId | None:
        i = bisect.bisect_right(self.starts, offset)
        return self.by_start[self.starts[i - 1]] if i else None

    def segment_ids(self) -> list[RemoteLogSegmentId]:
        return [self.by_start[s] for s in self.starts] + list(self.unreferenced)


class RemoteLogMetadataCache:
    """The remote segments of one partition and their states, fed by metadata events in order."""

    def __init__(self, topic_id_partition: TopicIdPartition) -> None:
        self.topic_id_partition = topic_id_partition
        # Segments that have not reached DELETE_SEGMENT_FINISHED.
        self._segments: dict[RemoteLogSegmentId, RemoteLogSegmentMetadata] = {}
        # Epoch states are kept even when they empty out (Kafka does the same): their highest
        # copied offset still answers highest_offset_for_epoch.
        self._epochs: dict[int, _EpochState] = {}
        # Every event applied to each live segment, so a re-delivered one is recognised as such.
        # A segment sees a handful in its life.
        self._applied: dict[RemoteLogSegmentId, list[RemoteLogMetadata]] = {}
        # Ids of segments whose deletion finished. Segment ids are never reused, so any later
        # event naming one is a re-delivery; without this a late duplicate COPY_SEGMENT_STARTED
        # would bring a deleted segment back as a ghost.
        self._deleted: set[RemoteLogSegmentId] = set()
        self._partition_delete: RemotePartitionDeleteMetadata | None = None
        self._partition_delete_applied: list[RemotePartitionDeleteMetadata] = []

    @classmethod
    def replay(cls, topic_id_partition: TopicIdPartition,
               events: Iterable[RemoteLogMetadata]) -> "RemoteLogMetadataCache":
        """A cache built from ``events`` (this partition's, in metadata-partition order)."""
        cache = cls(topic_id_partition)
        for event in events:
            cache.apply(event)
        return cache

    # -- applying events ---------------------------------------------------------------------

    def apply(self, event: RemoteLogMetadata) -> None:
        """Apply one event of this partition, whatever its kind."""
        if isinstance(event, RemoteLogSegmentMetadata):
            self.add_copy_in_progress_segment(event)
        elif isinstance(event, RemoteLogSegmentMetadataUpdate):
            self.update_remote_log_segment_metadata(event)
        elif isinstance(event, RemotePartitionDeleteMetadata):
            self.update_partition_delete(event)
        else:
            raise TypeError(f"not remote log metadata: {type(event).__name__}")

    def _check_partition(self, tip: TopicIdPartition) -> None:
        if tip != self.topic_id_partition:
            raise ValueError(f"event for {tip} applied to the cache of {self.topic_id_partition}")

    def _seen(self, sid: RemoteLogSegmentId, event: RemoteLogMetadata) -> bool:
        return sid in self._deleted or event in self._applied.get(sid, ())

    def _check_not_deleted(self, event: RemoteLogMetadata) -> None:
        pd = self._partition_delete
        if pd is not None and pd.state is RemotePartitionDeleteState.DELETE_PARTITION_FINISHED:
            raise InvalidRemoteLogMetadataTransition(
                f"{self.topic_id_partition}: remote data already deleted, cannot apply {event}")

    def add_copy_in_progress_segment(self, metadata: RemoteLogSegmentMetadata) -> None:
        """Announce a segment whose copy has begun. It is listed from now on but not readable
        until an update moves it to COPY_SEGMENT_FINISHED."""
        self._check_partition(metadata.topic_id_partition)
        sid = metadata.remote_log_segment_id
        if self._seen(sid, metadata):
            return
        self._check_not_deleted(metadata)
        if metadata.state is not _STARTED:
            raise InvalidRemoteLogMetadataTransition(
                f"{sid}: a segment is announced in {_STARTED.name}, not {metadata.state.name}")
        existing = self._segments.get(sid)
        current = existing.state if existing is not None else None
        if not RemoteLogSegmentState.is_valid_transition(current, _STARTED):
            raise InvalidRemoteLogMetadataTransition(
                f"{sid}: cannot go back from {current.name if current is not None else None} to {_STARTED.name}")
        for epoch in metadata.segment_leader_epochs:
            self._epochs.setdefault(epoch, _EpochState()).copy_started(sid)
        self._segments[sid] = metadata
        self._applied.setdefault(sid, []).append(metadata)

    def update_remote_log_segment_metadata(self, update: RemoteLogSegmentMetadataUpdate) -> None:
        """Move an announced segment to ``update.state``."""
        self._check_partition(update.topic_id_partition)
        sid = update.remote_log_segment_id
        if self._seen(sid, update):
            return
        self._check_not_deleted(update)
        existing = self._segments.get(sid)
        if existing is None:
            raise RemoteSegmentNotFound(f"no remote log segment metadata for {sid}")
        target = update.state
        if target is _STARTED:
            raise InvalidRemoteLogMetadataTransition(
                f"{sid}: {_STARTED.name} is announced with the segment's metadata, not by an update")
        if not RemoteLogSegmentState.is_valid_transition(existing.state, target):
            raise InvalidRemoteLogMetadataTransition(
                f"{sid}: illegal transition {existing.state.name} -> {target.name}")
        updated = existing.create_with_updates(update)
        for epoch, start in updated.segment_leader_epochs.items():
            state = self._epochs.setdefault(epoch, _EpochState())
            if target is _FINISHED:
                state.copy_finished(start, sid, updated.epoch_end_offset(epoch))
            elif target is _DELETE_STARTED:
                state.delete_started(start, sid)
            else:
                state.delete_finished(sid)
        if target is _DELETE_FINISHED:
            del self._segments[sid]
            del self._applied[sid]
            self._deleted.add(sid)
        else:
            self._segments[sid] = updated
            self._applied[sid].append(update)

    def update_partition_delete(self, metadata: RemotePartitionDeleteMetadata) -> None:
        """Record a step in deleting the partition's remote data. At DELETE_PARTITION_FINISHED the
        segments are forgotten (Kafka drops the partition's cache at that point)."""
        self._check_partition(metadata.topic_id_partition)
        if metadata in self._partition_delete_applied:
            return  # a re-delivery, even one that arrives after a later step
        current = self._partition_delete
        source = current.state if current is not None else None
        if not RemotePartitionDeleteState.is_valid_transition(source, metadata.state):
            raise InvalidRemoteLogMetadataTransition(
                f"{self.topic_id_partition}: illegal partition delete transition "
                f"{source.name if source is not None else None} -> {metadata.state.name}")
        self._partition_delete = metadata
        self._partition_delete_applied.append(metadata)
        if metadata.state is RemotePartitionDeleteState.DELETE_PARTITION_FINISHED:
            # Every segment is gone with the partition; later events naming one are re-deliveries.
            self._deleted.update(self._segments)
            self._segments.clear()
            self._epochs.clear()
            self._applied.clear()

    # -- queries -----------------------------------------------------------------------------

    def remote_log_segment_metadata(self, leader_epoch: int, offset: int) -> RemoteLogSegmentMetadata | None:
        """The readable (COPY_SEGMENT_FINISHED) segment holding ``offset`` as written in
        ``leader_epoch``, or None."""
        state = self._epochs.get(leader_epoch)
        if state is None:
            return None
        sid = state.floor(offset)
        if sid is None:
            return None  # below the first copied offset of the epoch
        metadata = self._segments[sid]
        # The floor segment starts the epoch at or before the offset; it holds the offset only if
        # the epoch has not ended inside the segment before it.
        if offset > metadata.epoch_end_offset(leader_epoch):
            return None
        return metadata

    def highest_offset_for_epoch(self, leader_epoch: int) -> int | None:
        """The highest offset of ``leader_epoch`` ever copied (segments that reached
        COPY_SEGMENT_FINISHED), or None if none was."""
        state = self._epochs.get(leader_epoch)
        return state.highest_log_offset if state is not None else None

    def list_remote_log_segments(self, leader_epoch: int) -> list[RemoteLogSegmentMetadata]:
        """Live segments (any state but DELETE_SEGMENT_FINISHED) with records of
        ``leader_epoch``, by start offset."""
        state = self._epochs.get(leader_epoch)
        if state is None:
            return []
        return _by_start(self._segments[sid] for sid in state.segment_ids())

    def list_all_remote_log_segments(self) -> list[RemoteLogSegmentMetadata]:
        """Every live segment (any state but DELETE_SEGMENT_FINISHED), by start offset."""
        return _by_start(self._segments.values())

    def segments_in_state(self, *states: RemoteLogSegmentState) -> list[RemoteLogSegmentMetadata]:
        """Live segments in any of ``states``, by start offset."""
        wanted = set(states)
        return _by_start(m for m in self._segments.values() if m.state in wanted)

    @property
    def partition_delete_metadata(self) -> RemotePartitionDeleteMetadata | None:
        """The latest partition-delete event, or None if the partition is not being deleted."""
        return self._partition_delete

    @property
    def partition_delete_state(self) -> RemotePartitionDeleteState | None:
        pd = self._partition_delete
        return pd.state if pd is not None else None


def _by_start(segments: Iterable[RemoteLogSegmentMetadata]) -> list[RemoteLogSegmentMetadata]:
    # Ties (several copies of the same offsets) in a fixed order, so listings are reproducible.
    return sorted(segments, key=lambda m: (m.start_offset, m.end_offset, m.remote_log_segment_id.id))


__all__ = ["InvalidRemoteLogMetadataTransition", "RemoteLogMetadataCache", "RemoteLogMetadataError",
           "RemoteSegmentNotFound"]
