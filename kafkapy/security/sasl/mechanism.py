"""What every server-side SASL mechanism offers the exchange, and the two ways it can fail."""

from __future__ import annotations

from typing import Protocol


class SaslAuthenticationError(Exception):
    """The client failed to authenticate and may be told why: the message goes to the client
    (Kafka's SaslAuthenticationException)."""


class SaslError(Exception):
    """The exchange failed in a way the client is told only generically (Kafka's SaslException:
    its message may reveal, e.g., whether a user exists). The message is for the log."""


class SaslServerMechanism(Protocol):
    """One authentication attempt with one mechanism, driven token by token."""

    @property
    def complete(self) -> bool:
        """True once the client has authenticated."""
        ...

    @property
    def authorization_id(self) -> str:
        """The authenticated user's name (valid once complete)."""
        ...

    @property
    def credential_expires_at_ms(self) -> int | None:
        """When the presented credential stops being valid (wall-clock ms), for mechanisms whose
        credentials expire (OAUTHBEARER tokens); None otherwise."""
        ...

    def evaluate(self, token: bytes, now_ms: int) -> bytes:
        """The response to the client's ``token``; raises SaslAuthenticationError or SaslError."""
        ...
