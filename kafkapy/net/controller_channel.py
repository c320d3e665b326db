"""Requests from a node to the active KRaft controller, over the controllers' CONTROLLER listener.

A broker on a node without an active controller registers, heartbeats, asks for producer ids and
forwards admin requests this way (Kafka's ``NodeToControllerChannelManager``). Which voter is the
active controller is only known approximately: the node's view of the quorum (``leader_hint``)
can lag an election, and the controller that answered last may have lost its leadership since.
So each call picks a target, and moves on when the target cannot be reached or answers
NOT_CONTROLLER:

1. ``leader_hint()``, when it names a voter;
2. else the controller that last answered for real;
3. else the voters in turn.

A target that failed is skipped for the rest of that call until every voter has failed once, so
a stale hint costs one round trip, not the whole timeout. Between attempts the call sleeps a
bounded exponential backoff (``retry_backoff`` doubling up to ``retry_backoff_max``); after
``timeout`` seconds it gives up with REQUEST_TIMED_OUT.

NOT_CONTROLLER is recognised wherever Kafka's ``errorCounts`` would see it: the top-level error
code, or the error code of any entry of the response's lists (CreateTopics, DeleteTopics,
CreatePartitions, IncrementalAlterConfigs carry their errors per topic or resource only) and of
their nested lists (ElectLeaders' per-partition results). Kafka retries such a request as a whole,
and so do we.

There is one ``KafkaClient`` connection per controller, opened on first use (ApiVersions
negotiated) and shared by concurrent calls, which the client pipelines. A connection that breaks,
times out, is abandoned by a cancelled call, or belongs to a controller that answered
NOT_CONTROLLER is closed; the next call to that controller opens a new one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Final

import trio

from kafkapy.net.client import KafkaClient, KafkaClientError, UnsupportedByPeer
from kafkapy.net.client_security import ClientSecurity
from kafkapy.protocol import ApiKey, ErrorCode, KafkaError

__all__ = ["ControllerChannel"]

log = logging.getLogger("kafkapy.net.controller_channel")

# How deep a response is searched for NOT_CONTROLLER: the top level, its lists, and their lists
# (ElectLeaders: results per topic, then per partition).
_SCAN_DEPTH: Final = 3


class _Controller:
    """One voter: its shared connection and the lock that makes concurrent callers open it once."""

    __slots__ = ("client", "lock", "node_id")

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self.client: KafkaClient | None = None
        self.lock = trio.Lock()


class _AttemptFailed(Exception):
    """Internal: this target did not give a usable answer; try another."""


class ControllerChannel:
    """Requests from this node to the active controller, over the controller listener.

    ``voters`` maps controller ids to their CONTROLLER listener's (host, port); it is read at each
    connect, so it may be filled in after construction. ``leader_hint`` returns the voter this node
    believes is the active controller, or -1. Times are seconds on Trio's clock.
    """

    def __init__(self, voters: Mapping[int, tuple[str, int]], *,
                 leader_hint: Callable[[], int] = lambda: -1,
                 client_id: str = "kafkapy-controller-channel", connect_timeout: float = 5.0,
                 retry_backoff: float = 0.1, retry_backoff_max: float = 1.0,
                 monotonic: Callable[[], float] = trio.current_time,
                 security: ClientSecurity | None = None) -> None:
        # The controller listener's TLS/SASL (None: PLAINTEXT).
        self.security = security
        self._monotonic = monotonic  # the node's clock (Trio's: MockClock moves it)
        self.voters = voters
        self.leader_hint = leader_hint
        self.client_id = client_id
        self.connect_timeout = connect_timeout
        self.retry_backoff = retry_backoff
        self.retry_backoff_max = max(retry_backoff, retry_backoff_max)
        self._controllers: dict[int, _Controller] = {}
        self._last_answered: int | None = None
        self._last_tried: int | None = None
        self._closed = False

    @property
    def active_controller(self) -> int | None:
        """The controller that answered the last successful call (None before one did, or after
        it failed since)."""
        return self._last_answered

    async def call(self, body: Any, *, version: int | None = None, timeout: float = 30.0) -> Any:
        """Send request message ``body`` to the active controller and return the decoded response.

        ``version`` None means the highest version both sides speak. Raises
        ``KafkaError(REQUEST_TIMED_OUT)`` when no controller gave an answer other than
        NOT_CONTROLLER within ``timeout`` seconds, ``KafkaError(UNSUPPORTED_VERSION)`` when the
        controller reached serves no version of the API that we speak (as Kafka fails such a
        request at once), and ``trio.ClosedResourceError`` after :meth:`aclose`.
        """
        api = ApiKey.name_of(body.API_KEY)
        deadline = self._monotonic() + timeout
        backoff = self.retry_backoff
        failed: set[int] = set()
        problem = "no controller was tried"
        while True:
            self._check_open()
            target = self._pick(failed)
            if target is None:
                problem = "no controller voters are known"
            else:
                self._last_tried = target
                try:
                    return await self._attempt(target, body, version, deadline)
                except _AttemptFailed as exc:
                    problem = f"controller {target}: {exc}"
                    log.debug("%s to controller %d failed: %s", api, target, exc)
                    failed.add(target)
                    if self._last_answered == target:
                        self._last_answered = None
                    if failed >= set(self.voters):
                        failed.clear()  # every voter had its turn: start another round
            remaining = deadline - self._monotonic()
            if remaining > 0:
                await trio.sleep(min(backoff, remaining))
                backoff = min(backoff * 2, self.retry_backoff_max)
            # (Checked after the sleep too: an attempt with no time left would only abandon a
            # shared connection.)
            if self._monotonic() >= deadline:
                raise KafkaError(ErrorCode.REQUEST_TIMED_OUT,
                                 f"{api}: no answer from the active controller within "
                                 f"{timeout:g} s (last: {problem})")

    async def aclose(self) -> None:
        """Close every connection; calls still running and later calls fail."""
        self._closed = True
        for controller in self._controllers.values():
            client, controller.client = controller.client, None
            if client is not None:
                await client.aclose()

    # -- internals -------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise trio.ClosedResourceError("the controller channel is closed")

    def _pick(self, failed: set[int]) -> int | None:
        voters = self.voters
        hint = self.leader_hint()
        if hint in voters and hint not in failed:
            return hint
        last = self._last_answered
        if last is not None and last in voters and last not in failed:
            return last
        candidates = [v for v in sorted(voters) if v not in failed]
        if not candidates:
            return None
        # In turn: the first voter after the one tried last, wrapping around.
        if self._last_tried is not None:
            for v in candidates:
                if v > self._last_tried:
                    return v
        return candidates[0]

    async def _attempt(self, target: int, body: Any, version: int | None, deadline: float) -> Any:
        controller = self._controllers.get(target)
        if controller is None:
            controller = self._controllers[target] = _Controller(target)
        client = await self._connected(controller, deadline)
        api_key = body.API_KEY
        if version is None:
            try:
                use = client.version_for(api_key)
            except UnsupportedByPeer:
                raise KafkaError(ErrorCode.UNSUPPORTED_VERSION,
                                 f"controller {target} serves no {ApiKey.name_of(api_key)} version "
                                 "we speak") from None
        else:
            use = version
        try:
            response = await client.send(body, version=use,
                                         timeout=max(0.0, deadline - self._monotonic()))
        except (KafkaClientError, trio.TooSlowError, OSError) as exc:
            await self._drop(controller, client)
            raise _AttemptFailed(str(exc) or type(exc).__name__) from exc
        except BaseException:
            # Cancelled mid-request: the frame may be half written, so nobody may reuse the
            # connection.
            with trio.CancelScope(shield=True):
                await self._drop(controller, client)
            raise
        if _carries_not_controller(response):
            await self._drop(controller, client)
            raise _AttemptFailed("NOT_CONTROLLER")
        if self._last_answered != target:
            log.info("Controller %d answered %s as the active controller", target,
                     ApiKey.name_of(api_key))
            self._last_answered = target
        return response

    async def _connected(self, controller: _Controller, deadline: float) -> KafkaClient:
        """The controller's live connection, opened now if there is none."""
        # The call's deadline also bounds waiting for another caller's connect.
        with trio.move_on_at(deadline):
            async with controller.lock:
                self._check_open()
                if controller.client is not None:
                    return controller.client
                address = self.voters.get(controller.node_id)
                if address is None:
                    raise _AttemptFailed("no address known")
                host, port = address
                try:
                    client = await KafkaClient.connect(host, port, client_id=self.client_id,
                                                       timeout=self.connect_timeout,
                                                       security=self.security)
                except (OSError, KafkaClientError, trio.TooSlowError) as exc:
                    raise _AttemptFailed(f"cannot connect to {host}:{port}: "
                                         f"{exc or type(exc).__name__}") from exc
                if self._closed:
                    await client.aclose()
                    self._check_open()
                controller.client = client
                return client
        raise _AttemptFailed("timed out connecting")

    async def _drop(self, controller: _Controller, client: KafkaClient) -> None:
        # Another caller may already have replaced a connection that broke under both of us.
        if controller.client is client:
            controller.client = None
        await client.aclose()


def _carries_not_controller(response: Any) -> bool:
    """Whether NOT_CONTROLLER is the top-level error code or that of an entry of the response's
    lists (see the module docstring)."""
    to_dict = getattr(response, "to_dict", None)
    if to_dict is None:
        return getattr(response, "error_code", None) == ErrorCode.NOT_CONTROLLER
    return _scan(to_dict(), 0)


def _scan(fields: Mapping[str, Any], depth: int) -> bool:
    if fields.get("error_code") == ErrorCode.NOT_CONTROLLER:
        return True
    if depth >= _SCAN_DEPTH:
        return False
    for value in fields.values():
        if isinstance(value, Mapping):
            if _scan(value, depth + 1):
                return True
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, Mapping) and _scan(item, depth + 1):
                    return True
    return False
