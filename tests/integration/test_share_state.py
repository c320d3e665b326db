"""Share-partition state on a live node (KIP-932's share coordinator): found with FindCoordinator
v6 key type 2, written with WriteShareGroupState, and read back equal after the node is killed
with SIGKILL and restarted, since every write is in ``__share_group_state`` before it is answered;
and, on three nodes, read back at the partition's next leader once its leader is stopped.

The RPCs are served while ``share.version`` >= 1; a node that does not advertise them skips the
part that needs them.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import trio

from kafkapy.coordinator.share_state_service import coordinator_key
from kafkapy.net.client import KafkaClient
from kafkapy.protocol import ApiKey
from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import ErrorCode as E
from kafkapy.testing.cluster import LocalCluster, eventually
from kafkapy.testing.node import KafkaNode

GROUP = "share-it"
TOPIC = uuid.UUID(int=0xC0FFEE)
BATCHES = [(10, 19, 2, 1), (20, 24, 4, 5), (25, 29, 0, 2)]


async def find(client: KafkaClient, partition: int) -> Any:
    body = m.FindCoordinatorRequest(key_type=2, coordinator_keys=[coordinator_key(GROUP, TOPIC, partition)])
    for _ in range(100):  # the first one creates __share_group_state; its leader then loads it
        resp = await client.send(body, 6)
        [c] = resp.coordinators
        if c.error_code != E.COORDINATOR_NOT_AVAILABLE:
            return c
        await trio.sleep(0.1)
    raise AssertionError("no share coordinator")


async def until_loaded(send) -> Any:
    for _ in range(100):
        resp = await send()
        [p] = resp.results[0].partitions
        if p.error_code not in (E.COORDINATOR_LOAD_IN_PROGRESS, E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE):
            return p
        await trio.sleep(0.1)
    raise AssertionError("the share coordinator did not load")


def served(client: KafkaClient) -> bool:
    return ApiKey.WRITE_SHARE_GROUP_STATE in (client.peer_versions or {})


def on(address: tuple[str, int], fn, *, timeout: float = 60.0) -> Any:
    """``fn(client)`` with a client connected to the broker at ``address``, bounded."""
    async def main() -> Any:
        with trio.fail_after(timeout):
            async with await KafkaClient.connect(*address, client_id="share-it") as client:
                return await fn(client)

    return trio.run(main)


async def write_state(client: KafkaClient) -> bool:
    """Initialize and write partition 0's state (False: the RPCs are not served here)."""
    if not served(client):
        return False
    Init = m.InitializeShareGroupStateRequest
    p = await until_loaded(lambda: client.send(Init(group_id=GROUP, topics=[Init.InitializeStateData(
        topic_id=TOPIC, partitions=[Init.InitializeStateData.PartitionData(
            partition=0, state_epoch=1, start_offset=10)])]), 0))
    assert p.error_code == E.NONE
    W = m.WriteShareGroupStateRequest
    D = W.WriteStateData.PartitionData
    resp = await client.send(W(group_id=GROUP, topics=[W.WriteStateData(topic_id=TOPIC, partitions=[D(
        partition=0, state_epoch=1, leader_epoch=3, start_offset=10, delivery_complete_count=10,
        state_batches=[D.StateBatch(first_offset=f, last_offset=last, delivery_state=s, delivery_count=n)
                       for f, last, s, n in BATCHES])])]), 1)
    assert resp.results[0].partitions[0].error_code == E.NONE
    return True


async def read_state(client: KafkaClient) -> Any:
    R = m.ReadShareGroupStateRequest
    return await until_loaded(lambda: client.send(R(group_id=GROUP, topics=[R.ReadStateData(
        topic_id=TOPIC, partitions=[R.ReadStateData.PartitionData(partition=0, leader_epoch=3)])]), 0))


def assert_written(p: Any) -> None:
    assert (p.error_code, p.state_epoch, p.start_offset) == (E.NONE, 1, 10)
    assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches] == BATCHES


@pytest.mark.timeout(180)
def test_share_state_survives_kill9(tmp_path):
    with KafkaNode(tmp_path / "node") as node:
        async def write(client: KafkaClient) -> bool:
            c = await find(client, 0)
            assert (c.error_code, c.node_id, c.port) == (E.NONE, 1, node.port)
            return await write_state(client)

        if not on((node.host, node.port), write):
            pytest.skip("this node does not serve the share-state RPCs (share.version not finalized)")
        node.kill9()
        node.restart()
        assert_written(on((node.host, node.port), read_state))


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_share_state_follows_the_leader_of_its_partition(tmp_path):
    """Three nodes, one ``__share_group_state`` partition on all three: the state written at its
    leader is read back at the next leader once that one is stopped."""
    with LocalCluster(tmp_path, combined=3, overrides={"share.coordinator.state.topic.num.partitions": 1}) as cluster:
        cluster.up()
        ids = cluster.broker_ids()

        def coordinator(via: int) -> int | None:
            c = on(cluster.broker_address(via), lambda client: find(client, 0))
            return c.node_id if c.error_code == E.NONE else None

        leader = eventually(lambda: coordinator(ids[0]), timeout=60, what="a share coordinator")
        if not on(cluster.broker_address(leader), write_state):
            pytest.skip("these nodes do not serve the share-state RPCs (share.version not finalized)")
        cluster.stop(leader)
        other = next(i for i in ids if i != leader)
        moved = eventually(lambda: (c := coordinator(other)) not in (None, leader) and c, timeout=60,
                           what="the share coordinator to move")
        assert_written(on(cluster.broker_address(moved), read_state))
