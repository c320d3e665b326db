"""The client side of SASL on a Kafka connection (SaslHandshake, then SaslAuthenticate rounds).

Placeholder for issue 24's SASL part, which replaces this module: the TLS part calls
:func:`authenticate` from ``KafkaClient.connect`` when its ClientSecurity carries credentials.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkapy.security.sasl_credentials import SaslCredentials

if TYPE_CHECKING:
    from kafkapy.net.client import KafkaClient


async def authenticate(client: KafkaClient, credentials: SaslCredentials, *, timeout: float) -> None:
    """Authenticate ``client`` (connected, versions negotiated) with ``credentials``."""
    raise NotImplementedError(f"SASL {credentials.mechanism} client is not written yet")
