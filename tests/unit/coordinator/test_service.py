"""The Trio edge of the group coordinator, on virtual time: loading, parked joins, session expiry,
records written to and reloaded from a real __consumer_offsets partition log."""

from __future__ import annotations

import types
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
import uuid

import pytest
import trio
import trio.testing

from kafkapy.config import BrokerConfig
from kafkapy.coordinator.group import JoinRequest
from kafkapy.coordinator.schema import OFFSETS_TOPIC, partition_for
from kafkapy.coordinator.service import GroupCoordinator
from kafkapy.log.config import LogConfig
from kafkapy.log.partition_log import PartitionLog
from kafkapy.protocol.errors import ErrorCode as E
from kafkapy.protocol.errors import KafkaError

PARTITIONS = 3
GROUP = "grp"


class VirtualClock:
    """Wall-clock milliseconds that follow Trio's (mock) clock."""

    def now_ms(self) -> int:
        return 1_700_000_000_000 + int(trio.current_time() * 1000)


class Replicas:
    def __init__(self, root) -> None:
        self.logs = {p: PartitionLog.open(str(root / f"{OFFSETS_TOPIC}-{p}"), LogConfig(), now_ms=0, recover=False)
                     for p in range(PARTITIONS)}

    def get(self, topic, p):
        if topic != OFFSETS_TOPIC or p not in self.logs:
            raise KafkaError(E.UNKNOWN_TOPIC_OR_PARTITION)
        return types.SimpleNamespace(log=self.logs[p], leader_id=1, leader_epoch=0)

    def append(self, hosted, records, *, now_ms, from_client=True):
        return hosted.log.append_as_leader(records, now_ms=now_ms, leader_epoch=hosted.leader_epoch,
                                           from_client=from_client)

    async def wait_for_replication(self, hosted, required, deadline):
        return E.NONE  # one replica: the append is the commit

    def close(self) -> None:
        for plog in self.logs.values():
            plog.close()


def image(topic_id=uuid.UUID(int=7)):
    regs = {p: types.SimpleNamespace(leader=1) for p in range(PARTITIONS)}
    topic = types.SimpleNamespace(id=topic_id, partitions=regs)
    return types.SimpleNamespace(topics=types.SimpleNamespace(by_name={OFFSETS_TOPIC: topic}))


def coordinator(replicas) -> GroupCoordinator:
    config = BrokerConfig.from_sources({"offsets.topic.num.partitions": str(PARTITIONS),
                                        "group.initial.rebalance.delay.ms": "0"})
    return GroupCoordinator(config, replicas, VirtualClock(), node_id=1)


def join_req(member_id="", session=10_000) -> JoinRequest:
    return JoinRequest(GROUP, member_id, None, "consumer", [("range", b"")], session, 20_000, client_id="c")


async def join(coord: GroupCoordinator, member_id="", session=10_000):
    shard = coord.shard_for(GROUP)
    outcome = shard.join(join_req(member_id, session), coord.clock.now_ms())
    return await coord.run_op(shard, outcome, timeout_ms=30_000, on_timeout="timeout")


@pytest.fixture
def replicas(tmp_path):
    r = Replicas(tmp_path)
    yield r
    r.close()


def run(fn):
    trio.run(fn, clock=trio.testing.MockClock(autojump_threshold=0))


def test_load_in_progress_until_the_edge_loads(replicas):
    async def main():
        coord = coordinator(replicas)
        coord.on_image(image())
        with pytest.raises(KafkaError) as err:
            coord.shard_for(GROUP)
        assert err.value.code == E.COORDINATOR_LOAD_IN_PROGRESS
        async with trio.open_nursery() as n:
            await n.start(coord.run)
            await trio.sleep(0.1)
            assert coord.shard_for(GROUP).partition == partition_for(GROUP, PARTITIONS)
            n.cancel_scope.cancel()

    run(main)


def test_joins_are_parked_until_the_rebalance_completes_and_sessions_expire(replicas):
    async def main():
        coord = coordinator(replicas)
        coord.on_image(image())
        async with trio.open_nursery() as n:
            await n.start(coord.run)
            await trio.sleep(0.1)
            a = (await join(coord)).member_id  # MEMBER_ID_REQUIRED
            first = await join(coord, a)
            assert first.error == E.NONE and first.generation == 1
            shard = coord.shard_for(GROUP)
            await coord.run_op(shard, shard.sync(GROUP, 1, a, None, None, None, [(a, b"A")], coord.clock.now_ms()),
                               timeout_ms=1000, on_timeout=None)
            # b joins: its JoinGroup waits until a rejoins (a learns it from its heartbeat)
            b = (await join(coord)).member_id
            results = {}

            async def join_b():
                results["b"] = await join(coord, b)

            n.start_soon(join_b)
            await trio.sleep(1)
            assert "b" not in results
            hb = shard.heartbeat(GROUP, 1, a, None, coord.clock.now_ms()).response
            assert hb == E.REBALANCE_IN_PROGRESS
            results["a"] = await join(coord, a)
            await trio.sleep(0)
            assert results["a"].generation == results["b"].generation == 2
            # a goes silent: after its session timeout the edge's timer removes it
            start = trio.current_time()
            while a in shard.groups[GROUP].members:
                shard.heartbeat(GROUP, 2, b, None, coord.clock.now_ms())
                await trio.sleep(1)
            assert 10 <= trio.current_time() - start <= 12
            n.cancel_scope.cancel()

    run(main)


