"""ShareGroupHeartbeat, ShareGroupDescribe and the share-group offsets admin over a group
coordinator writing to real ``__consumer_offsets`` logs and a fake share coordinator: validation
as Kafka 4.4, share-partition initialization (and its retries) before assignment, members
leaving, NON_EMPTY_GROUP, alter/delete/describe of start offsets, authorization."""

from __future__ import annotations

import types
import uuid

import pytest
import trio

from kafkapy.broker.handlers.groups import handle_delete_groups, handle_describe_groups, handle_list_groups
from kafkapy.broker.handlers.share_groups import (
    SHARE_GROUP_APIS,
    handle_alter_share_group_offsets,
    handle_delete_share_group_offsets,
    handle_describe_share_group_offsets,
    handle_share_group_describe,
    handle_share_group_heartbeat,
)
from kafkapy.broker.request_authorization import authorized_call
from kafkapy.coordinator.share_group_service import ShareGroupService
from kafkapy.protocol import messages as m
from kafkapy.protocol.apis import ApiKey
from kafkapy.protocol.errors import ErrorCode as E
from kafkapy.protocol.errors import KafkaError
from kafkapy.share.partition import PartitionState
from kafkapy.share.persister import StateResult
from tests.unit.broker.test_authorization import BOB, _never, as_
from tests.unit.broker.test_authorization import broker as authz_broker  # noqa: F401 (fixture)
from tests.unit.broker.test_authorization import request as authz_request
from tests.unit.broker.test_consumer_group_handlers import FOO, Ctx, _image, run, started
from tests.unit.broker.test_consumer_group_handlers import replicas as replicas  # noqa: F401 (fixture)

RETRY_MS = 30_000


class FakePersister:
    """The share coordinator as a dict; ``fail`` answers the next calls with an error."""

    def __init__(self) -> None:
        self.states: dict[tuple[str, uuid.UUID, int], PartitionState] = {}
        self.calls: list[tuple] = []
        self.fail: list[int] = []

    def _error(self) -> int:
        return self.fail.pop(0) if self.fail else E.NONE

    async def initialize(self, group_id, topic_id, partition, state_epoch, start_offset):
        self.calls.append(("initialize", group_id, partition, state_epoch, start_offset))
        code = self._error()
        if code == E.NONE:
            self.states[(group_id, topic_id, partition)] = PartitionState(state_epoch, -1, start_offset)
        return StateResult(code)

    async def read_summary(self, group_id, topic_id, partition, leader_epoch=-1):
        s = self.states.get((group_id, topic_id, partition))
        return StateResult(E.NONE, state=PartitionState(s.state_epoch, 3, s.start_offset, (), 2)) if s else \
            StateResult(E.UNKNOWN_TOPIC_OR_PARTITION)

    async def delete(self, group_id, topic_id, partition):
        self.calls.append(("delete", group_id, partition))
        code = self._error()
        if code == E.NONE:
            self.states.pop((group_id, topic_id, partition), None)
        return StateResult(code)


class ShareCtx(Ctx):
    def __init__(self, coord, image, persister) -> None:
        super().__init__(coord, image)
        self.share_groups = ShareGroupService(coord, persister, coord.clock)
        self.denied_groups: set[str] = set()
        hw = types.SimpleNamespace(log=types.SimpleNamespace(high_watermark=100))
        self.replicas = types.SimpleNamespace(leader=lambda topic, p, epoch: hw)

    def authorize(self, op, rtype, name="kafka-cluster", *, audit=True) -> bool:
        return name not in self.denied_groups


def in_share_ctx(replicas, body) -> None:
    """Run ``body(ctx, persister)`` against a started coordinator and share-group service."""
    async def main():
        image = _image()
        persister = FakePersister()
        async with trio.open_nursery() as n:
            ctx = ShareCtx(await started(replicas, n, image), image, persister)
            await n.start(ctx.share_groups.serve)
            await body(ctx, persister)
            n.cancel_scope.cancel()

    run(main)


def hb(group="g", member="m1", epoch=0, topics=("foo",), **kw):
    fields = dict(group_id=group, member_id=member, member_epoch=epoch, rack_id=None,
                  subscribed_topic_names=list(topics) if epoch == 0 else None)
    fields.update(kw)
    return types.SimpleNamespace(body=m.ShareGroupHeartbeatRequest(**fields), api_version=1, client_id="cli")


def req(body, version=0):
    return types.SimpleNamespace(body=body, api_version=version, client_id="cli")


