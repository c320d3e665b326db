"""Online migration through the coordinator's Trio edge, on virtual time: the policy comes from
``group.consumer.migration.policy``, the upgrade's records are written to a real
__consumer_offsets log before the heartbeat is answered, a JoinGroup parked on the classic group
is answered by the upgrade, mixed-mode joins are answered at once, and a coordinator loading the
log again finds the mixed group with its offsets."""

from __future__ import annotations

import uuid

import pytest
import trio

from kafkapy.config import BrokerConfig
from kafkapy.coordinator.consumer.heartbeat import HeartbeatRequest
from kafkapy.coordinator.group import CONSUMER, JoinRequest, JoinResult, TopicInfo
from kafkapy.coordinator.migration import MigrationPolicy
from kafkapy.coordinator.service import GroupCoordinator, migration_policy
from kafkapy.protocol import consumer_protocol as cp
from kafkapy.protocol.errors import ErrorCode as E

from .test_service import PARTITIONS, Replicas, VirtualClock, image, run

G = "grp"
TOPICS = {"foo": TopicInfo(uuid.UUID(int=0xF00), "foo", 4)}
SUB = cp.encode_subscription(["foo"], None, {}, -1, None, 1)


@pytest.fixture
def replicas(tmp_path):
    r = Replicas(tmp_path)
    yield r
    r.close()


def coordinator(replicas, **settings: str) -> GroupCoordinator:
    config = BrokerConfig.from_sources({"offsets.topic.num.partitions": str(PARTITIONS),
                                        "group.initial.rebalance.delay.ms": "0", **settings})
    coord = GroupCoordinator(config, replicas, VirtualClock(), node_id=1)
    coord.topics, coord.topics_version = dict(TOPICS), 1
    return coord


def jreq(member_id: str = "") -> JoinRequest:
    return JoinRequest(G, member_id, None, "consumer", [("range", SUB)], 10_000, 20_000, client_id="c")


async def join(coord: GroupCoordinator, member_id: str = "") -> JoinResult:
    shard = coord.shard_for(G)
    result = await coord.run_op(shard, shard.join(jreq(member_id), coord.clock.now_ms()), timeout_ms=30_000,
                                on_timeout="timeout")
    assert isinstance(result, JoinResult)
    return result


async def heartbeat(coord: GroupCoordinator, member: str, epoch: int):
    shard = coord.shard_for(G)
    req = HeartbeatRequest(G, member, epoch, rebalance_timeout_ms=20_000, subscribed_topic_names=["foo"], owned={}) \
        if epoch == 0 else HeartbeatRequest(G, member, epoch)
    return await coord.run_modern(shard, shard.consumer_heartbeat(req, coord.clock.now_ms()), lambda e: e)


def test_the_policy_is_read_from_the_broker_config():
    assert migration_policy(BrokerConfig.from_sources({})) is MigrationPolicy.BIDIRECTIONAL
    for name, policy in (("upgrade", MigrationPolicy.UPGRADE), ("DISABLED", MigrationPolicy.DISABLED)):
        config = BrokerConfig.from_sources({"group.consumer.migration.policy": name})
        assert migration_policy(config) is policy


def test_an_upgrade_through_the_edge_answers_the_parked_join_and_survives_a_reload(replicas):
    async def main():
        coord = coordinator(replicas)
        coord.on_image(image())
        async with trio.open_nursery() as n:
            await n.start(coord.run)
            await trio.sleep(0.1)
            shard = coord.shard_for(G)
            assert shard.migration_policy is MigrationPolicy.BIDIRECTIONAL
            a = (await join(coord)).member_id
            gen = (await join(coord, a)).generation
            given = [(a, cp.encode_assignment({"foo": [0, 1, 2, 3]}, None, 1))]
            await coord.run_op(shard, shard.sync(G, gen, a, None, None, None, given, coord.clock.now_ms()),
                               timeout_ms=1000, on_timeout=None)
            await coord.run_op(shard, shard.commit(G, [("foo", 1, 17, -1, "")], coord.clock.now_ms()),
                               timeout_ms=0, on_timeout=None)
            # b's JoinGroup waits in the rebalance it started...
            b = (await join(coord)).member_id
            parked: dict[str, JoinResult] = {}

            async def join_b() -> None:
                parked["b"] = await join(coord, b)

            n.start_soon(join_b)
            await trio.sleep(1)
            assert "b" not in parked
            # ...until a consumer-protocol member arrives: the group is upgraded and b told to rejoin.
            end = replicas.logs[shard.partition].log_end_offset
            r = await heartbeat(coord, "new", 0)
            assert r.error == E.NONE and shard.group_type(G) == CONSUMER
            assert replicas.logs[shard.partition].log_end_offset > end  # written before answered
            await trio.sleep(0.1)
            assert parked["b"].error == E.REBALANCE_IN_PROGRESS
            rejoined = await join(coord, b)  # answered at once, in mixed mode
            assert rejoined.error == E.NONE and rejoined.leader == ""
            members = dict(shard.consumer_group(G).members)
            n.cancel_scope.cancel()

        # Another coordinator loads the log: the same mixed group, the same offsets.
        again = coordinator(replicas)
        again.on_image(image())
        async with trio.open_nursery() as n:
            await n.start(again.run)
            await trio.sleep(0.1)
            loaded = again.shard_for(G)
            assert loaded.group_type(G) == CONSUMER and loaded.consumer_group(G).members == members
            assert [(t, p, c.offset) for t, p, c in loaded.fetch_offsets(G, None)] == [("foo", 1, 17)]
            n.cancel_scope.cancel()

    run(main)


def test_with_the_policy_disabled_the_edge_answers_as_kafka(replicas):
    async def main():
        coord = coordinator(replicas, **{"group.consumer.migration.policy": "disabled"})
        coord.on_image(image())
        async with trio.open_nursery() as n:
            await n.start(coord.run)
            await trio.sleep(0.1)
            a = (await join(coord)).member_id
            await join(coord, a)
            r = await heartbeat(coord, "new", 0)
            assert r.error == E.GROUP_ID_NOT_FOUND and "online upgrade is disabled" in r.error_message
            assert coord.shard_for(G).migration_policy is MigrationPolicy.DISABLED
            n.cancel_scope.cancel()

    run(main)