def test_parked_join_times_out_with_rebalance_in_progress(replicas):
    async def main():
        coord = coordinator(replicas)
        coord.on_image(image())
        async with trio.open_nursery() as n:
            await n.start(coord.run)
            await trio.sleep(0.1)
            shard = coord.shard_for(GROUP)
            a = (await join(coord)).member_id
            await join(coord, a)
            outcome = shard.join(join_req(), coord.clock.now_ms())  # a new member id, pending
            b = outcome.response.member_id
            outcome = shard.join(join_req(b), coord.clock.now_ms())
            got = await coord.run_op(shard, outcome, timeout_ms=100, on_timeout="gave up")
            assert got == "gave up"
            n.cancel_scope.cancel()

    run(main)


def test_records_are_written_and_reloaded(replicas):
    async def main():
        coord = coordinator(replicas)
        coord.on_image(image())
        async with trio.open_nursery() as n:
            await n.start(coord.run)
            await trio.sleep(0.1)
            shard = coord.shard_for(GROUP)
            outcome = shard.commit(GROUP, [("t", 0, 42, 3, "md")], coord.clock.now_ms())
            assert await coord.run_op(shard, outcome, timeout_ms=0, on_timeout=None) == [E.NONE]
            n.cancel_scope.cancel()
        assert replicas.logs[shard.partition].log_end_offset == 1

        again = coordinator(replicas)
        again.on_image(image())
        async with trio.open_nursery() as n:
            await n.start(again.run)
            await trio.sleep(0.1)
            [(t, p, c)] = again.shard_for(GROUP).fetch_offsets(GROUP, None)
            assert (t, p, c.offset, c.leader_epoch, c.metadata) == ("t", 0, 42, 3, "md")
            n.cancel_scope.cancel()

    run(main)


def test_topic_gone_unloads_the_shards(replicas):
    async def main():
        coord = coordinator(replicas)
        coord.on_image(image())
        async with trio.open_nursery() as n:
            await n.start(coord.run)
            await trio.sleep(0.1)
            coord.on_image(types.SimpleNamespace(topics=types.SimpleNamespace(by_name={})))
            assert coord.shards == {}
            n.cancel_scope.cancel()

    run(main)


def test_offsets_expire_on_the_retention_check_interval(replicas):
    async def main():
        config = BrokerConfig.from_sources({"offsets.topic.num.partitions": str(PARTITIONS),
                                            "offsets.retention.minutes": "1",
                                            "offsets.retention.check.interval.ms": "10000"})
        coord = GroupCoordinator(config, replicas, VirtualClock(), node_id=1)
        coord.on_image(image())
        async with trio.open_nursery() as n:
            await n.start(coord.run)
            await trio.sleep(0.1)
            shard = coord.shard_for(GROUP)
            await coord.run_op(shard, shard.commit(GROUP, [("t", 0, 5, -1, "")], coord.clock.now_ms()),
                               timeout_ms=0, on_timeout=None)
            await trio.sleep(55)
            assert shard.fetch_offsets(GROUP, None) != []
            await trio.sleep(20)  # past a minute, and a check ran
            assert shard.fetch_offsets(GROUP, None) == [] and GROUP not in shard.groups
            # the offset and the group are tombstoned in the log
            assert replicas.logs[shard.partition].log_end_offset == 3
            n.cancel_scope.cancel()

    run(main)


class SlowReplicas(Replicas):
    """Replication the test releases by hand, with the outcome it chooses."""

    def __init__(self, root) -> None:
        super().__init__(root)
        self.release = trio.Event()
        self.outcome = E.NONE

    async def wait_for_replication(self, hosted, required, deadline):
        await self.release.wait()
        return self.outcome


