"""The KIP-405 remote log metadata types: segment ids, segment metadata, updates, partition deletes.

These are the events a RemoteLogMetadataManager stores (Kafka keeps them in the internal topic
``__remote_log_metadata``) and the state machines they move through. A segment is announced once
with its full description in ``COPY_SEGMENT_STARTED``; every later step is a small
``RemoteLogSegmentMetadataUpdate`` naming the segment and its new state. Names, state ids and
legal transitions follow Apache Kafka's ``org.apache.kafka.server.log.remote.storage`` API, so
the bytes we write and read agree with a Java broker's (see ``remote_metadata_serde``).

Pure values: no I/O, no clock (event times arrive as ``*_ms`` arguments).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from types import MappingProxyType
from typing import Union


class RemoteLogSegmentState(IntEnum):
    """Where a remote segment is in its life; the value is the id written on the wire.

    COPY_SEGMENT_STARTED -> COPY_SEGMENT_FINISHED -> DELETE_SEGMENT_STARTED -> DELETE_SEGMENT_FINISHED,
    with a shortcut from COPY_SEGMENT_STARTED straight to DELETE_SEGMENT_STARTED (a failed or
    abandoned upload is cleaned up without ever becoming readable).
    """

    COPY_SEGMENT_STARTED = 0
    COPY_SEGMENT_FINISHED = 1
    DELETE_SEGMENT_STARTED = 2
    DELETE_SEGMENT_FINISHED = 3

    @staticmethod
    def is_valid_transition(source: "RemoteLogSegmentState | None",
                            target: "RemoteLogSegmentState") -> bool:
        """Whether a segment in ``source`` (None: not yet known) may move to ``target``.

        Staying in the same state is legal: a retry or a new leader may announce a step again.
        """
        if source is None:
            return target is RemoteLogSegmentState.COPY_SEGMENT_STARTED
        if source is target:
            return True
        return target in _SEGMENT_NEXT[source]


_SEGMENT_NEXT: dict[RemoteLogSegmentState, frozenset[RemoteLogSegmentState]] = {
    RemoteLogSegmentState.COPY_SEGMENT_STARTED: frozenset({
        RemoteLogSegmentState.COPY_SEGMENT_FINISHED, RemoteLogSegmentState.DELETE_SEGMENT_STARTED}),
    RemoteLogSegmentState.COPY_SEGMENT_FINISHED: frozenset({RemoteLogSegmentState.DELETE_SEGMENT_STARTED}),
    RemoteLogSegmentState.DELETE_SEGMENT_STARTED: frozenset({RemoteLogSegmentState.DELETE_SEGMENT_FINISHED}),
    RemoteLogSegmentState.DELETE_SEGMENT_FINISHED: frozenset(),
}


class RemotePartitionDeleteState(IntEnum):
    """Progress of deleting a whole partition's remote data; the value is the id on the wire.

    DELETE_PARTITION_MARKED (written by the controller when the topic is deleted) ->
    DELETE_PARTITION_STARTED -> DELETE_PARTITION_FINISHED (both by the remover).
    """

    DELETE_PARTITION_MARKED = 0
    DELETE_PARTITION_STARTED = 1
    DELETE_PARTITION_FINISHED = 2

    @staticmethod
    def is_valid_transition(source: "RemotePartitionDeleteState | None",
                            target: "RemotePartitionDeleteState") -> bool:
        """Whether a partition in ``source`` (None: no delete yet) may move to ``target``."""
        if source is None:
            return target is RemotePartitionDeleteState.DELETE_PARTITION_MARKED
        if source is target:
            return True
        return target == source + 1  # the chain is strictly linear


@dataclass(frozen=True)
class TopicIdPartition:
    """A partition named both ways: the topic id (which survives renames and tells a recreated
    topic from its predecessor) and the topic name + partition number."""

    topic_id: uuid.UUID
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}:{self.topic_id}"


def _fresh_uuid() -> uuid.UUID:
    # Kafka's Uuid.randomUuid never hands out the all-zero id, the reserved id 1 (metadata topic),
    # or an id whose base64 form starts with "-" (it would read as a command-line flag).
    while True:
        u = uuid.uuid4()
        if u.int > 1 and (u.int >> 122) != 0b111110:
            return u


@dataclass(frozen=True)
class RemoteLogSegmentId:
    """Names one uploaded copy of a segment: its partition and a UUID drawn per copy attempt.

    Two uploads of the same offsets (a retry, or a new leader re-copying) get different ids, so
    their objects and metadata never collide.
    """

    topic_id_partition: TopicIdPartition
    id: uuid.UUID

    @classmethod
    def generate_new(cls, topic_id_partition: TopicIdPartition) -> "RemoteLogSegmentId":
        """A fresh id for a new copy of a segment of ``topic_id_partition``."""
        return cls(topic_id_partition, _fresh_uuid())

    def __str__(self) -> str:
        return f"RemoteLogSegmentId({self.topic_id_partition}, {self.id})"


def _frozen_epochs(epochs: Mapping[int, int]) -> Mapping[int, int]:
    return MappingProxyType({int(e): int(o) for e, o in sorted(epochs.items())})


@dataclass(frozen=True)
class RemoteLogSegmentMetadata:
    """Everything known about one remote segment, as of its latest event.

    Offsets are inclusive at both ends. ``segment_leader_epochs`` maps each leader epoch that
    wrote records in the segment to the first offset of that epoch inside it (never empty: a
    single-epoch segment maps that epoch to ``start_offset``); it is kept sorted by epoch.
    ``custom_metadata`` is opaque bytes from the RemoteStorageManager (None when it gave none).
    """

    remote_log_segment_id: RemoteLogSegmentId
    start_offset: int
    end_offset: int
    max_timestamp_ms: int
    broker_id: int
    event_timestamp_ms: int
    segment_size_in_bytes: int
    segment_leader_epochs: Mapping[int, int]
    state: RemoteLogSegmentState = RemoteLogSegmentState.COPY_SEGMENT_STARTED
    custom_metadata: bytes | None = None

    def __post_init__(self) -> None:
        if self.start_offset < 0:
            raise ValueError(f"start offset {self.start_offset} of a remote segment cannot be negative")
        if self.end_offset < self.start_offset:
            raise ValueError(f"end offset {self.end_offset} is below start offset {self.start_offset}")
        if not self.segment_leader_epochs:
            raise ValueError("segment_leader_epochs cannot be empty")
        # A read-only, epoch-sorted copy: the value is shared by caches and must not change
        # under them, and "next epoch" lookups rely on the order.
        object.__setattr__(self, "segment_leader_epochs", _frozen_epochs(self.segment_leader_epochs))
        object.__setattr__(self, "state", RemoteLogSegmentState(self.state))
        if self.custom_metadata is not None:
            object.__setattr__(self, "custom_metadata", bytes(self.custom_metadata))

    def __hash__(self) -> int:
        return hash((self.remote_log_segment_id, self.start_offset, self.end_offset, self.state,
                     self.event_timestamp_ms, tuple(self.segment_leader_epochs.items())))

    @property
    def topic_id_partition(self) -> TopicIdPartition:
        return self.remote_log_segment_id.topic_id_partition

    def epoch_end_offset(self, leader_epoch: int) -> int:
        """The last offset of ``leader_epoch`` inside this segment: one before the next epoch's
        start, or the segment's end offset for its last epoch."""
        for epoch, start in self.segment_leader_epochs.items():
            if epoch > leader_epoch:
                return start - 1
        return self.end_offset

    def create_with_updates(self, update: "RemoteLogSegmentMetadataUpdate") -> "RemoteLogSegmentMetadata":
        """This segment as ``update`` leaves it: new state, broker, event time and custom metadata;
        offsets, size and epochs are fixed at copy start and never change."""
        if update.remote_log_segment_id != self.remote_log_segment_id:
            raise ValueError(f"update for {update.remote_log_segment_id} applied to {self.remote_log_segment_id}")
        return RemoteLogSegmentMetadata(
            self.remote_log_segment_id, self.start_offset, self.end_offset, self.max_timestamp_ms,
            update.broker_id, update.event_timestamp_ms, self.segment_size_in_bytes,
            self.segment_leader_epochs, update.state, update.custom_metadata)


