"""The pre-auth campaign's oracle: did a connection log in with a real user's credentials, and
was any request other than ApiVersions/SaslHandshake/SaslAuthenticate served before it did?

It reads the frames a worker sent and the answers it got, byte by byte, with its own parsers (not
the node's): a PLAIN token is valid when it names a user with that user's password (and an
authorization id that is empty or the same user); a SCRAM client-final is valid when its proof
verifies, with the user's password, over the messages actually exchanged on the connection; an
OAUTHBEARER token is valid when it is an unsecured JWS (``alg: none``, no signature) with a
non-empty ``sub`` and an ``exp`` in the future, as Kafka's default unsecured validator demands
(anyone may claim a name with such a token: that is the mechanism, not a finding).

Before a valid login, the only answer a non-SASL request may get is Kafka's refusal (a SASL
connection in its authenticate state answers it with ILLEGAL_SASL_STATE, then closes): the oracle
rebuilds that error response from the request and wants the same bytes. Anything else is a
finding.
"""

from __future__ import annotations

import base64
import json
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field

from kafkapy.protocol import ErrorCode
from kafkapy.protocol.apis import ApiKey, ApiVersionsTable, request_class
from kafkapy.protocol.decode import decode_request
from kafkapy.protocol.encode import encode_response
from kafkapy.protocol.error_responses import error_response
from kafkapy.testing.fuzz.preauth_frames import (
    API_VERSIONS,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    scram_proof,
)

_EVERYTHING = ApiVersionsTable.everything()
_BEARER = re.compile(rb"(?:^|\x01)auth=Bearer +([-_.a-zA-Z0-9]+)(?:\x01|$)")


class _Short(Exception):
    pass


