"""What the group coordinator needs of the broker's replica manager, as Protocols.

The coordinator sits below the broker: it reads and appends to the ``__consumer_offsets``
partitions this broker leads through these, never through the broker's classes (the node hands
it the ``ReplicaManager``, which fits them). ``OffsetsReplicas`` is generic in the partition type
so the partitions it hands out are the ones it takes back (the broker's ``Partition``).
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from kafkapy.log.partition_log import PartitionLog
from kafkapy.protocol.errors import ErrorCode


class OffsetsPartition(Protocol):
    """One hosted ``__consumer_offsets`` partition."""

    @property
    def index(self) -> int: ...

    @property
    def leader_id(self) -> int: ...

    @property
    def log(self) -> PartitionLog: ...


class Appended(Protocol):
    """An append's outcome, as far as the coordinator reads it."""

    @property
    def last_offset(self) -> int: ...


P = TypeVar("P", bound=OffsetsPartition)


class OffsetsReplicas(Protocol[P]):
    """The replica manager as the coordinator uses it."""

    def get(self, topic: str, partition: int) -> P:
        """The hosted partition (KafkaError when it is not hosted here)."""
        ...

    def append(self, hosted: P, records: bytearray, *, now_ms: int, from_client: bool = True) -> Appended:
        """Append the coordinator's records as leader (KafkaError when not leader)."""
        ...

    async def wait_for_replication(self, hosted: P, required_offset: int, deadline: float) -> ErrorCode:
        """Until every in-sync replica has ``required_offset``, leadership is lost or ``deadline``."""
        ...
