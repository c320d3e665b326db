"""The share coordinator's RPCs (83-87) and FindCoordinator key type 2 over an in-memory broker: a
real share coordinator on a real __share_group_state partition, requests in, answers out, and
their ACL (CLUSTER_ACTION) refusals."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import trio
import trio.testing

from kafkapy.broker.authorization import BrokerAuthorizer, request_principal
from kafkapy.broker.handlers.coordinator import handle_find_coordinator
from kafkapy.broker.handlers.share_state import (
    SHARE_STATE_APIS,
    handle_delete_share_group_state,
    handle_initialize_share_group_state,
    handle_read_share_group_state,
    handle_read_share_group_state_summary,
    handle_write_share_group_state,
)
from kafkapy.broker.request_authorization import authorized_call
from kafkapy.coordinator.share_persister import ShareStatePersister
from kafkapy.coordinator.share_state_service import SHARE_STATE_TOPIC, ShareCoordinator, coordinator_key
from kafkapy.metadata.records import AccessControlEntryRecord
from kafkapy.protocol import ApiKey
from kafkapy.protocol import messages as m
from kafkapy.protocol.connection import Request, RequestHeader
from kafkapy.protocol.errors import ErrorCode as E
from kafkapy.security import KafkaPrincipal
from kafkapy.security.acl import AclOperation as Op
from kafkapy.security.acl import AclPermissionType as Perm
from kafkapy.security.acl import PatternType as Pat
from kafkapy.security.acl import ResourceType as Res
from kafkapy.share.partition import PartitionState, StateBatch
from tests.unit.broker.fakes import InMemoryBroker
from tests.unit.coordinator.test_share_state_service import run as run_coordinator

TOPIC = uuid.UUID(int=77)
GROUP = "sg"


def request(api: ApiKey, version: int, body: Any) -> Request:
    return Request(api, version, 7, "t", RequestHeader(api, version, 7, "t", 2), body, 0)


@pytest.fixture
def broker(tmp_path):
    b = InMemoryBroker(tmp_path, brokers=(1,))
    b.create(SHARE_STATE_TOPIC, uuid.uuid4(), 1)
    yield b
    b.close()


def run(broker: InMemoryBroker, fn) -> None:
    """``fn(ctx)`` with a running share coordinator (one __share_group_state partition) in ctx."""
    async def with_ctx(coord: ShareCoordinator) -> None:
        broker.ctx.share_state = coord
        await fn(broker.ctx)

    run_coordinator(broker, with_ctx)


def initialize(*partitions: int, group: str = GROUP) -> Request:
    R = m.InitializeShareGroupStateRequest
    D = R.InitializeStateData
    return request(ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0, R(group_id=group, topics=[D(topic_id=TOPIC, partitions=[
        D.PartitionData(partition=p, state_epoch=1, start_offset=100 + p) for p in partitions])]))


def write(partition: int, version: int = 1, leader_epoch: int = 2) -> Request:
    R = m.WriteShareGroupStateRequest
    D = R.WriteStateData.PartitionData
    return request(ApiKey.WRITE_SHARE_GROUP_STATE, version, R(group_id=GROUP, topics=[R.WriteStateData(
        topic_id=TOPIC, partitions=[D(partition=partition, state_epoch=1, leader_epoch=leader_epoch, start_offset=105,
                                      delivery_complete_count=3, state_batches=[
                                          D.StateBatch(first_offset=105, last_offset=109, delivery_state=2,
                                                       delivery_count=1)])])]))


def read(*partitions: int, summary: bool = False) -> Request:
    R = m.ReadShareGroupStateSummaryRequest if summary else m.ReadShareGroupStateRequest
    D = R.ReadStateSummaryData if summary else R.ReadStateData
    api = ApiKey.READ_SHARE_GROUP_STATE_SUMMARY if summary else ApiKey.READ_SHARE_GROUP_STATE
    return request(api, 1 if summary else 0, R(group_id=GROUP, topics=[D(topic_id=TOPIC, partitions=[
        D.PartitionData(partition=p, leader_epoch=2) for p in partitions])]))


def delete(*partitions: int) -> Request:
    R = m.DeleteShareGroupStateRequest
    D = R.DeleteStateData
    return request(ApiKey.DELETE_SHARE_GROUP_STATE, 0, R(group_id=GROUP, topics=[D(topic_id=TOPIC, partitions=[
        D.PartitionData(partition=p) for p in partitions])]))


def codes(response) -> dict[int, int]:
    [topic] = response.results
    assert topic.topic_id == TOPIC
    return {p.partition: p.error_code for p in topic.partitions}


def test_the_share_state_rpcs_are_gated_on_share_version_1():
    assert sorted((a.key, a.min_version, a.max_version, a.feature, a.min_level) for a in SHARE_STATE_APIS) == [
        (83, 0, 0, "share.version", 1), (84, 0, 0, "share.version", 1), (85, 0, 1, "share.version", 1),
        (86, 0, 0, "share.version", 1), (87, 0, 1, "share.version", 1)]


def test_a_share_partition_state_through_the_rpcs(broker):
    async def go(ctx):
        assert codes(await handle_initialize_share_group_state(ctx, initialize(0, 1, 2))) == {0: 0, 1: 0, 2: 0}
        assert codes(await handle_write_share_group_state(ctx, write(0))) == {0: E.NONE}
        # an older leader is fenced
        assert codes(await handle_write_share_group_state(ctx, write(0, leader_epoch=1))) == {0: E.FENCED_LEADER_EPOCH}
        resp = await handle_read_share_group_state(ctx, read(0, 1))
        [topic] = resp.results
        p0, p1 = topic.partitions
        assert (p0.error_code, p0.state_epoch, p0.start_offset) == (0, 1, 105)
        assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p0.state_batches] == \
            [(105, 109, 2, 1)]
        assert (p1.error_code, p1.start_offset, p1.state_batches) == (0, 101, [])
        resp = await handle_read_share_group_state_summary(ctx, read(0, summary=True))
        [p] = resp.results[0].partitions
        assert (p.state_epoch, p.leader_epoch, p.start_offset, p.delivery_complete_count) == (1, 2, 105, 3)
        assert codes(await handle_delete_share_group_state(ctx, delete(1, 9))) == {1: 0, 9: 0}
        assert codes(await handle_read_share_group_state(ctx, read(1))) == {1: E.INVALID_REQUEST}
        # Write v0 carries no delivery-complete count: the stored one stays
        assert codes(await handle_write_share_group_state(ctx, write(0, version=0))) == {0: E.NONE}

    run(broker, go)


def test_malformed_requests_get_no_results_and_no_coordinator_is_not_available(broker):
    async def go(ctx):
        assert (await handle_initialize_share_group_state(ctx, initialize(0, group=""))).results == []
        R = m.ReadShareGroupStateRequest
        empty = request(ApiKey.READ_SHARE_GROUP_STATE, 0, R(group_id=GROUP, topics=[
            R.ReadStateData(topic_id=TOPIC, partitions=[])]))
        assert (await handle_read_share_group_state(ctx, empty)).results == []
        ctx.share_state = None
        assert codes(await handle_write_share_group_state(ctx, write(0))) == {0: E.COORDINATOR_NOT_AVAILABLE}

    run(broker, go)


def test_find_coordinator_for_a_share_partition(broker):
    F = m.FindCoordinatorRequest
    key = coordinator_key(GROUP, TOPIC, 0)

    async def go(ctx):
        # key type 2 needs v6; a key that is not <group>:<topic id>:<partition> is INVALID_REQUEST
        r = await handle_find_coordinator(ctx, request(ApiKey.FIND_COORDINATOR, 5, F(
            key_type=2, coordinator_keys=[key])))
        assert [c.error_code for c in r.coordinators] == [E.INVALID_REQUEST]
        r = await handle_find_coordinator(ctx, request(ApiKey.FIND_COORDINATOR, 6, F(
            key_type=2, coordinator_keys=["nope", f"{GROUP}:x:0", key])))
        # (the in-memory broker registers no listener: the live node's test checks the address)
        assert [c.error_code for c in r.coordinators] == [E.INVALID_REQUEST, E.INVALID_REQUEST,
                                                          E.COORDINATOR_NOT_AVAILABLE]

    run(broker, go)


def _as(principal: KafkaPrincipal, ctx, req: Request):
    async def never(_: Request) -> Any:
        raise AssertionError("a refused request ran")

    async def main() -> Any:
        request_principal.set(principal)
        return await authorized_call(ctx, req, never)

    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_the_rpcs_and_finding_a_share_coordinator_need_cluster_action(broker):
    broker.ctx.authorizer = BrokerAuthorizer(lambda: broker.image, super_users=frozenset(), allow_if_no_acl=False)
    bob = KafkaPrincipal.user("bob")
    for req in (initialize(0, 1), write(0), read(0), read(0, summary=True), delete(0)):
        refused = codes(_as(bob, broker.ctx, req))
        assert refused == dict.fromkeys(refused, E.CLUSTER_AUTHORIZATION_FAILED) and 0 in refused
    find = request(ApiKey.FIND_COORDINATOR, 6, m.FindCoordinatorRequest(
        key_type=2, coordinator_keys=[coordinator_key(GROUP, TOPIC, 0)]))
    r = _as(bob, broker.ctx, find)
    assert [c.error_code for c in r.coordinators] == [E.CLUSTER_AUTHORIZATION_FAILED]
    # CLUSTER_ACTION lets it through (and no DESCRIBE on a group is asked for key type 2)
    broker.step(AccessControlEntryRecord(uuid.UUID(int=5), Res.CLUSTER, "kafka-cluster", Pat.LITERAL, "User:bob",
                                         "*", Op.CLUSTER_ACTION, Perm.ALLOW))

    async def main() -> Any:
        request_principal.set(bob)

        async def ran(_: Request) -> str:
            return "ran"

        return await authorized_call(broker.ctx, find, ran), await authorized_call(broker.ctx, write(0), ran)

    assert trio.run(main) == ("ran", "ran")


class Wire:
    """A connection to the in-memory broker: requests and answers go through their bytes."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.handlers = {a.key: a.handler for a in SHARE_STATE_APIS}

    async def send(self, body, version=None, *, timeout=None):
        body = type(body).decode(body.encode(version=version), version=version)
        response = await self.handlers[body.API_KEY](self.ctx, request(body.API_KEY, version, body))
        return type(response).decode(response.encode(version=version), version=version)

    async def aclose(self) -> None:
        pass


