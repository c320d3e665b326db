"""The client side of each SASL mechanism, sans-I/O: the tokens a client sends, given the server's
challenges. ``net.sasl_client`` carries them in SaslAuthenticate requests."""

from __future__ import annotations

from typing import Protocol

from scramp import ScramClient, ScramException

from kafkapy.security.sasl.mechanism import SaslError
from kafkapy.security.sasl.oauthbearer import client_initial_response
from kafkapy.security.sasl.scram import SCRAM_MECHANISMS
from kafkapy.security.sasl_credentials import SaslCredentials


class SaslClientMechanism(Protocol):
    def first(self) -> bytes:
        """The client's first token."""
        ...

    def respond(self, challenge: bytes) -> bytes | None:
        """The answer to a server challenge; None when the exchange is over for the client."""
        ...


class _PlainClient:
    def __init__(self, username: str, password: str) -> None:
        self._message = f"\0{username}\0{password}".encode()

    def first(self) -> bytes:
        return self._message

    def respond(self, challenge: bytes) -> bytes | None:
        return None


class _ScramClient:
    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self._client = ScramClient([mechanism], username, password)
        self._step = 0

    def first(self) -> bytes:
        return str(self._client.get_client_first()).encode()

    def respond(self, challenge: bytes) -> bytes | None:
        try:
            if self._step == 0:
                self._step = 1
                self._client.set_server_first(challenge.decode())
                return str(self._client.get_client_final()).encode()
            if self._step == 1:
                self._step = 2
                # Checks the server's signature: the server proved it knows our credential.
                self._client.set_server_final(challenge.decode())
                return None
        except (ScramException, UnicodeDecodeError) as exc:
            raise SaslError(f"SCRAM exchange failed: {exc}") from None
        raise SaslError("SCRAM exchange has already completed")


class _OAuthBearerClient:
    def __init__(self, token: str, extensions: tuple[tuple[str, str], ...]) -> None:
        self._message = client_initial_response(token, extensions=extensions)

    def first(self) -> bytes:
        return self._message

    def respond(self, challenge: bytes) -> bytes | None:
        # A non-empty challenge is the server's error (RFC 7628): acknowledge it so it fails.
        return b"\x01" if challenge else None


def client_mechanism(credentials: SaslCredentials) -> SaslClientMechanism:
    """The client half of ``credentials.mechanism``; ValueError when it lacks what it needs."""
    mechanism = credentials.mechanism
    if mechanism == "PLAIN" or mechanism in SCRAM_MECHANISMS:
        if credentials.username is None or credentials.password is None:
            raise ValueError(f"SASL {mechanism} needs a username and a password")
        if mechanism == "PLAIN":
            return _PlainClient(credentials.username, credentials.password)
        return _ScramClient(mechanism, credentials.username, credentials.password)
    if mechanism == "OAUTHBEARER":
        if credentials.token is None:
            raise ValueError("SASL OAUTHBEARER needs a token")
        return _OAuthBearerClient(credentials.token, credentials.extensions)
    raise ValueError(f"SASL mechanism {mechanism} is not supported by kafkapy's client")
