"""ControllerChannel on real sockets: small test controllers served by ``net.server.serve`` on
localhost, all in one Trio run.

Each test controller answers ApiVersions (every API we have a schema for) and, when it is the
active one, any request with that API's default response (error code 0); a standby raises
NOT_CONTROLLER, which the server turns into the request's error response exactly as for a real
node (the code at the top level, or on every topic/resource entry). A controller can hold its
answers, and can be stopped: its listener and every connection close. Every test is bounded by
``trio.fail_after``.
"""

from __future__ import annotations

import socket
import uuid
from typing import Any

import pytest
import trio

from helpers import run_trio
from kafkapy.broker.lifecycle import BrokerLifecycleManager, BrokerState
from kafkapy.net.controller_channel import ControllerChannel
from kafkapy.net.server import ConnectionInfo, serve
from kafkapy.protocol import ApiKey, ApiVersionsTable, ErrorCode, KafkaError, Request
from kafkapy.protocol import messages as m
from kafkapy.protocol.apis import response_class

HOST = "127.0.0.1"
FAST = dict(retry_backoff=0.01, retry_backoff_max=0.05, connect_timeout=2.0)


class TestController:
    """One controller listener (see the module docstring)."""

    __test__ = False  # not a pytest class

    def __init__(self, node_id: int, *, active: bool) -> None:
        self.node_id = node_id
        self.active = active
        self.versions = ApiVersionsTable.everything()
        self.seen: list[ApiKey] = []
        self.connections: set[str] = set()
        self.hold: trio.Event | None = None
        self.held = trio.Event()
        self.port = 0
        self._scope: trio.CancelScope | None = None
        self._stopped = trio.Event()
        # BrokerRegistration/BrokerHeartbeat, as a real controller answers them (simplified).
        self.epochs: dict[int, int] = {}

    async def handle(self, request: Request, conn: ConnectionInfo) -> Any:
        if request.api_key == ApiKey.API_VERSIONS:
            return self.versions.response(request.api_version)
        self.seen.append(request.api_key)
        self.connections.add(conn.connection_id)
        if self.hold is not None:
            self.held.set()
            await self.hold.wait()
        if not self.active:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, f"node {self.node_id} is not the active controller")
        version = request.api_version
        body = request.body
        if request.api_key == ApiKey.BROKER_REGISTRATION:
            epoch = self.epochs.setdefault(body.broker_id, 1000 + body.broker_id)
            return m.BrokerRegistrationResponse(version=version, broker_epoch=epoch)
        if request.api_key == ApiKey.BROKER_HEARTBEAT:
            if self.epochs.get(body.broker_id) != body.broker_epoch:
                return m.BrokerHeartbeatResponse(version=version,
                                                 error_code=ErrorCode.STALE_BROKER_EPOCH)
            return m.BrokerHeartbeatResponse(version=version, is_caught_up=True, is_fenced=False,
                                             should_shut_down=body.want_shut_down)
        if request.api_key == ApiKey.ALLOCATE_PRODUCER_IDS:
            return m.AllocateProducerIdsResponse(version=version, producer_id_start=1000 * self.node_id,
                                                 producer_id_len=1000)
        return response_class(request.api_key)(version=version)

    async def start(self, nursery: trio.Nursery) -> None:
        self._stopped = trio.Event()

        async def run(task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
            try:
                with trio.CancelScope() as self._scope:
                    await serve(self, HOST, self.port, listener_name="CONTROLLER",
                                task_status=task_status)
            finally:
                self._stopped.set()

        self.port = await nursery.start(run)

    async def stop(self) -> None:
        """Close the listener and every connection, and wait until they are."""
        assert self._scope is not None
        self._scope.cancel()
        await self._stopped.wait()


async def start_all(nursery: trio.Nursery, *controllers: TestController) -> dict[int, tuple[str, int]]:
    for c in controllers:
        await c.start(nursery)
    return {c.node_id: (HOST, c.port) for c in controllers}


def closed_port() -> int:
    """A localhost port nobody listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def requests_with_entries() -> list[Any]:
    """Admin requests whose error responses carry the error per entry (and two with it on top)."""
    return [
        m.CreateTopicsRequest(topics=[m.CreateTopicsRequest.CreatableTopic(
            name="t", num_partitions=1, replication_factor=1, assignments=[], configs=[])],
            timeout_ms=1000, validate_only=False),
        m.DeleteTopicsRequest(topics=[m.DeleteTopicsRequest.DeleteTopicState(
            name="t", topic_id=uuid.UUID(int=0))], timeout_ms=1000),
        m.CreatePartitionsRequest(topics=[m.CreatePartitionsRequest.CreatePartitionsTopic(
            name="t", count=3, assignments=None)], timeout_ms=1000, validate_only=False),
        m.IncrementalAlterConfigsRequest(resources=[
            m.IncrementalAlterConfigsRequest.AlterConfigsResource(
                resource_type=2, resource_name="t", configs=[])], validate_only=False),
        m.ElectLeadersRequest(election_type=0, topic_partitions=[
            m.ElectLeadersRequest.TopicPartitions(topic="t", partitions=[0])], timeout_ms=1000),
        m.AllocateProducerIdsRequest(broker_id=7, broker_epoch=3),
        m.BrokerHeartbeatRequest(broker_id=7, broker_epoch=-1, current_metadata_offset=0,
                                 want_fence=False, want_shut_down=False),
    ]


@pytest.mark.parametrize("body", requests_with_entries(), ids=lambda b: type(b).__name__)
def test_not_controller_from_the_hinted_controller_moves_on(body: Any) -> None:
    @run_trio(20)
    async def scenario() -> None:
        standby, active = TestController(1, active=False), TestController(2, active=True)
        async with trio.open_nursery() as nursery:
            voters = await start_all(nursery, standby, active)
            channel = ControllerChannel(voters, leader_hint=lambda: 1, **FAST)  # a stale hint
            try:
                response = await channel.call(body, timeout=10)
            finally:
                await channel.aclose()
            assert standby.seen == [body.API_KEY] and active.seen == [body.API_KEY]
            assert channel.active_controller == 2
            # The standby's NOT_CONTROLLER (on top, or on each entry) was not taken for an
            # answer: the active controller was asked too, and its answer came back.
            assert type(response) is response_class(body.API_KEY)
            nursery.cancel_scope.cancel()

    scenario()


@run_trio(20)
async def test_without_a_hint_voters_are_tried_in_turn_and_the_answerer_remembered() -> None:
    c1, c2, c3 = (TestController(1, active=False), TestController(2, active=False),
                  TestController(3, active=True))
    async with trio.open_nursery() as nursery:
        voters = await start_all(nursery, c1, c2, c3)
        channel = ControllerChannel(voters, **FAST)
        try:
            first = await channel.call(m.AllocateProducerIdsRequest(broker_id=7, broker_epoch=3))
            assert first.producer_id_start == 3000
            assert (len(c1.seen), len(c2.seen), len(c3.seen)) == (1, 1, 1)
            # Later calls go straight to the controller that answered, on the same connection.
            for _ in range(5):
                again = await channel.call(m.AllocateProducerIdsRequest(broker_id=7, broker_epoch=3))
                assert again.producer_id_start == 3000
            assert (len(c1.seen), len(c2.seen), len(c3.seen)) == (1, 1, 6)
            assert len(c3.connections) == 1
        finally:
            await channel.aclose()
        nursery.cancel_scope.cancel()


@run_trio(20)
async def test_concurrent_calls_share_one_connection() -> None:
    active = TestController(1, active=True)
    async with trio.open_nursery() as nursery:
        voters = await start_all(nursery, active)
        channel = ControllerChannel(voters, leader_hint=lambda: 1, **FAST)
        results: list[int] = []

        async def one(i: int) -> None:
            resp = await channel.call(m.AllocateProducerIdsRequest(broker_id=i, broker_epoch=1),
                                      timeout=10)
            results.append(resp.producer_id_start)

        try:
            async with trio.open_nursery() as calls:
                for i in range(20):
                    calls.start_soon(one, i)
        finally:
            await channel.aclose()
        assert results == [1000] * 20
        assert len(active.connections) == 1
        nursery.cancel_scope.cancel()


@run_trio(20)
async def test_fails_over_when_the_controller_goes_away_mid_call() -> None:
    first, second = TestController(1, active=True), TestController(2, active=False)
    async with trio.open_nursery() as nursery:
        voters = await start_all(nursery, first, second)
        hint = 1
        channel = ControllerChannel(voters, leader_hint=lambda: hint, **FAST)
        try:
            resp = await channel.call(m.AllocateProducerIdsRequest(broker_id=7, broker_epoch=3))
            assert resp.producer_id_start == 1000

            # The next call is in flight at controller 1 when it goes away, and controller 2
            # takes over; the node's view of the quorum still names 1.
            first.hold = trio.Event()
            first.held = trio.Event()
            outcome: list[Any] = []

            async def in_flight() -> None:
                outcome.append(await channel.call(
                    m.AllocateProducerIdsRequest(broker_id=7, broker_epoch=3), timeout=10))

            async with trio.open_nursery() as calls:
                calls.start_soon(in_flight)
                await first.held.wait()
                second.active = True
                await first.stop()
            assert outcome[0].producer_id_start == 2000
            assert channel.active_controller == 2

            # With the hint updated, or not, later calls keep reaching controller 2.
            resp = await channel.call(m.AllocateProducerIdsRequest(broker_id=7, broker_epoch=3))
            assert resp.producer_id_start == 2000
            hint = 2
            resp = await channel.call(m.AllocateProducerIdsRequest(broker_id=7, broker_epoch=3))
            assert resp.producer_id_start == 2000
        finally:
            await channel.aclose()
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("situation", ["unreachable", "all standby"])
def test_no_active_controller_times_out_within_its_bound(situation: str) -> None:
    @run_trio(20)
    async def scenario() -> None:
        async with trio.open_nursery() as nursery:
            if situation == "unreachable":
                voters = {1: (HOST, closed_port()), 2: (HOST, closed_port())}
            else:
                voters = await start_all(nursery, TestController(1, active=False),
                                         TestController(2, active=False))
            channel = ControllerChannel(voters, leader_hint=lambda: 1, **FAST)
            timeout = 1.0
            start = trio.current_time()
            try:
                with pytest.raises(KafkaError) as info:
                    await channel.call(m.AllocateProducerIdsRequest(broker_id=7, broker_epoch=3),
                                       timeout=timeout)
            finally:
                await channel.aclose()
            elapsed = trio.current_time() - start
            assert info.value.code == ErrorCode.REQUEST_TIMED_OUT
            assert "controller" in str(info.value)
            # Within its bound: not before the timeout, and not long after it (a generous margin
            # for a loaded machine; the last backoff is cut short at the deadline).
            assert timeout <= elapsed < timeout + 2.0
            nursery.cancel_scope.cancel()

    scenario()


@run_trio(20)
async def test_unsupported_api_fails_at_once() -> None:
    active = TestController(1, active=True)
    active.versions.remove(ApiKey.ALLOCATE_PRODUCER_IDS)
    async with trio.open_nursery() as nursery:
        voters = await start_all(nursery, active)
        channel = ControllerChannel(voters, leader_hint=lambda: 1, **FAST)
        try:
            with pytest.raises(KafkaError) as info:
                await channel.call(m.AllocateProducerIdsRequest(broker_id=7, broker_epoch=3))
        finally:
            await channel.aclose()
        assert info.value.code == ErrorCode.UNSUPPORTED_VERSION
        assert active.seen == []
        nursery.cancel_scope.cancel()


@run_trio(20)
async def test_closed_channel_refuses_calls() -> None:
    channel = ControllerChannel({1: (HOST, closed_port())}, **FAST)
    await channel.aclose()
    with pytest.raises(trio.ClosedResourceError):
        await channel.call(m.AllocateProducerIdsRequest(broker_id=7, broker_epoch=3))


@run_trio(30)
async def test_broker_lifecycle_over_the_channel() -> None:
    """A broker registers and heartbeats through the channel; the hint names the standby."""
    standby, active = TestController(1, active=False), TestController(2, active=True)
    async with trio.open_nursery() as nursery:
        voters = await start_all(nursery, standby, active)
        channel = ControllerChannel(voters, leader_hint=lambda: 1, **FAST)
        mgr = BrokerLifecycleManager(
            channel.call, broker_id=7, cluster_id="c", incarnation_id=uuid.uuid4(),
            listeners=[("PLAINTEXT", HOST, 9092, 0)], rack=None,
            features=[("metadata.version", 7, 21)], log_dirs=[uuid.uuid4()],
            metadata_offset=lambda: 10, heartbeat_interval_s=0.05, session_timeout_s=2.0)
        try:
            async with trio.open_nursery() as inner:
                await inner.start(mgr.run)
                assert mgr.broker_epoch == 1007
                await mgr.wait_unfenced()
                assert mgr.state == BrokerState.RUNNING
                assert await mgr.controlled_shutdown(timeout_s=5.0)
        finally:
            await channel.aclose()
        assert ApiKey.BROKER_REGISTRATION in active.seen and ApiKey.BROKER_HEARTBEAT in active.seen
        assert not mgr.contact_lost
        nursery.cancel_scope.cancel()
