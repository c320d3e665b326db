"""ConsumerGroupHeartbeat and ConsumerGroupDescribe handlers over a group coordinator writing to
real ``__consumer_offsets`` logs: validation, errors, authorization, acks before the answer,
rollback of a failed append, and a reload from the log."""

from __future__ import annotations

import types
import uuid

import pytest
import trio
import trio.testing

from kafkapy.broker.handlers.consumer_groups import (
    CONSUMER_GROUP_APIS,
    handle_consumer_group_describe,
    handle_consumer_group_heartbeat,
)
from kafkapy.config import BrokerConfig
from kafkapy.coordinator.schema import OFFSETS_TOPIC
from kafkapy.coordinator.service import GroupCoordinator
from kafkapy.log.config import LogConfig
from kafkapy.log.partition_log import PartitionLog
from kafkapy.protocol import messages as m
from kafkapy.protocol.apis import ApiKey
from kafkapy.protocol.errors import ErrorCode as E
from kafkapy.protocol.errors import KafkaError

PARTITIONS = 2
FOO = uuid.UUID(int=0xF00)


class Clock:
    def now_ms(self) -> int:
        return 1_700_000_000_000 + int(trio.current_time() * 1000)


class Replicas:
    def __init__(self, root) -> None:
        self.logs = {p: PartitionLog.open(str(root / f"{OFFSETS_TOPIC}-{p}"), LogConfig(), now_ms=0, recover=False)
                     for p in range(PARTITIONS)}
        self.fail: KafkaError | None = None
        self.leader = 1

    def get(self, topic, p):
        return types.SimpleNamespace(log=self.logs[p], leader_id=self.leader, leader_epoch=0)

    def append(self, hosted, records, *, now_ms, from_client=True):
        if self.fail is not None:
            raise self.fail
        return hosted.log.append_as_leader(records, now_ms=now_ms, leader_epoch=0, from_client=from_client)

    async def wait_for_replication(self, hosted, required, deadline):
        return E.NONE

    def close(self) -> None:
        for plog in self.logs.values():
            plog.close()


def _image(leader: int = 1):
    offsets = types.SimpleNamespace(id=uuid.UUID(int=7), partitions={
        p: types.SimpleNamespace(leader=leader) for p in range(PARTITIONS)})
    foo = types.SimpleNamespace(id=FOO, name="foo", partitions={p: None for p in range(4)})
    by_name = {OFFSETS_TOPIC: offsets, "foo": foo}
    return types.SimpleNamespace(offset=10, topics=types.SimpleNamespace(by_name=by_name, by_id={FOO: foo}))


class Ctx:
    """What the handlers use of a BrokerContext."""

    def __init__(self, coord: GroupCoordinator, image) -> None:
        self.groups = coord
        self.config = coord.config
        self.clock = coord.clock
        self._image = image
        self.authorizer = None
        self.denied_topics: set[str] = set()

    def image(self):
        return self._image

    def authorize(self, op, rtype, name="kafka-cluster", *, audit=True) -> bool:
        return True

    def authorized_names(self, op, rtype, names) -> set[str]:
        return {n for n in names if n not in self.denied_topics}


async def started(replicas, nursery, image) -> GroupCoordinator:
    config = BrokerConfig.from_sources({"offsets.topic.num.partitions": str(PARTITIONS)})
    coord = GroupCoordinator(config, replicas, Clock(), node_id=1)
    coord.on_topics(types.SimpleNamespace(image=image, full=True))
    coord.on_image(image)
    await nursery.start(coord.run)
    await trio.sleep(0.1)
    return coord


def cgh(group="g", member="m1", epoch=0, version=1, **kw):
    fields = dict(group_id=group, member_id=member, member_epoch=epoch, instance_id=None, rack_id=None,
                  rebalance_timeout_ms=30_000 if epoch == 0 else -1,
                  subscribed_topic_names=["foo"] if epoch == 0 else None, subscribed_topic_regex=None,
                  server_assignor=None, topic_partitions=[] if epoch == 0 else None)
    fields.update(kw)
    return types.SimpleNamespace(body=m.ConsumerGroupHeartbeatRequest(**fields), api_version=version,
                                 client_id="cli")


def describe(*groups: str, ops: bool = False):
    return types.SimpleNamespace(body=m.ConsumerGroupDescribeRequest(group_ids=list(groups),
                                                                     include_authorized_operations=ops),
                                 api_version=1, client_id="cli")


@pytest.fixture
def replicas(tmp_path):
    r = Replicas(tmp_path)
    yield r
    r.close()


def run(fn):
    trio.run(fn, clock=trio.testing.MockClock(autojump_threshold=0))


def test_gated_on_group_version_1():
    assert {(a.key, a.min_version, a.max_version, a.feature, a.min_level) for a in CONSUMER_GROUP_APIS} == {
        (ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, 1, "group.version", 1),
        (ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 1, "group.version", 1)}


