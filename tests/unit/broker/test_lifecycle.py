"""BrokerLifecycleManager against a scripted in-memory controller, on Trio's virtual clock.

The fake controller behaves like the quorum controller in the parts the broker sees: registration
hands out an epoch, heartbeats keep the broker fenced until its metadata offset reaches the
registration's, a shutdown request is granted one round after it is first seen, and it can be
told to be unreachable (the channel's REQUEST_TIMED_OUT), to hang, or to forget the broker.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
import trio
import trio.testing

from kafkapy.broker.lifecycle import BrokerLifecycleManager, BrokerState
from kafkapy.protocol import ErrorCode, KafkaError
from kafkapy.protocol import messages as m

BROKER = 4
CLUSTER = "MkU3OEVBNTcwNTJENDM2Qk"
INTERVAL = 2.0
SESSION = 9.0
REGISTRATION_OFFSET = 50
INCARNATION = uuid.UUID("0a0b0c0d-0000-0071-1020-304050007177")
LOG_DIR = uuid.UUID("0a0b0c0d-0000-0072-1020-304050007277")


def virtual_time(fn: Callable[[], Awaitable[None]]) -> Callable[[], None]:
    """Run the test on MockClock (virtual time jumps whenever every task waits), bounded."""

    @functools.wraps(fn)
    def test() -> None:
        async def main() -> None:
            with trio.fail_after(3600):  # virtual seconds
                await fn()

        trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))

    return test


@dataclass
class Registration:
    epoch: int
    incarnation: uuid.UUID
    offset: int
    fenced: bool = True
    shutdown_seen: bool = False


class FakeController:
    """The active controller as the broker sees it (see the module docstring)."""

    def __init__(self) -> None:
        self.mode = "up"  # "up", "down" (times out like the channel), "hang" (never answers)
        self.registration_errors: list[int] = []
        self.grant_shutdown = True
        self.brokers: dict[int, Registration] = {}
        self.next_epoch = 100
        self.next_offset = REGISTRATION_OFFSET
        self.requests: list[Any] = []
        self.times: list[float] = []

    async def __call__(self, body: Any, *, timeout: float = 30.0) -> Any:
        if self.mode == "down":
            await trio.sleep(timeout)
            raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, "no controller answered")
        if self.mode == "hang":
            await trio.sleep_forever()
        await trio.sleep(0.001)  # a round trip
        self.requests.append(body)
        self.times.append(trio.current_time())
        if isinstance(body, m.BrokerRegistrationRequest):
            return self._register(body)
        if isinstance(body, m.BrokerHeartbeatRequest):
            return self._heartbeat(body)
        raise AssertionError(f"unexpected request {body}")

    def _register(self, req: Any) -> Any:
        if self.registration_errors:
            return m.BrokerRegistrationResponse(error_code=self.registration_errors.pop(0))
        reg = self.brokers.get(req.broker_id)
        if reg is None or reg.incarnation != req.incarnation_id:
            reg = self.brokers[req.broker_id] = Registration(
                self.next_epoch, req.incarnation_id, self.next_offset)
            self.next_epoch += 1
        return m.BrokerRegistrationResponse(error_code=0, broker_epoch=reg.epoch)

    def _heartbeat(self, req: Any) -> Any:
        reg = self.brokers.get(req.broker_id)
        if reg is None or reg.epoch != req.broker_epoch:
            return m.BrokerHeartbeatResponse(error_code=ErrorCode.STALE_BROKER_EPOCH)
        caught_up = req.current_metadata_offset >= reg.offset
        should_shut_down = False
        if req.want_shut_down:
            should_shut_down = reg.shutdown_seen and self.grant_shutdown
            reg.shutdown_seen = True
        elif reg.fenced and caught_up:
            reg.fenced = False
        return m.BrokerHeartbeatResponse(error_code=0, is_caught_up=caught_up, is_fenced=reg.fenced,
                                         should_shut_down=should_shut_down)

    def heartbeats(self) -> list[Any]:
        return [r for r in self.requests if isinstance(r, m.BrokerHeartbeatRequest)]

    def registrations(self) -> list[Any]:
        return [r for r in self.requests if isinstance(r, m.BrokerRegistrationRequest)]


class Broker:
    """The broker's side: its metadata offset and what the contact callbacks saw."""

    def __init__(self, controller: FakeController, *, offset: int = REGISTRATION_OFFSET) -> None:
        self.offset = offset
        self.events: list[str] = []
        self.manager = BrokerLifecycleManager(
            controller, broker_id=BROKER, cluster_id=CLUSTER, incarnation_id=INCARNATION,
            listeners=[("PLAINTEXT", "b4.example", 9092, 0), ("INTERNAL", "b4.internal", 9094, 0)],
            rack="rack-a", features=[("metadata.version", 7, 21), ("kraft.version", 0, 1)],
            log_dirs=[LOG_DIR], metadata_offset=lambda: self.offset,
            heartbeat_interval_s=INTERVAL, session_timeout_s=SESSION, previous_broker_epoch=42,
            on_contact_lost=lambda: self.events.append("lost"),
            on_contact_restored=lambda: self.events.append("restored"))


