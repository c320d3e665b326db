"""A deleted topic's logs leave the broker through the background deletion task (LogDeleter):
the metadata step only forgets them; the task renames, checkpoints and, after
file.delete.delay.ms, removes them, while a topic of the same name can be created at once."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator

import pytest
import trio

from kafkapy.broker.log_deletion import LogDeleter
from kafkapy.broker.metadata_publisher import BrokerMetadata
from kafkapy.broker.replica_manager import ReplicaManager
from kafkapy.config import BrokerConfig
from kafkapy.log import files
from kafkapy.log.checkpoint import read_offsets_checkpoint
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

NODE = 1
DELAY_MS = 60_000


class Broker:
    """Metadata, replica manager and log manager over real logs, with a clock the test moves."""

    def __init__(self, log_dir: str) -> None:
        self.log_dir = log_dir
        self.now_ms = 1_000
        self.logs = LogManager([log_dir], LogConfig.from_props({"file.delete.delay.ms": str(DELAY_MS)}),
                               now_ms=0, clock_ms=lambda: self.now_ms)
        self.replicas = ReplicaManager(self.logs, BrokerConfig(), NODE)
        self.metadata = BrokerMetadata("c")
        self.metadata.add_update_publisher(lambda u: self.replicas.apply_update(u, now_ms=self.now_ms))
        self.offset = 0
        self.commit([FeatureLevelRecord("metadata.version", 21),
                     RegisterBrokerRecord(NODE, uuid.UUID(int=NODE), 10, fenced=False)])

    def commit(self, records: list[MetadataRecord]) -> None:
        batch = []
        for r in records:
            batch.append((r, self.offset))
            self.offset += 1
        self.metadata.on_commit(batch)

    def create_topic(self, name: str, partitions: int) -> uuid.UUID:
        topic_id = uuid.uuid4()
        self.commit([TopicRecord(name, topic_id)] + [
            PartitionRecord(i, topic_id, (NODE,), (NODE,), NODE) for i in range(partitions)])
        return topic_id

    def names(self, topic: str) -> tuple[list[str], list[str]]:
        """(live partition dirs, dirs renamed for deletion) of ``topic``."""
        live, deleting = [], []
        for n in sorted(os.listdir(self.log_dir)):
            if (tp := files.parse_dir_name(n)) is not None and tp[0] == topic:
                live.append(n)
            elif (sp := files.parse_special_dir_name(n)) is not None and sp[0] == topic:
                deleting.append(n)
        return live, deleting


@pytest.fixture
def broker() -> Iterator[Broker]:
    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    d = tempfile.mkdtemp(prefix="kafkapy-deletion-", dir=base)
    b = Broker(d)
    yield b
    b.logs.shutdown()
    shutil.rmtree(d, ignore_errors=True)


async def until(check, what: str, timeout_s: float = 10.0) -> None:
    with trio.move_on_after(timeout_s):
        while not check():
            await trio.sleep(0.01)
        return
    raise AssertionError(f"not {what} within {timeout_s} s")


def test_the_task_renames_checkpoints_and_later_removes_a_deleted_topic(broker):
    old_id = broker.create_topic("doomed", 6)
    broker.create_topic("kept", 1)
    assert broker.names("doomed") == ([f"doomed-{i}" for i in range(6)], [])

    async def main() -> None:
        deleter = LogDeleter(broker.logs, lambda: broker.now_ms, max_wait_s=0.02)
        async with trio.open_nursery() as nursery:
            await nursery.start(deleter.run)
            broker.commit([RemoveTopicRecord(old_id)])
            # The step only forgot them; nothing is served any more.
            assert len(broker.replicas) == 1 and broker.logs.get("doomed", 0) is None
            await until(lambda: broker.names("doomed")[0] == [], "renamed")
            assert len(broker.names("doomed")[1]) == 6
            await until(lambda: deleter.passes >= 1, "a pass")
            recovery = read_offsets_checkpoint(os.path.join(broker.log_dir,
                                                            files.RECOVERY_POINT_CHECKPOINT))
            assert set(recovery) == {("kept", 0)}
            # Recreated at once under the same name: new dirs, the old ones still wait.
            broker.create_topic("doomed", 2)
            assert broker.names("doomed")[0] == ["doomed-0", "doomed-1"]
            assert len(broker.names("doomed")[1]) == 6
            await trio.sleep(0.1)
            assert len(broker.names("doomed")[1]) == 6 and deleter.removed == 0
            broker.now_ms += DELAY_MS  # file.delete.delay.ms has passed
            await until(lambda: deleter.removed == 6, "removed")
            assert broker.names("doomed")[1] == []
            assert broker.names("doomed")[0] == ["doomed-0", "doomed-1"]
            nursery.cancel_scope.cancel()
        assert deleter.wake not in broker.logs.deletion_listeners

    trio.run(main)
    assert {(h.topic, h.index) for h in broker.replicas.partitions()} == \
        {("kept", 0), ("doomed", 0), ("doomed", 1)}


def test_a_failing_pass_does_not_stop_the_task(broker, monkeypatch):
    calls: list[int] = []

    def failing(now_ms: int) -> int:
        calls.append(now_ms)
        if len(calls) == 1:
            raise RuntimeError("disk on fire")
        return real(now_ms)

    real = broker.logs.delete_logs_pass
    monkeypatch.setattr(broker.logs, "delete_logs_pass", failing)
    topic_id = broker.create_topic("flaky", 2)

    async def main() -> None:
        deleter = LogDeleter(broker.logs, lambda: broker.now_ms, max_wait_s=0.02)
        async with trio.open_nursery() as nursery:
            await nursery.start(deleter.run)
            broker.commit([RemoveTopicRecord(topic_id)])
            await until(lambda: broker.names("flaky")[0] == [], "renamed after the failure")
            nursery.cancel_scope.cancel()

    trio.run(main)
    assert len(calls) >= 2
