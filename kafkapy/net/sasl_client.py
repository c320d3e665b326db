"""The client side of SASL on a Kafka connection: SaslHandshake v1, then SaslAuthenticate rounds
until the mechanism is done (the tokens come from ``security.sasl.client_mechanisms``).

The TLS part calls :func:`authenticate` from ``KafkaClient.connect`` when its ClientSecurity
carries credentials; tests and tools may call it on any connected, negotiated client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkapy.protocol import ApiKey, ErrorCode
from kafkapy.protocol import messages as m
from kafkapy.security.sasl.client_mechanisms import client_mechanism
from kafkapy.security.sasl.mechanism import SaslError
from kafkapy.security.sasl_credentials import SaslCredentials

if TYPE_CHECKING:
    from kafkapy.net.client import KafkaClient

__all__ = ["SaslAuthenticationFailed", "authenticate"]


class SaslAuthenticationFailed(Exception):
    """The server refused the credentials (or the mechanism); ``error_code`` is Kafka's."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


async def authenticate(client: KafkaClient, credentials: SaslCredentials, *, timeout: float) -> int:
    """Authenticate ``client`` (connected, versions negotiated) with ``credentials``; returns the
    session lifetime the server gave (ms, 0: none; KIP-368). Raises SaslAuthenticationFailed."""
    mechanism = client_mechanism(credentials)
    handshake = await client.send(m.SaslHandshakeRequest(mechanism=credentials.mechanism),
                                  version=min(1, client.version_for(ApiKey.SASL_HANDSHAKE)), timeout=timeout)
    if handshake.error_code != ErrorCode.NONE:
        raise SaslAuthenticationFailed(handshake.error_code,
                                       f"SASL handshake for {credentials.mechanism} failed: error "
                                       f"{ErrorCode(handshake.error_code).name} (server offers "
                                       f"{', '.join(handshake.mechanisms or [])})")
    token: bytes | None = mechanism.first()
    lifetime = 0
    while token is not None:
        response = await client.send(m.SaslAuthenticateRequest(auth_bytes=token), timeout=timeout)
        if response.error_code != ErrorCode.NONE:
            raise SaslAuthenticationFailed(response.error_code, response.error_message or
                                           ErrorCode(response.error_code).name)
        lifetime = getattr(response, "session_lifetime_ms", 0) or 0
        try:
            token = mechanism.respond(bytes(response.auth_bytes or b""))
        except SaslError as exc:
            raise SaslAuthenticationFailed(ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc)) from None
    return lifetime
