"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802/7677) on the server, with ``scramp`` doing the
cryptography, and the stored credential Kafka keeps per user and mechanism.

Kafka stores, per user and mechanism, the salt, the iteration count, the StoredKey and the ServerKey
(never the password). AlterUserScramCredentials carries the *salted* password, from which both keys
are derived here.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from scramp import ScramException, ScramMechanism
from scramp.core import Gs2Header

from kafkapy.security.sasl.mechanism import SaslError

# Kafka's ScramMechanism enum: the mechanism's type byte in the metadata log and the API.
SCRAM_MECHANISMS: Final = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
MECHANISM_NAMES: Final = {v: k for k, v in SCRAM_MECHANISMS.items()}
_HASHES: Final = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# Kafka's bounds for both mechanisms.
MIN_ITERATIONS: Final = 4096
MAX_ITERATIONS: Final = 16384


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What a server needs to check a SCRAM client, for one user and mechanism."""

    salt: bytes
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
    iterations: int

    @classmethod
    def from_salted_password(cls, mechanism: str, salted_password: bytes, salt: bytes,
                             iterations: int) -> ScramCredential:
        """The credential from AlterUserScramCredentials' salted password (RFC 5802's
        ClientKey/StoredKey/ServerKey)."""
        digest = _HASHES[mechanism]
        client_key = hmac.new(salted_password, b"Client Key", digest).digest()
        stored_key = hashlib.new(digest, client_key).digest()
        server_key = hmac.new(salted_password, b"Server Key", digest).digest()
        return cls(salt, stored_key, server_key, iterations)

    @classmethod
    def from_password(cls, mechanism: str, password: str, *, iterations: int = MIN_ITERATIONS,
                      salt: bytes | None = None) -> ScramCredential:
        """The credential for ``password`` (a fresh random salt unless one is given), as
        kafka-storage's ``--add-scram`` makes it."""
        salt_out, stored, server, count = ScramMechanism(mechanism).make_auth_info(
            password, iteration_count=iterations, salt=salt)
        return cls(salt_out, stored, server, count)


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) of RFC 5802: what a client sends in AlterUserScramCredentials."""
    return hashlib.pbkdf2_hmac(_HASHES[mechanism], password.encode(), salt, iterations)


# A client-first message that names an authorization id: "n,a=<authzid>,<bare>" (RFC 5802 §7).
_WITH_AUTHZID = re.compile(r"([ny]),a=([^,]*),(.*)\Z", re.S)


class _Gs2HeaderWithAuthzid(Gs2Header):
    """The client's GS2 header as it sent it, authorization id included: the channel binding of
    its final message (c=) is this header's base64. scramp refuses any authzid, so it gets the
    message without one and this header to check the binding against."""

    def __init__(self, base: Gs2Header, text: str) -> None:
        super().__init__(base.gs2_char, base.cb_name)
        self._text = text

    def __str__(self) -> str:
        return self._text


def _saslname(value: str) -> str:
    return value.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """One SCRAM exchange: client-first → server-first, client-final → server-final.

    ``lookup(username)`` gives the user's credential for this mechanism, or None. Every failure
    (unknown user, wrong proof, malformed message) is a :class:`SaslError`: Kafka tells the client
    only that authentication failed, never which of these it was.
    """

    def __init__(self, mechanism: str, lookup: Callable[[str], ScramCredential | None]) -> None:
        if mechanism not in SCRAM_MECHANISMS:
            raise ValueError(f"not a SCRAM mechanism: {mechanism}")
        self._mechanism = mechanism
        self._lookup = lookup
        self._user: str | None = None
        self._server = ScramMechanism(mechanism).make_server(self._auth_info)
        self._step = 0

    def _auth_info(self, username: str) -> tuple[bytes, bytes, bytes, int]:
        credential = self._lookup(username)
        if credential is None:
            raise SaslError(f"Authentication failed: Invalid user credentials ({username!r} unknown "
                            f"for {self._mechanism})")
        self._user = username
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations

    @property
    def complete(self) -> bool:
        return self._step == 2

    @property
    def authorization_id(self) -> str:
        if self._step != 2 or self._user is None:
            raise SaslError("Authentication exchange has not completed")
        return self._user

    @property
    def credential_expires_at_ms(self) -> int | None:
        return None

    def _accept_prefixed_nonce(self, client_final: str) -> None:
        """Kafka checks only that the client's final nonce *ends with* the one it sent, and
        librdkafka 2.0 sends its own part twice; scramp wants them equal. The proof still covers
        the nonce as the client sent it, so taking that one as expected weakens nothing."""
        sent = str(self._server.nonce)
        nonce = next((attr[2:] for attr in client_final.split(",") if attr.startswith("r=")), None)
        if nonce is not None and nonce != sent and nonce.endswith(sent):
            self._server.nonce = type(self._server.nonce)(nonce)

    @staticmethod
    def _without_authzid(message: str) -> tuple[str | None, str]:
        """A client-first message naming an authorization id as (its GS2 header, the message
        without it); Kafka accepts one only when it is the username itself."""
        match = _WITH_AUTHZID.match(message)
        if match is None:
            return None, message
        flag, authzid, bare = match.groups()
        username = next((_saslname(a[2:]) for a in bare.split(",") if a.startswith("n=")), None)
        if authzid != username:
            raise SaslError("Authentication failed: Client requested an authorization id that is "
                            "different from username")
        return f"{flag},a={authzid},", f"{flag},,{bare}"

    def evaluate(self, token: bytes, now_ms: int) -> bytes:
        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslError("Invalid SCRAM message: not UTF-8") from None
        try:
            if self._step == 0:
                header, message = self._without_authzid(message)
                self._server.set_client_first(message)
                if header is not None:
                    self._server.gs2_header = _Gs2HeaderWithAuthzid(self._server.gs2_header, header)
                self._step = 1
                return str(self._server.get_server_first()).encode()
            if self._step == 1:
                self._accept_prefixed_nonce(message)
                self._server.set_client_final(message)
                final = str(self._server.get_server_final()).encode()
                self._step = 2
                return final
        except ScramException as exc:
            raise SaslError(f"Authentication failed: {exc}") from None
        raise SaslError("Authentication exchange has already completed")