async def described(ctx, *group_ids: str, ops: bool = False):
    body = m.ShareGroupDescribeRequest(group_ids=list(group_ids), include_authorized_operations=ops)
    return (await handle_share_group_describe(ctx, req(body, 1))).groups


def departures(ctx) -> list[tuple[str, str]]:
    """The (group, member) pairs the service announces as gone, as the share-fetch side sees them."""
    left: list[tuple[str, str]] = []

    async def member_left(group_id: str, member_id: str) -> None:
        left.append((group_id, member_id))

    ctx.share_groups.on_member_left.append(member_left)
    ctx.share_groups.on_group_empty.append(lambda group_id: left.append((group_id, "")))
    return left


def assigned(r) -> list[tuple[uuid.UUID, list[int]]]:
    return [(tp.topic_id, tp.partitions) for tp in r.assignment.topic_partitions] if r.assignment else []


async def joined(ctx, member="m1"):
    """Join, wait for the share coordinator to initialize the partitions, heartbeat them in."""
    r = await handle_share_group_heartbeat(ctx, hb(member=member))
    assert r.error_code == E.NONE
    await trio.sleep(0.1)
    return await handle_share_group_heartbeat(ctx, hb(member=member, epoch=r.member_epoch))


def test_gated_on_share_version_1():
    assert {(a.key, a.min_version, a.max_version, a.feature, a.min_level) for a in SHARE_GROUP_APIS} == {
        (ApiKey.SHARE_GROUP_HEARTBEAT, 1, 1, "share.version", 1),
        (ApiKey.SHARE_GROUP_DESCRIBE, 1, 1, "share.version", 1),
        (ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, 1, "share.version", 1),
        (ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, 0, "share.version", 1),
        (ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, 0, "share.version", 1)}


def test_join_initializes_partitions_before_assigning_them(replicas):
    async def main(ctx, persister):
        r = await handle_share_group_heartbeat(ctx, hb())
        # Nothing is assignable until the share coordinator has the partitions' state.
        assert (r.error_code, r.member_id, r.heartbeat_interval_ms, assigned(r)) == (E.NONE, "m1", 5000, [])
        await trio.sleep(0.1)
        assert sorted(c[2] for c in persister.calls) == [0, 1, 2, 3]
        assert {c[4] for c in persister.calls} == {-1}  # share.auto.offset.reset decides
        r = await handle_share_group_heartbeat(ctx, hb(epoch=r.member_epoch))
        assert r.error_code == E.NONE and assigned(r) == [(FOO, [0, 1, 2, 3])]
        # A second member shares the same partitions (no new initialization).
        r2 = await joined(ctx, "m2")
        assert r2.error_code == E.NONE and len(persister.calls) == 4
        d = await described(ctx, "g", "nope", ops=True)
        assert (d[0].error_code, d[0].group_state, d[0].assignor_name) == (E.NONE, "Stable", "simple")
        assert [mm.member_id for mm in d[0].members] == ["m1", "m2"]
        assert d[0].members[0].client_id == "cli" and d[0].members[0].subscribed_topic_names == ["foo"]
        # m1 shows what it was last given (it has not heartbeated since m2 came).
        parts = {p for mm in d[0].members for tp in mm.assignment.topic_partitions for p in tp.partitions}
        assert parts == {0, 1, 2, 3}
        assert {tp.topic_name for mm in d[0].members for tp in mm.assignment.topic_partitions} == {"foo"}
        assert d[0].authorized_operations > 0
        assert (d[1].error_code, d[1].error_message) == (E.GROUP_ID_NOT_FOUND, "Group nope not found.")

    in_share_ctx(replicas, main)


def test_failed_initialization_is_retried_after_the_interval(replicas):
    async def main(ctx, persister):
        persister.fail = [E.COORDINATOR_NOT_AVAILABLE] * 4
        r = await handle_share_group_heartbeat(ctx, hb())
        await trio.sleep(1)
        assert len(persister.calls) == 4 and not persister.states
        r = await handle_share_group_heartbeat(ctx, hb(epoch=r.member_epoch))
        assert assigned(r) == []
        await trio.sleep(RETRY_MS / 1000)
        assert len(persister.calls) == 8 and len(persister.states) == 4
        r = await handle_share_group_heartbeat(ctx, hb(epoch=r.member_epoch))
        assert assigned(r) == [(FOO, [0, 1, 2, 3])]

    in_share_ctx(replicas, main)


