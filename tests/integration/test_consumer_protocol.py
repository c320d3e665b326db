"""KIP-848 consumer groups against a live node with confluent-kafka (librdkafka 2.16) speaking
``group.protocol=consumer``: members join, consume, one leaves, its partitions move, commits
survive, and the group is described, listed and deleted.

Needs a node that serves ConsumerGroupHeartbeat: ``group.version`` finalized at 1 and the gated
APIs dispatched (the foundation work of issue 25). On a node without it the module is skipped.
"""

from __future__ import annotations

import time
import uuid

import pytest
import trio
from helpers import create_topics, run_client

from kafkapy.net.client import KafkaClient
from kafkapy.protocol import messages as m
from kafkapy.protocol.apis import ApiKey
from kafkapy.protocol.errors import ErrorCode as E

NODE_OVERRIDES = {
    "offsets.topic.num.partitions": "3",
    # Fast rebalances; Kafka checks min <= value <= max at startup, so the minimums come down too.
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.session.timeout.ms": "6000",
}
TOPIC, PARTITIONS, GROUP = "cp-topic", 6, "cp-group"


def _serves_consumer_protocol(node) -> bool:
    async def go(c: KafkaClient) -> bool:
        r = await c.send(m.ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
        return any(k.api_key == ApiKey.CONSUMER_GROUP_HEARTBEAT for k in r.api_keys)
    return bool(run_client(node, go))


@pytest.fixture(scope="module")
def served(node):
    if not _serves_consumer_protocol(node):
        pytest.skip("the node does not advertise ConsumerGroupHeartbeat (group.version not finalized)")
    return node


def _consumer(bootstrap: str, name: str):
    import confluent_kafka
    return confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": GROUP, "group.protocol": "consumer",
        "client.id": name, "enable.auto.commit": False, "auto.offset.reset": "earliest",
    })


def _poll_until(consumers, done, secs: float = 60.0):
    """Poll every consumer until ``done()``; returns {consumer index: [(partition, offset)]}."""
    seen: dict[int, list[tuple[int, int]]] = {i: [] for i in range(len(consumers))}
    deadline = time.monotonic() + secs
    while time.monotonic() < deadline and not done(seen):
        for i, c in enumerate(consumers):
            msg = c.poll(0.1)
            if msg is not None and msg.error() is None:
                seen[i].append((msg.partition(), msg.offset()))
    return seen


def _assigned(c) -> set[int]:
    return {tp.partition for tp in c.assignment()}


