"""What tiered storage needs of the broker's replica manager, as Protocols.

``tiered/`` sits below the broker: the remote log manager and the ``__remote_log_metadata``
log reach the hosted partitions only through these (the node hands them the ``ReplicaManager``,
which fits them). ``MetadataReplicas`` is generic in the partition type so the partitions it hands
out are the ones it takes back.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Protocol, TypeVar

from kafkapy.log.partition_log import PartitionLog
from kafkapy.protocol.errors import ErrorCode


class TieredPartition(Protocol):
    """One hosted partition, as tiered storage reads it."""

    @property
    def topic(self) -> str: ...

    @property
    def topic_id(self) -> uuid.UUID: ...

    @property
    def index(self) -> int: ...

    @property
    def log(self) -> PartitionLog: ...

    @property
    def leader_id(self) -> int: ...

    @property
    def leader_epoch(self) -> int: ...

    def is_leader(self, node_id: int) -> bool: ...


class TieredReplicas(Protocol):
    """The replica manager as the remote log manager uses it."""

    @property
    def leadership_suspended(self) -> bool: ...

    def partitions(self) -> Iterable[TieredPartition]: ...

    def get(self, topic: str, partition: int) -> TieredPartition:
        """The hosted partition (KafkaError when it is not hosted here)."""
        ...


class Appended(Protocol):
    """An append's outcome, as far as the metadata log reads it."""

    @property
    def first_offset(self) -> int: ...

    @property
    def last_offset(self) -> int: ...


P = TypeVar("P", bound=TieredPartition)


class MetadataReplicas(Protocol[P]):
    """The replica manager as the ``__remote_log_metadata`` log uses it."""

    def get(self, topic: str, partition: int) -> P: ...

    def leader(self, topic: str, partition: int) -> P:
        """The partition if this broker leads it (KafkaError otherwise)."""
        ...

    def check_min_insync(self, hosted: P) -> None: ...

    def append(self, hosted: P, records: bytearray, *, now_ms: int, from_client: bool = True) -> Appended: ...

    async def wait_for_replication(self, hosted: P, required_offset: int, deadline: float) -> ErrorCode: ...
