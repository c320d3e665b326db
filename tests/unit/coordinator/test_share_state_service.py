"""The share coordinator's Trio edge over an in-memory broker (real __share_group_state logs, a
stepped metadata image): loading, each operation written and replayed, placement, rollback of a
refused append, cold-partition snapshots and pruning, and the persister's routing."""

from __future__ import annotations

import uuid

import pytest
import trio
import trio.testing

from kafkapy.config import BrokerConfig
from kafkapy.coordinator.schema import java_string_hash
from kafkapy.coordinator.share_persister import ShareStatePersister
from kafkapy.coordinator.share_state import codec
from kafkapy.coordinator.share_state.records import ShareSnapshot, ShareUpdate
from kafkapy.coordinator.share_state_service import (
    SHARE_STATE_TOPIC,
    ShareCoordinator,
    coordinator_key,
    share_coordinator_settings,
)
from kafkapy.metadata.records import PartitionChangeRecord
from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import ErrorCode as E
from kafkapy.protocol.errors import KafkaError
from kafkapy.records.reader import iter_batches, iter_records
from kafkapy.share.partition import PartitionState, StateBatch
from tests.unit.broker.fakes import InMemoryBroker

STATE_TOPIC_ID = uuid.UUID(int=0x5A)
TOPIC = uuid.UUID("6d3a2c0e-1f44-4b8e-9c55-0a1b2c3d4e5f")
GROUP = "g1"


@pytest.fixture
def broker(tmp_path):
    b = InMemoryBroker(tmp_path, brokers=(1, 2))
    b.create(SHARE_STATE_TOPIC, STATE_TOPIC_ID, 1, leader_epoch=4)
    yield b
    b.close()


def config(**props: str) -> BrokerConfig:
    return BrokerConfig.from_sources({"share.coordinator.state.topic.num.partitions": "1", **props})


def run(broker: InMemoryBroker, fn, **props: str) -> None:
    async def main():
        coord = ShareCoordinator(config(**props), broker.replicas, broker.ctx.clock, 1, image=lambda: broker.image)
        coord.on_image(broker.image)
        async with trio.open_nursery() as n:
            await n.start(coord.run)
            await trio.sleep(0.1)
            await fn(coord)
            n.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def records_in_log(broker: InMemoryBroker) -> list:
    plog = broker.replicas.get(SHARE_STATE_TOPIC, 0).log
    fetched = plog.read(plog.log_start_offset, 1 << 20)
    out = []
    for _, batch in iter_batches(fetched.read_bytes() if fetched is not None else b""):
        out += [codec.decode(r.key, r.value) for r in iter_records(batch)]
    return out


STATE = PartitionState(0, 1, 10, (StateBatch(10, 14, 2, 1), StateBatch(15, 19, 4, 3)), 5)


def test_settings_placement_and_topic_configs():
    s = share_coordinator_settings(BrokerConfig.from_sources({}))
    assert (s.num_partitions, s.replication_factor, s.min_isr, s.snapshot_update_records_per_snapshot,
            s.write_timeout_ms, s.prune_interval_ms, s.cold_partition_snapshot_interval_ms) == \
        (50, 3, 2, 500, 5000, 300_000, 300_000)
    assert s.topic_configs() == {"cleanup.policy": "delete", "compression.type": "producer", "retention.ms": "-1",
                                 "segment.bytes": str(100 * 1024 * 1024), "min.insync.replicas": "2"}
    # Kafka's SharePartitionKey.asCoordinatorKey: the topic id in Kafka's base64 form
    key = coordinator_key(GROUP, TOPIC, 3)
    assert key == "g1:bTosDh9ES46cVQobLD1OXw:3"
    coord = ShareCoordinator(BrokerConfig.from_sources({}), None, None, 1, image=lambda: None)  # type: ignore[arg-type]
    assert coord.partition_for(GROUP, TOPIC, 3) == abs(java_string_hash(key)) % 50


