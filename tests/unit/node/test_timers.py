"""The node's timers under Trio's MockClock: the controller fencing a silent broker when its
session expires, the leader dropping a lagging follower from the ISR, and the retention pass
schedule (first after log.initial.task.delay.ms, then every log.retention.check.interval.ms).

Each runs the runtime's own task on a ``NodeClock`` in virtual time: no sockets, no sleeps.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
import trio
import trio.testing

from kafkapy.broker.replica_manager import ReplicaManager
from kafkapy.config import BrokerConfig
from kafkapy.config_views import BrokerSettings, ControllerSettings
from kafkapy.controller import BrokerHeartbeatRequest, BrokerRegistrationRequest
from kafkapy.log.config import LogConfig
from kafkapy.log.log_manager import LogManager
from kafkapy.metadata.delta import MetadataDelta
from kafkapy.metadata.image import MetadataImage
from kafkapy.metadata.loader import MetadataLoader
from kafkapy.metadata.records import (
    BrokerEndpoint,
    BrokerFeature,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from kafkapy.node.controller_runtime import ControllerRuntime, new_quorum_controller
from kafkapy.node.log_tasks import LogTasks
from kafkapy.quorum.clock import NodeClock
from kafkapy.raft.events import CommittedBatch
from kafkapy.metadata.records import MetadataRecordCodec
from kafkapy.records.builder import Record, build_batch

CLUSTER = "timers-cluster"


def run(fn) -> None:
    trio.run(fn, clock=trio.testing.MockClock(autojump_threshold=0))


async def inline(fn, *args):
    """``run_sync`` that computes on the loop: a worker thread would let MockClock jump."""
    return fn(*args)


class InstantQuorum:
    """A one-voter quorum that commits every append at once: the batch goes through the loader
    (as the driver's commit callback sends it) before ``wait_committed`` returns."""

    def __init__(self, loader: MetadataLoader, clock: NodeClock) -> None:
        self.loader, self.clock = loader, clock
        self.epoch, self.leader_id, self.running = 1, 1, True
        self.committed_end = 1  # this epoch's LeaderChange at offset 0
        self.replica = SimpleNamespace(is_leader=True, leader_epoch_start_offset=0,
                                       log_end_offset=1)
        self._pending: list[tuple[int, bytes]] = []

    def append(self, encoded: list[bytes]) -> int:
        base = self.replica.log_end_offset
        self._pending.append((base, build_batch([Record(None, e) for e in encoded], base_offset=base,
                                                partition_leader_epoch=self.epoch, now_ms=0)))
        self.replica.log_end_offset += len(encoded)
        return self.replica.log_end_offset - 1

    async def wait_committed(self, offset: int, timeout: float, *, epoch: int | None = None) -> None:
        while self._pending:
            base, batch = self._pending.pop(0)
            self.loader.handle(CommittedBatch(base, batch), self.clock.now_ms())
        self.committed_end = self.replica.log_end_offset


def controller_runtime(config: BrokerConfig) -> tuple[ControllerRuntime, MetadataLoader]:
    settings = ControllerSettings.from_config(config)
    controller = new_quorum_controller(config, settings, CLUSTER, [1])
    codec = MetadataRecordCodec()
    loader = MetadataLoader(CLUSTER, codec.decode)
    clock = NodeClock()
    runtime = ControllerRuntime(node_id=1, cluster_id=CLUSTER, controller=controller,
                                settings=settings, driver=InstantQuorum(loader, clock),  # type: ignore[arg-type]
                                loader=loader, codec=codec, clock=clock, run_sync=inline)
    return runtime, loader


def test_the_active_controller_fences_a_broker_whose_session_expired():
    config = BrokerConfig.from_sources({"broker.session.timeout.ms": "9000",
                                        "broker.heartbeat.interval.ms": "2000"})
    runtime, loader = controller_runtime(config)

    async def main() -> None:
        async with runtime:
            while not runtime._serving():  # active once its epoch's bootstrap committed
                await trio.sleep(0.01)
            reply = await runtime.controller_call(lambda c: c.register_broker(
                BrokerRegistrationRequest(
                    broker_id=2, cluster_id=CLUSTER, incarnation_id=uuid.UUID(int=2),
                    listeners=(BrokerEndpoint("PLAINTEXT", "b2", 9092, 0),),
                    features=(BrokerFeature("metadata.version", 1, 26),
                              BrokerFeature("eligible.leader.replicas.version", 0, 1),
                      BrokerFeature("group.version", 0, 1), BrokerFeature("share.version", 0, 1)),
                    log_dirs=(uuid.UUID(int=9 << 64),)),
                now_ms=runtime.now_ms(), next_offset=runtime.next_metadata_offset()))
            assert reply.error_code == 0
            heartbeat = BrokerHeartbeatRequest(2, reply.broker_epoch,
                                               current_metadata_offset=runtime.next_metadata_offset())
            for _ in range(5):  # a broker heartbeating on time stays registered and unfenced
                answer = await runtime.broker_heartbeat(heartbeat)
                assert answer.error_code == 0
                silent_from = trio.current_time()
                await trio.sleep(2)
            assert not loader.image.cluster.brokers[2].fenced
            with trio.fail_after(60):
                while not loader.image.cluster.brokers[2].fenced:
                    await trio.sleep(0.05)
            silent_for = trio.current_time() - silent_from
            # Fenced once the 9 s session ran out, at the next check (every heartbeat interval).
            assert 9.0 <= silent_for <= 9.0 + 2.0 + 0.1

    run(main)


def test_a_follower_that_stops_fetching_leaves_the_isr_after_replica_lag_time_max(tmp_path):
    config = BrokerConfig.from_sources({"replica.lag.time.max.ms": "10000"})
    settings = BrokerSettings.from_config(config)

    @dataclass
    class Proposals:
        submitted: list[tuple[float, Any]] = field(default_factory=list)

        def submit(self, topic_id, partition, proposal, on_result) -> None:
            self.submitted.append((trio.current_time(), proposal))

    async def main() -> None:
        clock = NodeClock()
        log_manager = LogManager([str(tmp_path)], LogConfig(), now_ms=clock.now_ms())
        proposals = Proposals()
        replicas = ReplicaManager(log_manager, config, 1, alter_partition=proposals,  # type: ignore[arg-type]
                                  fetchers=lambda host: SimpleNamespace(follow=lambda t: None,
                                                                        unfollow=lambda k: None))
        topic_id = uuid.UUID(int=7)
        delta = MetadataDelta(MetadataImage.empty(CLUSTER))
        for offset, record in enumerate([
                *(RegisterBrokerRecord(broker_id=b, incarnation_id=uuid.UUID(int=b), broker_epoch=b,
                                       fenced=False) for b in (1, 2)),
                TopicRecord(name="t", topic_id=topic_id),
                PartitionRecord(partition_id=0, topic_id=topic_id, replicas=(1, 2), isr=(1, 2),
                                leader=1, leader_epoch=0, partition_epoch=0)]):
            delta.replay(record, offset)
        replicas.apply_image(delta.apply(), now_ms=clock.now_ms())
        tasks = LogTasks(log_manager, replicas, settings, clock, log_dirs=[str(tmp_path)],
                         image=lambda: None, run_sync=inline)
        started = trio.current_time()
        try:
            with trio.move_on_after(30):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(tasks.isr_loop)
                    while not proposals.submitted:
                        await trio.sleep(0.1)
                    nursery.cancel_scope.cancel()
        finally:
            log_manager.shutdown()
        (when, proposal), = proposals.submitted
        assert tuple(proposal.new_isr) == (1,)
        # Checked every half lag time: out once it lagged 10 s, at the next check.
        assert 10.0 <= when - started <= 15.0

    run(main)


class RetentionLogs:
    """A LogManager stand-in that records when retention passes ran."""

    def __init__(self, clock: NodeClock) -> None:
        self.clock = clock
        self.passes: list[int] = []

    def next_file_delete_ms(self) -> int | None:
        return None

    def cleanup_logs(self, now_ms: int, *, checkpoint: bool = True) -> bool:
        self.passes.append(now_ms)
        return False


@pytest.mark.parametrize("initial_delay_ms, interval_ms", [(30_000, 300_000), (0, 5_000)])
def test_retention_runs_after_the_initial_delay_then_every_check_interval(initial_delay_ms, interval_ms):
    config = BrokerConfig.from_sources({"log.initial.task.delay.ms": str(initial_delay_ms),
                                        "log.retention.check.interval.ms": str(interval_ms)})

    async def main() -> None:
        clock = NodeClock()
        logs = RetentionLogs(clock)
        tasks = LogTasks(logs, None, BrokerSettings.from_config(config), clock,  # type: ignore[arg-type]
                         log_dirs=[], image=lambda: None, run_sync=inline)
        start = clock.now_ms()
        with trio.move_on_after((initial_delay_ms + 3.5 * interval_ms) / 1000):
            await tasks.retention_loop()
        offsets = [when - start for when in logs.passes]
        assert offsets == [initial_delay_ms + i * interval_ms for i in range(4)]

    run(main)
