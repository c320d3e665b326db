"""In-memory stand-ins for what the replica manager drives (logs, the log manager)."""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass, field

from kafkapy.log.config import LogConfig
from kafkapy.protocol.errors import ErrorCode, KafkaError


class FakeEpochCache:
    def assign(self, epoch: int, start_offset: int) -> None:
        pass


@dataclass
class FakeLog:
    topic_id: uuid.UUID
    config: LogConfig
    config_updates: int = 0
    # What taking or giving up leadership reads and writes.
    log_end_offset: int = 0
    high_watermark: int = 0
    hw_follows_leo: bool = True
    leader_epoch_cache: FakeEpochCache = field(default_factory=FakeEpochCache)

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        self.config_updates += 1


@dataclass
class FakeLogManager:
    """The LogManager calls the replica manager makes, in memory; ``fail`` makes the next
    opening of a partition fail once."""

    logs: dict[tuple[str, int], FakeLog] = field(default_factory=dict)
    created: Counter = field(default_factory=Counter)
    deleted: Counter = field(default_factory=Counter)
    fail: set[tuple[str, int]] = field(default_factory=set)
    log_dirs: tuple[str, ...] = ("/nowhere",)
    offline_dirs: dict[str, str] = field(default_factory=dict)
    dir_offline_listeners: list = field(default_factory=list)

    def is_offline(self, topic: str, partition: int) -> bool:
        return False

    def get_or_create(self, topic: str, partition: int, topic_id: uuid.UUID, config: LogConfig,
                      *, now_ms: int) -> FakeLog:
        key = (topic, partition)
        if key in self.fail:
            self.fail.discard(key)
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "disk on fire")
        existing = self.logs.get(key)
        if existing is not None:
            assert existing.topic_id == topic_id, "would be INCONSISTENT_TOPIC_ID"
            existing.update_config(config)
            return existing
        self.created[key] += 1
        self.logs[key] = FakeLog(topic_id, config)
        return self.logs[key]

    def get(self, topic: str, partition: int) -> FakeLog | None:
        return self.logs.get((topic, partition))

    def delete(self, topic: str, partition: int) -> bool:
        self.deleted[(topic, partition)] += 1
        return self.logs.pop((topic, partition), None) is not None
