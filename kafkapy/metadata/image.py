"""The immutable metadata image: the cluster state after replaying the metadata log to an offset.

A ``MetadataImage`` is built from the previous image plus a ``MetadataDelta`` (see
``kafkapy.metadata.delta``). Every part is immutable (frozen dataclasses, tuples and read-only
mappings), so readers on other tasks can hold an image while the next one is being built, and
an ``apply()`` can share every sub-image it did not touch with the image before it. The maps
that grow with the cluster (topics, config resources) are ``ShardedMap``s, so a change to one
topic copies a small part of them rather than the whole; their iteration order is unspecified.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from kafkapy.metadata.client_quotas import ClientQuotasImage
from kafkapy.metadata.link_configs import described_link_configs
from kafkapy.metadata.pmap import EMPTY_SHARDED, ShardedMap
from kafkapy.metadata.records import (
    AccessControlEntryRecord,
    BrokerEndpoint,
    BrokerFeature,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
)
from kafkapy.metadata.scram_image import ScramImage
from kafkapy.security.acl import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType

# ConfigResource.Type ids as Kafka numbers them (DescribeConfigs, ConfigRecord.ResourceType).
RESOURCE_UNKNOWN = 0
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_BROKER_LOGGER = 8
RESOURCE_CLIENT_METRICS = 16

METADATA_VERSION_FEATURE = "metadata.version"

NO_LEADER = -1

EMPTY_MAP: Mapping[Any, Any] = MappingProxyType({})


def frozen_map(d: Mapping[Any, Any]) -> Mapping[Any, Any]:
    """A read-only view of a private copy of ``d`` (shared empty map when ``d`` is empty)."""
    return MappingProxyType(dict(d)) if d else EMPTY_MAP


class MetadataReplayError(ValueError):
    """A record cannot be applied to the image (an inconsistent log; fatal for the replayer)."""


# --------------------------------------------------------------------------------------------
# Brokers

@dataclass(frozen=True)
class BrokerRegistration:
    """A registered broker as the cluster sees it."""

    id: int
    incarnation_id: uuid.UUID
    epoch: int
    listeners: tuple[BrokerEndpoint, ...] = ()
    features: tuple[BrokerFeature, ...] = ()
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False
    log_dirs: tuple[uuid.UUID, ...] = ()

    @classmethod
    def from_record(cls, rec: RegisterBrokerRecord) -> "BrokerRegistration":
        return cls(
            id=rec.broker_id, incarnation_id=rec.incarnation_id, epoch=rec.broker_epoch,
            listeners=tuple(rec.end_points), features=tuple(rec.features), rack=rec.rack,
            fenced=rec.fenced, in_controlled_shutdown=rec.in_controlled_shutdown,
            log_dirs=tuple(rec.log_dirs),
        )

    def to_record(self, version: int = 3) -> RegisterBrokerRecord:
        return RegisterBrokerRecord(
            broker_id=self.id, incarnation_id=self.incarnation_id, broker_epoch=self.epoch,
            end_points=self.listeners, features=self.features, rack=self.rack,
            fenced=self.fenced, in_controlled_shutdown=self.in_controlled_shutdown,
            log_dirs=self.log_dirs if version >= 3 else (), version=version,
        )

    def listener(self, name: str) -> BrokerEndpoint | None:
        for ep in self.listeners:
            if ep.name == name:
                return ep
        return None


@dataclass(frozen=True)
class ClusterImage:
    """Registered brokers by id."""

    brokers: Mapping[int, BrokerRegistration] = field(default_factory=lambda: EMPTY_MAP)

    def unfenced(self) -> list[BrokerRegistration]:
        return [b for b in self.brokers.values() if not b.fenced]

    def is_active(self, broker_id: int) -> bool:
        """Registered, unfenced and not shutting down: may join an ISR or lead."""
        b = self.brokers.get(broker_id)
        return b is not None and not b.fenced and not b.in_controlled_shutdown


# --------------------------------------------------------------------------------------------
# Topics and partitions

@dataclass(frozen=True)
class PartitionRegistration:
    """One partition's replica set, ISR, leader and epochs."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    leader_recovery_state: int = 0
    directories: tuple[uuid.UUID, ...] = ()
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()
    # Replicas outside the ISR unless promoted (confluent.placement.constraints); a subset of
    # ``replicas``, listed after the synchronous ones.
    observers: tuple[int, ...] = ()

    @property
    def sync_replicas(self) -> tuple[int, ...]:
        """The replicas that are not observers."""
        return tuple(r for r in self.replicas if r not in self.observers)

    @classmethod
    def from_record(cls, rec: PartitionRecord) -> "PartitionRegistration":
        return cls(
            replicas=tuple(rec.replicas), isr=tuple(rec.isr), leader=rec.leader,
            leader_epoch=rec.leader_epoch, partition_epoch=rec.partition_epoch,
            removing_replicas=tuple(rec.removing_replicas),
            adding_replicas=tuple(rec.adding_replicas),
            leader_recovery_state=rec.leader_recovery_state,
            directories=tuple(rec.directories),
            elr=tuple(rec.eligible_leader_replicas or ()),
            last_known_elr=tuple(rec.last_known_elr or ()),
            observers=tuple(rec.observers or ()),
        )

    def to_record(self, topic_id: uuid.UUID, partition_id: int, version: int = 1) -> PartitionRecord:
        return PartitionRecord(
            partition_id=partition_id, topic_id=topic_id, replicas=self.replicas, isr=self.isr,
            leader=self.leader, leader_epoch=self.leader_epoch,
            partition_epoch=self.partition_epoch, removing_replicas=self.removing_replicas,
            adding_replicas=self.adding_replicas, leader_recovery_state=self.leader_recovery_state,
            directories=self.directories if version >= 1 else (),
            # Tagged fields Kafka sets only when they hold something.
            eligible_leader_replicas=self.elr if version >= 2 and self.elr else None,
            last_known_elr=self.last_known_elr if version >= 2 and self.last_known_elr else None,
            observers=self.observers or None,
            version=version,
        )

    def merge(self, rec: PartitionChangeRecord) -> "PartitionRegistration":
        """This partition after ``rec``. As in Kafka, any leader field bumps the leader epoch and
        every change bumps the partition epoch."""
        changes: dict[str, Any] = {"partition_epoch": self.partition_epoch + 1}
        if rec.replicas is not None:
            changes["replicas"] = tuple(rec.replicas)
        if rec.isr is not None:
            changes["isr"] = tuple(rec.isr)
        if rec.leader != PartitionChangeRecord.LEADER_UNCHANGED:
            changes["leader"] = rec.leader
            changes["leader_epoch"] = self.leader_epoch + 1
        if rec.removing_replicas is not None:
            changes["removing_replicas"] = tuple(rec.removing_replicas)
        if rec.adding_replicas is not None:
            changes["adding_replicas"] = tuple(rec.adding_replicas)
        if rec.leader_recovery_state != -1:
            changes["leader_recovery_state"] = rec.leader_recovery_state
        if rec.directories is not None:
            changes["directories"] = tuple(rec.directories)
        if rec.eligible_leader_replicas is not None:
            changes["elr"] = tuple(rec.eligible_leader_replicas)
        if rec.last_known_elr is not None:
            changes["last_known_elr"] = tuple(rec.last_known_elr)
        if rec.observers is not None:
            changes["observers"] = tuple(rec.observers)
        return replace(self, **changes)


