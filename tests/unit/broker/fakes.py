"""In-memory stand-ins for what the replica manager drives (logs, the log manager), and an
in-memory broker for handler tests."""

from __future__ import annotations

import os
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import trio

from kafkapy.broker.context import BrokerContext
from kafkapy.broker.replica_manager import ReplicaManager
from kafkapy.broker.replica_results import AppendResult
from kafkapy.config import BrokerConfig, Listener
from kafkapy.log.config import LogConfig
from kafkapy.log.log_manager import LogManager
from kafkapy.metadata.delta import MetadataDelta
from kafkapy.metadata.image import MetadataImage
from kafkapy.metadata.records import PartitionRecord, RegisterBrokerRecord, TopicRecord
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.protocol.events import FileRegion
from kafkapy.records.builder import Record, build_batch


class FakeAbortedTxn(NamedTuple):
    """An aborted transaction as the log's transaction index gives it (log.transaction_index)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int = 0


@dataclass
class FakeTxnIndex:
    """A log's aborted transactions behind ``collect_aborted_transactions`` (the PartitionLog
    method), recording each [start, upper bound) range it was asked about."""

    aborted: list[FakeAbortedTxn] = field(default_factory=list)
    asked: list[tuple[int, int]] = field(default_factory=list)

    def collect_aborted_transactions(self, start_offset: int,
                                     upper_bound_offset: int) -> list[FakeAbortedTxn]:
        self.asked.append((start_offset, upper_bound_offset))
        return [t for t in self.aborted
                if t.last_offset >= start_offset and t.first_offset < upper_bound_offset]


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
    txn_index: FakeTxnIndex = field(default_factory=FakeTxnIndex)

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        self.config_updates += 1

    def collect_aborted_transactions(self, start_offset: int,
                                     upper_bound_offset: int) -> list[FakeAbortedTxn]:
        return self.txn_index.collect_aborted_transactions(start_offset, upper_bound_offset)


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


class TrioWallClock:
    """Wall-clock milliseconds that follow Trio's clock (a MockClock moves them too)."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self.start_ms = start_ms

    def now_ms(self) -> int:
        return self.start_ms + int(trio.current_time() * 1000)


class InMemoryBroker:
    """One broker as its API handlers see it, without sockets or a node process: a real
    ReplicaManager over real partition logs in ``root``, and a metadata image stepped record by
    record (as the broker's metadata publisher does), behind a ``BrokerContext``."""

    def __init__(self, root: Any, node_id: int = 1, brokers: tuple[int, ...] = (1, 2, 3)) -> None:
        self.node_id = node_id
        self.log_manager = LogManager([str(root)], LogConfig(), now_ms=0)
        config = BrokerConfig.from_sources({})
        self.replicas = ReplicaManager(self.log_manager, config, node_id)
        self.image = MetadataImage.empty("test-cluster")
        self.step(*(RegisterBrokerRecord(broker_id=b, incarnation_id=uuid.UUID(int=b), broker_epoch=b,
                                         fenced=False) for b in brokers))
        self.ctx = BrokerContext(node_id=node_id, cluster_id="test-cluster", config=config,
                                 clock=TrioWallClock(), replicas=self.replicas, image=lambda: self.image,
                                 controller=None, advertised=[Listener("PLAINTEXT", "127.0.0.1", 9092)])

    def step(self, *records: Any) -> None:
        delta = MetadataDelta(self.image)
        for offset, record in enumerate(records, start=self.image.offset + 1):
            delta.replay(record, offset)
        update = delta.apply_update()
        self.image = update.image
        self.replicas.apply_update(update, now_ms=0)

    def create(self, name: str, topic_id: uuid.UUID, partitions: int = 1, *,
               replicas: tuple[int, ...] | None = None, leader: int | None = None,
               leader_epoch: int = 0) -> None:
        replicas = replicas or (self.node_id,)
        leader = replicas[0] if leader is None else leader
        self.step(TopicRecord(name=name, topic_id=topic_id),
                  *(PartitionRecord(partition_id=p, topic_id=topic_id, replicas=replicas, isr=replicas,
                                    leader=leader, leader_epoch=leader_epoch, partition_epoch=0)
                    for p in range(partitions)))

    def produce(self, name: str, partition: int, *values: bytes, now_ms: int = 1_700_000_000_000) -> AppendResult:
        hosted = self.replicas.leader(name, partition)
        batch = bytearray(build_batch([Record(b"k", v) for v in values], now_ms=now_ms))
        return self.replicas.append(hosted, batch, now_ms=now_ms)

    def index_aborted(self, name: str, partition: int, *txns: FakeAbortedTxn) -> FakeTxnIndex:
        """Have the partition's log answer ``txns`` as its aborted transactions (in place of
        its transaction index), and return the index to see what reads asked of it."""
        index = FakeTxnIndex(list(txns))
        plog = self.replicas.get(name, partition).log
        plog.collect_aborted_transactions = index.collect_aborted_transactions
        return index

    def close(self) -> None:
        self.replicas.shutdown()
        self.log_manager.shutdown()


class CommittingController:
    """A combined node's controller door: runs an operation on ``controller`` and replays its
    records at once, as if the quorum committed them."""

    def __init__(self, controller: Any) -> None:
        self.controller = controller

    async def __call__(self, operation: Any) -> Any:
        result = operation(self.controller)
        offset = self.controller.last_applied_offset
        for i, rec in enumerate(result.records):
            self.controller.replay(rec, offset + 1 + i)
        return result.response


def reply_frame(reply: Any) -> bytes:
    """The bytes a handler's reply puts on the wire, file regions read as the listener sends
    them (and released)."""
    out = []
    for part in reply.parts:
        if isinstance(part, FileRegion):
            out.append(os.pread(part.fileno(), part.count, part.offset))
            part.release()
        else:
            out.append(bytes(part))
    return b"".join(out)
