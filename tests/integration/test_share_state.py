"""Share-partition state on a live node (KIP-932's share coordinator): found with FindCoordinator
v6 key type 2, written with WriteShareGroupState, and read back equal after the node is killed
with SIGKILL and restarted, since every write is in ``__share_group_state`` before it is answered.

The RPCs are served while ``share.version`` >= 1; a node that does not advertise them skips the
part that needs them.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import trio
from helpers import run_client

from kafkapy.coordinator.share_state_service import coordinator_key
from kafkapy.net.client import KafkaClient
from kafkapy.protocol import ApiKey
from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import ErrorCode as E
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


@pytest.mark.timeout(180)
def test_share_state_survives_kill9(tmp_path):
    with KafkaNode(tmp_path / "node") as node:
        async def write(client: KafkaClient) -> bool:
            c = await find(client, 0)
            assert (c.error_code, c.node_id, c.port) == (E.NONE, 1, node.port)
            if not served(client):
                return False
            I = m.InitializeShareGroupStateRequest
            p = await until_loaded(lambda: client.send(I(group_id=GROUP, topics=[I.InitializeStateData(
                topic_id=TOPIC, partitions=[I.InitializeStateData.PartitionData(
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

        if not run_client(node, write, timeout=60):
            pytest.skip("this node does not serve the share-state RPCs (share.version not finalized)")
        node.kill9()
        node.restart()

        async def read(client: KafkaClient) -> Any:
            R = m.ReadShareGroupStateRequest
            return await until_loaded(lambda: client.send(R(group_id=GROUP, topics=[R.ReadStateData(
                topic_id=TOPIC, partitions=[R.ReadStateData.PartitionData(partition=0, leader_epoch=3)])]), 0))

        p = run_client(node, read, timeout=60)
        assert (p.error_code, p.state_epoch, p.start_offset) == (E.NONE, 1, 10)
        assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches] == BATCHES
