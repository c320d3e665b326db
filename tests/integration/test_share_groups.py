"""KIP-932 share groups against a live node with confluent-kafka 2.16's ``ShareConsumer``: two
members join one group (ShareGroupHeartbeat; the node's group coordinator initializes the share
partitions' state with its share coordinator), consume every record once between them
(ShareFetch, implicit acknowledgement), show in ListGroups/ShareGroupDescribe with their
assignment and in DescribeShareGroupOffsets; once they leave, AlterShareGroupOffsets rewinds the
group and a new member reads the records again; then the group's offsets and the group go.

Skipped on a node that does not serve ShareGroupHeartbeat (share.version not finalized).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
import trio
from helpers import create_topics, run_client

from kafkapy.net.client import KafkaClient
from kafkapy.protocol import messages as m
from kafkapy.protocol.apis import ApiKey
from kafkapy.protocol.errors import ErrorCode as E

NODE_OVERRIDES = {"offsets.topic.num.partitions": "3"}
TOPIC, PARTITIONS, GROUP, RECORDS = "sg-topic", 2, "sg-group", 20
GROUP_RESOURCE = 32


@pytest.fixture(scope="module")
def served(node):
    async def go(c: KafkaClient) -> bool:
        r = await c.send(m.ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
        return any(k.api_key == ApiKey.SHARE_GROUP_HEARTBEAT for k in r.api_keys)
    if not run_client(node, go):
        pytest.skip("the node does not advertise ShareGroupHeartbeat (share.version not finalized)")
    return node


def _share_consumer(bootstrap: str, name: str):
    import confluent_kafka
    return confluent_kafka.ShareConsumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "client.id": name})


def _consume(consumers, want: int, secs: float = 90.0) -> dict[int, list[tuple[int, int]]]:
    """Poll every consumer until ``want`` records were received between them."""
    seen: dict[int, list[tuple[int, int]]] = {i: [] for i in range(len(consumers))}
    deadline = time.monotonic() + secs
    while time.monotonic() < deadline and sum(map(len, seen.values())) < want:
        for i, c in enumerate(consumers):
            for msg in c.poll(0.2) or []:
                if msg.error() is None:
                    seen[i].append((msg.partition(), msg.offset()))
    return seen


def _admin(served, fn) -> Any:
    return run_client(served, fn, timeout=60.0)


async def _topic_id(c: KafkaClient) -> uuid.UUID:
    meta = await c.send(m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=TOPIC)],
                                          allow_auto_topic_creation=False), 12)
    return meta.topics[0].topic_id


async def _coordinator(c: KafkaClient) -> KafkaClient:
    """A client connected to the group's coordinator (the node itself: a single broker)."""
    for _ in range(100):
        r = await c.send(m.FindCoordinatorRequest(key_type=0, coordinator_keys=[GROUP]), 4)
        if r.coordinators[0].error_code == E.NONE:
            return c
        await trio.sleep(0.1)
    raise AssertionError("no coordinator for the group")