def test_operations_are_written_and_a_reload_gives_the_same_state(broker):
    async def first(coord):
        assert (await coord.read(GROUP, TOPIC, 0, 1)).error == E.INVALID_REQUEST  # not initialized
        assert (await coord.initialize(GROUP, TOPIC, 0, 0, 10)).error == E.NONE
        assert (await coord.write(GROUP, TOPIC, 0, STATE)).error == E.NONE
        r = await coord.read(GROUP, TOPIC, 0, 2)  # a newer leader: remembered
        assert r.error == E.NONE and r.state == PartitionState(0, 2, 10, STATE.state_batches, 5)
        # fencing comes through as the core answers it
        assert (await coord.write(GROUP, TOPIC, 0, PartitionState(0, 1, 12))).error == E.FENCED_LEADER_EPOCH
        assert (await coord.initialize(GROUP, TOPIC, 1, 3, 0)).error == E.NONE
        assert (await coord.delete(GROUP, TOPIC, 1)).error == E.NONE
        s = await coord.read_summary(GROUP, TOPIC, 0)
        assert s.state == PartitionState(0, 2, 10, (), 5)

    run(broker, first)
    kinds = [type(r).__name__ for r in records_in_log(broker)]
    assert kinds == ["ShareSnapshot", "ShareUpdate", "ShareUpdate", "ShareSnapshot", "Tombstone"]

    async def second(coord):  # a restarted coordinator replays the log
        r = await coord.read(GROUP, TOPIC, 0, 2)
        assert r.state == PartitionState(0, 2, 10, STATE.state_batches, 5)
        assert (await coord.read(GROUP, TOPIC, 1, 0)).error == E.INVALID_REQUEST  # deleted

    run(broker, second)


def test_not_served_here_answers_what_callers_retry_on(broker):
    async def go(coord):
        broker.step(PartitionChangeRecord(partition_id=0, topic_id=STATE_TOPIC_ID, leader=2, replicas=(1, 2),
                                          isr=(1, 2)))
        coord.on_image(broker.image)
        assert (await coord.read(GROUP, TOPIC, 0, 0)).error == E.NOT_COORDINATOR
        # it comes back at a newer leader epoch: loading, then served
        broker.step(PartitionChangeRecord(partition_id=0, topic_id=STATE_TOPIC_ID, leader=1, isr=(1,)))
        coord.on_image(broker.image)
        with pytest.raises(KafkaError) as err:
            coord.shard_for(GROUP, TOPIC, 0)
        assert err.value.code == E.COORDINATOR_LOAD_IN_PROGRESS
        await trio.sleep(0.1)
        assert (await coord.initialize(GROUP, TOPIC, 0, 0, 0)).error == E.NONE

    run(broker, go)


def test_no_state_topic_is_coordinator_not_available(tmp_path):
    b = InMemoryBroker(tmp_path, brokers=(1,))
    try:
        async def go(coord):
            assert (await coord.write(GROUP, TOPIC, 0, STATE)).error == E.COORDINATOR_NOT_AVAILABLE

        run(b, go)
    finally:
        b.close()


def test_a_refused_append_is_rolled_back(broker):
    async def go(coord):
        assert (await coord.initialize(GROUP, TOPIC, 0, 0, 10)).error == E.NONE
        hosted = broker.replicas.get(SHARE_STATE_TOPIC, 0)
        real = broker.replicas.append

        def refuse(*args, **kwargs):
            raise KafkaError(E.NOT_ENOUGH_REPLICAS)

        broker.replicas.append = refuse  # type: ignore[method-assign]
        assert (await coord.write(GROUP, TOPIC, 0, STATE)).error == E.COORDINATOR_NOT_AVAILABLE
        broker.replicas.append = real  # type: ignore[method-assign]
        assert (await coord.read_summary(GROUP, TOPIC, 0)).state == PartitionState(0, 0, 10, (), 0)
        assert hosted.log.log_end_offset == 1

    run(broker, go)


def test_cold_snapshots_let_the_log_be_pruned(broker):
    async def go(coord):
        assert (await coord.initialize(GROUP, TOPIC, 0, 0, 10)).error == E.NONE
        for i in range(3):
            assert (await coord.write(GROUP, TOPIC, 0, PartitionState(0, 1, 10 + i))).error == E.NONE
        plog = broker.replicas.get(SHARE_STATE_TOPIC, 0).log
        assert plog.log_end_offset == 4
        await trio.sleep(1.5)  # one prune interval: the initial snapshot still holds the log
        assert plog.log_start_offset == 0
        await trio.sleep(1.0)  # one cold-snapshot interval: a snapshot at offset 4, then pruned below it
        assert plog.log_end_offset == 5
        await trio.sleep(1.5)
        assert plog.log_start_offset == 4
        assert (await coord.read(GROUP, TOPIC, 0, 1)).state == PartitionState(0, 1, 12, (), 0)

    run(broker, go, **{"share.coordinator.state.topic.prune.interval.ms": "1500",
                       "share.coordinator.cold.partition.snapshot.interval.ms": "2500"})

    async def reload(coord):
        assert (await coord.read(GROUP, TOPIC, 0, 1)).state == PartitionState(0, 1, 12, (), 0)

    run(broker, reload)
    assert [type(r) for r in records_in_log(broker)] == [ShareSnapshot]