async def wait_for(predicate: Callable[[], bool], step: float = 0.05) -> None:
    """Poll in virtual time (the test's fail_after bounds it)."""
    while not predicate():
        await trio.sleep(step)


@virtual_time
async def test_registers_then_is_unfenced_once_caught_up() -> None:
    controller = FakeController()
    broker = Broker(controller, offset=10)
    mgr = broker.manager
    assert (mgr.state, mgr.broker_epoch, mgr.fenced) == (BrokerState.NOT_RUNNING, -1, True)
    async with trio.open_nursery() as nursery:
        await nursery.start(mgr.run)
        assert mgr.broker_epoch == 100 and mgr.state == BrokerState.STARTING

        # Behind the registration offset: heartbeats keep saying fenced, however long it takes.
        await trio.sleep(30)
        assert mgr.fenced and mgr.state == BrokerState.STARTING
        beats = controller.heartbeats()
        assert beats and all(b.current_metadata_offset == 10 and b.broker_epoch == 100
                             and not b.want_shut_down for b in beats)

        broker.offset = REGISTRATION_OFFSET + 3
        await mgr.wait_unfenced()
        assert not mgr.fenced and mgr.state == BrokerState.RUNNING
        assert controller.heartbeats()[-1].current_metadata_offset == REGISTRATION_OFFSET + 3
        await mgr.wait_unfenced()  # already unfenced: returns at once

        # Once running, heartbeats come every interval.
        before = len(controller.heartbeats())
        await trio.sleep(10 * INTERVAL + 0.5)
        assert len(controller.heartbeats()) - before == 10
        nursery.cancel_scope.cancel()
    assert broker.events == []


@virtual_time
async def test_registration_request_carries_the_broker_description() -> None:
    controller = FakeController()
    mgr = Broker(controller).manager
    async with trio.open_nursery() as nursery:
        await nursery.start(mgr.run)
        nursery.cancel_scope.cancel()
    (req,) = controller.registrations()
    assert (req.broker_id, req.cluster_id, req.incarnation_id, req.rack) == (
        BROKER, CLUSTER, INCARNATION, "rack-a")
    assert [(l.name, l.host, l.port, l.security_protocol) for l in req.listeners] == [
        ("PLAINTEXT", "b4.example", 9092, 0), ("INTERNAL", "b4.internal", 9094, 0)]
    assert [(f.name, f.min_supported_version, f.max_supported_version) for f in req.features] == [
        ("metadata.version", 7, 21), ("kraft.version", 0, 1)]
    assert list(req.log_dirs) == [LOG_DIR] and req.previous_broker_epoch == 42
    # The channel picks the version: the one body must encode (and decode back) at each of them.
    for version in range(5):
        decoded = m.BrokerRegistrationRequest.decode(bytes(req.encode(version=version)),
                                                     version=version)
        assert decoded.broker_id == BROKER and len(decoded.listeners) == 2
        assert (list(decoded.log_dirs) == [LOG_DIR]) == (version >= 2)