@pytest.mark.parametrize("fields,code,message", [
    (dict(group_id=""), E.INVALID_REQUEST, "GroupId can't be empty."),
    (dict(member_id=""), E.INVALID_REQUEST, None),
    (dict(member_id="x" * 37), E.INVALID_REQUEST, None),
    (dict(rack_id=""), E.INVALID_REQUEST, "RackId can't be empty."),
    (dict(subscribed_topic_names=[]), E.INVALID_REQUEST, "SubscribedTopicNames must be set in first request."),
    (dict(member_epoch=-2), E.INVALID_REQUEST, "MemberEpoch is invalid."),
    (dict(member_epoch=3), E.GROUP_ID_NOT_FOUND, "Share group g not found."),
])
def test_invalid_requests(replicas, fields, code, message):
    async def main(ctx, _persister):
        r = await handle_share_group_heartbeat(ctx, hb(**fields))
        assert (r.error_code, r.error_message) == (code, message)

    in_share_ctx(replicas, main)


def test_leave_fencing_authorization_and_failed_append(replicas):
    async def main(ctx, _persister):
        left = departures(ctx)
        r = await joined(ctx)
        r = await handle_share_group_heartbeat(ctx, hb(epoch=r.member_epoch + 5))
        assert (r.error_code, r.error_message) == (E.FENCED_MEMBER_EPOCH, (
            "The share group member has a greater member epoch (8) than the one known by the group "
            "coordinator (3). The member must abandon all its partitions and rejoin."))
        r = await handle_share_group_heartbeat(ctx, hb(member="m9", epoch=1))
        assert r.error_code == E.UNKNOWN_MEMBER_ID
        ctx.denied_topics = {"foo"}
        r = await handle_share_group_heartbeat(ctx, hb(member="m2"))
        assert (r.error_code, r.error_message) == (E.TOPIC_AUTHORIZATION_FAILED, None)
        ctx.denied_topics = set()
        # The append fails: NOT_COORDINATOR, and the member did not join.
        ctx.groups.replicas.fail = KafkaError(E.NOT_LEADER_OR_FOLLOWER)
        r = await handle_share_group_heartbeat(ctx, hb(member="m2"))
        assert r.error_code == E.NOT_COORDINATOR
        ctx.groups.replicas.fail = None
        d = await described(ctx, "g")
        assert [mm.member_id for mm in d[0].members] == ["m1"]
        assert not left
        r = await handle_share_group_heartbeat(ctx, hb(epoch=-1))
        assert (r.error_code, r.member_id, r.member_epoch) == (E.NONE, "m1", -1)
        await trio.sleep(0.01)
        assert left == [("g", "m1"), ("g", "")]  # the member, then the group it emptied
        d = await described(ctx, "g")
        assert (d[0].group_state, d[0].members) == ("Empty", [])

    in_share_ctx(replicas, main)


def test_session_expiry_removes_the_member_and_announces_it(replicas):
    async def main(ctx, _persister):
        left = departures(ctx)
        await joined(ctx)
        # While __consumer_offsets cannot be written the expiry is undone and retried.
        ctx.groups.replicas.fail = KafkaError(E.NOT_LEADER_OR_FOLLOWER)
        await trio.sleep(46)  # group.share.session.timeout.ms 45000
        assert left == [] and (await described(ctx, "g"))[0].group_state == "Stable"
        ctx.groups.replicas.fail = None
        await trio.sleep(2)
        assert left == [("g", "m1"), ("g", "")]
        d = await described(ctx, "g")
        assert d[0].group_state == "Empty"

    in_share_ctx(replicas, main)


def test_describe_refuses_groups_and_hides_groups_with_unauthorized_topics(replicas):
    async def main(ctx, _persister):
        await joined(ctx)
        ctx.denied_groups = {"g"}
        d = await described(ctx, "g")
        assert d[0].error_code == E.GROUP_AUTHORIZATION_FAILED
        ctx.denied_groups = set()
        ctx.denied_topics = {"foo"}
        d = await described(ctx, "g")
        assert (d[0].error_code, d[0].error_message, d[0].members) == (
            E.TOPIC_AUTHORIZATION_FAILED,
            "The group has described topic(s) that the client is not authorized to describe.", [])

    in_share_ctx(replicas, main)


def _alter(group="g", **offsets):
    R = m.AlterShareGroupOffsetsRequest
    T = R.AlterShareGroupOffsetsRequestTopic
    return req(R(group_id=group, topics=[T(topic_name=name, partitions=[
        T.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=o) for p, o in parts.items()])
        for name, parts in offsets.items()]))


def _describe_offsets(group="g", topics=None, version=1):
    R = m.DescribeShareGroupOffsetsRequest
    G = R.DescribeShareGroupOffsetsRequestGroup
    ts = None if topics is None else [G.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=ps)
                                      for t, ps in topics.items()]
    return req(R(groups=[G(group_id=group, topics=ts)]), version)


