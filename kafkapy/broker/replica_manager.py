"""The partitions this broker hosts: their logs, appends, and waking long-poll fetches.

The replica manager follows the metadata image: when a partition assigned to this node appears it
opens (or creates) its log, when a topic is removed it deletes the log. Produce appends go through
here so that fetches parked in a long poll wake on new data instead of polling.

Two ways in: ``apply_image`` walks the whole image (a snapshot load, the first image), and
``apply_delta`` looks only at what one committed batch changed, so that following the metadata
log costs O(changes) per batch, not O(partitions). Both leave the same hosted partitions behind.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

import trio

from kafkapy.config import BrokerConfig
from kafkapy.log.config import LogConfig
from kafkapy.log.log_manager import LogManager
from kafkapy.log.partition_log import LogAppendResult, PartitionLog
from kafkapy.metadata.image import RESOURCE_TOPIC, MetadataImage, PartitionRegistration, TopicImage
from kafkapy.metadata.update import MetadataUpdate
from kafkapy.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)


@dataclass
class HostedPartition:
    """One partition replica on this broker."""

    topic: str
    topic_id: uuid.UUID
    index: int
    log: PartitionLog
    leader_id: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark


def topic_log_config(config: BrokerConfig, image: MetadataImage, topic: str) -> LogConfig:
    """A topic's effective log settings: its own configs over the broker's topic defaults."""
    props = config.topic_defaults()
    props.update(image.configs.topic(topic))
    return LogConfig.from_props(props, ignore_unknown=True)


class ReplicaManager:
    """Hosted partitions keyed by (topic, partition), kept in step with the metadata image."""

    def __init__(self, log_manager: LogManager, config: BrokerConfig, node_id: int) -> None:
        self._log_manager = log_manager
        self._config = config
        self._node_id = node_id
        self._partitions: dict[tuple[str, int], HostedPartition] = {}
        # Hosted partition indexes by topic name, so a deleted topic's logs are found without
        # scanning every hosted partition.
        self._by_topic: dict[str, set[int]] = {}
        # Partitions whose last apply failed (a log that would not open): retried next time.
        self._retry: set[tuple[str, int]] = set()
        self._appended = trio.Event()
        # Set while this broker has lost contact with the controllers for a whole session: it
        # has been fenced (or soon will be) and others may lead its partitions now, so it must
        # not accept writes or serve reads as their leader (the node sets it; see lifecycle).
        self.leadership_suspended = False
        # The image last applied: its configs tell whether a running log's settings changed.
        self._applied: MetadataImage | None = None

    def __len__(self) -> int:
        return len(self._partitions)

    @property
    def log_dirs(self) -> list[str]:
        return list(self._log_manager.log_dirs)

    def move_to_log_dir(self, topic: str, partition: int, log_dir: str) -> bool:
        """AlterReplicaLogDirs for one replica: see ``LogManager.move``."""
        return self._log_manager.move(topic, partition, log_dir)

    def partitions(self) -> list[HostedPartition]:
        return list(self._partitions.values())

    def get(self, topic: str, partition: int) -> HostedPartition:
        hosted = self._partitions.get((topic, partition))
        if hosted is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return hosted

    def leader(self, topic: str, partition: int, current_leader_epoch: int = -1) -> HostedPartition:
        """The partition if this broker leads it at the client's leader epoch (-1: any), as Kafka checks."""
        hosted = self.get(topic, partition)
        if hosted.leader_id != self._node_id or self.leadership_suspended:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if current_leader_epoch >= 0 and current_leader_epoch != hosted.leader_epoch:
            raise KafkaError(
                ErrorCode.FENCED_LEADER_EPOCH if current_leader_epoch < hosted.leader_epoch
                else ErrorCode.UNKNOWN_LEADER_EPOCH
            )
        return hosted

    def log_config(self, image: MetadataImage, topic: str) -> LogConfig:
        return topic_log_config(self._config, image, topic)

    def apply_update(self, update: MetadataUpdate, *, now_ms: int) -> None:
        """Follow one published metadata step: a full walk for a full update, else the delta."""
        if update.full:
            self.apply_image(update.image, now_ms=now_ms)
        else:
            self.apply_delta(update, now_ms=now_ms)

    def apply_image(self, image: MetadataImage, *, now_ms: int) -> None:
        """Open logs for partitions placed here and delete logs of topics that are gone.

        Every partition of the image is looked at; a partition that fails (its log cannot be
        opened) does not stop the others, and the first failure is raised at the end.
        """
        previous, self._applied = self._applied, image
        self._retry.clear()
        wanted: set[tuple[str, int]] = set()
        failures: list[KafkaError] = []
        for topic in image.topics.by_name.values():
            config_changed = previous is None or \
                previous.configs.topic(topic.name) != image.configs.topic(topic.name)
            sync = _TopicSync(self, image, topic, config_changed, now_ms)
            for index, reg in topic.partitions.items():
                if self._node_id in reg.replicas:
                    wanted.add((topic.name, index))
                sync.partition(index, reg, failures)
        for key in [k for k in self._partitions if k not in wanted]:
            self._drop(key)
        self._raise_first(failures)

    def apply_delta(self, update: MetadataUpdate, *, now_ms: int) -> None:
        """``apply_image(update.image)`` for a step from the image applied last, touching only
        the topics, partitions and topic configs the step changed.

        Partitions that failed in an earlier apply are tried again here, so one bad log is not
        forgotten until the next full walk.
        """
        image = update.image
        previous, self._applied = self._applied, image
        failures: list[KafkaError] = []
        # Deletions first: a topic deleted and recreated under the same name in one step must
        # lose its old logs before the new ones open.
        for name in sorted(set(update.deleted_topics.values())):
            live = image.topics.by_name.get(name)
            for index in sorted(self._by_topic.get(name, ())):
                if live is None or self._partitions[(name, index)].topic_id != live.id:
                    self._drop((name, index))
        touched: dict[str, set[int]] = {}
        for topic_id, indexes in update.changed_partitions.items():
            topic = image.topics.by_id.get(topic_id)
            if topic is not None:
                touched.setdefault(topic.name, set()).update(indexes)
        for topic_name, index in list(self._retry):
            touched.setdefault(topic_name, set()).add(index)
        self._retry.clear()
        for rtype, rname in update.changed_configs:
            if rtype == RESOURCE_TOPIC:
                touched.setdefault(rname, set())
        for name in sorted(touched):
            topic = image.topics.by_name.get(name)
            if topic is None:
                for index in sorted(touched[name]):
                    if (name, index) in self._partitions:
                        self._drop((name, index))  # a retried partition of a topic now gone
                continue
            config_changed = previous is None or \
                previous.configs.topic(name) != image.configs.topic(name)
            sync = _TopicSync(self, image, topic, config_changed, now_ms)
            for index in sorted(touched[name]):
                reg = topic.partitions.get(index)
                if reg is not None:
                    sync.partition(index, reg, failures)
                elif (name, index) in self._partitions:
                    self._drop((name, index))
            if config_changed:
                # Hosted partitions the step did not otherwise touch take the new settings too.
                for index in sorted(self._by_topic.get(name, ())):
                    if index not in touched[name]:
                        sync.refresh_config(self._partitions[(name, index)])
        self._raise_first(failures)

    @staticmethod
    def _raise_first(failures: list[KafkaError]) -> None:
        if failures:
            raise failures[0]

    def _host(self, hosted: HostedPartition) -> None:
        self._partitions[(hosted.topic, hosted.index)] = hosted
        self._by_topic.setdefault(hosted.topic, set()).add(hosted.index)

    def _drop(self, key: tuple[str, int]) -> None:
        hosted = self._partitions.pop(key)
        indexes = self._by_topic[key[0]]
        indexes.discard(key[1])
        if not indexes:
            del self._by_topic[key[0]]
        log.info("Deleting log of %s-%d", hosted.topic, hosted.index)
        self._log_manager.delete(hosted.topic, hosted.index)

    def append(self, hosted: HostedPartition, records: bytearray | memoryview, *, now_ms: int) -> LogAppendResult:
        """Append a produce request's batches as leader and wake fetches waiting for data."""
        if hosted.leader_id != self._node_id or self.leadership_suspended:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        result = hosted.log.append_as_leader(records, now_ms=now_ms, leader_epoch=hosted.leader_epoch)
        if not result.duplicate:
            # The log moves its high watermark with the log end offset until replication
            # tracks followers; waiting fetches can read the new data now.
            self._appended.set()
            self._appended = trio.Event()
        return result

    async def wait_for_append(self, deadline: float) -> None:
        """Sleep until some partition gets new data or ``deadline`` (trio time) passes."""
        with trio.move_on_at(deadline):
            await self._appended.wait()

    def shutdown(self) -> None:
        self._partitions.clear()
        self._by_topic.clear()