@dataclass(frozen=True)
class TopicImage:
    """A topic: name, id and partitions by index."""

    name: str
    id: uuid.UUID
    partitions: Mapping[int, PartitionRegistration] = field(default_factory=lambda: EMPTY_MAP)

    @property
    def num_partitions(self) -> int:
        return len(self.partitions)

    @property
    def replication_factor(self) -> int:
        first = self.partitions.get(0)
        return len(first.replicas) if first is not None else 0


@dataclass(frozen=True)
class TopicsImage:
    """Topics by id and by name (both views over the same TopicImage objects)."""

    by_id: ShardedMap[uuid.UUID, TopicImage] = field(default_factory=lambda: EMPTY_SHARDED)
    by_name: ShardedMap[str, TopicImage] = field(default_factory=lambda: EMPTY_SHARDED)

    def get(self, name: str) -> TopicImage | None:
        return self.by_name.get(name)

    def partition(self, name: str, index: int) -> PartitionRegistration | None:
        t = self.by_name.get(name)
        return None if t is None else t.partitions.get(index)


# --------------------------------------------------------------------------------------------
# Features, configs, producer ids

@dataclass(frozen=True)
class FeaturesImage:
    """Finalized feature levels (metadata.version among them)."""

    levels: Mapping[str, int] = field(default_factory=lambda: EMPTY_MAP)

    @property
    def metadata_version(self) -> int:
        """The metadata.version feature level, 0 when not set yet."""
        return self.levels.get(METADATA_VERSION_FEATURE, 0)


@dataclass(frozen=True)
class ConfigurationsImage:
    """Dynamic configs: (resource_type, resource_name) -> {key: value}."""

    resources: ShardedMap[tuple[int, str], Mapping[str, str]] = field(
        default_factory=lambda: EMPTY_SHARDED)

    def get(self, resource_type: int, name: str) -> Mapping[str, str]:
        return self.resources.get((resource_type, name), EMPTY_MAP)

    def topic(self, name: str) -> Mapping[str, str]:
        return self.get(RESOURCE_TOPIC, name)


@dataclass(frozen=True)
class ProducerIdsImage:
    """The next producer id block start; -1 until the first block is handed out."""

    next_producer_id: int = -1
    broker_id: int = -1
    broker_epoch: int = -1


# --------------------------------------------------------------------------------------------
# Cluster links and mirror topics (kafkapy's own records, types 10000-10002)

class MirrorState(enum.IntEnum):
    """A mirror topic's state (MirrorTopicRecord.State)."""

    ACTIVE = 0
    PAUSED = 1
    STOPPED = 2


