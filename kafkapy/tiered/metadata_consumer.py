"""What a broker reads from ``__remote_log_metadata``, without the reading (Kafka's ConsumerTask).

A broker needs the remote metadata of the partitions it hosts (a follower may become leader at
any time and must then know what is remote). Each user partition's events live in one metadata
partition (:func:`remote_metadata_serde.metadata_partition`); this core tracks which metadata
partitions to read and from where, applies each record to the cache of the user partition it
names (records of partitions not hosted here are skipped), and says when a partition's cache is
ready: once the metadata partition has been read up to the end offset seen when the partition was
assigned, so a new leader never acts on a partial view (Kafka answers REPLICA_NOT_AVAILABLE for
remote reads until then).

A partition assigned after its metadata partition was already read past its events is caught
up by reading that metadata partition again from the start (the caches of partitions already
there ignore the re-delivered events). Sans-I/O: the Trio edge fetches and calls in.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from kafkapy.tiered.metadata_cache import RemoteLogMetadataCache, RemoteLogMetadataError
from kafkapy.tiered.remote_metadata import (
    RemoteLogMetadata,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    TopicIdPartition,
)
from kafkapy.tiered.remote_metadata_serde import (
    RemoteLogMetadataSerdeError,
    deserialize,
    metadata_partition,
)

log = logging.getLogger(__name__)


def partition_of(event: RemoteLogMetadata) -> TopicIdPartition:
    """The user partition an event is about."""
    if isinstance(event, (RemoteLogSegmentMetadata, RemoteLogSegmentMetadataUpdate)):
        return event.remote_log_segment_id.topic_id_partition
    return event.topic_id_partition


class RemoteMetadataConsumer:
    """The consumed state of ``__remote_log_metadata`` for the partitions hosted here."""

    def __init__(self, metadata_partitions: int) -> None:
        self.metadata_partitions = metadata_partitions
        self._caches: dict[TopicIdPartition, RemoteLogMetadataCache] = {}
        # Where each user partition becomes ready: (metadata partition, end offset to reach).
        self._ready_at: dict[TopicIdPartition, tuple[int, int]] = {}
        # Next offset to read per metadata partition in use.
        self._positions: dict[int, int] = {}
        # Partitions whose cache has caught up once; re-reading their metadata partition for a
        # newcomer does not make them unready again (their cache ignores the repeats).
        self._ready: set[TopicIdPartition] = set()

    # -- assignment ------------------------------------------------------------------------------
    def assign(self, partitions: Iterable[TopicIdPartition], end_offsets: Mapping[int, int]) -> set[int]:
        """Start following ``partitions``; ``end_offsets`` gives each metadata partition's end
        offset now (what "caught up" means). Returns the metadata partitions to read from 0."""
        restart: set[int] = set()
        for tp in partitions:
            if tp in self._caches:
                continue
            mp = metadata_partition(tp, self.metadata_partitions)
            self._caches[tp] = RemoteLogMetadataCache(tp)
            self._ready_at[tp] = (mp, end_offsets.get(mp, 0))
            if self._positions.get(mp, 0) > 0:
                restart.add(mp)  # its events went by before we hosted it: read them again
            self._positions[mp] = 0 if mp in restart else self._positions.get(mp, 0)
            self._mark_ready(mp)
        return restart

    def unassign(self, partitions: Iterable[TopicIdPartition]) -> None:
        for tp in partitions:
            self._caches.pop(tp, None)
            self._ready_at.pop(tp, None)
            self._ready.discard(tp)
        used = {metadata_partition(tp, self.metadata_partitions) for tp in self._caches}
        for mp in [mp for mp in self._positions if mp not in used]:
            del self._positions[mp]

    def positions(self) -> dict[int, int]:
        """Next offset to fetch for each metadata partition in use."""
        return dict(self._positions)

    # -- records ---------------------------------------------------------------------------------
    def on_records(self, mp: int, records: Iterable[tuple[int, bytes | None]]) -> None:
        """Apply the records (offset, value) read from metadata partition ``mp``, in order."""
        position = self._positions.get(mp)
        if position is None:
            return  # no longer in use
        for offset, value in records:
            if offset < position:
                continue  # already applied (a re-fetch)
            position = offset + 1
            if value is None:
                continue
            try:
                event = deserialize(value)
            except RemoteLogMetadataSerdeError as exc:
                log.error("__remote_log_metadata-%d offset %d is unreadable, skipped: %s", mp, offset, exc)
                continue
            cache = self._caches.get(partition_of(event))
            if cache is None:
                continue  # a partition not hosted here
            try:
                cache.apply(event)
            except RemoteLogMetadataError as exc:
                # Kafka logs and drops such events too; one bad event must not stop the others.
                log.warning("__remote_log_metadata-%d offset %d not applied: %s", mp, offset, exc)
        self._positions[mp] = position
        self._mark_ready(mp)

    def _mark_ready(self, mp: int) -> None:
        position = self._positions.get(mp, 0)
        for tp, (where, end) in self._ready_at.items():
            if where == mp and position >= end:
                self._ready.add(tp)

    # -- answers ---------------------------------------------------------------------------------
    def is_ready(self, tp: TopicIdPartition) -> bool:
        return tp in self._ready

    def cache(self, tp: TopicIdPartition) -> RemoteLogMetadataCache | None:
        """The partition's remote metadata once ready, else None (not hosted, or catching up)."""
        return self._caches.get(tp) if self.is_ready(tp) else None
