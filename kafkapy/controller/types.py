"""Plain-Python inputs and outputs of the quorum controller's operations.

The broker's API handlers map wire messages onto these and back; nothing here knows the wire
format. Error codes are ``kafkapy.protocol.errors.ErrorCode`` values (ints on the wire).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Generic, TypeVar

from kafkapy.metadata.records import BrokerEndpoint, BrokerFeature, MetadataRecord
from kafkapy.protocol.errors import ErrorCode

T = TypeVar("T")


@dataclass(frozen=True)
class ControllerResult(Generic[T]):
    """Records to commit and the response to send once they are committed.

    The controller does not change its own state when it produces a result: the records take
    effect when the quorum commits them and they are replayed (on every controller alike).
    ``records`` is empty for a validate-only request or when nothing changes.
    """

    records: tuple[MetadataRecord, ...]
    response: T


# --------------------------------------------------------------------------------------------
# CreateTopics

@dataclass(frozen=True)
class NewTopic:
    """One topic of a CreateTopics request.

    ``num_partitions``/``replication_factor`` of -1 take the defaults. ``assignments`` maps a
    partition index to its replica broker ids (then both counts must be -1, as in Kafka).
    ``configs`` values may be None only to be rejected (Kafka refuses null topic configs).
    """

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: dict[int, list[int]] = field(default_factory=dict)
    configs: dict[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class TopicDefaults:
    """Broker defaults for CreateTopics: ``num.partitions`` and ``default.replication.factor``."""

    num_partitions: int = 1
    replication_factor: int = 1


@dataclass(frozen=True)
class TopicConfigEntry:
    """One effective config of a created topic (CreateTopics response v5+ ``configs``).

    ``source`` is a DescribeConfigs ConfigSource id (``kafkapy.config.ConfigSource``).
    """

    name: str
    value: str | None
    read_only: bool
    source: int
    is_sensitive: bool = False


@dataclass(frozen=True)
class TopicResult:
    """The outcome for one topic of CreateTopics."""

    name: str
    error_code: int = ErrorCode.NONE
    error_message: str | None = None
    topic_id: uuid.UUID = uuid.UUID(int=0)
    num_partitions: int = -1
    replication_factor: int = -1
    configs: tuple[TopicConfigEntry, ...] = ()


# --------------------------------------------------------------------------------------------
# DeleteTopics / CreatePartitions

@dataclass(frozen=True)
class DeleteTopicResult:
    """The outcome for one topic of DeleteTopics (``name`` None when asked by id only)."""

    name: str | None
    topic_id: uuid.UUID
    error_code: int = ErrorCode.NONE
    error_message: str | None = None


@dataclass(frozen=True)
class CreatePartitionsTopic:
    """Grow topic ``name`` to ``count`` partitions; ``assignments`` lists the replicas of each
    new partition (None: let the placer choose)."""

    name: str
    count: int
    assignments: list[list[int]] | None = None


@dataclass(frozen=True)
class CreatePartitionsResult:
    name: str
    error_code: int = ErrorCode.NONE
    error_message: str | None = None


# --------------------------------------------------------------------------------------------
# IncrementalAlterConfigs

class OpType(IntEnum):
    """IncrementalAlterConfigs operation ids."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True)
class AlterConfigOp:
    name: str
    op: OpType | int  # an int outside OpType is a client's unknown id, refused as INVALID_REQUEST
    value: str | None = None


@dataclass(frozen=True)
class AlterConfigsResource:
    """One resource of IncrementalAlterConfigs (``resource_type``: 2 topic, 4 broker)."""

    resource_type: int
    resource_name: str
    ops: tuple[AlterConfigOp, ...]


@dataclass(frozen=True)
class AlterConfigsResult:
    resource_type: int
    resource_name: str
    error_code: int = ErrorCode.NONE
    error_message: str | None = None


# --------------------------------------------------------------------------------------------
# Broker lifecycle

@dataclass(frozen=True)
class BrokerRegistrationRequest:
    """BrokerRegistration's fields as the controller needs them."""

    broker_id: int
    cluster_id: str
    incarnation_id: uuid.UUID
    listeners: tuple[BrokerEndpoint, ...] = ()
    features: tuple[BrokerFeature, ...] = ()
    rack: str | None = None
    log_dirs: tuple[uuid.UUID, ...] = ()
    is_migrating_zk_broker: bool = False
    previous_broker_epoch: int = -1


@dataclass(frozen=True)
class BrokerRegistrationReply:
    error_code: int = ErrorCode.NONE
    error_message: str | None = None
    broker_epoch: int = -1


@dataclass(frozen=True)
class BrokerHeartbeatRequest:
    broker_id: int
    broker_epoch: int
    current_metadata_offset: int
    want_fence: bool = False
    want_shut_down: bool = False
    #: Directory ids of the broker's log dirs that failed (KIP-858).
    offline_log_dirs: tuple[uuid.UUID, ...] = ()


@dataclass(frozen=True)
class BrokerHeartbeatReply:
    error_code: int = ErrorCode.NONE
    error_message: str | None = None
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shut_down: bool = False


