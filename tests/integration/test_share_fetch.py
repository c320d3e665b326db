"""ShareFetch and ShareAcknowledge against a live node (our client, the node's own share
coordinator keeping the state): a member acquires records, acknowledges some and releases one,
closes its session; after a kill -9 and a restart another member gets exactly the released record,
on its second delivery.

The share group's coordinator (which initializes share-partition state) is another piece: the test
initializes the state itself with InitializeShareGroupState, as that coordinator would. Skipped on a
node that does not serve ShareFetch (share.version not finalized).
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
from kafkapy.records.builder import Record, build_batch
from kafkapy.records.reader import iter_batches, iter_records
from kafkapy.testing.node import KafkaNode
from tests.integration.helpers import create_topics, produce

GROUP = "share-fetch-it"
TOPIC = "work"
F, A = m.ShareFetchRequest, m.ShareAcknowledgeRequest


def on(node: KafkaNode, fn, *, timeout: float = 60.0) -> Any:
    async def main() -> Any:
        with trio.fail_after(timeout):
            async with await KafkaClient.connect(node.host, node.port, client_id="share-it") as client:
                return await fn(client)
    return trio.run(main)


def share_fetch(topic_id: uuid.UUID, member: str, epoch: int, acks: list[tuple[int, int, int]] = (),
                max_wait_ms: int = 500) -> Any:
    P = F.FetchTopic.FetchPartition
    B = P.AcknowledgementBatch
    return F(group_id=GROUP, member_id=member, share_session_epoch=epoch, max_wait_ms=max_wait_ms, min_bytes=1,
             max_bytes=1 << 20, max_records=500, batch_size=500, forgotten_topics_data=[],
             topics=[F.FetchTopic(topic_id=topic_id, partitions=[P(partition_index=0, acknowledgement_batches=[
                 B(first_offset=f, last_offset=la, acknowledge_types=[t]) for f, la, t in acks])])])


def only_partition(resp: Any) -> Any:
    assert resp.error_code == E.NONE, resp
    [topic] = resp.responses
    [p] = topic.partitions
    return p


def acquired(p: Any) -> list[tuple[int, int, int]]:
    return [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records]


def offered(p: Any) -> list[bytes]:
    held = {o for a in p.acquired_records for o in range(a.first_offset, a.last_offset + 1)}
    return [r.value for _, b in iter_batches(bytes(p.records or b"")) for r in iter_records(b) if r.offset in held]


async def setup(client: KafkaClient) -> uuid.UUID | None:
    """The topic, three records and the group's share-partition state; None when not served."""
    if ApiKey.SHARE_FETCH not in (client.peer_versions or {}):
        return None
    assert (await client.send(create_topics((TOPIC, 1, 1)), 5)).topics[0].error_code == E.NONE
    meta = await client.send(m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=TOPIC)],
                                               allow_auto_topic_creation=False), 12)
    topic_id = meta.topics[0].topic_id
    batch = build_batch([Record(b"k", v) for v in (b"a", b"b", b"c")], now_ms=0)
    for _ in range(100):
        resp = await client.send(produce(TOPIC, 0, batch), 9)
        if resp.responses[0].partition_responses[0].error_code == E.NONE:
            break
        await trio.sleep(0.1)
    key = coordinator_key(GROUP, topic_id, 0)
    for _ in range(100):  # the first FindCoordinator creates __share_group_state
        [c] = (await client.send(m.FindCoordinatorRequest(key_type=2, coordinator_keys=[key]), 6)).coordinators
        if c.error_code == E.NONE:
            break
        await trio.sleep(0.1)
    Init = m.InitializeShareGroupStateRequest
    for _ in range(100):  # then its coordinator loads
        resp = await client.send(Init(group_id=GROUP, topics=[Init.InitializeStateData(topic_id=topic_id, partitions=[
            Init.InitializeStateData.PartitionData(partition=0, state_epoch=1, start_offset=0)])]), 0)
        if resp.results[0].partitions[0].error_code == E.NONE:
            return topic_id
        await trio.sleep(0.1)
    raise AssertionError(f"the share-partition state was not initialized: {resp}")


@pytest.mark.timeout(180)
def test_share_fetch_acknowledge_and_redelivery_across_a_restart(tmp_path):
    with KafkaNode(tmp_path / "node") as node:
        topic_id = on(node, setup)
        if topic_id is None:
            pytest.skip("this node does not serve ShareFetch (share.version not finalized)")

        async def first_member(client: KafkaClient) -> None:
            p = only_partition(await client.send(share_fetch(topic_id, "member-1", 0), 1))
            assert acquired(p) == [(0, 2, 1)] and offered(p) == [b"a", b"b", b"c"]
            ack = await client.send(A(group_id=GROUP, member_id="member-1", share_session_epoch=1, topics=[
                A.AcknowledgeTopic(topic_id=topic_id, partitions=[A.AcknowledgeTopic.AcknowledgePartition(
                    partition_index=0, acknowledgement_batches=[
                        A.AcknowledgeTopic.AcknowledgePartition.AcknowledgementBatch(
                            first_offset=0, last_offset=1, acknowledge_types=[1])])])]), 1)
            assert ack.error_code == E.NONE and ack.responses[0].partitions[0].error_code == E.NONE
            # Offset 2 goes back on the way out (Release), with the session.
            p = only_partition(await client.send(share_fetch(topic_id, "member-1", -1, [(2, 2, 2)]), 1))
            assert p.acknowledge_error_code == E.NONE

        on(node, first_member)
        node.kill9()
        node.restart()

        async def second_member(client: KafkaClient) -> None:
            for _ in range(100):  # the share coordinator loads __share_group_state after the restart
                p = only_partition(await client.send(share_fetch(topic_id, "member-2", 0), 1))
                if p.error_code == E.NONE:
                    break
                await trio.sleep(0.1)
            assert acquired(p) == [(2, 2, 2)] and offered(p) == [b"c"]

        on(node, second_member)


@pytest.mark.timeout(120)
def test_a_groups_own_delivery_count_limit_applies(tmp_path):
    # share.delivery.count.limit=2 set on the group (the broker's default is 5): records released
    # twice are archived, not offered a third time.
    R = m.IncrementalAlterConfigsRequest.AlterConfigsResource
    with KafkaNode(tmp_path / "node") as node:
        async def limit(client: KafkaClient) -> Any:
            altered = await client.send(m.IncrementalAlterConfigsRequest(validate_only=False, resources=[R(
                resource_type=32, resource_name=GROUP, configs=[R.AlterableConfig(
                    name="share.delivery.count.limit", config_operation=0, value="2")])]), 1)
            assert altered.responses[0].error_code == E.NONE, altered
            return await setup(client)

        topic_id = on(node, limit)
        if topic_id is None:
            pytest.skip("this node does not serve ShareFetch (share.version not finalized)")

        async def member(client: KafkaClient) -> list[tuple[int, int, int]]:
            seen: list[tuple[int, int, int]] = []
            release: list[tuple[int, int, int]] = []
            for epoch in range(4):  # each fetch releases what the previous one acquired
                resp = await client.send(share_fetch(topic_id, "member-1", epoch, release), 1)
                got = acquired(only_partition(resp)) if resp.responses else []  # (none: nothing changed)
                seen += got
                release = [(f, la, 2) for f, la, _ in got]
            return seen

        assert on(node, member) == [(0, 2, 1), (0, 2, 2)]