@dataclass(frozen=True, repr=False)
class ClusterLink:
    """A link from this (destination) cluster to a source cluster."""

    id: uuid.UUID
    name: str
    source_cluster_id: str
    configs: Mapping[str, str] = field(default_factory=lambda: EMPTY_MAP)

    def __repr__(self) -> str:
        shown = {k: "(redacted)" if secret else v for k, v, secret in described_link_configs(self.configs)}
        return f"ClusterLink(id={self.id}, name={self.name!r}, source_cluster_id={self.source_cluster_id!r}, " \
               f"configs={shown})"


@dataclass(frozen=True)
class MirrorTopic:
    """A topic of this cluster that mirrors ``source_topic`` over link ``link_id``.

    ``epoch_ceiling``: the highest partition leader epoch a mirrored batch may carry, so that
    the leader epochs given out when the mirror is stopped are above every one in its logs.
    """

    topic_id: uuid.UUID
    link_id: uuid.UUID
    source_topic: str
    source_topic_id: uuid.UUID
    state: MirrorState
    epoch_ceiling: int

    @property
    def read_only(self) -> bool:
        """Producers may not write to it until it is stopped (promoted)."""
        return self.state != MirrorState.STOPPED


@dataclass(frozen=True)
class LinksImage:
    """Cluster links by id, and mirror topics by the (destination) topic's id."""

    by_id: Mapping[uuid.UUID, ClusterLink] = field(default_factory=lambda: EMPTY_MAP)
    mirrors: Mapping[uuid.UUID, MirrorTopic] = field(default_factory=lambda: EMPTY_MAP)

    def by_name(self, name: str) -> ClusterLink | None:
        # A cluster has a handful of links: a scan beats keeping a second map in step.
        for link in self.by_id.values():
            if link.name == name:
                return link
        return None

    def mirror(self, topic_id: uuid.UUID) -> MirrorTopic | None:
        return self.mirrors.get(topic_id)

    def mirrors_of(self, link_id: uuid.UUID) -> list[MirrorTopic]:
        """The mirror topics of one link, in no particular order."""
        return [m for m in self.mirrors.values() if m.link_id == link_id]


# --------------------------------------------------------------------------------------------
# ACLs (AccessControlEntryRecord / RemoveAccessControlEntryRecord)

def acl_from_record(rec: AccessControlEntryRecord) -> AclBinding:
    return AclBinding(ResourceType.from_code(rec.resource_type), rec.resource_name,
                      PatternType.from_code(rec.pattern_type), rec.principal, rec.host,
                      AclOperation.from_code(rec.operation), AclPermissionType.from_code(rec.permission_type))


def acl_record(acl_id: uuid.UUID, acl: AclBinding) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(acl_id, int(acl.resource_type), acl.resource_name, int(acl.pattern_type),
                                    acl.principal, acl.host, int(acl.operation), int(acl.permission))


@dataclass(frozen=True)
class AclsImage:
    """Every ACL of the cluster by its id (Kafka's AclsImage)."""

    by_id: Mapping[uuid.UUID, AclBinding] = field(default_factory=lambda: EMPTY_MAP)


# --------------------------------------------------------------------------------------------
# The whole image

@dataclass(frozen=True)
class MetadataImage:
    """The cluster metadata after applying every record up to and including ``offset``.

    ``offset`` is -1 for the empty image. ``cluster_id`` comes from meta.properties (it is not a
    metadata record), so it is carried over from image to image unchanged.
    """

    cluster_id: str = ""
    offset: int = -1
    features: FeaturesImage = field(default_factory=FeaturesImage)
    cluster: ClusterImage = field(default_factory=ClusterImage)
    topics: TopicsImage = field(default_factory=TopicsImage)
    configs: ConfigurationsImage = field(default_factory=ConfigurationsImage)
    producer_ids: ProducerIdsImage = field(default_factory=ProducerIdsImage)
    links: LinksImage = field(default_factory=LinksImage)
    acls: AclsImage = field(default_factory=AclsImage)
    scram: ScramImage = field(default_factory=ScramImage)
    client_quotas: ClientQuotasImage = field(default_factory=ClientQuotasImage)

    @classmethod
    def empty(cls, cluster_id: str = "") -> "MetadataImage":
        return cls(cluster_id=cluster_id)

    @property
    def brokers(self) -> Mapping[int, BrokerRegistration]:
        return self.cluster.brokers

    @property
    def metadata_version(self) -> int:
        return self.features.metadata_version

    def is_empty(self) -> bool:
        return self.offset < 0


__all__ = [
    "AclsImage", "BrokerRegistration", "ClusterImage", "ClusterLink", "ConfigurationsImage", "FeaturesImage",
    "LinksImage", "METADATA_VERSION_FEATURE", "MetadataImage", "MetadataReplayError",
    "MirrorState", "MirrorTopic", "NO_LEADER",
    "PartitionRegistration", "ProducerIdsImage", "RESOURCE_BROKER", "RESOURCE_BROKER_LOGGER",
    "RESOURCE_CLIENT_METRICS", "RESOURCE_TOPIC", "RESOURCE_UNKNOWN", "TopicImage", "TopicsImage",
    "acl_from_record", "acl_record", "frozen_map",
]
