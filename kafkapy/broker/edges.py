"""What the broker uses of the packages beside it, as Protocols (never ``Any``).

The group coordinator, the remote log manager (tiered storage), the producer-id blocks, the
per-topic counters and the cluster links are built by the node and handed to the broker's context; these Protocols say
which of their methods the handlers and the replica manager call, so the import graph shows the
edge and a test can hand in a small fake.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from kafkapy.broker.partition import Partition
    from kafkapy.coordinator.classic_group import ClassicGroup
    from kafkapy.coordinator.group import GroupShard
    from kafkapy.coordinator.outcome import Outcome
    from kafkapy.coordinator.transaction import TransactionShard, TxnResult


class RemoteReads(Protocol):
    """What the replica manager asks of tiered storage while reading."""

    def serves_remotely(self, hosted: Partition, offset: int) -> bool:
        """Whether a fetch at ``offset`` is below the local log but inside the whole log."""
        ...


class RemoteLog(RemoteReads, Protocol):
    """The remote log manager (``kafkapy.tiered.manager.RemoteLogManager``) as the Fetch and
    ListOffsets handlers use it."""

    async def read_remote(self, hosted: Partition, offset: int, max_bytes: int, *,
                          min_one: bool) -> bytes | None:
        """Whole batches from ``offset`` out of remote storage; None when none holds it."""
        ...

    async def read_remote_committed(self, hosted: Partition, offset: int, max_bytes: int, *,
                                    min_one: bool) -> tuple[bytes, Sequence[tuple[int, int]]] | None:
        """``read_remote`` for READ_COMMITTED: the batches and the aborted transactions
        (producer id, first offset) overlapping them."""
        ...

    def highest_remote_offset(self, hosted: Partition) -> int:
        ...

    async def offset_for_timestamp(self, hosted: Partition, timestamp: int) -> tuple[int, int] | None:
        ...


class GroupService(Protocol):
    """The group coordinator (``kafkapy.coordinator.service.GroupCoordinator``) as the group,
    offset and FindCoordinator handlers use it."""

    loading: set[int]

    def partition_for(self, group_id: str) -> int:
        ...

    def shard_for(self, group_id: str) -> GroupShard:
        ...

    async def run_op(self, shard: GroupShard, outcome: Outcome, *, timeout_ms: int,
                     on_timeout: object) -> object:
        ...

    async def run_modern(self, shard: GroupShard, outcome: Outcome, on_error: Callable[[int], object]) -> object:
        ...

    def groups(self) -> Sequence[tuple[GroupShard, ClassicGroup]]:
        ...

    def listed_groups(self) -> list[tuple[str, str, str, str]]:
        ...

    def complete_transaction(self, offsets_partition: int, producer_id: int, commit: bool) -> None:
        ...


class ProducerIds(Protocol):
    """Hands out producer ids (``kafkapy.broker.producer_id_manager.ProducerIdManager``)."""

    async def next_id(self) -> int:
        ...


class TopicStats(Protocol):
    """Per-topic produce and fetch counters (``kafkapy.metrics.stats.BrokerTopicStats``)."""

    def produced(self, topic: str, messages: int, size: int) -> None:
        ...

    def produce_failed(self, topic: str) -> None:
        ...

    def fetched(self, topic: str, size: int, *, failed: bool = False) -> None:
        ...

    def partition_fetched(self, topic: str, partition: int, size: int, *, redirected: bool = False) -> None:
        ...


class TransactionService(Protocol):
    """The transaction coordinator (``kafkapy.coordinator.transaction_service.TransactionCoordinator``)
    as the transaction and FindCoordinator handlers use it."""

    def partition_for(self, transactional_id: str) -> int:
        ...

    def shard_for(self, transactional_id: str) -> TransactionShard:
        """The loaded shard of the id (KafkaError: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS)."""
        ...

    async def execute(self, shard: TransactionShard, res: TxnResult) -> object:
        """Write the operation's records, send its markers; its answer."""
        ...

    def all_loaded(self) -> bool:
        ...

    def loaded_shards(self) -> Sequence[TransactionShard]:
        ...


class SourceTopicFacts(Protocol):
    """What a link's source says of one of its topics (for making its mirror)."""

    @property
    def topic_id(self) -> uuid.UUID: ...

    @property
    def num_partitions(self) -> int: ...

    @property
    def max_leader_epoch(self) -> int: ...

    @property
    def configs(self) -> Mapping[str, str]:
        """The topic configs a mirror takes from it."""
        ...


class LinkService(Protocol):
    """What the cluster-link handlers ask of the links this broker runs (kafkapy.link.manager):
    everything that needs the source cluster or this cluster as a client."""

    async def source_cluster_id(self, link_name: str, configs: Mapping[str, str]) -> str:
        """Reach the source ``configs`` name and return its cluster id (raises if it cannot)."""
        ...

    async def read_source_topic(self, link_name: str, topic: str) -> SourceTopicFacts:
        """Read source topic ``topic`` over link ``link_name``."""
        ...

    async def wait_caught_up(self, topic: str, timeout_s: float) -> None:
        """Return once mirror ``topic`` holds what its source held on entry (raises
        KafkaError(REQUEST_TIMED_OUT) after ``timeout_s``)."""
        ...

    def state(self, link_id: uuid.UUID) -> str:
        """ACTIVE while this broker reaches the link's source, else UNAVAILABLE."""
        ...