async def two_member_group(coord: GroupCoordinator, n: trio.Nursery) -> tuple[str, str]:
    """A group of generation 2 with members a (the leader) and b, both about to sync."""
    shard = coord.shard_for(GROUP)
    a = (await join(coord)).member_id
    await join(coord, a)
    outcome = shard.sync(GROUP, 1, a, None, None, None, [(a, b"A")], coord.clock.now_ms())
    coord.replicas.release.set()  # generation 1 settles at once
    await coord.run_op(shard, outcome, timeout_ms=1000, on_timeout=None)
    coord.replicas.release = trio.Event()
    b = (await join(coord)).member_id
    joined = {}

    async def join_b():
        joined["b"] = await join(coord, b)

    n.start_soon(join_b)
    await trio.sleep(0.5)
    joined["a"] = await join(coord, a)
    await trio.sleep(0)
    assert joined["a"].generation == joined["b"].generation == 2
    assert joined["a"].leader == a
    return a, b


def sync_all(coord: GroupCoordinator, n: trio.Nursery, a: str, b: str, answers: dict) -> None:
    """b (a follower) syncs first, then a (the leader) with both assignments."""
    shard = coord.shard_for(GROUP)

    async def sync(member, assignments):
        outcome = shard.sync(GROUP, 2, member, None, None, None, assignments, coord.clock.now_ms())
        answers[member] = await coord.run_op(shard, outcome, timeout_ms=60_000, on_timeout="timeout")

    n.start_soon(sync, b, [])
    n.start_soon(sync, a, [(a, b"for-a"), (b, b"for-b")])


@asynccontextmanager
async def serving(replicas) -> AsyncIterator[tuple[GroupCoordinator, trio.Nursery]]:
    """A coordinator over ``replicas`` running in a nursery, its shards loaded; stopped on exit."""
    coord = coordinator(replicas)
    coord.on_image(image())
    async with trio.open_nursery() as n:
        await n.start(coord.run)
        await trio.sleep(0.1)
        yield coord, n
        n.cancel_scope.cancel()


def run_with_slow_replicas(tmp_path, body) -> None:
    """Run ``body(replicas, coord, answers, a, b)`` once a two-member group's SyncGroups (the
    leader's with an assignment) are in flight over replicas that hold replication back."""
    replicas = SlowReplicas(tmp_path)

    async def main():
        async with serving(replicas) as (coord, n):
            a, b = await two_member_group(coord, n)
            answers: dict = {}
            sync_all(coord, n, a, b, answers)
            await body(replicas, coord, answers, a, b)

    try:
        run(main)
    finally:
        replicas.close()


def test_every_sync_is_answered_only_once_the_assignment_is_committed(tmp_path):
    async def body(replicas, coord, answers, a, b):
        await trio.sleep(2)
        # The record is in the leader's log but not replicated: nobody has an answer yet.
        assert answers == {}
        assert coord.shard_for(GROUP).groups[GROUP].state.name == "COMPLETING_REBALANCE"
        replicas.release.set()
        await trio.sleep(0.1)
        assert (answers[a].error, answers[a].assignment) == (E.NONE, b"for-a")
        assert (answers[b].error, answers[b].assignment) == (E.NONE, b"for-b")
        assert coord.shard_for(GROUP).groups[GROUP].state.name == "STABLE"

    run_with_slow_replicas(tmp_path, body)


def test_an_assignment_not_committed_fails_every_sync_and_rebalances(tmp_path):
    async def body(replicas, coord, answers, a, b):
        await trio.sleep(1)
        replicas.outcome = E.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        replicas.release.set()
        await trio.sleep(0.1)
        # As Kafka: the error to every member (mapped as for any coordinator write), and the
        # group rebalances.
        assert answers[a].error == answers[b].error == E.COORDINATOR_NOT_AVAILABLE
        assert coord.shard_for(GROUP).groups[GROUP].state.name == "PREPARING_REBALANCE"

    run_with_slow_replicas(tmp_path, body)


def test_members_answered_after_a_slow_commit_keep_a_whole_session(tmp_path):
    # The assignment record takes 8 s of the 10 s session to commit (a slow in-sync replica).
    # As Kafka's propagateAssignment, each member's session restarts when its SyncGroup is
    # answered, so a member that heartbeats 3 s after its answer is still in the group.
    async def body(replicas, coord, answers, a, b):
        await trio.sleep(8)
        assert answers == {}
        replicas.release.set()
        await trio.sleep(0.1)
        assert answers[a].error == answers[b].error == E.NONE
        await trio.sleep(3)  # 11 s after the SyncGroups were sent
        shard = coord.shard_for(GROUP)
        for member in (a, b):
            assert shard.heartbeat(GROUP, 2, member, None, coord.clock.now_ms()).response == E.NONE
        group = shard.groups[GROUP]
        assert group.state.name == "STABLE" and set(group.members) == {a, b}

    run_with_slow_replicas(tmp_path, body)