@virtual_time
async def test_registration_is_retried_until_accepted() -> None:
    controller = FakeController()
    controller.registration_errors = [ErrorCode.DUPLICATE_BROKER_REGISTRATION,
                                      ErrorCode.DUPLICATE_BROKER_REGISTRATION]
    controller.mode = "down"
    mgr = Broker(controller).manager
    async with trio.open_nursery() as nursery:
        started = trio.Event()

        async def run() -> None:
            await nursery.start(mgr.run)
            started.set()

        nursery.start_soon(run)
        # Unreachable controller: registration keeps trying, not registered yet.
        await trio.sleep(3 * SESSION)
        assert not started.is_set() and mgr.broker_epoch == -1 and mgr.state == BrokerState.STARTING
        # Reachable, but a previous incarnation's session is still alive twice; then accepted.
        controller.mode = "up"
        await started.wait()
        assert mgr.broker_epoch == 100
        assert len(controller.registrations()) == 3
        await mgr.wait_unfenced()
        nursery.cancel_scope.cancel()


def test_registration_errors_are_logged_clearly(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kafkapy.broker.lifecycle")

    @virtual_time
    async def scenario() -> None:
        controller = FakeController()
        controller.registration_errors = [ErrorCode.DUPLICATE_BROKER_REGISTRATION,
                                          ErrorCode.INCONSISTENT_CLUSTER_ID]
        mgr = Broker(controller).manager
        async with trio.open_nursery() as nursery:
            await nursery.start(mgr.run)
            await mgr.wait_unfenced()
            nursery.cancel_scope.cancel()

    scenario()
    text = caplog.text
    assert "[BrokerLifecycleManager id=4] Unable to register broker 4: another broker with this id" in text
    assert "INCONSISTENT_CLUSTER_ID" in text
    assert "[BrokerLifecycleManager id=4] Successfully registered broker 4 with broker epoch 100" in text
    assert "[BrokerLifecycleManager id=4] The broker has been unfenced" in text


@virtual_time
async def test_stale_broker_epoch_registers_again() -> None:
    controller = FakeController()
    broker = Broker(controller)
    mgr = broker.manager
    async with trio.open_nursery() as nursery:
        await nursery.start(mgr.run)
        await mgr.wait_unfenced()
        assert mgr.broker_epoch == 100

        # The controller lost the registration (say, an UnregisterBroker): the next heartbeat is
        # refused, the broker registers again with a new epoch, and is fenced until it has
        # caught up with that new registration.
        del controller.brokers[BROKER]
        controller.next_offset = REGISTRATION_OFFSET + 100
        await wait_for(lambda: mgr.broker_epoch == 101)
        assert mgr.fenced and mgr.state == BrokerState.STARTING
        await trio.sleep(3 * INTERVAL)
        assert mgr.fenced
        broker.offset = REGISTRATION_OFFSET + 100
        await mgr.wait_unfenced()
        assert mgr.broker_epoch == 101 and mgr.state == BrokerState.RUNNING
        assert len(controller.registrations()) == 2
        assert controller.heartbeats()[-1].broker_epoch == 101
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("outage", ["down", "hang"])
def test_contact_lost_after_the_session_timeout_and_restored(outage: str) -> None:
    @virtual_time
    async def scenario() -> None:
        controller = FakeController()
        broker = Broker(controller)
        mgr = broker.manager
        async with trio.open_nursery() as nursery:
            await nursery.start(mgr.run)
            await mgr.wait_unfenced()
            last_ok = trio.current_time()
            controller.mode = outage

            # Within the session the broker keeps going as if nothing happened...
            await trio.sleep_until(last_ok + SESSION - INTERVAL - 0.1)
            assert not mgr.contact_lost and broker.events == []
            # ...then fences itself, once, within a heartbeat of the session timeout.
            await trio.sleep_until(last_ok + SESSION + INTERVAL)
            assert mgr.contact_lost and broker.events == ["lost"]
            await trio.sleep(5 * SESSION)
            assert broker.events == ["lost"]

            controller.mode = "up"
            await wait_for(lambda: not mgr.contact_lost)
            assert broker.events == ["lost", "restored"]
            # It is still the same registration, still unfenced by the controller.
            assert mgr.broker_epoch == 100 and not mgr.fenced
            nursery.cancel_scope.cancel()

    scenario()


@virtual_time
async def test_controlled_shutdown_waits_for_the_controller() -> None:
    controller = FakeController()
    mgr = Broker(controller).manager
    async with trio.open_nursery() as nursery:
        done = trio.Event()

        async def run() -> None:
            await mgr.run()
            done.set()

        nursery.start_soon(run)
        await mgr.wait_unfenced()
        assert await mgr.controlled_shutdown(timeout_s=30.0)
        assert mgr.state == BrokerState.SHUTTING_DOWN
        asks = [b for b in controller.heartbeats() if b.want_shut_down]
        assert len(asks) == 2  # the controller grants it on the second round
        await done.wait()  # run() returns: no more heartbeats after the controller's yes
        count = len(controller.requests)
        await trio.sleep(10 * INTERVAL)
        assert len(controller.requests) == count
        assert await mgr.controlled_shutdown(timeout_s=1.0)  # already done


@virtual_time
async def test_controlled_shutdown_times_out_when_not_granted() -> None:
    controller = FakeController()
    controller.grant_shutdown = False
    mgr = Broker(controller).manager
    async with trio.open_nursery() as nursery:
        await nursery.start(mgr.run)
        await mgr.wait_unfenced()
        start = trio.current_time()
        assert not await mgr.controlled_shutdown(timeout_s=10.0)
        assert trio.current_time() - start == pytest.approx(10.0)
        assert mgr.state == BrokerState.PENDING_CONTROLLED_SHUTDOWN
        # Heartbeats asked at once, then every interval.
        asks = [t for t, r in zip(controller.times, controller.requests)
                if isinstance(r, m.BrokerHeartbeatRequest) and r.want_shut_down]
        assert asks[0] == pytest.approx(start, abs=0.01) and len(asks) >= 4
        assert all(b - a == pytest.approx(INTERVAL, abs=0.01) for a, b in zip(asks, asks[1:]))
        nursery.cancel_scope.cancel()


@virtual_time
async def test_controlled_shutdown_needs_a_registration() -> None:
    controller = FakeController()
    controller.mode = "down"
    mgr = Broker(controller).manager
    assert not await mgr.controlled_shutdown(timeout_s=5.0)  # not running at all
    async with trio.open_nursery() as nursery:
        nursery.start_soon(mgr.run)
        await trio.sleep(1.0)
        assert not await mgr.controlled_shutdown(timeout_s=5.0)  # running, never registered
        assert mgr.state == BrokerState.STARTING
        nursery.cancel_scope.cancel()


@virtual_time
async def test_an_offline_log_dir_is_reported_at_once_and_in_every_heartbeat_after() -> None:
    controller = FakeController()
    mgr = Broker(controller).manager
    async with trio.open_nursery() as nursery:
        await nursery.start(mgr.run)
        await mgr.wait_unfenced()
        assert all(not b.offline_log_dirs for b in controller.heartbeats())
        before = len(controller.heartbeats())
        reported_at = trio.current_time()
        mgr.report_offline_dir(LOG_DIR)
        await wait_for(lambda: len(controller.heartbeats()) > before)
        assert controller.times[-1] - reported_at < INTERVAL, "not held back until the interval"
        await trio.sleep(3 * INTERVAL)
        beats = controller.heartbeats()[before:]
        assert len(beats) >= 3 and all(list(b.offline_log_dirs) == [LOG_DIR] for b in beats)
        # The field exists from BrokerHeartbeat v1: it must survive encoding there.
        decoded = m.BrokerHeartbeatRequest.decode(bytes(beats[-1].encode(version=1)), version=1)
        assert list(decoded.offline_log_dirs) == [LOG_DIR]
        nursery.cancel_scope.cancel()
