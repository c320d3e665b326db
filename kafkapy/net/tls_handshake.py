"""The server side of a TLS connection's start: the handshake, bounded in time, and what it
tells about the client (its certificate, and with mTLS its principal) written into the
connection's ``Session``.

A client that fails the handshake (plaintext Kafka frames sent to a TLS port, an untrusted or
missing certificate where one is required, a handshake that never ends) costs one log line and
its connection; the listener carries on.
"""

from __future__ import annotations

import logging
import ssl
from typing import TYPE_CHECKING, Final

import trio

from kafkapy.net.tls import ListenerTls
from kafkapy.security.principal import KafkaPrincipal
from kafkapy.security.ssl_principal import NoMatchingRule, certificate_dn

if TYPE_CHECKING:
    from kafkapy.net.server import ConnectionInfo

log = logging.getLogger("kafkapy.net.tls")

# Kafka bounds the whole authentication by connections.max.idle.ms; a handshake is a few round
# trips, so a much shorter bound frees a slot held by a silent peer sooner.
DEFAULT_HANDSHAKE_TIMEOUT: Final = 30.0


async def tls_handshake(stream: trio.SocketStream, tls: ListenerTls, info: ConnectionInfo,
                        timeout: float = DEFAULT_HANDSHAKE_TIMEOUT) -> trio.SSLStream[trio.SocketStream] | None:
    """The TLS stream over ``stream`` once the handshake succeeded, with ``info.session``
    filled in; None (the connection closed, one line logged) when it failed."""
    secured = trio.SSLStream(stream, tls.context, server_side=True)
    peer = f"{info.peer[0]}" if info.peer else "?"
    reason: str | None = None
    try:
        with trio.move_on_after(timeout) as scope:
            await secured.do_handshake()
        if scope.cancelled_caught:
            reason = f"no TLS handshake within {timeout:g} s"
    except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
        cause = exc.__cause__
        reason = (cause.reason or str(cause)) if isinstance(cause, ssl.SSLError) else str(cause or exc)
        reason = f"SSL handshake failed: {reason}"
    if reason is None:
        reason = _fill_session(secured, tls, info)
    if reason is not None:
        # INFO, as Kafka's Selector logs it: clients routinely drop half-open TLS connections.
        log.info("Failed authentication with %s on listener %s (connection %s): %s", peer,
                 info.listener, info.connection_id, reason)
        await trio.aclose_forcefully(stream)
        return None
    return secured


def _fill_session(secured: trio.SSLStream[trio.SocketStream], tls: ListenerTls,
                  info: ConnectionInfo) -> str | None:
    """Record the client's certificate and principal; the reason to refuse it, if any."""
    session = info.session
    if tls.client_auth == "none":
        return None
    der = secured.getpeercert(binary_form=True)
    if not der:
        return None  # "requested" and none presented: ANONYMOUS, as in Kafka
    session.peer_certificate = secured.getpeercert() or None
    if session.uses_sasl:
        return None  # SASL names the principal
    try:
        dn = certificate_dn(der)
        name = tls.mapper.name(dn)
    except (NoMatchingRule, ValueError) as exc:
        return f"no principal for the client certificate: {exc}"
    session.principal = KafkaPrincipal.user(name)
    log.info("Connection %s on listener %s authenticated by its certificate %s as %s",
             info.connection_id, info.listener, dn, session.principal)
    return None