@dataclass(frozen=True)
class ProducerIdsBlock:
    """AllocateProducerIds' answer: ids [first_producer_id, first_producer_id + size)."""

    error_code: int = ErrorCode.NONE
    error_message: str | None = None
    first_producer_id: int = -1
    size: int = 0


class ElectionType(IntEnum):
    """ElectLeaders' election types, numbered as on the wire."""

    PREFERRED = 0
    UNCLEAN = 1


@dataclass(frozen=True)
class PartitionResult:
    """The outcome for one partition of ElectLeaders or AlterPartitionReassignments."""

    topic: str
    partition: int
    error_code: int = ErrorCode.NONE
    error_message: str | None = None


# --------------------------------------------------------------------------------------------
# AlterPartition (a partition leader's ISR change)

@dataclass(frozen=True)
class AlterPartitionPartition:
    """One partition of an AlterPartition request: the leader's proposed ISR.

    ``new_isr_epochs`` holds (broker id, broker epoch) pairs from v3 (KIP-903; an epoch of -1
    skips the check for that member), None before v3. ``leader_recovery_state`` is 0 RECOVERED,
    1 RECOVERING (KIP-704).
    """

    partition_index: int
    leader_epoch: int
    new_isr: tuple[int, ...]
    partition_epoch: int
    new_isr_epochs: tuple[tuple[int, int], ...] | None = None
    leader_recovery_state: int = 0


@dataclass(frozen=True)
class AlterPartitionTopic:
    """A topic of an AlterPartition request: by ``topic_id`` from v2, by ``name`` before."""

    topic_id: uuid.UUID | None
    name: str | None
    partitions: tuple[AlterPartitionPartition, ...]


@dataclass(frozen=True)
class AlterPartitionPartitionResult:
    """The controller's verdict on one proposed ISR, with the partition's state after it.

    ``previous_isr`` is the ISR before this request when the request changed the partition
    (for the controller's log line; not on the wire), None when nothing was written.
    """

    partition_index: int
    error_code: int = ErrorCode.NONE
    leader_id: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    leader_recovery_state: int = 0
    partition_epoch: int = -1
    previous_isr: tuple[int, ...] | None = None


@dataclass(frozen=True)
class AlterPartitionTopicResult:
    """One topic's answers. ``name`` is filled in whenever the topic is known, even when the
    request named it by id (the wire carries only what its version has)."""

    topic_id: uuid.UUID | None
    name: str | None
    partitions: tuple[AlterPartitionPartitionResult, ...]


@dataclass(frozen=True)
class AlterPartitionReply:
    """AlterPartition's answer: a request-wide error (STALE_BROKER_EPOCH, with no topics, as
    Kafka's response to a refused sender) or per-partition results."""

    error_code: int = ErrorCode.NONE
    topics: tuple[AlterPartitionTopicResult, ...] = ()
    error_message: str | None = None


# --------------------------------------------------------------------------------------------
# Cluster links and mirror topics (kafkapy's own operations)

@dataclass(frozen=True)
class MirrorTopicSpec:
    """One mirror topic to create over link ``link_name``.

    Not ``restore``: topic ``name`` is created as CreateTopics would create it
    (``num_partitions``, ``replication_factor`` -1 for the default, ``configs`` already filtered
    to the synced keys) and becomes an ACTIVE mirror. ``restore``: topic ``name`` exists with
    the source's partition count and becomes an ACTIVE mirror again (its configs untouched).
    ``source_max_leader_epoch``: the highest partition leader epoch the source reported.
    """

    name: str
    link_name: str
    source_topic: str
    source_topic_id: uuid.UUID = uuid.UUID(int=0)
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str] = field(default_factory=dict)
    source_max_leader_epoch: int = 0
    restore: bool = False


@dataclass(frozen=True)
class ClusterLinkResult:
    """The outcome of creating, altering or deleting one cluster link."""

    link_name: str
    error_code: int = ErrorCode.NONE
    error_message: str | None = None
    link_id: uuid.UUID = uuid.UUID(int=0)


@dataclass(frozen=True)
class MirrorTopicResult:
    """The outcome for one topic of creating, pausing, resuming or stopping mirrors."""

    name: str
    error_code: int = ErrorCode.NONE
    error_message: str | None = None
    topic_id: uuid.UUID = uuid.UUID(int=0)


__all__ = [
    "AlterConfigOp", "AlterConfigsResource", "AlterConfigsResult", "AlterPartitionPartition",
    "AlterPartitionPartitionResult", "AlterPartitionReply", "AlterPartitionTopic",
    "AlterPartitionTopicResult", "BrokerHeartbeatReply", "ClusterLinkResult",
    "BrokerHeartbeatRequest", "BrokerRegistrationReply", "BrokerRegistrationRequest",
    "ControllerResult", "CreatePartitionsResult", "CreatePartitionsTopic", "DeleteTopicResult",
    "ElectionType", "MirrorTopicResult", "MirrorTopicSpec", "PartitionResult",
    "NewTopic", "OpType", "ProducerIdsBlock", "TopicConfigEntry", "TopicDefaults", "TopicResult",
]
