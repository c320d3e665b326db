"""The partitions this broker hosts: their logs, appends, and waking long-poll fetches.

The replica manager follows the metadata image: when a partition assigned to this node appears it
opens (or creates) its log, when a topic is removed it deletes the log. Produce appends go through
here so that fetches parked in a long poll wake on new data instead of polling.
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
from kafkapy.metadata.image import MetadataImage
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
        self._appended = trio.Event()
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
        if hosted.leader_id != self._node_id:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if current_leader_epoch >= 0 and current_leader_epoch != hosted.leader_epoch:
            raise KafkaError(
                ErrorCode.FENCED_LEADER_EPOCH if current_leader_epoch < hosted.leader_epoch
                else ErrorCode.UNKNOWN_LEADER_EPOCH
            )
        return hosted

    def log_config(self, image: MetadataImage, topic: str) -> LogConfig:
        return topic_log_config(self._config, image, topic)

    def apply_image(self, image: MetadataImage, *, now_ms: int) -> None:
        """Open logs for partitions placed here and delete logs of topics that are gone."""
        wanted: set[tuple[str, int]] = set()
        for topic in image.topics.by_name.values():
            config = None
            for index, reg in topic.partitions.items():
                if self._node_id not in reg.replicas:
                    continue
                key = (topic.name, index)
                wanted.add(key)
                hosted = self._partitions.get(key)
                if hosted is not None and hosted.topic_id == topic.id:
                    hosted.leader_id, hosted.leader_epoch = reg.leader, reg.leader_epoch
                    hosted.replicas, hosted.isr = list(reg.replicas), list(reg.isr)
                    previous = self._applied
                    if previous is None or previous.configs.topic(topic.name) != image.configs.topic(topic.name):
                        # A config change (AlterConfigs) applies to the running log at once.
                        config = config or self.log_config(image, topic.name)
                        hosted.log.update_config(config)
                    continue
                if hosted is not None:
                    # Same name, new id: the topic was deleted and recreated.
                    self._drop(key)
                if config is None:
                    config = self.log_config(image, topic.name)
                plog = self._log_manager.get_or_create(topic.name, index, topic.id, config, now_ms=now_ms)
                self._partitions[key] = HostedPartition(
                    topic.name, topic.id, index, plog, reg.leader, reg.leader_epoch, list(reg.replicas), list(reg.isr)
                )
        for key in [k for k in self._partitions if k not in wanted]:
            self._drop(key)
        self._applied = image

    def _drop(self, key: tuple[str, int]) -> None:
        hosted = self._partitions.pop(key)
        log.info("Deleting log of %s-%d", hosted.topic, hosted.index)
        self._log_manager.delete(hosted.topic, hosted.index)

    def append(self, hosted: HostedPartition, records: bytearray | memoryview, *, now_ms: int) -> LogAppendResult:
        """Append a produce request's batches as leader and wake fetches waiting for data."""
        if hosted.leader_id != self._node_id:
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