def test_join_heartbeat_describe_and_reload(replicas):
    async def main():
        image = _image()
        async with trio.open_nursery() as n:
            ctx = Ctx(await started(replicas, n, image), image)
            r = await handle_consumer_group_heartbeat(ctx, cgh())
            assert (r.error_code, r.member_id, r.member_epoch, r.heartbeat_interval_ms) == (E.NONE, "m1", 2, 5000)
            assert [(tp.topic_id, tp.partitions) for tp in r.assignment.topic_partitions] == [(FOO, [0, 1, 2, 3])]
            r = await handle_consumer_group_heartbeat(ctx, cgh(epoch=5))
            assert r.error_code == E.FENCED_MEMBER_EPOCH and r.assignment is None
            r = await handle_consumer_group_heartbeat(ctx, cgh(epoch=2))
            assert (r.error_code, r.member_epoch, r.assignment) == (E.NONE, 2, None)
            d = (await handle_consumer_group_describe(ctx, describe("g", "nope", ops=True))).groups
            assert (d[0].error_code, d[0].group_state, d[0].group_epoch, d[0].assignor_name) == (
                E.NONE, "Stable", 2, "uniform")
            mm = d[0].members[0]
            assert (mm.member_id, mm.client_id, mm.member_type, mm.subscribed_topic_names, mm.subscribed_topic_regex) \
                == ("m1", "cli", 1, ["foo"], "")
            assert [(tp.topic_name, tp.partitions) for tp in mm.assignment.topic_partitions] == [("foo", [0, 1, 2, 3])]
            assert d[0].authorized_operations > 0
            assert (d[1].error_code, d[1].error_message) == (E.GROUP_ID_NOT_FOUND, "Group nope not found.")
            n.cancel_scope.cancel()
        # A coordinator loading the same log has the same group.
        async with trio.open_nursery() as n:
            ctx = Ctx(await started(replicas, n, image), image)
            d = (await handle_consumer_group_describe(ctx, describe("g"))).groups[0]
            assert (d.group_state, d.group_epoch, [mm.member_epoch for mm in d.members]) == ("Stable", 2, [2])
            r = await handle_consumer_group_heartbeat(ctx, cgh(epoch=2))
            assert (r.error_code, r.member_epoch) == (E.NONE, 2)
            n.cancel_scope.cancel()

    run(main)