class _TopicSync:
    """Brings the hosted partitions of one topic in line with its image; shared by the full
    walk and the delta so both apply exactly the same rules."""

    def __init__(self, manager: ReplicaManager, image: MetadataImage, topic: TopicImage,
                 config_changed: bool, now_ms: int) -> None:
        self._manager = manager
        self._image = image
        self._topic = topic
        self._config_changed = config_changed
        self._now_ms = now_ms
        self._config: LogConfig | None = None

    def _log_config(self) -> LogConfig:
        if self._config is None:
            self._config = self._manager.log_config(self._image, self._topic.name)
        return self._config

    def refresh_config(self, hosted: HostedPartition) -> None:
        """A config change (AlterConfigs) applies to the running log at once."""
        if self._config_changed and hosted.topic_id == self._topic.id:
            hosted.log.update_config(self._log_config())

    def partition(self, index: int, reg: PartitionRegistration, failures: list[KafkaError]) -> None:
        """Host, update or drop replica ``index`` as ``reg`` says; a failure is recorded in
        ``failures`` (and retried on the next apply) rather than raised."""
        manager, topic = self._manager, self._topic
        key = (topic.name, index)
        hosted = manager._partitions.get(key)
        if manager._node_id not in reg.replicas:
            if hosted is not None:
                manager._drop(key)  # moved away, or a stale replica of an older topic id
            return
        if hosted is not None and hosted.topic_id == topic.id:
            hosted.leader_id, hosted.leader_epoch = reg.leader, reg.leader_epoch
            hosted.replicas, hosted.isr = list(reg.replicas), list(reg.isr)
            self.refresh_config(hosted)
            return
        if hosted is not None:
            manager._drop(key)  # same name, new id: the topic was deleted and recreated
        try:
            plog = manager._log_manager.get_or_create(topic.name, index, topic.id, self._log_config(),
                                                      now_ms=self._now_ms)
        except KafkaError as exc:
            log.error("Cannot open the log of %s-%d: %s", topic.name, index, exc)
            manager._retry.add(key)
            failures.append(exc)
            return
        manager._host(HostedPartition(topic.name, topic.id, index, plog, reg.leader,
                                      reg.leader_epoch, list(reg.replicas), list(reg.isr)))
