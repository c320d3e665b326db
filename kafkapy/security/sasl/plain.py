"""SASL/PLAIN (RFC 4616) on the server, as Kafka's PlainSaslServer: one message
``authzid NUL authcid NUL passwd`` checked against static users."""

from __future__ import annotations

import hmac
from collections.abc import Callable

from kafkapy.security.sasl.mechanism import SaslAuthenticationError, SaslError

PLAIN = "PLAIN"


class PlainServer:
    """Checks one PLAIN message; ``check(username, password)`` says whether it is valid."""

    def __init__(self, check: Callable[[str, str], bool]) -> None:
        self._check = check
        self._user: str | None = None

    @property
    def complete(self) -> bool:
        return self._user is not None

    @property
    def authorization_id(self) -> str:
        if self._user is None:
            raise SaslError("Authentication exchange has not completed")
        return self._user

    @property
    def credential_expires_at_ms(self) -> int | None:
        return None

    def evaluate(self, token: bytes, now_ms: int) -> bytes:
        if self._user is not None:
            raise SaslError("Authentication exchange has already completed")
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslError("Invalid SASL/PLAIN response: not UTF-8") from None
        parts = text.split("\0")
        if len(parts) != 3:
            raise SaslError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        authzid, username, password = parts
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        if not self._check(username, password):
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationError("Authentication failed: Client requested an authorization id "
                                          "that is different from username")
        self._user = username
        return b""


def static_users(users: dict[str, str]) -> Callable[[str, str], bool]:
    """A PLAIN check against JAAS ``user_<name>`` entries, in constant time per password."""

    def check(username: str, password: str) -> bool:
        expected = users.get(username)
        return expected is not None and hmac.compare_digest(expected.encode(), password.encode())

    return check
