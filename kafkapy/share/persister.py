"""The share-partition state store as a share partition's leader sees it (Kafka's Persister).

A leader reads a share partition's state once, when the partition is first fetched, and writes it
before answering an acknowledgement; the group coordinator initializes and deletes states as
share groups subscribe and unsubscribe. Behind this interface sits the share coordinator of the
``__share_group_state`` partition that owns the key: called in-process when this node leads that
partition, over Read/Write/Initialize/DeleteShareGroupState RPCs otherwise.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Protocol

from kafkapy.share.partition import PartitionState


@dataclass(frozen=True)
class StateResult:
    """One partition's answer. ``state`` is set by Read (the whole state) and ReadStateSummary
    (no batches); Initialize, Write and Delete answer the error only."""

    error: int = 0
    message: str | None = None
    state: PartitionState | None = None


class SharePersister(Protocol):
    """Where share-partition states live. Every call answers one partition's :class:`StateResult`
    (Kafka's error codes: FENCED_STATE_EPOCH, FENCED_LEADER_EPOCH, COORDINATOR_NOT_AVAILABLE,
    NOT_COORDINATOR, ...) and returns only once the change is durable (acks=all)."""

    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                         start_offset: int) -> StateResult: ...

    async def read(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int) -> StateResult: ...

    async def read_summary(self, group_id: str, topic_id: uuid.UUID, partition: int,
                           leader_epoch: int = -1) -> StateResult: ...

    async def write(self, group_id: str, topic_id: uuid.UUID, partition: int,
                    state: PartitionState) -> StateResult: ...

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> StateResult: ...


__all__ = ["SharePersister", "StateResult"]