class _Reader:
    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data, self.pos = data, pos

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise _Short()
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def int16(self) -> int:
        return int(struct.unpack(">h", self.take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack(">i", self.take(4))[0])

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 35:
                raise _Short()

    def tagged(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())


def _flexible(api_key: int, version: int) -> bool:
    cls = request_class(api_key)
    return bool(cls is not None and cls.flexible_version_q(version))


def request_head(frame: bytes) -> tuple[int, int, int] | None:
    """(api key, version, correlation id) of a framed request, None when too short."""
    if len(frame) < 12:
        return None
    return struct.unpack_from(">hhi", frame, 4)


def _body(frame: bytes) -> tuple[_Reader, int, int]:
    key, version, _ = struct.unpack_from(">hhi", frame, 4)
    r = _Reader(frame, 12)
    n = r.int16()
    r.take(max(n, 0))
    if _flexible(key, version):
        r.tagged()
    return r, key, version


def handshake_mechanism(frame: bytes) -> str | None:
    try:
        r, _, _ = _body(frame)
        n = r.int16()
        return r.take(n).decode() if n >= 0 else None
    except (_Short, struct.error, UnicodeDecodeError):
        return None


def authenticate_token(frame: bytes) -> bytes | None:
    try:
        r, _, version = _body(frame)
        n = r.uvarint() - 1 if version >= 2 else r.int32()
        return r.take(n) if n >= 0 else None
    except (_Short, struct.error):
        return None


def authenticate_answer(payload: bytes, version: int) -> tuple[int, bytes] | None:
    """(error code, auth bytes) of a SaslAuthenticate response (payload: after the size)."""
    try:
        r = _Reader(payload, 4)
        if version >= 2:
            r.tagged()
        code = r.int16()
        n = r.uvarint() - 1 if version >= 2 else r.int16()
        r.take(max(n, 0))
        n = r.uvarint() - 1 if version >= 2 else r.int32()
        return code, r.take(max(n, 0))
    except (_Short, struct.error):
        return None


def plain_is_valid(token: bytes, users: Mapping[str, str]) -> bool:
    parts = token.split(b"\0")
    if len(parts) != 3:
        return False
    try:
        authzid, user, password = (p.decode() for p in parts)
    except UnicodeDecodeError:
        return False
    return users.get(user) == password and authzid in ("", user)


def scram_attrs(message: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in message.split(",") if "=" in part)


def scram_final_is_valid(mechanism: str, client_first: bytes, server_first: bytes, final: bytes,
                         users: Mapping[str, str]) -> bool:
    """Whether ``final``'s proof shows the password of the user ``client_first`` names."""
    try:
        cf, sf, fin = client_first.decode(), server_first.decode(), final.decode()
        head, _, bare = cf.partition(",")  # gs2: "n", then "a=..." or "", then the bare message
        authz, _, bare = bare.partition(",")
        name = scram_attrs(bare)["n"].replace("=2C", ",").replace("=3D", "=")
        if authz not in ("", f"a={scram_attrs(bare)['n']}"):
            return False
        password = users.get(name)
        attrs = scram_attrs(sf)
        salt, iterations = base64.b64decode(attrs["s"]), int(attrs["i"])
        without_proof, _, proof_b64 = fin.rpartition(",p=")
        proof = base64.b64decode(proof_b64, validate=True)
    except (UnicodeDecodeError, KeyError, ValueError):
        return False
    if password is None or not without_proof or not 1 <= iterations <= 100_000:
        return False
    return scram_proof(mechanism, password, salt, iterations, f"{bare},{sf},{without_proof}") == proof


def _b64url_json(segment: bytes) -> object:
    return json.loads(base64.urlsafe_b64decode(segment + b"=" * (-len(segment) % 4)))


def oauth_is_valid(message: bytes, now_s: float) -> bool:
    found = _BEARER.search(message)
    if found is None or not message.startswith((b"n,", b"y,")):
        return False
    parts = found.group(1).split(b".")
    try:
        header, claims = _b64url_json(parts[0]), _b64url_json(parts[1])
    except (ValueError, IndexError):
        return False
    if len(parts) != 3 or parts[2] or not isinstance(header, dict) or not isinstance(claims, dict):
        return False
    sub, exp, iat = claims.get("sub"), claims.get("exp"), claims.get("iat")
    authzid = message.split(b",")[1]
    return (header.get("alg") == "none" and isinstance(sub, str) and bool(sub.strip())
            and isinstance(exp, (int, float)) and not isinstance(exp, bool) and exp > now_s
            and (iat is None or (isinstance(iat, (int, float)) and iat < exp))
            and authzid in (b"", b"a=" + sub.encode()))


def refusal_bytes(frame: bytes) -> bytes | None:
    """Kafka's answer to a non-SASL request during SASL authentication (ILLEGAL_SASL_STATE), as
    a frame; None when the request cannot be decoded or its response has no place for an error."""
    try:
        request = decode_request(bytearray(frame[4:]), _EVERYTHING)
        name = ApiKey(request.api_key).name
        body = error_response(request, ErrorCode.ILLEGAL_SASL_STATE,
                              f"Unexpected Kafka request of type {name} during SASL authentication.")
        return encode_response(request, body) if body is not None else None
    except Exception:
        return None


@dataclass
class ConnectionJudge:
    """Follows one connection: what was sent (by correlation id), what came back; says whether a
    real user logged in and records every answer that should not have been given."""

    users: Mapping[str, str]
    now_s: float
    sasl: bool = True  # False on an SSL listener: the TLS handshake is the whole authentication
    sent: dict[int, bytes] = field(default_factory=dict)
    outgoing: bytearray = field(default_factory=bytearray)
    mechanism: str | None = None
    client_first: bytes | None = None
    server_first: bytes | None = None
    logged_in: bool = False
    findings: list[str] = field(default_factory=list)
    outcomes: list[str] = field(default_factory=list)

    def on_send(self, data: bytes) -> None:
        """Note what was sent, cut into frames as the node cuts the stream (a size prefix that
        lies makes the node read the rest as another frame)."""
        self.outgoing += data
        while len(self.outgoing) >= 4:
            (size,) = struct.unpack_from(">i", self.outgoing)
            if size < 0 or len(self.outgoing) < 4 + size:
                return
            frame = bytes(self.outgoing[:4 + size])
            del self.outgoing[:4 + size]
            head = request_head(frame)
            if head is not None:
                self.sent[head[2]] = frame

    def on_answer(self, payload: bytes) -> str:
        """Judge one response (its bytes after the size prefix); returns its outcome."""
        outcome = self._judge(payload)
        self.outcomes.append(outcome)
        return outcome

    def _judge(self, payload: bytes) -> str:
        if len(payload) < 4:
            self.findings.append(f"an answer of {len(payload)} bytes: {payload.hex()}")
            return "finding"
        (cid,) = struct.unpack_from(">i", payload)
        frame = self.sent.get(cid)
        if frame is None:
            self.findings.append(f"an answer to correlation id {cid}, which no request had: "
                                 f"{payload[:64].hex()}")
            return "finding"
        key, version, _ = struct.unpack_from(">hhi", frame, 4)
        if key == API_VERSIONS:
            return "api-versions"
        if key == SASL_HANDSHAKE:
            if len(payload) >= 6 and struct.unpack_from(">h", payload, 4)[0] == 0:
                self.mechanism = handshake_mechanism(frame)
                self.client_first = self.server_first = None
            return "handshake"
        if key == SASL_AUTHENTICATE:
            self._on_authenticated_step(frame, version, payload)
            return "authenticate"
        if self.logged_in or not self.sasl:
            return "served-after-login"
        if payload == (refusal_bytes(frame) or b"")[4:]:
            return "refused-with-error"
        self.findings.append(f"request api key {key} v{version} (correlation id {cid}) answered "
                             f"without a login: sent {frame[:200].hex()} got {payload[:200].hex()}")
        return "finding"

    def _on_authenticated_step(self, frame: bytes, version: int, payload: bytes) -> None:
        answer, token = authenticate_answer(payload, version), authenticate_token(frame)
        if answer is None or answer[0] != 0 or token is None or self.mechanism is None:
            return
        mech = self.mechanism
        if mech == "PLAIN":
            self.logged_in |= plain_is_valid(token, self.users)
        elif mech == "OAUTHBEARER":
            self.logged_in |= oauth_is_valid(token, self.now_s)
        elif mech.startswith("SCRAM-SHA-"):
            if self.client_first is None:
                self.client_first, self.server_first = token, answer[1]
            elif self.server_first is not None:
                self.logged_in |= scram_final_is_valid(mech, self.client_first, self.server_first,
                                                       token, self.users)
                self.server_first = None