@dataclass(frozen=True)
class RemoteLogSegmentMetadataUpdate:
    """A state change of a known remote segment (any state but COPY_SEGMENT_STARTED, which is
    announced by the full ``RemoteLogSegmentMetadata`` instead)."""

    remote_log_segment_id: RemoteLogSegmentId
    event_timestamp_ms: int
    state: RemoteLogSegmentState
    broker_id: int
    custom_metadata: bytes | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "state", RemoteLogSegmentState(self.state))
        if self.custom_metadata is not None:
            object.__setattr__(self, "custom_metadata", bytes(self.custom_metadata))

    @property
    def topic_id_partition(self) -> TopicIdPartition:
        return self.remote_log_segment_id.topic_id_partition


@dataclass(frozen=True)
class RemotePartitionDeleteMetadata:
    """A step in deleting all remote data of a partition (its topic was deleted)."""

    topic_id_partition: TopicIdPartition
    state: RemotePartitionDeleteState
    event_timestamp_ms: int
    broker_id: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "state", RemotePartitionDeleteState(self.state))


# What one value of __remote_log_metadata holds.
RemoteLogMetadata = Union[RemoteLogSegmentMetadata, RemoteLogSegmentMetadataUpdate, RemotePartitionDeleteMetadata]

__all__ = ["RemoteLogMetadata", "RemoteLogSegmentId", "RemoteLogSegmentMetadata",
           "RemoteLogSegmentMetadataUpdate", "RemoteLogSegmentState", "RemotePartitionDeleteMetadata",
           "RemotePartitionDeleteState", "TopicIdPartition"]