# Kafka 4.4's answers, from a run against it.
@pytest.mark.parametrize("fields,error,message", [
    (dict(group_id=""), E.INVALID_REQUEST, "GroupId can't be empty."),
    (dict(group_id="", member_id=""), E.INVALID_REQUEST, "MemberId can't be empty."),
    (dict(member_id=" "), E.INVALID_REQUEST, "MemberId can't be empty."),
    (dict(topic_partitions=None), E.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining."),
    (dict(member_id="", member_epoch=-5, version=0), E.INVALID_REQUEST, "MemberEpoch is invalid."),
    (dict(rebalance_timeout_ms=-1), E.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request."),
    (dict(subscribed_topic_names=None), E.INVALID_REQUEST,
     "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."),
    (dict(topic_partitions=[m.ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=FOO, partitions=[0])]),
     E.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining."),
    (dict(member_id=""), E.INVALID_REQUEST, "MemberId can't be empty."),
    (dict(instance_id=""), E.INVALID_REQUEST, "InstanceId can't be empty."),
    (dict(rack_id=""), E.INVALID_REQUEST, "RackId can't be empty."),
    (dict(member_epoch=-3), E.INVALID_REQUEST, "MemberEpoch is invalid."),
    (dict(member_epoch=-2), E.INVALID_REQUEST, "InstanceId can't be null."),
    (dict(server_assignor="sticky"), E.UNSUPPORTED_ASSIGNOR,
     "ServerAssignor sticky is not supported. Supported assignors: uniform, range."),
    (dict(member_epoch=3), E.GROUP_ID_NOT_FOUND, "Consumer group g not found."),
    (dict(member_epoch=-1), E.GROUP_ID_NOT_FOUND, "Group g not found."),
])
def test_invalid_requests(replicas, fields, error, message):
    async def main():
        image = _image()
        async with trio.open_nursery() as n:
            ctx = Ctx(await started(replicas, n, image), image)
            version = fields.pop("version", 1)
            r = await handle_consumer_group_heartbeat(ctx, cgh(version=version, **fields))
            assert (r.error_code, r.error_message) == (error, message)
            n.cancel_scope.cancel()

    run(main)


def test_invalid_regex_worded_as_kafka(replicas):
    async def main():
        image = _image()
        async with trio.open_nursery() as n:
            ctx = Ctx(await started(replicas, n, image), image)
            r = await handle_consumer_group_heartbeat(ctx, cgh(subscribed_topic_names=None,
                                                               subscribed_topic_regex="(?=a)b"))
            assert (r.error_code, r.error_message) == (
                E.INVALID_REGULAR_EXPRESSION,
                "SubscribedTopicRegex `(?=a)b` is not a valid regular expression: invalid or unsupported Perl syntax.")
            n.cancel_scope.cancel()

    run(main)


def with_ctx(replicas, body) -> None:
    """Run ``body(ctx)`` against a started coordinator over ``replicas``."""
    async def main():
        image = _image()
        async with trio.open_nursery() as n:
            await body(Ctx(await started(replicas, n, image), image))
            n.cancel_scope.cancel()

    run(main)


def test_empty_subscriptions_join_as_in_kafka(replicas):
    # Kafka 4.4 answers an empty list (or an empty regex) with epoch 1 and nothing assigned.
    async def body(ctx):
        for group, fields in (("g", dict(subscribed_topic_names=[])),
                              ("g2", dict(subscribed_topic_names=None, subscribed_topic_regex=""))):
            r = await handle_consumer_group_heartbeat(ctx, cgh(group=group, **fields))
            assert (r.error_code, r.member_epoch, r.assignment.topic_partitions) == (E.NONE, 1, [])

    with_ctx(replicas, body)


def test_a_regex_matches_only_topics_the_member_may_describe(replicas):
    async def body(ctx):
        for group, denied, matched in (("g", {"foo"}, []), ("g2", set(), [FOO])):
            ctx.denied_topics = denied
            r = await handle_consumer_group_heartbeat(ctx, cgh(group=group, subscribed_topic_names=None,
                                                               subscribed_topic_regex="f.*"))
            assert (r.error_code, [t.topic_id for t in r.assignment.topic_partitions]) == (E.NONE, matched)

    with_ctx(replicas, body)


def test_errors_of_placement_authorization_and_writes(replicas):
    async def main():
        image = _image()
        async with trio.open_nursery() as n:
            coord = await started(replicas, n, image)
            ctx = Ctx(coord, image)
            ctx.denied_topics = {"foo"}
            r = await handle_consumer_group_heartbeat(ctx, cgh())
            assert (r.error_code, r.error_message) == (E.TOPIC_AUTHORIZATION_FAILED, None)
            ctx.denied_topics = set()
            r = await handle_consumer_group_heartbeat(ctx, cgh(group="other"))
            assert r.error_code == E.NONE
            # A group whose members hold a topic the caller may not describe is not described.
            ctx.denied_topics = {"foo"}
            d = (await handle_consumer_group_describe(ctx, describe("other"))).groups[0]
            assert (d.error_code, d.error_message, d.members) == (
                E.TOPIC_AUTHORIZATION_FAILED,
                "The described group uses topics that the client is not authorized to describe.", [])
            ctx.denied_topics = set()
            r = await handle_consumer_group_heartbeat(ctx, cgh(server_assignor="sticky"))
            assert r.error_code == E.UNSUPPORTED_ASSIGNOR
            # The append fails: the member is told to find its coordinator, and nothing changed.
            replicas.fail = KafkaError(E.NOT_LEADER_OR_FOLLOWER)
            r = await handle_consumer_group_heartbeat(ctx, cgh())
            assert r.error_code == E.NOT_COORDINATOR
            assert coord.shard_for("g").group_type("g") is None
            replicas.fail = None
            # Leadership moved away.
            coord.on_image(_image(leader=2))
            replicas.leader = 2
            r = await handle_consumer_group_heartbeat(ctx, cgh())
            assert r.error_code == E.NOT_COORDINATOR
            d = (await handle_consumer_group_describe(ctx, describe("g"))).groups[0]
            assert d.error_code == E.NOT_COORDINATOR
            n.cancel_scope.cancel()

    run(main)


def test_added_partitions_reach_the_group_on_its_next_heartbeat(replicas):
    async def main():
        image = _image()
        async with trio.open_nursery() as n:
            coord = await started(replicas, n, image)
            ctx = Ctx(coord, image)
            r = await handle_consumer_group_heartbeat(ctx, cgh())
            assert sorted(r.assignment.topic_partitions[0].partitions) == [0, 1, 2, 3]
            # Leadership moves of the topic's partitions change nothing the groups see.
            before = coord.topics
            coord.on_topics(types.SimpleNamespace(image=image, previous=image, full=False, created_topics=frozenset(),
                                                  deleted_topics={}, changed_partitions={FOO: frozenset({0})}))
            assert coord.topics is before
            # Two partitions added: the member is assigned them on its next heartbeat.
            grown = _image()
            grown.topics.by_id[FOO].partitions.update({4: None, 5: None})
            grown.offset = 11
            coord.on_topics(types.SimpleNamespace(image=grown, previous=image, full=False, created_topics=frozenset(),
                                                  deleted_topics={}, changed_partitions={FOO: frozenset({4, 5})}))
            r = await handle_consumer_group_heartbeat(ctx, cgh(epoch=2))
            assert r.member_epoch == 3
            assert sorted(r.assignment.topic_partitions[0].partitions) == [0, 1, 2, 3, 4, 5]
            n.cancel_scope.cancel()

    run(main)
