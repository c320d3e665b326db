"""The SASL gate of a connection: answers SaslHandshake/SaslAuthenticate itself, keeps everything
but ApiVersions from the dispatcher until the client has authenticated, and records the outcome in
the connection's :class:`~kafkapy.security.Session`.

The state machine is :class:`~kafkapy.security.sasl.exchange.SaslServerExchange`; this is its Trio
edge: the clocks, the delay before closing a failed connection
(``connection.failed.authentication.delay.ms``, Kafka's brake on password guessing), the log.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import trio

from kafkapy.protocol import Request
from kafkapy.protocol.events import Reply
from kafkapy.security.sasl.exchange import (
    SASL_APIS,
    MechanismFactory,
    SaslServerExchange,
    Verdict,
    answer_outside_sasl,
)
from kafkapy.security.session import Session

log = logging.getLogger("kafkapy.net.sasl_gate")


class SaslClose(Exception):
    """Close this connection now (already logged)."""


@dataclass(frozen=True)
class ListenerSasl:
    """One SASL listener's settings: its enabled mechanisms (each a factory of a server),
    ``connections.max.reauth.ms`` (one value, or one per mechanism) and
    ``connection.failed.authentication.delay.ms``."""

    mechanisms: Mapping[str, MechanismFactory]
    max_reauth_ms: int | Mapping[str, int] = 0
    failed_delay_ms: int = 100
    wall_ms: Callable[[], int] = field(default=lambda: int(time.time() * 1000))


class SaslGate:
    """The SASL state of one connection on a SASL listener."""

    def __init__(self, settings: ListenerSasl, session: Session, connection_id: str) -> None:
        self._settings = settings
        self._session = session
        self._connection_id = connection_id
        self._exchange = SaslServerExchange(settings.mechanisms, settings.max_reauth_ms)
        session.authenticated = False

    async def screen(self, request: Request) -> Reply | None:
        """The gate's answer to ``request``, or None to hand it to the dispatcher. Raises
        :class:`SaslClose` when the connection must close without an answer."""
        now_ms = int(trio.current_time() * 1000)
        step = self._exchange.on_request(request, now_ms, self._settings.wall_ms())
        if step.verdict is Verdict.PASS:
            return None
        if step.verdict is Verdict.REPLY:
            self._record()
            return Reply(body=step.body)
        if step.verdict is Verdict.CLOSE:
            log.info("Closing connection %s: %s", self._connection_id, step.reason)
            raise SaslClose()
        log.info("Failed authentication with %s (%s)", self._connection_id, step.reason)
        self._session.authenticated = False
        if self._settings.failed_delay_ms > 0:
            await trio.sleep(self._settings.failed_delay_ms / 1000)
        if step.body is None:
            raise SaslClose()
        return Reply(body=step.body, close=True)

    def _record(self) -> None:
        exchange, session = self._exchange, self._session
        if exchange.authenticated and exchange.principal is not None:
            if not session.authenticated or session.principal != exchange.principal:
                log.debug("Connection %s authenticated as %s with %s", self._connection_id,
                          exchange.principal, exchange.mechanism)
            session.authenticated = True
            session.principal = exchange.principal
            session.sasl_mechanism = exchange.mechanism
            session.expires_at_ms = exchange.expires_at_ms


def screen_outside_sasl(request: Request) -> Reply | None:
    """SASL requests on a listener without SASL get ILLEGAL_SASL_STATE, as Kafka answers them;
    None (to the dispatcher) for every other request."""
    if request.api_key in SASL_APIS:
        return Reply(body=answer_outside_sasl(request))
    return None


def open_gate(settings: ListenerSasl | None, session: Session, connection_id: str) -> SaslGate | None:
    """The gate for a new connection: one on SASL listeners, None elsewhere."""
    if settings is None or not session.uses_sasl:
        return None
    return SaslGate(settings, session, connection_id)