def test_another_brokers_persister_reaches_the_coordinator_over_the_rpcs(broker):
    async def go(ctx):
        connected: list[int] = []

        async def connect(broker_id: int) -> Wire:
            connected.append(broker_id)
            return Wire(ctx)

        # a persister on broker 2: the key's partition is led by broker 1
        persister = ShareStatePersister(ctx.share_state, 2, lambda: broker.image, connect)
        state = PartitionState(1, 4, 20, (StateBatch(20, 22, 2, 1), StateBatch(23, 23, 4, 5)), 3)
        assert (await persister.initialize(GROUP, TOPIC, 0, 1, 20)).error == E.NONE
        assert (await persister.write(GROUP, TOPIC, 0, state)).error == E.NONE
        assert (await persister.read(GROUP, TOPIC, 0, 4)).state == PartitionState(1, 4, 20, state.state_batches)
        assert (await persister.read_summary(GROUP, TOPIC, 0)).state == PartitionState(1, 4, 20, (), 3)
        assert (await persister.write(GROUP, TOPIC, 0, PartitionState(0, 4, 20))).error == E.FENCED_STATE_EPOCH
        assert (await persister.delete(GROUP, TOPIC, 0)).error == E.NONE
        assert (await persister.read(GROUP, TOPIC, 0, 4)).error == E.INVALID_REQUEST
        assert connected == [1]  # one connection, kept

    run(broker, go)
