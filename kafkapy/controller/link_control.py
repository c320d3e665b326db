"""ClusterLinkControlManager: cluster links and their mirror topics.

kafkapy's own manager (Kafka has no cluster links). It owns the ``links`` area of the image and
replays ClusterLinkRecord, RemoveClusterLinkRecord and MirrorTopicRecord. A mirror topic is
created by ReplicationControlManager's CreateTopics (same placement, validation and config
records) plus a MirrorTopicRecord.

Stopping a mirror must leave its partitions leading at an epoch above every leader epoch in its
logs, which are the source's. The controller cannot see the logs, so each mirror carries an
``epoch_ceiling`` its leaders never append past; stopping rewrites every partition with a leader
epoch above that ceiling.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence

from kafkapy.controller.control_manager import ControlManager, ImageSource, error
from kafkapy.controller.names import topic_name_error
from kafkapy.controller.replication_control import ReplicationControlManager
from kafkapy.controller.types import (
    ClusterLinkResult,
    ControllerResult,
    MirrorTopicResult,
    MirrorTopicSpec,
    NewTopic,
)
from kafkapy.metadata.image import ClusterLink, MirrorState, MirrorTopic, TopicImage
from kafkapy.metadata.link_configs import validate_link_configs
from kafkapy.metadata.records import (
    ZERO_UUID,
    ClusterLinkRecord,
    LinkConfig,
    MetadataRecord,
    MirrorTopicRecord,
    RemoveClusterLinkRecord,
)
from kafkapy.metadata.snapshot import partition_record_version
from kafkapy.protocol.errors import ErrorCode, KafkaError

#: Added to the highest leader epoch known when a mirror is created: the room its source's
#: leader epochs have to grow before the mirror must pause.
EPOCH_CEILING_MARGIN = 1_000_000

_RUNNING = (MirrorState.ACTIVE, MirrorState.PAUSED)
# Leader epochs are int32; the stop hands out the ceiling + 1.
_MAX_CEILING = (1 << 31) - 2


def epoch_ceiling(source_max_leader_epoch: int, topic: TopicImage | None) -> int:
    """The ceiling of a mirror created now: above the source's epochs and the topic's own."""
    local = max((p.leader_epoch for p in topic.partitions.values()), default=0) if topic else 0
    return min(max(source_max_leader_epoch, local, 0) + EPOCH_CEILING_MARGIN, _MAX_CEILING)


def _mirror_record(m: MirrorTopic) -> MirrorTopicRecord:
    return MirrorTopicRecord(m.topic_id, m.link_id, m.source_topic, m.source_topic_id,
                             int(m.state), m.epoch_ceiling)


def _duplicates(names: Iterable[str]) -> set[str]:
    seen: set[str] = set()
    dups: set[str] = set()
    for name in names:
        (dups if name in seen else seen).add(name)
    return dups


class ClusterLinkControlManager(ControlManager):
    """Creates, alters and deletes cluster links; creates, pauses, resumes and stops mirrors.

    Operations return records and learn their effect only by replay, like every manager.
    Errors: unknown link RESOURCE_NOT_FOUND; duplicate link name, a topic that is no mirror, a
    mirror in the wrong state INVALID_REQUEST; bad link configs INVALID_CONFIG.
    """

    record_types = (ClusterLinkRecord, RemoveClusterLinkRecord, MirrorTopicRecord)

    def __init__(self, *, image: ImageSource, replication: ReplicationControlManager,
                 uuid_source: Callable[[], uuid.UUID]) -> None:
        self._image = image
        self._replication = replication
        self._uuid_source = uuid_source

    # -- links -------------------------------------------------------------------------------

    def _link(self, name: str) -> ClusterLink:
        link = self._image().links.by_name(name)
        if link is None:
            raise error(ErrorCode.RESOURCE_NOT_FOUND, f"Cluster link '{name}' does not exist.")
        return link

    @staticmethod
    def _check_configs(configs: Mapping[str, str]) -> None:
        problem = validate_link_configs(configs)
        if problem is not None:
            raise error(ErrorCode.INVALID_CONFIG, problem)

    @staticmethod
    def _link_record(link_id: uuid.UUID, name: str, source_cluster_id: str,
                     configs: Mapping[str, str]) -> ClusterLinkRecord:
        return ClusterLinkRecord(link_id, name, source_cluster_id,
                                 tuple(LinkConfig(k, v) for k, v in sorted(configs.items())))

    def _new_link_id(self) -> uuid.UUID:
        while True:
            u = self._uuid_source()
            if u != ZERO_UUID and u not in self._image().links.by_id:
                return u

    def create_cluster_link(self, name: str, source_cluster_id: str, configs: Mapping[str, str],
                            *, validate_only: bool = False) -> ControllerResult[ClusterLinkResult]:
        """A new link named ``name`` to the cluster ``configs`` point at."""
        try:
            problem = topic_name_error(name)
            if problem is not None:
                raise error(ErrorCode.INVALID_REQUEST,
                            problem.replace("Topic name", "Cluster link name", 1))
            if self._image().links.by_name(name) is not None:
                raise error(ErrorCode.INVALID_REQUEST, f"Cluster link '{name}' already exists.")
            self._check_configs(configs)
        except KafkaError as e:
            return ControllerResult((), ClusterLinkResult(name, int(e.code), e.message))
        link_id = self._new_link_id()
        rec = self._link_record(link_id, name, source_cluster_id, configs)
        return ControllerResult(() if validate_only else (rec,), ClusterLinkResult(name, link_id=link_id))

    def alter_cluster_link_configs(self, name: str, configs: Mapping[str, str], *,
                                   validate_only: bool = False) -> ControllerResult[ClusterLinkResult]:
        """Replace link ``name``'s configs with ``configs``."""
        try:
            link = self._link(name)
            self._check_configs(configs)
        except KafkaError as e:
            return ControllerResult((), ClusterLinkResult(name, int(e.code), e.message))
        rec = self._link_record(link.id, link.name, link.source_cluster_id, configs)
        return ControllerResult(() if validate_only else (rec,), ClusterLinkResult(name, link_id=link.id))

    def delete_cluster_link(self, name: str, *, force: bool = False
                            ) -> ControllerResult[ClusterLinkResult]:
        """Delete link ``name``; ``force`` first stops its running mirrors (in the same batch),
        which are refused otherwise. Its stopped mirrors become plain topics."""
        try:
            link = self._link(name)
        except KafkaError as e:
            return ControllerResult((), ClusterLinkResult(name, int(e.code), e.message))
        running = sorted((m for m in self._image().links.mirrors_of(link.id) if m.state in _RUNNING),
                         key=self._topic_name)
        if running and not force:
            names = ", ".join(self._topic_name(m) for m in running)
            return ControllerResult((), ClusterLinkResult(
                name, ErrorCode.INVALID_REQUEST,
                f"Cluster link '{name}' still has {len(running)} ACTIVE or PAUSED mirror topic(s): "
                f"{names}. "
                "Stop them first, or delete the link with force.", link.id))
        records: list[MetadataRecord] = []
        for m in running:
            records.extend(self._stop_records(m))
        records.append(RemoveClusterLinkRecord(link.id))
        return ControllerResult(tuple(records), ClusterLinkResult(name, link_id=link.id))

    # -- mirror topics -----------------------------------------------------------------------

    def _topic_name(self, m: MirrorTopic) -> str:
        topic = self._image().topics.by_id.get(m.topic_id)
        return topic.name if topic is not None else ""

    def create_mirror_topics(self, specs: Sequence[MirrorTopicSpec], *, validate_only: bool = False
                             ) -> ControllerResult[list[MirrorTopicResult]]:
        """Create (or restore) mirror topics; one result per distinct name, in request order."""
        errors: dict[str, tuple[int, str | None]] = {
            name: (ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
            for name in _duplicates(s.name for s in specs)}
        unique = list({s.name: s for s in specs if s.name not in errors}.values())
        links: dict[str, ClusterLink] = {}
        records: list[MetadataRecord] = []
        topic_ids: dict[str, uuid.UUID] = {}
        to_create: list[MirrorTopicSpec] = []
        for spec in unique:
            try:
                links[spec.name] = self._link(spec.link_name)
                if not spec.source_topic:
                    raise error(ErrorCode.INVALID_REQUEST, "The source topic name is missing.")
                if spec.restore:
                    topic = self._restorable(spec)
                    topic_ids[spec.name] = topic.id
                    records.append(self._new_mirror(spec, links[spec.name], topic.id, topic))
                else:
                    to_create.append(spec)
            except KafkaError as e:
                errors[spec.name] = (int(e.code), e.message)
        if to_create:
            created = self._replication.create_topics([
                NewTopic(s.name, s.num_partitions, s.replication_factor, configs=dict(s.configs))
                for s in to_create])
            records.extend(created.records)
            for spec, result in zip(to_create, created.response):
                if result.error_code != ErrorCode.NONE:
                    errors[spec.name] = (result.error_code, result.error_message)
                    continue
                topic_ids[spec.name] = result.topic_id
                records.append(self._new_mirror(spec, links[spec.name], result.topic_id, None))
        results = [MirrorTopicResult(name, *errors[name]) if name in errors
                   else MirrorTopicResult(name, topic_id=topic_ids[name])
                   for name in dict.fromkeys(s.name for s in specs)]
        return ControllerResult(() if validate_only else tuple(records), results)

    def _restorable(self, spec: MirrorTopicSpec) -> TopicImage:
        topic = self._image().topics.by_name.get(spec.name)
        if topic is None:
            raise error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        f"Topic '{spec.name}' does not exist: there is nothing to restore.")
        current = self._image().links.mirror(topic.id)
        if current is not None and current.state in _RUNNING:
            raise error(ErrorCode.INVALID_REQUEST,
                        f"Topic '{spec.name}' is already a {current.state.name} mirror topic.")
        if spec.num_partitions != topic.num_partitions:
            raise error(ErrorCode.INVALID_PARTITIONS,
                        f"Topic '{spec.name}' has {topic.num_partitions} partition(s), but its "
                        f"source has {spec.num_partitions}.")
        return topic

    @staticmethod
    def _new_mirror(spec: MirrorTopicSpec, link: ClusterLink, topic_id: uuid.UUID,
                    topic: TopicImage | None) -> MirrorTopicRecord:
        """An ACTIVE mirror; ``topic`` is the existing topic restored (None: a new one)."""
        return MirrorTopicRecord(
            topic_id, link.id, spec.source_topic,
            spec.source_topic_id, int(MirrorState.ACTIVE),
            epoch_ceiling(spec.source_max_leader_epoch, topic))

    def pause_mirrors(self, names: Sequence[str]) -> ControllerResult[list[MirrorTopicResult]]:
        """ACTIVE mirrors stop fetching from their source (they stay read-only)."""
        return self._transition(names, (MirrorState.ACTIVE,), self._set_state(MirrorState.PAUSED))

    def resume_mirrors(self, names: Sequence[str]) -> ControllerResult[list[MirrorTopicResult]]:
        """PAUSED mirrors fetch from their source again."""
        return self._transition(names, (MirrorState.PAUSED,), self._set_state(MirrorState.ACTIVE))

    def stop_mirrors(self, names: Sequence[str]) -> ControllerResult[list[MirrorTopicResult]]:
        """ACTIVE or PAUSED mirrors become normal writable topics, their partitions leading at
        an epoch above the mirror's ceiling."""
        return self._transition(names, _RUNNING, self._stop_records)

    @staticmethod
    def _set_state(state: MirrorState) -> Callable[[MirrorTopic], list[MetadataRecord]]:
        return lambda m: [_mirror_record(dataclasses.replace(m, state=state))]

    def _stop_records(self, m: MirrorTopic) -> list[MetadataRecord]:
        """The stop, and every partition of the topic as it is but for its epochs: the leader
        epoch jumps above the ceiling (and above the current one) and the partition epoch
        moves, as for any partition change."""
        topic = self._image().topics.by_id[m.topic_id]
        version = partition_record_version(self._image().metadata_version)
        out: list[MetadataRecord] = [_mirror_record(dataclasses.replace(m, state=MirrorState.STOPPED))]
        for index, p in sorted(topic.partitions.items()):
            jumped = dataclasses.replace(p, leader_epoch=max(p.leader_epoch, m.epoch_ceiling) + 1,
                                         partition_epoch=p.partition_epoch + 1)
            out.append(jumped.to_record(topic.id, index, version))
        return out

    def _transition(self, names: Sequence[str], allowed: tuple[MirrorState, ...],
                    make: Callable[[MirrorTopic], list[MetadataRecord]]
                    ) -> ControllerResult[list[MirrorTopicResult]]:
        dups = _duplicates(names)
        results: list[MirrorTopicResult] = []
        records: list[MetadataRecord] = []
        for name in dict.fromkeys(names):
            if name in dups:
                results.append(MirrorTopicResult(name, ErrorCode.INVALID_REQUEST, "Duplicate topic name."))
                continue
            topic = self._image().topics.by_name.get(name)
            m = self._image().links.mirror(topic.id) if topic is not None else None
            if topic is None:
                results.append(MirrorTopicResult(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                 "This server does not host this topic-partition."))
            elif m is None:
                results.append(MirrorTopicResult(name, ErrorCode.INVALID_REQUEST,
                                                 f"Topic '{name}' is not a mirror topic.", topic.id))
            elif m.state not in allowed:
                wanted = " or ".join(s.name for s in allowed)
                results.append(MirrorTopicResult(
                    name, ErrorCode.INVALID_REQUEST,
                    f"Mirror topic '{name}' is {m.state.name}, not {wanted}.", topic.id))
            else:
                records.extend(make(m))
                results.append(MirrorTopicResult(name, topic_id=topic.id))
        return ControllerResult(tuple(records), results)


__all__ = ["EPOCH_CEILING_MARGIN", "ClusterLinkControlManager", "epoch_ceiling"]
