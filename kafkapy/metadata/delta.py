"""MetadataDelta: records replayed on top of an image, folded into the next image by ``apply()``.

The delta keeps only what changed (per broker, per topic, per partition, per config resource);
``apply()`` builds new sub-images for the changed areas and hands back the base image's objects
for everything else, so consecutive images share most of their memory and identity checks
(``new.topics is old.topics``) tell a listener whether an area changed at all.
``apply_update()`` also says exactly what changed (a ``MetadataUpdate``), so listeners can
follow a one-record batch with work proportional to that record rather than to the cluster.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from kafkapy.metadata.client_quotas import QuotaEntity, apply_quota_changes, quota_entity
from kafkapy.metadata.image import (
    EMPTY_MAP,
    METADATA_VERSION_FEATURE,
    RESOURCE_TOPIC,
    AclsImage,
    BrokerRegistration,
    ClusterImage,
    ClusterLink,
    ConfigurationsImage,
    FeaturesImage,
    LinksImage,
    MetadataImage,
    MetadataReplayError,
    MirrorState,
    MirrorTopic,
    PartitionRegistration,
    ProducerIdsImage,
    TopicImage,
    TopicsImage,
    acl_from_record,
    frozen_map,
)
from kafkapy.metadata.pmap import sharded
from kafkapy.metadata.records import (
    ZERO_UUID,
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ClearElrRecord,
    ClientQuotaRecord,
    ClusterLinkRecord,
    ConfigRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataRecord,
    MirrorTopicRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveClusterLinkRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
)
from kafkapy.metadata.scram_image import ScramDelta
from kafkapy.metadata.update import MetadataUpdate
from kafkapy.security.acl import AclBinding

_REMOVED = None  # marks a broker removed in ``MetadataDelta._brokers``


@dataclass
class _TopicChange:
    """A topic created in this delta (``created``) or an existing one with partition changes."""

    name: str
    id: uuid.UUID
    created: bool
    partitions: dict[int, PartitionRegistration] = field(default_factory=dict)


@dataclass
class _ConfigChange:
    """Changes to one config resource. ``cleared``: start from nothing instead of the base
    (its topic was deleted in this delta)."""

    cleared: bool = False
    changes: dict[str, str | None] = field(default_factory=dict)


class MetadataDelta:
    """Accumulates records on top of ``image``; ``apply()`` returns the resulting image.

    ``replay`` raises ``MetadataReplayError`` for a record that contradicts the state (a topic
    created twice, a partition of an unknown topic, ...): a consistent log never does that.
    """

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self._offset = image.offset
        self._features: dict[str, int | None] = {}
        self._brokers: dict[int, BrokerRegistration | None] = {}
        self._topics: dict[uuid.UUID, _TopicChange] = {}
        self._deleted_topics: dict[uuid.UUID, str] = {}  # ids of base-image topics removed
        # Names of topics created in this delta and still live: a TopicRecord checks it rather
        # than scanning every change (a snapshot load creates all topics in one delta).
        self._created_names: dict[str, uuid.UUID] = {}
        self._configs: dict[tuple[int, str], _ConfigChange] = {}
        self._producer_ids: ProducerIdsImage | None = None
        # Cluster links and mirror topics changed in this delta (None: removed).
        self._links: dict[uuid.UUID, ClusterLink | None] = {}
        self._mirrors: dict[uuid.UUID, MirrorTopic | None] = {}
        # Topics whose MirrorTopicRecord was replayed: their partitions count as changed, so
        # the replica manager re-applies them (a mirror fetcher starts, stops or pauses).
        self._mirror_records: set[uuid.UUID] = set()
        # ACLs created (AclBinding) or removed (None) in this delta, by id.
        self._acls: dict[uuid.UUID, AclBinding | None] = {}
        self._scram = ScramDelta()
        # Client quota keys set (a value) or removed (None) in this delta, by entity.
        self._quotas: dict[QuotaEntity, dict[str, float | None]] = {}
        # Each handler takes its own record type: Any, not MetadataRecord, in the value type.
        self._handlers: dict[type, Callable[[Any], None]] = {
            TopicRecord: self._replay_topic,
            PartitionRecord: self._replay_partition,
            PartitionChangeRecord: self._replay_partition_change,
            RemoveTopicRecord: self._replay_remove_topic,
            ClearElrRecord: self._replay_clear_elr,
            ConfigRecord: self._replay_config,
            FeatureLevelRecord: self._replay_feature,
            RegisterBrokerRecord: self._replay_register_broker,
            UnregisterBrokerRecord: self._replay_unregister_broker,
            FenceBrokerRecord: self._replay_fence,
            UnfenceBrokerRecord: self._replay_unfence,
            BrokerRegistrationChangeRecord: self._replay_broker_change,
            ProducerIdsRecord: self._replay_producer_ids,
            ClusterLinkRecord: self._replay_cluster_link,
            RemoveClusterLinkRecord: self._replay_remove_cluster_link,
            MirrorTopicRecord: self._replay_mirror_topic,
            AccessControlEntryRecord: self._replay_acl,
            RemoveAccessControlEntryRecord: self._replay_remove_acl,
            UserScramCredentialRecord: self._scram.replay_upsert,
            RemoveUserScramCredentialRecord: self._scram.replay_remove,
            ClientQuotaRecord: self._replay_client_quota,
            NoOpRecord: lambda rec: None,
        }

    # -- public ------------------------------------------------------------------------------

    @property
    def offset(self) -> int:
        """Offset of the last record replayed (the base image's offset when none yet)."""
        return self._offset

    def replay(self, record: MetadataRecord, offset: int) -> None:
        """Apply one committed ``record`` found at log ``offset``."""
        if offset <= self._offset:
            raise MetadataReplayError(
                f"record at offset {offset} is not after the last applied offset {self._offset}")
        handler = self._handlers.get(type(record))
        if handler is None:
            raise MetadataReplayError(f"cannot replay {type(record).__name__}")
        handler(record)
        self._offset = offset

    def apply(self) -> MetadataImage:
        """The image after everything replayed so far."""
        return self._build()[0]

    def apply_update(self) -> MetadataUpdate:
        """The image after everything replayed so far, with what changed since ``self.image``."""
        image, changed_configs = self._build()
        base = self.image
        changed_partitions: dict[uuid.UUID, frozenset[int]] = {}
        created: list[uuid.UUID] = []
        for topic_id, change in self._topics.items():
            if change.created:
                created.append(topic_id)
                changed_partitions[topic_id] = frozenset(change.partitions)
            elif change.partitions:
                changed_partitions[topic_id] = frozenset(change.partitions)
        for topic_id in self._mirror_records:
            topic = image.topics.by_id.get(topic_id)
            if topic is not None:
                changed_partitions[topic_id] = frozenset(topic.partitions)
        changed_brokers = frozenset(
            broker_id for broker_id, reg in self._brokers.items()
            if base.cluster.brokers.get(broker_id) != reg)
        return MetadataUpdate(
            previous=base, image=image,
            changed_partitions=frozen_map(changed_partitions),
            created_topics=frozenset(created),
            deleted_topics=frozen_map(self._deleted_topics),
            changed_configs=changed_configs,
            changed_brokers=changed_brokers,
            features_changed=image.features is not base.features,
            producer_ids_changed=image.producer_ids is not base.producer_ids,
            links_changed=image.links is not base.links,
            acls_changed=image.acls is not base.acls,
            client_quotas_changed=image.client_quotas is not base.client_quotas,
        )

    def _build(self) -> tuple[MetadataImage, frozenset[tuple[int, str]]]:
        base = self.image
        configs, changed_configs = self._apply_configs()
        image = MetadataImage(
            cluster_id=base.cluster_id,
            offset=self._offset,
            features=self._apply_features(),
            cluster=self._apply_cluster(),
            topics=self._apply_topics(),
            configs=configs,
            producer_ids=self._producer_ids if self._producer_ids is not None else base.producer_ids,
            links=self._apply_links(),
            acls=self._apply_acls(),
            scram=self._scram.apply(base.scram),
            client_quotas=apply_quota_changes(base.client_quotas, self._quotas),
        )
        return image, changed_configs

    # -- lookups through the delta ---------------------------------------------------------

    def broker(self, broker_id: int) -> BrokerRegistration | None:
        if broker_id in self._brokers:
            return self._brokers[broker_id]
        return self.image.cluster.brokers.get(broker_id)

    def _topic_change(self, topic_id: uuid.UUID) -> _TopicChange | None:
        """The live topic with this id, as a change entry (created on first touch)."""
        change = self._topics.get(topic_id)
        if change is not None:
            return change
        if topic_id in self._deleted_topics:
            return None
        base = self.image.topics.by_id.get(topic_id)
        if base is None:
            return None
        change = _TopicChange(base.name, base.id, created=False)
        self._topics[topic_id] = change
        return change

    def _current_partition(self, change: _TopicChange, index: int) -> PartitionRegistration | None:
        if index in change.partitions:
            return change.partitions[index]
        if change.created:
            return None
        return self.image.topics.by_id[change.id].partitions.get(index)

    def _topic_name_live(self, name: str) -> bool:
        if name in self._created_names:
            return True
        base = self.image.topics.by_name.get(name)
        return base is not None and base.id not in self._deleted_topics

    # -- topics ------------------------------------------------------------------------------

    def _replay_topic(self, rec: TopicRecord) -> None:
        if self._topic_name_live(rec.name):
            raise MetadataReplayError(f"topic {rec.name!r} already exists")
        if rec.topic_id in self._topics or (
                rec.topic_id in self.image.topics.by_id and rec.topic_id not in self._deleted_topics):
            raise MetadataReplayError(f"topic id {rec.topic_id} already exists")
        self._topics[rec.topic_id] = _TopicChange(rec.name, rec.topic_id, created=True)
        self._created_names[rec.name] = rec.topic_id

    def _replay_partition(self, rec: PartitionRecord) -> None:
        change = self._topic_change(rec.topic_id)
        if change is None:
            raise MetadataReplayError(f"PartitionRecord for unknown topic id {rec.topic_id}")
        change.partitions[rec.partition_id] = PartitionRegistration.from_record(rec)

    def _replay_partition_change(self, rec: PartitionChangeRecord) -> None:
        change = self._topic_change(rec.topic_id)
        if change is None:
            raise MetadataReplayError(f"PartitionChangeRecord for unknown topic id {rec.topic_id}")
        current = self._current_partition(change, rec.partition_id)
        if current is None:
            raise MetadataReplayError(
                f"PartitionChangeRecord for unknown partition {rec.partition_id} of {change.name}")
        change.partitions[rec.partition_id] = current.merge(rec)

    def _replay_remove_topic(self, rec: RemoveTopicRecord) -> None:
        change = self._topic_change(rec.topic_id)
        if change is None:
            raise MetadataReplayError(f"RemoveTopicRecord for unknown topic id {rec.topic_id}")
        del self._topics[rec.topic_id]
        if change.created:
            del self._created_names[change.name]
        else:
            self._deleted_topics[rec.topic_id] = change.name
        # A topic's configs die with it (Kafka drops them when it replays the removal).
        self._configs[(RESOURCE_TOPIC, change.name)] = _ConfigChange(cleared=True)
        # So does its mirror entry.
        self._mirror_records.discard(rec.topic_id)
        if self._mirror(rec.topic_id) is not None:
            self._mirrors[rec.topic_id] = None

    def _replay_clear_elr(self, rec: ClearElrRecord) -> None:
        if rec.topic_name:
            topic_id = self._created_names.get(rec.topic_name)
            if topic_id is None:
                base = self.image.topics.by_name.get(rec.topic_name)
                if base is None or base.id in self._deleted_topics:
                    raise MetadataReplayError(f"ClearElrRecord for unknown topic {rec.topic_name!r}")
                topic_id = base.id
            ids = [topic_id]
        else:
            ids = [t for t in self.image.topics.by_id if t not in self._deleted_topics]
            ids.extend(t for t, c in self._topics.items() if c.created)
        cleared = PartitionChangeRecord(partition_id=0, topic_id=ZERO_UUID,
                                        eligible_leader_replicas=(), last_known_elr=())
        for topic_id in ids:
            change = self._topic_change(topic_id)
            assert change is not None
            indexes = set(change.partitions)
            if not change.created:
                indexes.update(self.image.topics.by_id[topic_id].partitions)
            for index in sorted(indexes):
                current = self._current_partition(change, index)
                # As Kafka's merge: only a partition with something to clear changes (and its
                # partition epoch moves).
                if current is not None and (current.elr or current.last_known_elr):
                    change.partitions[index] = current.merge(cleared)

    # -- configs and features ---------------------------------------------------------------

    def _replay_config(self, rec: ConfigRecord) -> None:
        key = (rec.resource_type, rec.resource_name)
        self._configs.setdefault(key, _ConfigChange()).changes[rec.name] = rec.value

    def _replay_feature(self, rec: FeatureLevelRecord) -> None:
        if rec.name == METADATA_VERSION_FEATURE and rec.feature_level == 0:
            raise MetadataReplayError("metadata.version cannot be removed")
        # Level 0 means the feature is no longer finalized.
        self._features[rec.name] = rec.feature_level if rec.feature_level != 0 else None

    def _replay_client_quota(self, rec: ClientQuotaRecord) -> None:
        entity = quota_entity((e.entity_type, e.entity_name) for e in rec.entity)
        self._quotas.setdefault(entity, {})[rec.key] = None if rec.remove else rec.value

    # -- brokers -----------------------------------------------------------------------------

    def _replay_register_broker(self, rec: RegisterBrokerRecord) -> None:
        self._brokers[rec.broker_id] = BrokerRegistration.from_record(rec)

    def _existing_broker(self, broker_id: int, epoch: int, what: str) -> BrokerRegistration:
        current = self.broker(broker_id)
        if current is None:
            raise MetadataReplayError(f"{what} for unregistered broker {broker_id}")
        if current.epoch != epoch:
            raise MetadataReplayError(
                f"{what} for broker {broker_id} epoch {epoch}, but its epoch is {current.epoch}")
        return current

    def _replay_unregister_broker(self, rec: UnregisterBrokerRecord) -> None:
        self._existing_broker(rec.broker_id, rec.broker_epoch, "UnregisterBrokerRecord")
        self._brokers[rec.broker_id] = _REMOVED

    def _replay_fence(self, rec: FenceBrokerRecord) -> None:
        cur = self._existing_broker(rec.id, rec.epoch, "FenceBrokerRecord")
        self._brokers[rec.id] = replace(cur, fenced=True)

    def _replay_unfence(self, rec: UnfenceBrokerRecord) -> None:
        cur = self._existing_broker(rec.id, rec.epoch, "UnfenceBrokerRecord")
        self._brokers[rec.id] = replace(cur, fenced=False)

    def _replay_broker_change(self, rec: BrokerRegistrationChangeRecord) -> None:
        cur = self._existing_broker(rec.broker_id, rec.broker_epoch, "BrokerRegistrationChangeRecord")
        changes: dict[str, Any] = {}
        if rec.fenced == BrokerRegistrationChangeRecord.FENCE:
            changes["fenced"] = True
        elif rec.fenced == BrokerRegistrationChangeRecord.UNFENCE:
            changes["fenced"] = False
        elif rec.fenced != 0:
            raise MetadataReplayError(f"bad fencing change {rec.fenced}")
        if rec.in_controlled_shutdown == 1:
            changes["in_controlled_shutdown"] = True
        if rec.log_dirs:
            changes["log_dirs"] = tuple(rec.log_dirs)
        self._brokers[rec.broker_id] = replace(cur, **changes)

    # -- producer ids --------------------------------------------------------------------------

    def _replay_producer_ids(self, rec: ProducerIdsRecord) -> None:
        current = self._producer_ids or self.image.producer_ids
        if rec.next_producer_id <= current.next_producer_id:
            raise MetadataReplayError(
                f"next producer id {rec.next_producer_id} does not advance past "
                f"{current.next_producer_id}")
        self._producer_ids = ProducerIdsImage(rec.next_producer_id, rec.broker_id, rec.broker_epoch)

    # -- cluster links and mirror topics -------------------------------------------------------

    def _link(self, link_id: uuid.UUID) -> ClusterLink | None:
        if link_id in self._links:
            return self._links[link_id]
        return self.image.links.by_id.get(link_id)

    def _mirror(self, topic_id: uuid.UUID) -> MirrorTopic | None:
        if topic_id in self._mirrors:
            return self._mirrors[topic_id]
        return self.image.links.mirrors.get(topic_id)

    def _live_links(self) -> list[ClusterLink]:
        live = [link for link_id, link in self.image.links.by_id.items() if link_id not in self._links]
        live.extend(link for link in self._links.values() if link is not None)
        return live

    def _live_mirrors(self) -> list[MirrorTopic]:
        live = [m for topic_id, m in self.image.links.mirrors.items() if topic_id not in self._mirrors]
        live.extend(m for m in self._mirrors.values() if m is not None)
        return live

    def _topic_id_live(self, topic_id: uuid.UUID) -> bool:
        if topic_id in self._topics:
            return True  # created here, or a base topic touched and not removed
        return topic_id in self.image.topics.by_id and topic_id not in self._deleted_topics

    def _replay_cluster_link(self, rec: ClusterLinkRecord) -> None:
        for link in self._live_links():
            if link.name == rec.link_name and link.id != rec.link_id:
                raise MetadataReplayError(
                    f"cluster link {rec.link_name!r} already exists with id {link.id}")
        configs = {c.name: c.value for c in rec.configs}
        self._links[rec.link_id] = ClusterLink(rec.link_id, rec.link_name, rec.source_cluster_id,
                                               frozen_map(dict(sorted(configs.items()))))

    def _replay_remove_cluster_link(self, rec: RemoveClusterLinkRecord) -> None:
        if self._link(rec.link_id) is None:
            raise MetadataReplayError(f"RemoveClusterLinkRecord for unknown link id {rec.link_id}")
        mirrors = [m for m in self._live_mirrors() if m.link_id == rec.link_id]
        running = [m.source_topic for m in mirrors if m.state != MirrorState.STOPPED]
        if running:
            # The controller stops a link's mirrors (in the same batch) before removing it.
            raise MetadataReplayError(
                f"cluster link {rec.link_id} removed while mirrors of {running} still run")
        # Its stopped mirrors are plain topics from here on: nothing refers to the link.
        for m in mirrors:
            self._mirrors[m.topic_id] = None
        self._links[rec.link_id] = None

    def _replay_mirror_topic(self, rec: MirrorTopicRecord) -> None:
        if not self._topic_id_live(rec.topic_id):
            raise MetadataReplayError(f"MirrorTopicRecord for unknown topic id {rec.topic_id}")
        if self._link(rec.link_id) is None:
            raise MetadataReplayError(f"MirrorTopicRecord for unknown link id {rec.link_id}")
        try:
            state = MirrorState(rec.state)
        except ValueError:
            raise MetadataReplayError(f"MirrorTopicRecord with unknown state {rec.state}") from None
        self._mirrors[rec.topic_id] = MirrorTopic(
            topic_id=rec.topic_id, link_id=rec.link_id, source_topic=rec.source_topic,
            source_topic_id=rec.source_topic_id, state=state, epoch_ceiling=rec.epoch_ceiling)
        self._mirror_records.add(rec.topic_id)

    # -- ACLs ----------------------------------------------------------------------------------

    def _replay_acl(self, rec: AccessControlEntryRecord) -> None:
        self._acls[rec.id] = acl_from_record(rec)

    def _replay_remove_acl(self, rec: RemoveAccessControlEntryRecord) -> None:
        known = self._acls[rec.id] if rec.id in self._acls else self.image.acls.by_id.get(rec.id)
        if known is None:
            raise MetadataReplayError(f"RemoveAccessControlEntryRecord for unknown ACL id {rec.id}")
        self._acls[rec.id] = None

    def _apply_acls(self) -> AclsImage:
        if not self._acls:
            return self.image.acls
        return AclsImage(_merged(self.image.acls.by_id, self._acls))

    # -- apply ---------------------------------------------------------------------------------

    def _apply_features(self) -> FeaturesImage:
        base = self.image.features
        if not self._features:
            return base
        levels = dict(base.levels)
        for name, level in self._features.items():
            if level is None:
                levels.pop(name, None)
            else:
                levels[name] = level
        return FeaturesImage(frozen_map(levels))

    def _apply_cluster(self) -> ClusterImage:
        base = self.image.cluster
        if not self._brokers:
            return base
        brokers = dict(base.brokers)
        for broker_id, reg in self._brokers.items():
            if reg is None:
                brokers.pop(broker_id, None)
            else:
                brokers[broker_id] = reg
        return ClusterImage(frozen_map(dict(sorted(brokers.items()))))

    def _apply_links(self) -> LinksImage:
        base = self.image.links
        if not self._links and not self._mirrors:
            return base
        return LinksImage(_merged(base.by_id, self._links), _merged(base.mirrors, self._mirrors))

    def _apply_topics(self) -> TopicsImage:
        base = self.image.topics
        if not self._topics and not self._deleted_topics:
            return base
        by_id: dict[uuid.UUID, TopicImage] = {}
        by_name: dict[str, TopicImage] = {}
        for topic_id, change in self._topics.items():
            if change.created:
                parts = dict(sorted(change.partitions.items()))
            else:
                if not change.partitions:
                    continue  # touched but unchanged: keep the old object
                old = base.by_id[topic_id].partitions
                parts = {**old, **change.partitions}
                if len(parts) != len(old):
                    parts = dict(sorted(parts.items()))  # new partitions: keep index order
            # ``parts`` is a fresh dict nobody else holds: wrap it rather than copy it again.
            topic = TopicImage(change.name, topic_id, MappingProxyType(parts) if parts else EMPTY_MAP)
            by_id[topic_id] = topic
            by_name[change.name] = topic
        # Only the changed entries are copied (ShardedMap): this runs for every committed batch.
        return TopicsImage(
            sharded(base.by_id).updated(by_id, removed=self._deleted_topics),
            sharded(base.by_name).updated(by_name, removed=self._deleted_topics.values()),
        )

    def _apply_configs(self) -> tuple[ConfigurationsImage, frozenset[tuple[int, str]]]:
        """The new configs, and the resources whose settings differ from the base's."""
        base = self.image.configs
        if not self._configs:
            return base, frozenset()
        updates: dict[tuple[int, str], Mapping[str, str]] = {}
        removed: list[tuple[int, str]] = []
        for key, change in self._configs.items():
            before = base.resources.get(key, {})
            current = {} if change.cleared else dict(before)
            for name, value in change.changes.items():
                if value is None:
                    current.pop(name, None)
                else:
                    current[name] = value
            if current == before:
                continue
            if current:
                updates[key] = frozen_map(dict(sorted(current.items())))
            else:
                removed.append(key)
        if not updates and not removed:
            return base, frozenset()
        resources = sharded(base.resources).updated(updates, removed=removed)
        return ConfigurationsImage(resources), frozenset(updates) | frozenset(removed)


def _merged(base: Mapping[Any, Any], changes: Mapping[Any, Any]) -> Mapping[Any, Any]:
    """``base`` with ``changes`` applied (a None value removes its key); ``base`` itself when
    there are none."""
    if not changes:
        return base
    merged = dict(base)
    for key, value in changes.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return frozen_map(merged)


def replay_all(image: MetadataImage,
               records_with_offsets: Iterable[tuple[MetadataRecord, int]]) -> MetadataImage:
    """Convenience: replay ``(record, offset)`` pairs on ``image`` and apply."""
    delta = MetadataDelta(image)
    for rec, offset in records_with_offsets:
        delta.replay(rec, offset)
    return delta.apply()


__all__ = ["MetadataDelta", "replay_all"]