class Peer:
    """Another broker's share coordinator, answering the RPCs the persister sends it."""

    def __init__(self) -> None:
        self.sent: list = []
        self.errors: list[int] = []

    async def connect(self, broker_id: int):
        peer = self

        class Client:
            async def send(self, request, version=None, *, timeout=None):
                peer.sent.append((broker_id, type(request).__name__, version))
                code = peer.errors.pop(0) if peer.errors else E.NONE
                if isinstance(request, m.ReadShareGroupStateRequest):
                    R = m.ReadShareGroupStateResponse
                    P = R.ReadStateResult.PartitionResult
                    return R(results=[R.ReadStateResult(topic_id=TOPIC, partitions=[P(
                        partition=0, error_code=code, state_epoch=3, start_offset=7, state_batches=[
                            P.StateBatch(first_offset=7, last_offset=8, delivery_state=4, delivery_count=2)])])])
                R = m.WriteShareGroupStateResponse
                return R(results=[R.WriteStateResult(topic_id=TOPIC, partitions=[
                    R.WriteStateResult.PartitionResult(partition=0, error_code=code)])])

            async def aclose(self):
                pass

        return Client()


def test_the_persister_calls_the_local_coordinator_or_the_partition_leader(broker):
    peer = Peer()

    async def go(coord):
        persister = ShareStatePersister(coord, 1, lambda: broker.image, peer.connect)
        assert (await persister.initialize(GROUP, TOPIC, 0, 0, 10)).error == E.NONE
        assert (await persister.write(GROUP, TOPIC, 0, STATE)).error == E.NONE
        assert (await persister.read(GROUP, TOPIC, 0, 1)).state == PartitionState(0, 1, 10, STATE.state_batches, 5)
        assert peer.sent == []
        # the partition moves to broker 2: RPCs, retried while it answers NOT_COORDINATOR
        broker.step(PartitionChangeRecord(partition_id=0, topic_id=STATE_TOPIC_ID, leader=2, replicas=(1, 2),
                                          isr=(1, 2)))
        coord.on_image(broker.image)
        peer.errors = [E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS]
        r = await persister.read(GROUP, TOPIC, 0, 5)
        assert r.state == PartitionState(3, 5, 7, (StateBatch(7, 8, 4, 2),))
        assert peer.sent == [(2, "ReadShareGroupStateRequest", 0)] * 3
        peer.errors = [E.FENCED_STATE_EPOCH]
        assert (await persister.write(GROUP, TOPIC, 0, STATE)).error == E.FENCED_STATE_EPOCH
        assert peer.sent[-1] == (2, "WriteShareGroupStateRequest", 1)
        # a coordinator that keeps moving: the last error once the deadline passes
        peer.errors = [E.NOT_COORDINATOR] * 1000
        assert (await persister.write(GROUP, TOPIC, 0, STATE)).error == E.NOT_COORDINATOR

    run(broker, go)


def test_records_keep_kafkas_key_and_value_framing():
    snap = ShareSnapshot(GROUP, TOPIC, 2, 1, 2, 3, 10, (StateBatch(10, 12, 2, 1),), 5, 6, 7)
    update = ShareUpdate(GROUP, TOPIC, 2, 1, -1, 11, (StateBatch(10, 12, 4, 1),))
    for record, kind in ((snap, 0), (update, 1)):
        key, value = codec.encode(record)
        assert key[:2] == kind.to_bytes(2, "big") and value is not None and value[:2] == b"\0\0"
        assert codec.decode(key, value) == record
    assert codec.decode(b"\x00\x09junk", b"") is None  # an unknown key type is skipped
