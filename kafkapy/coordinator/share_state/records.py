"""The ``__share_group_state`` records (key types 0 and 1), as plain values: what
:class:`~kafkapy.coordinator.share_state.shard.ShareStateShard` writes and what its ``replay``
reads back.

This is the narrow interface to the log: an edge binds each class to the byte codec of its record
type (key = group id, topic id and partition; value = the other fields, field names as in Kafka's
JSON schemas) and a :class:`Tombstone` to a key with a null value.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from kafkapy.share.partition import StateBatch


@dataclass(frozen=True)
class ShareSnapshot:
    """ShareSnapshotValue (key type 0): a share partition's whole state. ``snapshot_epoch`` counts
    the snapshots of the key; ``create_timestamp_ms`` is when its state epoch began."""

    RECORD_TYPE = 0
    group_id: str
    topic_id: uuid.UUID
    partition: int
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[StateBatch, ...]
    create_timestamp_ms: int
    write_timestamp_ms: int
    delivery_complete_count: int = -1


@dataclass(frozen=True)
class ShareUpdate:
    """ShareUpdateValue (key type 1): one write since the snapshot of ``snapshot_epoch``; its
    batches are combined over the state so far. ``leader_epoch`` and ``start_offset`` -1 mean
    unchanged."""

    RECORD_TYPE = 1
    group_id: str
    topic_id: uuid.UUID
    partition: int
    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[StateBatch, ...]
    delivery_complete_count: int = -1


@dataclass(frozen=True)
class Tombstone:
    """A null value for the key of ``record_type``: the share partition's state is deleted."""

    record_type: int
    group_id: str
    topic_id: uuid.UUID
    partition: int


ShareStateRecord = ShareSnapshot | ShareUpdate | Tombstone