def test_three_consumers_share_leave_and_commit(served):
    import confluent_kafka
    run_client(served, lambda c: c.send(create_topics((TOPIC, PARTITIONS, 1)), 5))
    producer = confluent_kafka.Producer({"bootstrap.servers": served.bootstrap})
    for i in range(60):
        producer.produce(TOPIC, value=f"v{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0

    consumers = [_consumer(served.bootstrap, f"c{i}") for i in range(3)]
    try:
        for c in consumers:
            c.subscribe([TOPIC])
        # Every message is read once the three share the partitions between them.
        seen = _poll_until(consumers, lambda s: sum(len(v) for v in s.values()) >= 60
                           and all(len(_assigned(c)) == 2 for c in consumers))
        assert sorted(len(_assigned(c)) for c in consumers) == [2, 2, 2]
        owned = [_assigned(c) for c in consumers]
        assert set().union(*owned) == set(range(PARTITIONS)) and sum(map(len, owned)) == PARTITIONS
        assert len({(p, o) for v in seen.values() for p, o in v}) == 60

        for c in consumers:
            c.commit(asynchronous=False)
        # The one leaving gives its partitions to the others.
        leaving = consumers.pop()
        leaving.close()
        _poll_until(consumers, lambda s: sum(len(_assigned(c)) for c in consumers) == PARTITIONS)
        assert sorted(len(_assigned(c)) for c in consumers) == [3, 3]

        committed = consumers[0].committed([confluent_kafka.TopicPartition(TOPIC, p) for p in range(PARTITIONS)], 10)
        assert sorted(tp.offset for tp in committed) == [10] * PARTITIONS

        async def describe(cl: KafkaClient):
            await cl.send(m.FindCoordinatorRequest(key_type=0, coordinator_keys=[GROUP]), 4)
            d = await cl.send(m.ConsumerGroupDescribeRequest(group_ids=[GROUP, "nope"],
                                                             include_authorized_operations=True), 1)
            lg = await cl.send(m.ListGroupsRequest(states_filter=[], types_filter=["CONSUMER"]), 5)
            dg = await cl.send(m.DescribeGroupsRequest(groups=[GROUP], include_authorized_operations=False), 5)
            return d, lg, dg

        d, lg, dg = run_client(served, describe)
        group, nope = d.groups
        assert (group.error_code, group.group_state, group.assignor_name) == (E.NONE, "Stable", "uniform")
        assert len(group.members) == 2 and all(mm.member_type == 1 for mm in group.members)
        assert {tp.topic_name for mm in group.members for tp in mm.assignment.topic_partitions} == {TOPIC}
        assert nope.error_code == E.GROUP_ID_NOT_FOUND
        assert [(g.group_id, g.group_type, g.protocol_type) for g in lg.groups] == [(GROUP, "consumer", "consumer")]
        # DescribeGroups v5 shows a consumer group as Kafka 4.4 does: as no classic group
        assert (dg.groups[0].error_code, dg.groups[0].group_state) == (E.NONE, "Dead")
    finally:
        for c in consumers:
            c.close()

    # Empty now: the group can be deleted, with its offsets.
    async def delete(cl: KafkaClient):
        return await cl.send(m.DeleteGroupsRequest(groups_names=[GROUP]), 2)
    assert [r.error_code for r in run_client(served, delete).results] == [E.NONE]


def test_a_new_consumer_resumes_from_commits_after_a_restart(served):
    import confluent_kafka
    group = f"resume-{uuid.uuid4().hex[:6]}"
    topic = f"resume-{uuid.uuid4().hex[:6]}"
    run_client(served, lambda c: c.send(create_topics((topic, 2, 1)), 5))
    producer = confluent_kafka.Producer({"bootstrap.servers": served.bootstrap})
    for i in range(10):
        producer.produce(topic, value=b"x", partition=i % 2)
    assert producer.flush(30) == 0

    def consumer():
        return confluent_kafka.Consumer({
            "bootstrap.servers": served.bootstrap, "group.id": group, "group.protocol": "consumer",
            "enable.auto.commit": False, "auto.offset.reset": "earliest"})

    first = consumer()
    first.subscribe([topic])
    seen = _poll_until([first], lambda s: len(s[0]) >= 6)
    first.commit(asynchronous=False)
    first.close()
    n_first = len(seen[0])
    # The group and its commits are read back from __consumer_offsets after a restart.
    served.restart()
    for i in range(4):
        producer.produce(topic, value=b"y", partition=i % 2)
    assert producer.flush(30) == 0
    second = consumer()
    second.subscribe([topic])
    try:
        rest = _poll_until([second], lambda s: len(s[0]) >= 14 - n_first, secs=30)
    finally:
        second.close()
    # Resumed from the commits: nothing read twice, nothing missed.
    assert len(rest[0]) == 14 - n_first
    assert not set(rest[0]) & set(seen[0])


def _join(group: str, **kw):
    fields = dict(group_id=group, member_id=str(uuid.uuid4()), member_epoch=0, instance_id=None, rack_id=None,
                  rebalance_timeout_ms=30_000, subscribed_topic_names=[TOPIC], subscribed_topic_regex=None,
                  server_assignor=None, topic_partitions=[])
    fields.update(kw)
    return m.ConsumerGroupHeartbeatRequest(**fields)


async def _heartbeat(c: KafkaClient, req):
    for _ in range(100):  # until the group's coordinator is loaded
        await c.send(m.FindCoordinatorRequest(key="", key_type=0, coordinator_keys=[req.group_id]), 4)
        r = await c.send(req, 1)
        if r.error_code not in (E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR):
            return r
        await trio.sleep(0.1)
    return r


def test_a_groups_own_heartbeat_interval_and_an_empty_subscription(served):
    group, other = f"own-{uuid.uuid4().hex[:6]}", f"plain-{uuid.uuid4().hex[:6]}"
    R = m.IncrementalAlterConfigsRequest.AlterConfigsResource

    async def go(c: KafkaClient):
        await c.send(create_topics((TOPIC, PARTITIONS, 1)), 5)
        altered = await c.send(m.IncrementalAlterConfigsRequest(validate_only=False, resources=[R(
            resource_type=32, resource_name=group, configs=[R.AlterableConfig(
                name="consumer.heartbeat.interval.ms", config_operation=0, value="700")])]), 1)
        assert altered.responses[0].error_code == E.NONE, altered
        D = m.DescribeConfigsRequest
        for _ in range(100):  # until this broker's metadata has the group's config
            described = await c.send(D(resources=[D.DescribeConfigsResource(
                resource_type=32, resource_name=group, configuration_keys=["consumer.heartbeat.interval.ms"])],
                include_synonyms=False, include_documentation=False), 4)
            if [e.value for e in described.results[0].configs] == ["700"]:
                break
            await trio.sleep(0.1)
        own = await _heartbeat(c, _join(group))
        plain = await _heartbeat(c, _join(other))
        empty = await _heartbeat(c, _join(f"empty-{uuid.uuid4().hex[:6]}", subscribed_topic_names=[]))
        return own, plain, empty

    own, plain, empty = run_client(served, go)
    assert (own.error_code, own.heartbeat_interval_ms) == (E.NONE, 700)
    assert (plain.error_code, plain.heartbeat_interval_ms) == (E.NONE, 500)
    # Kafka 4.4 takes an empty list on a join: the member is in, with nothing to consume yet.
    assert (empty.error_code, empty.member_epoch, empty.assignment.topic_partitions) == (E.NONE, 1, [])
