"""A broker's life as the active controller sees it: registration, heartbeats, fencing, shutdown.

The broker side of KIP-631 (Kafka's ``BrokerLifecycleManager``). :meth:`BrokerLifecycleManager.run`
registers the broker (incarnation id, listeners, rack, features, log directories) and then
heartbeats, reporting how far the broker has replayed the metadata log. The controller keeps a
new broker fenced until that offset reaches the broker's registration, then unfences it; it
fences a broker whose heartbeats stop for ``broker.session.timeout.ms``.

The broker watches the same clock from its side: when no heartbeat (nor registration) has
succeeded for the session timeout, the controller has (or is about to have) fenced it, so
``contact_lost`` turns True and ``on_contact_lost`` fires, letting the node stop acting as a
partition leader before it is told. The first exchange that succeeds again turns it back
(``on_contact_restored``).

States follow Kafka's ``BrokerState``: STARTING until the controller says the broker caught up,
RECOVERY until it is unfenced, RUNNING after; :meth:`BrokerLifecycleManager.controlled_shutdown`
moves to PENDING_CONTROLLED_SHUTDOWN (heartbeats ask to shut down, the controller moves
leadership away) and SHUTTING_DOWN once the controller agrees.

Requests go through ``call`` (``ControllerChannel.call`` in a node, a fake in tests), which finds
the active controller itself. Time is Trio's clock, so tests run it on ``MockClock``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from enum import IntEnum
from typing import Any, Final

import trio

from kafkapy.protocol import ErrorCode, KafkaError
from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import error_name

__all__ = ["BrokerLifecycleManager", "BrokerState"]

log = logging.getLogger("kafkapy.broker.lifecycle")

# While the broker has not caught up, Kafka heartbeats every 10 ms instead of every interval, so
# a broker with nothing to replay is unfenced at once.
CATCH_UP_HEARTBEAT_S: Final = 0.01
# After a failed registration or heartbeat: retry after this, doubling (Kafka's 100 ms start).
RETRY_BACKOFF_S: Final = 0.1
# Slack on top of a call's own timeout before we stop waiting for it: the channel times out
# first; this only bounds a call that ignores its timeout.
_CALL_SLACK_S: Final = 1.0


class BrokerState(IntEnum):
    """Kafka's ``BrokerState`` values (the ``broker-state`` metric reports these numbers)."""

    NOT_RUNNING = 0
    STARTING = 1
    RECOVERY = 2
    RUNNING = 3
    PENDING_CONTROLLED_SHUTDOWN = 6
    SHUTTING_DOWN = 7


