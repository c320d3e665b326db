"""The broker's replication paths in ReplicaManager: leading, following, the acks=all purgatory.

Real partition logs in a temporary directory; the fetcher and the AlterPartition sender are
recording fakes, so every step (a follower's fetch, an ISR proposal, a leadership change) is
driven by the test under Trio's mock clock.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest
import trio
import trio.testing

from kafkapy.broker.replica_manager import ReplicaManager
from kafkapy.config import BrokerConfig
from kafkapy.log.config import LogConfig
from kafkapy.log.log_manager import LogManager
from kafkapy.metadata.delta import MetadataDelta
from kafkapy.metadata.image import MetadataImage
from kafkapy.metadata.records import (
    ConfigRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.records.builder import Record, build_batch

NODE = 1
TOPIC = "orders"
TOPIC_ID = uuid.UUID(int=42)
KEY = (TOPIC, 0)


@dataclass
class FakeFetchers:
    following: dict[tuple[str, int], Any] = field(default_factory=dict)

    def follow(self, targets: dict) -> None:
        self.following.update(targets)

    def unfollow(self, keys) -> None:
        for key in keys:
            self.following.pop(key, None)


@dataclass
class FakeAlterPartition:
    submitted: list[tuple[uuid.UUID, int, Any, Any]] = field(default_factory=list)

    def submit(self, topic_id, partition, proposal, on_result) -> None:
        self.submitted.append((topic_id, partition, proposal, on_result))


class Cluster:
    """A metadata image with one three-replica partition, changed record by record."""

    def __init__(self) -> None:
        self.image = MetadataImage.empty("test-cluster")
        self._apply([RegisterBrokerRecord(broker_id=b, incarnation_id=uuid.UUID(int=b), broker_epoch=b,
                                          fenced=False) for b in (1, 2, 3)])
        self._apply([TopicRecord(name=TOPIC, topic_id=TOPIC_ID),
                     PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=(1, 2, 3),
                                     isr=(1, 2, 3), leader=NODE, leader_epoch=0, partition_epoch=0),
                     ConfigRecord(resource_type=2, resource_name=TOPIC, name="min.insync.replicas",
                                  value="2")])

    def _apply(self, records: list) -> MetadataImage:
        delta = MetadataDelta(self.image)
        for offset, record in enumerate(records, start=self.image.offset + 1):
            delta.replay(record, offset)
        self.image = delta.apply()
        return self.image

    def change(self, **fields: Any) -> MetadataImage:
        return self._apply([PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, **fields)])


@pytest.fixture
def setup(tmp_path):
    log_manager = LogManager([str(tmp_path)], LogConfig(), now_ms=0)
    manager = ReplicaManager(log_manager, BrokerConfig.from_sources({"replica.lag.time.max.ms": "1000"}),
                             NODE)
    manager.fetchers = FakeFetchers()  # type: ignore[assignment]
    manager.alter_partition = FakeAlterPartition()  # type: ignore[assignment]
    cluster = Cluster()
    manager.apply_image(cluster.image, now_ms=0)
    yield manager, cluster
    log_manager.shutdown()


def produce(manager: ReplicaManager, n: int = 1) -> int:
    hosted = manager.get(*KEY)
    batch = build_batch([Record(b"k", b"v%d" % i) for i in range(n)], now_ms=0)
    result = manager.append(hosted, bytearray(batch), now_ms=0)
    return result.last_offset + 1


def run(fn) -> None:
    trio.run(fn, clock=trio.testing.MockClock(autojump_threshold=0))


def while_waiting(manager: ReplicaManager, then) -> list[ErrorCode]:
    """Produce one batch with acks=all semantics, call ``then(hosted, end)`` while the produce
    waits in the purgatory (a second later), and return what the wait answered."""
    hosted = manager.get(*KEY)
    outcome: list[ErrorCode] = []

    async def main() -> None:
        end = produce(manager)

        async def wait() -> None:
            outcome.append(await manager.wait_for_replication(hosted, end, trio.current_time() + 30))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait)
            await trio.sleep(1)
            assert outcome == []
            then(hosted, end)
    run(main)
    return outcome


def test_the_high_watermark_waits_for_every_isr_member(setup):
    manager, _ = setup
    hosted = manager.get(*KEY)

    async def main() -> None:
        end = produce(manager, 3)
        assert hosted.log.log_end_offset == 3 and hosted.high_watermark == 0
        manager.on_follower_fetch(hosted, 2, end, now_ms=10)
        assert hosted.high_watermark == 0, "replica 3 has not fetched yet"
        manager.on_follower_fetch(hosted, 3, 2, now_ms=10)
        assert hosted.high_watermark == 2
        manager.on_follower_fetch(hosted, 3, end, now_ms=20)
        assert hosted.high_watermark == 3
    run(main)


def test_acks_all_completes_when_followers_have_the_batch(setup):
    manager, _ = setup

    def followers_fetch(hosted, end) -> None:
        manager.on_follower_fetch(hosted, 2, end, now_ms=1000)
        manager.on_follower_fetch(hosted, 3, end, now_ms=1000)
    assert while_waiting(manager, followers_fetch) == [ErrorCode.NONE]


def test_acks_all_times_out_when_a_follower_never_fetches(setup):
    manager, _ = setup
    hosted = manager.get(*KEY)

    async def main() -> None:
        end = produce(manager)
        manager.on_follower_fetch(hosted, 2, end, now_ms=0)
        code = await manager.wait_for_replication(hosted, end, trio.current_time() + 5)
        assert code == ErrorCode.REQUEST_TIMED_OUT
    run(main)


def test_min_insync_replicas_is_checked_against_the_committed_isr(setup):
    manager, cluster = setup
    hosted = manager.get(*KEY)
    manager.apply_image(cluster.change(isr=(1,)), now_ms=0)
    with pytest.raises(KafkaError) as err:
        manager.check_min_insync(hosted)
    assert err.value.code == ErrorCode.NOT_ENOUGH_REPLICAS

    async def main() -> None:
        # acks=1 semantics still append, but below min.insync.replicas the high watermark
        # stays where it was (Kafka 4.x's strict min ISR, KIP-966), so an acks=all waiter
        # never sees its records committed.
        before = hosted.high_watermark
        end = produce(manager)
        assert hosted.high_watermark == before < end
        code = await manager.wait_for_replication(hosted, end, trio.current_time() + 5)
        assert code == ErrorCode.REQUEST_TIMED_OUT
    run(main)


def test_losing_leadership_answers_waiters_and_starts_following(setup):
    manager, cluster = setup
    hosted = manager.get(*KEY)
    outcome = while_waiting(manager, lambda h, end: manager.apply_image(cluster.change(leader=2), now_ms=1000))
    assert outcome == [ErrorCode.NOT_LEADER_OR_FOLLOWER]
    target = manager.fetchers.following[KEY]  # type: ignore[union-attr]
    assert (target.leader_id, target.leader_epoch) == (2, 1)
    with pytest.raises(KafkaError) as err:
        manager.leader(*KEY)
    assert err.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert manager.follower_log(TOPIC, 0, 1) is hosted.log
    assert manager.follower_log(TOPIC, 0, 0) is None, "a stale leader epoch is not followed"


def test_taking_leadership_starts_a_new_epoch_at_the_log_end(setup):
    manager, cluster = setup
    manager.apply_image(cluster.change(leader=2), now_ms=0)
    hosted = manager.get(*KEY)
    manager.apply_image(cluster.change(leader=NODE), now_ms=0)
    assert KEY not in manager.fetchers.following  # type: ignore[union-attr]
    assert hosted.leader_epoch == 2
    assert hosted.log.leader_epoch_cache.latest_epoch == 2
    manager.leader(*KEY, current_leader_epoch=2)
    with pytest.raises(KafkaError) as err:
        manager.leader(*KEY, current_leader_epoch=1)
    assert err.value.code == ErrorCode.FENCED_LEADER_EPOCH


def test_a_lagging_follower_is_proposed_out_of_the_isr(setup):
    manager, _ = setup
    hosted = manager.get(*KEY)
    end = produce(manager)
    manager.on_follower_fetch(hosted, 2, end, now_ms=100)
    manager.check_isr(now_ms=1050)  # replica 3 has not caught up for 1050 ms (> 1000)
    sent = manager.alter_partition.submitted  # type: ignore[union-attr]
    assert [s[2].new_isr for s in sent] == [(1, 2)]
    topic_id, partition, proposal, on_result = sent[0]
    assert (topic_id, partition, proposal.partition_epoch) == (TOPIC_ID, 0, 0)
    # The controller's answer makes the shrink committed: the high watermark no longer waits
    # for replica 3.
    on_result(ErrorCode.NONE, type("Result", (), {"isr": [1, 2], "leader_epoch": 0,
                                                   "partition_epoch": 1})())
    assert hosted.high_watermark == end


# -- DeleteRecords: the low watermark waits for every live replica's log start ------------------

def test_delete_records_waits_until_every_live_replica_moved_its_log_start(setup):
    manager, _ = setup
    hosted = manager.get(*KEY)
    alive = {1, 2, 3}
    outcome: list[tuple[ErrorCode, int]] = []

    async def main() -> None:
        end = produce(manager, 10)
        for r in (2, 3):
            manager.on_follower_fetch(hosted, r, end, now_ms=0, log_start_offset=0)
        assert hosted.high_watermark == 10
        assert hosted.log.maybe_increment_log_start_offset(6)

        async def wait() -> None:
            outcome.append(await manager.wait_for_low_watermark(
                hosted, 6, trio.current_time() + 30, alive.__contains__))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait)
            await trio.sleep(1)
            manager.on_follower_fetch(hosted, 2, end, now_ms=1000, log_start_offset=6)
            await trio.sleep(1)
            assert outcome == [], "replica 3 still starts at 0"
            manager.on_follower_fetch(hosted, 3, end, now_ms=2000, log_start_offset=6)
    run(main)
    assert outcome == [(ErrorCode.NONE, 6)]


def test_delete_records_does_not_wait_for_a_fenced_replica_but_times_out_on_a_live_one(setup):
    manager, _ = setup
    hosted = manager.get(*KEY)

    async def main() -> None:
        end = produce(manager, 4)
        manager.on_follower_fetch(hosted, 2, end, now_ms=0, log_start_offset=0)
        manager.on_follower_fetch(hosted, 3, end, now_ms=0, log_start_offset=0)
        hosted.log.maybe_increment_log_start_offset(3)
        # Replica 3's broker is fenced: only replica 2 holds the answer back.
        code, low = await manager.wait_for_low_watermark(hosted, 3, trio.current_time() + 5, {1, 2}.__contains__)
        assert (code, low) == (ErrorCode.REQUEST_TIMED_OUT, 0)
        manager.on_follower_fetch(hosted, 2, end, now_ms=100, log_start_offset=3)
        code, low = await manager.wait_for_low_watermark(hosted, 3, trio.current_time() + 5, {1, 2}.__contains__)
        assert (code, low) == (ErrorCode.NONE, 3)
    run(main)
