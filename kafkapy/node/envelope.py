"""Forwarding with the caller's identity: Kafka's Envelope (API 58, KIP-590), both ends.

With the authorizer on, a broker forwards a client's admin request to the active controller
inside an Envelope that carries the request's bytes (header and body), the client's principal
(``principal_serde``) and its IP address. The controller checks that the envelope's sender may
forward (CLUSTER_ACTION on the cluster, as Kafka's), then authorizes and runs the inner request as
the original caller and wraps the response the same way. Errors about the envelope itself
(NOT_CONTROLLER, an unauthorized sender, bytes that do not parse) come back as the envelope's
error code; NOT_CONTROLLER sends the forwarding broker to the next controller as before.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from kafkapy.broker.authorization import request_principal
from kafkapy.broker.context import BrokerContext, client_address
from kafkapy.broker.request_authorization import authorized_call
from kafkapy.net.client import decode_response, encode_request
from kafkapy.protocol import messages as m
from kafkapy.protocol.apis import ApiVersionsTable
from kafkapy.protocol.connection import Request
from kafkapy.protocol.decode import decode_request
from kafkapy.protocol.encode import encode_response
from kafkapy.protocol.error_responses import error_response
from kafkapy.protocol.errors import ErrorCode, KafkaError, RemoteProtocolError
from kafkapy.security.acl import AclOperation, ResourceType
from kafkapy.security.principal import KafkaPrincipal
from kafkapy.security.principal_serde import PrincipalSerdeError, deserialize_principal, serialize_principal

log = logging.getLogger(__name__)

ENVELOPE_VERSION = 0
_SIZE_PREFIX = 4


def _host_bytes(host: str | None) -> bytes:
    try:
        return ipaddress.ip_address(host or "").packed
    except ValueError:
        return b""


def wrap(body: Any, version: int, principal: KafkaPrincipal, host: str | None, client_id: str) -> Any:
    """The EnvelopeRequest forwarding ``body`` (at ``version``) for ``principal`` at ``host``."""
    inner = encode_request(body, version, 0, client_id)[_SIZE_PREFIX:]
    return m.EnvelopeRequest(request_data=inner, request_principal=serialize_principal(principal),
                             client_host_address=_host_bytes(host))


def unwrap(body: Any, version: int, envelope_response: Any) -> Any:
    """The forwarded request's response out of the EnvelopeResponse (KafkaError for an envelope
    error)."""
    code = envelope_response.error_code
    if code != ErrorCode.NONE or envelope_response.response_data is None:
        raise KafkaError(ErrorCode(code or ErrorCode.UNKNOWN_SERVER_ERROR), "the controller refused the envelope")
    return decode_response(body.API_KEY, version, bytes(envelope_response.response_data))


Handler = Callable[[BrokerContext, Request], Awaitable[object]]


def _envelope_error(code: int) -> Any:
    return m.EnvelopeResponse(response_data=None, error_code=int(code))


async def serve(ctx: BrokerContext, envelope: Request, sender: KafkaPrincipal, sender_address: Any,
                versions: ApiVersionsTable, handlers: dict[int, Handler]) -> Any:
    """The controller's answer to an EnvelopeRequest from ``sender``: the inner request run by
    ``handlers`` (the forwarded APIs) as the principal the envelope names."""
    request_principal.set(sender)
    client_address.set(sender_address)
    if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER):
        log.info("Envelope from %s refused: no CLUSTER_ACTION on the cluster", sender)
        return _envelope_error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    body = envelope.body
    try:
        if body.request_principal is None:
            raise PrincipalSerdeError("no principal")
        principal = deserialize_principal(body.request_principal)
        inner = decode_request(bytearray(body.request_data), versions)
        host = str(ipaddress.ip_address(bytes(body.client_host_address))) if body.client_host_address else None
    except (PrincipalSerdeError, RemoteProtocolError, ValueError) as exc:
        log.info("Envelope from %s refused: %s", sender, exc)
        return _envelope_error(ErrorCode.INVALID_REQUEST)
    handler = handlers.get(inner.api_key)
    if handler is None:
        return _envelope_error(ErrorCode.INVALID_REQUEST)
    request_principal.set(principal)
    client_address.set((host, 0) if host else None)
    try:
        response = await authorized_call(ctx, inner, lambda r: handler(ctx, r))
    except KafkaError as exc:
        if exc.code == ErrorCode.NOT_CONTROLLER:
            return _envelope_error(exc.code)
        response = error_response(inner, exc.code, exc.message)
        if response is None:
            return _envelope_error(exc.code)
    frame = encode_response(inner, response)
    return m.EnvelopeResponse(response_data=frame[_SIZE_PREFIX:], error_code=0)


__all__ = ["ENVELOPE_VERSION", "serve", "unwrap", "wrap"]
