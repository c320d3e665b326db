"""Large metadata steps create their logs in the background (LogCreator + ReplicaManager)."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator

import pytest
import trio

from kafkapy.broker import replica_manager as rm_module
from kafkapy.broker.log_creation import LogCreator
from kafkapy.broker.metadata_publisher import BrokerMetadata
from kafkapy.broker.replica_manager import ReplicaManager
from kafkapy.config import BrokerConfig
from kafkapy.log import files
from kafkapy.log.config import LogConfig
from kafkapy.log.log_manager import LogManager
from kafkapy.metadata.records import (
    FeatureLevelRecord,
    MetadataRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from kafkapy.protocol.errors import ErrorCode, KafkaError

NODE = 1
LIMIT = 3  # INLINE_CREATE_LIMIT for these tests


class Broker:
    """A broker's metadata, replica manager and log creator over real logs in a temp dir."""

    def __init__(self, log_dir: str, *, chunk_size: int = 4) -> None:
        self.log_dir = log_dir
        self.logs = LogManager([log_dir], LogConfig(), now_ms=0)
        self.replicas = ReplicaManager(self.logs, BrokerConfig(), NODE)
        self.hosted_topics: list[set[str]] = []
        self.creator = LogCreator(self.replicas, lambda: 0, chunk_size=chunk_size,
                                  on_hosted=self.hosted_topics.append)
        self.replicas.log_creator = self.creator
        self.metadata = BrokerMetadata("c")
        self.metadata.add_update_publisher(lambda u: self.replicas.apply_update(u, now_ms=0))
        self.offset = 0
        self.commit([FeatureLevelRecord("metadata.version", 21),
                     RegisterBrokerRecord(NODE, uuid.UUID(int=NODE), 10, fenced=False)])

    def commit(self, records: list[MetadataRecord]) -> None:
        batch = []
        for r in records:
            batch.append((r, self.offset))
            self.offset += 1
        self.metadata.on_commit(batch)

    def create_topic(self, name: str, partitions: int, topic_id: uuid.UUID | None = None) -> uuid.UUID:
        topic_id = topic_id or uuid.uuid4()
        self.commit([TopicRecord(name, topic_id)] + [
            PartitionRecord(i, topic_id, (NODE,), (NODE,), NODE) for i in range(partitions)])
        return topic_id

    def hosted(self) -> dict[tuple[str, int], uuid.UUID]:
        return {(h.topic, h.index): h.topic_id for h in self.replicas.partitions()}

    def dirs(self, topic: str) -> list[str]:
        """The topic's live partition dirs (not those renamed for deletion)."""
        return sorted(n for n in os.listdir(self.log_dir) if n.startswith(f"{topic}-")
                      and files.parse_dir_name(n) is not None)

    def close(self) -> None:
        self.logs.shutdown()


@pytest.fixture
def broker(monkeypatch) -> Iterator[Broker]:
    monkeypatch.setattr(rm_module, "INLINE_CREATE_LIMIT", LIMIT)
    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    d = tempfile.mkdtemp(prefix="kafkapy-creation-", dir=base)
    b = Broker(d)
    yield b
    b.close()
    shutil.rmtree(d, ignore_errors=True)


def test_a_small_step_creates_its_logs_inline(broker):
    broker.create_topic("small", LIMIT)
    assert sorted(broker.hosted()) == [("small", i) for i in range(LIMIT)]
    assert len(broker.creator) == 0
    assert broker.replicas.leader("small", 0).is_leader(NODE)


def test_a_large_step_is_served_only_once_its_logs_exist(broker):
    broker.create_topic("big", 10)
    assert broker.hosted() == {} and len(broker.creator) == 10
    assert broker.dirs("big") == []
    # Known to the metadata, not hosted yet: a retriable answer, as Kafka gives.
    with pytest.raises(KafkaError) as err:
        broker.replicas.leader("big", 7)
    assert err.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    with pytest.raises(KafkaError) as err:
        broker.replicas.get("unknown", 0)
    assert err.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    async def create_all() -> list[int]:
        counts = []
        while len(broker.creator):
            counts.append(await broker.creator.create_chunk())
        return counts

    assert trio.run(create_all) == [4, 4, 2]  # chunks of chunk_size, in order
    assert sorted(broker.hosted()) == [("big", i) for i in range(10)]
    assert broker.hosted_topics == [{"big"}, {"big"}, {"big"}]
    hosted = broker.replicas.leader("big", 7)
    assert hosted.leader_epoch == 0
    # The new leader's epoch was written with the log, so becoming leader changed nothing.
    assert [(e.epoch, e.start_offset) for e in hosted.log.leader_epoch_cache.entries] == [(0, 0)]
    assert os.path.exists(os.path.join(hosted.log.dir, files.LEADER_EPOCH_CHECKPOINT))


def test_the_creator_task_works_through_everything_waiting(broker):
    broker.create_topic("a", 6)
    broker.create_topic("b", 5)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(broker.creator.run)
            with trio.fail_after(30):
                await broker.creator.wait_idle()
            nursery.cancel_scope.cancel()

    trio.run(main)
    assert len(broker.hosted()) == 11 and broker.creator.created == 11


def test_a_topic_deleted_while_waiting_gets_no_log(broker):
    topic_id = broker.create_topic("gone", 8)
    broker.commit([RemoveTopicRecord(topic_id)])
    trio.run(broker.creator.create_chunk)
    trio.run(broker.creator.create_chunk)
    assert broker.hosted() == {} and len(broker.creator) == 0
    assert broker.dirs("gone") == []


def test_a_step_landing_while_a_chunk_is_made_is_honoured(broker):
    """Deleted and recreated under a new id while its files were being made: the stale log
    goes and the partition is made again for the new topic id."""
    old_id = broker.create_topic("flip", 4)
    keys = [("flip", i) for i in range(4)]
    specs = broker.replicas.new_log_specs(keys)
    results = broker.replicas.create_new_logs(specs, now_ms=0)
    broker.commit([RemoveTopicRecord(old_id)])
    new_id = broker.create_topic("flip", 4)
    assert all(k in broker.creator for k in keys)
    for key in keys:  # as create_chunk does: out of flight, then hosted (or not)
        broker.creator._pending.pop(key, None)
    assert [broker.replicas.take_created(s, r, now_ms=0) for s, r in zip(specs, results)] == [False] * 4
    assert broker.hosted() == {} and len(broker.creator) == 4  # waiting again, for the new id
    trio.run(broker.creator.create_chunk)
    assert broker.hosted() == {k: new_id for k in keys}
    assert broker.dirs("flip") == [f"flip-{i}" for i in range(4)]