def _setup(served) -> None:
    import confluent_kafka

    async def go(c: KafkaClient) -> None:
        assert (await c.send(create_topics((TOPIC, PARTITIONS, 1)), 5)).topics[0].error_code == E.NONE
        # Records written before the group starts are read from the beginning.
        R = m.IncrementalAlterConfigsRequest
        r = await c.send(R(validate_only=False, resources=[R.AlterConfigsResource(
            resource_type=GROUP_RESOURCE, resource_name=GROUP, configs=[R.AlterConfigsResource.AlterableConfig(
                name="share.auto.offset.reset", config_operation=0, value="earliest")])]), 1)
        assert r.responses[0].error_code == E.NONE, r
    _admin(served, go)
    producer = confluent_kafka.Producer({"bootstrap.servers": served.bootstrap})
    for i in range(RECORDS):
        producer.produce(TOPIC, value=f"v{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0


@pytest.mark.timeout(300)
def test_share_consumers_describe_alter_and_delete(served):
    _setup(served)
    consumers = [_share_consumer(served.bootstrap, f"s{i}") for i in range(2)]
    try:
        for c in consumers:
            c.subscribe([TOPIC])
        seen = _consume(consumers, RECORDS)
        got = sorted(r for rs in seen.values() for r in rs)
        assert got == sorted((i % PARTITIONS, i // PARTITIONS) for i in range(RECORDS))  # each once
        for c in consumers:
            c.commit_sync(30)

        async def described(c: KafkaClient) -> Any:
            c = await _coordinator(c)
            listed = await c.send(m.ListGroupsRequest(states_filter=[], types_filter=["share"]), 5)
            d = await c.send(m.ShareGroupDescribeRequest(group_ids=[GROUP], include_authorized_operations=True), 1)
            offsets = await c.send(m.DescribeShareGroupOffsetsRequest(groups=[
                m.DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup(group_id=GROUP,
                                                                                         topics=None)]), 1)
            return listed, d.groups[0], offsets.groups[0], await _topic_id(c)

        listed, group, offsets, topic_id = _admin(served, described)
        assert [(g.group_id, g.group_type, g.group_state) for g in listed.groups] == [(GROUP, "share", "Stable")]
        assert (group.error_code, group.group_state, group.assignor_name, len(group.members)) == (
            E.NONE, "Stable", "simple", 2)
        assert {mm.client_id for mm in group.members} == {"s0", "s1"}
        assert {(tp.topic_name, p) for mm in group.members for tp in mm.assignment.topic_partitions
                for p in tp.partitions} == {(TOPIC, 0), (TOPIC, 1)}
        assert offsets.error_code == E.NONE and offsets.topics[0].topic_id == topic_id
        # Every record acknowledged (and written to the share state): the start offsets are past
        # them all, nothing is left to deliver.
        assert [(p.partition_index, p.error_code, p.start_offset, p.lag) for p in offsets.topics[0].partitions] == [
            (0, 0, RECORDS // PARTITIONS, 0), (1, 0, RECORDS // PARTITIONS, 0)]
    finally:
        for c in consumers:
            c.close()

    async def rewind(c: KafkaClient) -> Any:
        c = await _coordinator(c)
        R = m.AlterShareGroupOffsetsRequest
        T = R.AlterShareGroupOffsetsRequestTopic
        for _ in range(100):  # the members' leave heartbeats may still be on their way
            r = await c.send(R(group_id=GROUP, topics=[T(topic_name=TOPIC, partitions=[
                T.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=0)
                for p in range(PARTITIONS)])]), 0)
            if r.error_code != E.NON_EMPTY_GROUP:
                return r
            await trio.sleep(0.2)
        return r

    r = _admin(served, rewind)
    assert r.error_code == E.NONE and [p.error_code for p in r.responses[0].partitions] == [0, 0]
    again = _share_consumer(served.bootstrap, "s2")
    try:
        again.subscribe([TOPIC])
        seen = _consume([again], RECORDS)
        assert len(seen[0]) == RECORDS
        again.commit_sync(30)
    finally:
        again.close()

    async def delete(c: KafkaClient) -> Any:
        c = await _coordinator(c)
        D = m.DeleteShareGroupOffsetsRequest
        for _ in range(100):
            r = await c.send(D(group_id=GROUP, topics=[D.DeleteShareGroupOffsetsRequestTopic(topic_name=TOPIC)]), 0)
            if r.error_code != E.NON_EMPTY_GROUP:
                break
            await trio.sleep(0.2)
        gone = await c.send(m.DeleteGroupsRequest(groups_names=[GROUP]), 2)
        return r, gone

    r, gone = _admin(served, delete)
    assert (r.error_code, [t.error_code for t in r.responses]) == (E.NONE, [E.NONE])
    assert gone.results[0].error_code == E.NONE