def _delete(group="g", *topics):
    R = m.DeleteShareGroupOffsetsRequest
    return req(R(group_id=group, topics=[R.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics]))


def test_offsets_admin(replicas):
    async def main(ctx, persister):
        await joined(ctx)
        # Members exist: alter and delete are refused.
        a = await handle_alter_share_group_offsets(ctx, _alter(foo={0: 5}))
        assert (a.error_code, a.error_message, a.responses) == (E.NON_EMPTY_GROUP, "The group is not empty.", [])
        dl = await handle_delete_share_group_offsets(ctx, _delete("g", "foo"))
        assert dl.error_code == E.NON_EMPTY_GROUP
        # Every initialized partition, with its start offset and lag (v1).
        g = (await handle_describe_share_group_offsets(ctx, _describe_offsets())).groups[0]
        assert g.error_code == E.NONE and g.topics[0].topic_id == FOO
        assert [(p.partition_index, p.start_offset, p.lag) for p in g.topics[0].partitions] == \
            [(0, -1, -1), (1, -1, -1), (2, -1, -1), (3, -1, -1)]
        await handle_share_group_heartbeat(ctx, hb(epoch=-1))
        await trio.sleep(0.01)
        left = departures(ctx)
        # foo has 4 partitions: its partition 9 is refused alone, and no state is made for it.
        a = await handle_alter_share_group_offsets(ctx, _alter(foo={0: 5, 2: 7, 9: 1}, bar={0: 1}))
        assert a.error_code == E.NONE
        assert left == [("g", "")]  # the share partitions forget the old state
        codes = {(t.topic_name, p.partition_index): p.error_code for t in a.responses for p in t.partitions}
        assert codes == {("foo", 0): E.NONE, ("foo", 2): E.NONE, ("foo", 9): E.UNKNOWN_TOPIC_OR_PARTITION,
                         ("bar", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
        assert a.responses[1].partitions[2].error_message == "This server does not host this topic-partition."
        assert ("g", FOO, 9) not in persister.states
        # A new state epoch (the group epoch after the alter's bump) and the new start offsets.
        epochs = {c[3] for c in persister.calls[-2:]}
        assert [c[4] for c in persister.calls[-2:]] == [5, 7] and min(epochs) > 0
        g = (await handle_describe_share_group_offsets(ctx, _describe_offsets(topics={"foo": [0, 2], "bar": [0]})))
        foo, bar = g.groups[0].topics
        assert [(p.start_offset, p.leader_epoch, p.lag) for p in foo.partitions] == [(5, 3, 93), (7, 3, 91)]
        # An unknown topic has no state (as Kafka: no error, no start offset).
        assert (bar.topic_id, bar.partitions[0].error_code, bar.partitions[0].start_offset) == (
            uuid.UUID(int=0), E.NONE, -1)
        # v0 has no lag.
        g = (await handle_describe_share_group_offsets(ctx, _describe_offsets(topics={"foo": [0]}, version=0)))
        assert g.groups[0].topics[0].partitions[0].start_offset == 5
        dl = await handle_delete_share_group_offsets(ctx, _delete("g", "foo", "bar"))
        assert dl.error_code == E.NONE
        assert [(t.topic_name, t.error_code) for t in dl.responses] == [
            ("foo", E.NONE), ("bar", E.UNKNOWN_TOPIC_OR_PARTITION)]
        assert dl.responses[1].error_message == "This server does not host this topic-partition."
        assert not persister.states
        g = (await handle_describe_share_group_offsets(ctx, _describe_offsets())).groups[0]
        assert g.topics == []
        # Not a share group / missing.
        # Altering a missing group's offsets creates the group, as Kafka does.
        a = await handle_alter_share_group_offsets(ctx, _alter("new", foo={0: 1}))
        assert a.error_code == E.NONE and a.responses[0].partitions[0].error_code == E.NONE
        d = await described(ctx, "new")
        assert (d[0].error_code, d[0].group_state) == (E.NONE, "Empty")
        assert persister.states[("new", FOO, 0)].start_offset == 1
        g = (await handle_describe_share_group_offsets(ctx, _describe_offsets("nope"))).groups[0]
        assert (g.error_code, g.topics) == (E.NONE, [])  # a missing group holds no state
        dl = await handle_delete_share_group_offsets(ctx, _delete("new", "foo"))
        dl = await handle_delete_share_group_offsets(ctx, _delete("new", "foo"))
        assert (dl.responses[0].topic_id, dl.responses[0].error_message) == (
            uuid.UUID(int=0), "There is no offset information to delete.")

    in_share_ctx(replicas, main)


def test_offsets_admin_topic_and_group_authorization(replicas):
    async def main(ctx, _persister):
        r = await joined(ctx)
        await handle_share_group_heartbeat(ctx, hb(epoch=r.member_epoch and -1))
        ctx.denied_topics = {"foo"}
        a = await handle_alter_share_group_offsets(ctx, _alter(foo={0: 5}))
        assert (a.error_code, a.responses[0].partitions[0].error_code) == (E.NONE, E.TOPIC_AUTHORIZATION_FAILED)
        g = (await handle_describe_share_group_offsets(ctx, _describe_offsets(topics={"foo": [0]}))).groups[0]
        assert g.topics[0].partitions[0].error_code == E.TOPIC_AUTHORIZATION_FAILED
        dl = await handle_delete_share_group_offsets(ctx, _delete("g", "foo"))
        assert dl.responses[0].error_code == E.TOPIC_AUTHORIZATION_FAILED
        ctx.denied_groups = {"g"}
        g = (await handle_describe_share_group_offsets(ctx, _describe_offsets())).groups[0]
        assert g.error_code == E.GROUP_AUTHORIZATION_FAILED

    in_share_ctx(replicas, main)


def test_list_describe_and_delete_groups_of_a_share_group(replicas):
    async def main(ctx, persister):
        await joined(ctx)
        listed = await handle_list_groups(ctx, req(m.ListGroupsRequest(states_filter=[], types_filter=["share"]), 5))
        assert [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed.groups] == [
            ("g", "share", "Stable", "share")]
        d = await handle_describe_groups(ctx, req(m.DescribeGroupsRequest(groups=["g"]), 6))
        assert (d.groups[0].error_code, d.groups[0].group_state) == (E.GROUP_ID_NOT_FOUND, "Dead")
        delete = req(m.DeleteGroupsRequest(groups_names=["g"]), 2)
        assert (await handle_delete_groups(ctx, delete)).results[0].error_code == E.NON_EMPTY_GROUP
        await handle_share_group_heartbeat(ctx, hb(epoch=-1))
        # The share coordinator refuses: the group stays, with its state.
        persister.fail = [E.COORDINATOR_NOT_AVAILABLE]
        assert (await handle_delete_groups(ctx, delete)).results[0].error_code == E.COORDINATOR_NOT_AVAILABLE
        assert (await described(ctx, "g"))[0].group_state == "Empty"
        assert (await handle_delete_groups(ctx, delete)).results[0].error_code == E.NONE
        assert not persister.states
        assert (await described(ctx, "g"))[0].error_code == E.GROUP_ID_NOT_FOUND

    in_share_ctx(replicas, main)


def test_reload_resumes_pending_initializations(replicas):
    async def first(ctx, persister):
        persister.fail = [E.COORDINATOR_NOT_AVAILABLE] * 4  # nothing initialized before the restart
        r = await handle_share_group_heartbeat(ctx, hb())
        assert r.error_code == E.NONE
        await trio.sleep(0.1)
        assert not persister.states

    async def second(ctx, persister):
        # The loaded group hands its initializing partitions out again at once, not after the
        # retry interval; the member is still there and gets them on its next heartbeat.
        await trio.sleep(1)
        assert sorted(p for (_, _, p) in persister.states) == [0, 1, 2, 3]
        d = await described(ctx, "g")
        assert [mm.member_id for mm in d[0].members] == ["m1"]
        r = await handle_share_group_heartbeat(ctx, hb(epoch=d[0].members[0].member_epoch))
        assert r.error_code == E.NONE and assigned(r) == [(FOO, [0, 1, 2, 3])]

    in_share_ctx(replicas, first)
    in_share_ctx(replicas, second)


SHARE_REFUSALS = [
    (ApiKey.SHARE_GROUP_HEARTBEAT, 1, hb().body),
    (ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, _alter(foo={0: 1}).body),
    (ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, _delete("g", "foo").body),
]


@pytest.mark.parametrize(("key", "version", "body"), SHARE_REFUSALS,
                         ids=[ApiKey.name_of(k) for k, _, _ in SHARE_REFUSALS])
def test_a_caller_without_group_acls_is_refused_before_the_handler(authz_broker, key, version, body):  # noqa: F811
    # READ on the group for the heartbeat and Alter, DELETE for Delete (KafkaApis), checked by
    # the request rules: the handler never runs.
    response = as_(BOB, authorized_call, authz_broker.ctx, authz_request(key, version, body), _never)
    assert response.error_code == E.GROUP_AUTHORIZATION_FAILED
