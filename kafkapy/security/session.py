"""The security state of one connection, filled in by the network edge as it authenticates."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kafkapy.security.principal import ANONYMOUS, KafkaPrincipal


@dataclass(slots=True)
class Session:
    """Who is on one connection and how they proved it.

    ``security_protocol`` is the listener's (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL).
    ``authenticated`` is False only on a SASL listener before the SASL exchange succeeds: until
    then the connection may send ApiVersions and the SASL requests and nothing else, as in Kafka.
    ``principal`` is ANONYMOUS until TLS client authentication or SASL names someone.
    ``expires_at_ms`` is the monotonic deadline after which a re-authentication is due (KIP-368),
    None when ``connections.max.reauth.ms`` is 0 or the mechanism sets no lifetime.
    """

    security_protocol: str = "PLAINTEXT"
    principal: KafkaPrincipal = ANONYMOUS
    authenticated: bool = True
    sasl_mechanism: str | None = None
    expires_at_ms: int | None = None
    # The peer's TLS certificate as ssl.SSLSocket.getpeercert() gives it, when one was presented.
    peer_certificate: dict[str, Any] | None = None

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")