class BrokerLifecycleManager:
    """Registers one broker with the active controller and keeps its session alive.

    ``call(body, timeout=...)`` sends a request to the active controller and returns its decoded
    response (``ControllerChannel.call``). ``listeners`` are (name, host, port, security protocol
    id); ``features`` (name, min level, max level); ``metadata_offset()`` the offset of the last
    metadata record the broker has applied. Times are in seconds.
    """

    def __init__(self, call: Callable[..., Awaitable[Any]], *, broker_id: int, cluster_id: str,
                 incarnation_id: uuid.UUID, listeners: Sequence[tuple[str, str, int, int]],
                 rack: str | None, features: Sequence[tuple[str, int, int]],
                 log_dirs: Sequence[uuid.UUID], metadata_offset: Callable[[], int],
                 heartbeat_interval_s: float, session_timeout_s: float,
                 previous_broker_epoch: int = -1,
                 on_contact_lost: Callable[[], None] | None = None,
                 on_contact_restored: Callable[[], None] | None = None,
                 monotonic: Callable[[], float] = trio.current_time) -> None:
        self.call = call
        self._monotonic = monotonic  # the node's clock (Trio's: MockClock moves it)
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.incarnation_id = incarnation_id
        self.listeners = tuple(listeners)
        self.rack = rack
        self.features = tuple(features)
        self.log_dirs = tuple(log_dirs)
        self.metadata_offset = metadata_offset
        self.heartbeat_interval_s = heartbeat_interval_s
        self.session_timeout_s = session_timeout_s
        self.previous_broker_epoch = previous_broker_epoch
        self.on_contact_lost = on_contact_lost
        self.on_contact_restored = on_contact_restored

        #: The epoch the controller gave this broker's registration; -1 until registered.
        self.broker_epoch = -1
        self.state = BrokerState.NOT_RUNNING
        #: As the controller last reported it (True until a heartbeat says otherwise).
        self.fenced = True
        #: True while no heartbeat has succeeded for ``session_timeout_s`` (self-fencing).
        self.contact_lost = False

        self._prefix = f"[BrokerLifecycleManager id={broker_id}] "
        self._running = False
        self._registered = False
        self._want_shut_down = False
        self._last_contact = 0.0  # trio time of the last successful exchange
        self._unfenced = trio.Event()
        self._restored = trio.Event()
        self._shutdown_granted = trio.Event()
        self._wake = trio.Event()
        #: Directory ids of log dirs that failed; every heartbeat reports them (OfflineLogDirs).
        self.offline_log_dirs: list[uuid.UUID] = []

    # -- public ----------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Register (retrying until it succeeds; ``task_status.started()`` once registered), then
        heartbeat every ``heartbeat_interval_s`` until cancelled.

        A heartbeat answered STALE_BROKER_EPOCH or BROKER_ID_NOT_REGISTERED registers again.
        Returns by itself only when the controller has let a controlled shutdown proceed.
        """
        if self._running:
            raise RuntimeError("BrokerLifecycleManager.run is already running")
        self._running = True
        try:
            self.state = BrokerState.STARTING
            await self._register()
            task_status.started()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._watch_contact)
                await self._heartbeat_loop()
                nursery.cancel_scope.cancel()
        finally:
            self._running = False

    def report_offline_dir(self, directory_id: uuid.UUID) -> None:
        """A log dir went offline: tell the controller in a heartbeat now (and in every one
        after), so it moves leadership of the replicas there to other in-sync replicas."""
        if directory_id in self.offline_log_dirs:
            return
        self.offline_log_dirs.append(directory_id)
        log.warning("%sReporting log dir %s as offline to the controller", self._prefix,
                    directory_id)
        self._wake.set()

    async def wait_unfenced(self) -> None:
        """Return once a heartbeat reply has said the broker is not fenced (at once if the last
        one did)."""
        while self.fenced:
            await self._unfenced.wait()

    async def controlled_shutdown(self, timeout_s: float) -> bool:
        """Heartbeat with ``want_shut_down`` until the controller answers ``should_shut_down``
        (it has moved leadership away) or ``timeout_s`` passes; True if it did.

        Needs :meth:`run` running and registered; otherwise there is nothing to hand over and
        this returns False at once.
        """
        if self.state == BrokerState.SHUTTING_DOWN:
            return True
        if not self._running or not self._registered:
            log.warning("%sNot registered with the controller: skipping controlled shutdown",
                        self._prefix)
            return False
        if not self._want_shut_down:
            log.info("%sBeginning controlled shutdown.", self._prefix)
            self._want_shut_down = True
            self.state = BrokerState.PENDING_CONTROLLED_SHUTDOWN
        self._wake.set()
        with trio.move_on_after(timeout_s):
            await self._shutdown_granted.wait()
            return True
        log.warning("%sThe controller did not complete our controlled shutdown within %d ms",
                    self._prefix, round(timeout_s * 1000))
        return False

    # -- registration ----------------------------------------------------------------------------

    def _registration_request(self) -> Any:
        req = m.BrokerRegistrationRequest
        # Built without a version: the channel encodes it at the highest one both sides speak,
        # and versions without LogDirs/PreviousBrokerEpoch leave those out.
        return req(
            broker_id=self.broker_id,
            cluster_id=self.cluster_id,
            incarnation_id=self.incarnation_id,
            listeners=[req.Listener(name=name, host=host, port=port, security_protocol=protocol)
                       for name, host, port, protocol in self.listeners],
            features=[req.Feature(name=name, min_supported_version=lo, max_supported_version=hi)
                      for name, lo, hi in self.features],
            rack=self.rack,
            is_migrating_zk_broker=False,
            log_dirs=list(self.log_dirs),
            previous_broker_epoch=self.previous_broker_epoch,
        )

    async def _register(self) -> None:
        """Register, retrying with a bounded exponential backoff until the controller accepts."""
        self._registered = False
        backoff = RETRY_BACKOFF_S
        while True:
            reply = await self._exchange(self._registration_request(), "BrokerRegistration")
            if reply is not None:
                code = reply.error_code
                if code == ErrorCode.NONE:
                    self.broker_epoch = reply.broker_epoch
                    self._registered = True
                    self._contact_ok()
                    log.info("%sSuccessfully registered broker %d with broker epoch %d",
                             self._prefix, self.broker_id, self.broker_epoch)
                    return
                if code == ErrorCode.DUPLICATE_BROKER_REGISTRATION:
                    # Typically our previous incarnation, whose session has not expired yet.
                    log.error("%sUnable to register broker %d: another broker with this id is "
                              "registered and its session is still alive (a previous run of this "
                              "broker, or a second broker with the same node.id). Retrying in "
                              "%d ms.", self._prefix, self.broker_id, round(backoff * 1000))
                else:
                    log.error("%sUnable to register broker %d: %s (%s). Retrying in %d ms.",
                              self._prefix, self.broker_id, error_name(code),
                              getattr(reply, "error_message", None) or "no message",
                              round(backoff * 1000))
            await trio.sleep(backoff)
            backoff = min(backoff * 2, max(RETRY_BACKOFF_S, self.session_timeout_s / 2))

    # -- heartbeats ------------------------------------------------------------------------------

    async def _heartbeat_loop(self) -> None:
        failures = 0
        while True:
            if not self._registered:
                await self._register()
            self._wake = trio.Event()
            outcome = await self._heartbeat()
            if self.state == BrokerState.SHUTTING_DOWN:
                return
            if outcome == "ok":
                failures = 0
                delay = (CATCH_UP_HEARTBEAT_S if self.state == BrokerState.STARTING
                         else self.heartbeat_interval_s)
            elif outcome == "register":
                continue
            else:
                delay = min(RETRY_BACKOFF_S * 2 ** failures, self.heartbeat_interval_s)
                failures += 1
            # A controlled shutdown wakes us early, to ask at once.
            with trio.move_on_after(delay):
                await self._wake.wait()

    async def _heartbeat(self) -> str:
        """One heartbeat: "ok", "register" (the controller no longer knows this registration) or
        "failed"."""
        request = m.BrokerHeartbeatRequest(
            broker_id=self.broker_id,
            broker_epoch=self.broker_epoch,
            current_metadata_offset=self.metadata_offset(),
            want_fence=False,
            want_shut_down=self._want_shut_down,
            offline_log_dirs=list(self.offline_log_dirs),
        )
        reply = await self._exchange(request, "BrokerHeartbeat")
        if reply is None:
            return "failed"
        code = reply.error_code
        if code in (ErrorCode.STALE_BROKER_EPOCH, ErrorCode.BROKER_ID_NOT_REGISTERED):
            log.warning("%sThe controller does not know broker epoch %d (%s); registering again",
                        self._prefix, self.broker_epoch, error_name(code))
            self._registered = False
            self._set_fenced(True)
            if self.state in (BrokerState.RECOVERY, BrokerState.RUNNING):
                self.state = BrokerState.STARTING
            return "register"
        if code != ErrorCode.NONE:
            log.warning("%sBroker %d sent a heartbeat request but received error %s.",
                        self._prefix, self.broker_id, error_name(code))
            return "failed"
        self._contact_ok()
        self._apply(reply)
        return "ok"

    def _apply(self, reply: Any) -> None:
        """Move through Kafka's states as a successful heartbeat reply says."""
        if self.state == BrokerState.STARTING and reply.is_caught_up:
            log.info("%sThe broker has caught up. Transitioning from STARTING to RECOVERY.",
                     self._prefix)
            self.state = BrokerState.RECOVERY
        self._set_fenced(bool(reply.is_fenced))
        if not self.fenced and self.state in (BrokerState.STARTING, BrokerState.RECOVERY):
            log.info("%sThe broker has been unfenced. Transitioning from %s to RUNNING.",
                     self._prefix, self.state.name)
            self.state = BrokerState.RUNNING
        elif self.fenced and self.state == BrokerState.RUNNING:
            self.state = BrokerState.RECOVERY
        if self.state == BrokerState.PENDING_CONTROLLED_SHUTDOWN:
            if reply.should_shut_down:
                log.info("%sThe controller has asked us to exit controlled shutdown.", self._prefix)
                self.state = BrokerState.SHUTTING_DOWN
                self._shutdown_granted.set()
            else:
                log.info("%sThe broker is in PENDING_CONTROLLED_SHUTDOWN state, still waiting for "
                         "the active controller.", self._prefix)

    def _set_fenced(self, fenced: bool) -> None:
        if fenced == self.fenced:
            return
        self.fenced = fenced
        if fenced:
            log.warning("%sThe controller has fenced broker %d.", self._prefix, self.broker_id)
            self._unfenced = trio.Event()
        else:
            self._unfenced.set()

    async def _exchange(self, request: Any, what: str) -> Any | None:
        """``call`` bounded by the session timeout; None (logged) when it failed."""
        timeout = self.session_timeout_s
        problem = f"no answer within {round(timeout * 1000)} ms"
        try:
            with trio.move_on_after(timeout + _CALL_SLACK_S):
                return await self.call(request, timeout=timeout)
        except KafkaError as exc:
            name = error_name(exc.code)
            problem = f"{name}: {exc.message}" if exc.message else name
        except Exception as exc:  # the controller channel is closed, or a bug below us
            problem = repr(exc)
        log.warning("%s%s request to the controller failed: %s", self._prefix, what, problem)
        return None

    # -- self-fencing ----------------------------------------------------------------------------

    def _contact_ok(self) -> None:
        now = self._monotonic()
        if self.contact_lost:
            self.contact_lost = False
            log.info("%sContact with the controller restored after %d ms", self._prefix,
                     round((now - self._last_contact) * 1000))
            self._restored.set()
            self._notify(self.on_contact_restored)
        self._last_contact = now

    async def _watch_contact(self) -> None:
        while True:
            if self.contact_lost:
                await self._restored.wait()
                continue
            deadline = self._last_contact + self.session_timeout_s
            if self._monotonic() < deadline:
                await trio.sleep_until(deadline)
                continue  # a heartbeat may have moved the deadline meanwhile
            self.contact_lost = True
            self._restored = trio.Event()
            log.error("%sBroker %d has been unable to contact the controller for %d ms: fencing "
                      "ourselves", self._prefix, self.broker_id,
                      round((self._monotonic() - self._last_contact) * 1000))
            self._notify(self.on_contact_lost)

    def _notify(self, callback: Callable[[], None] | None) -> None:
        if callback is None:
            return
        try:
            callback()
        except Exception:
            log.exception("%sContact callback %r failed", self._prefix, callback)

