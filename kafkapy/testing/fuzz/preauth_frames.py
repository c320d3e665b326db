"""The pre-authentication conversations of a pre-auth campaign, deterministic from (seed, index).

Conversation ``i`` of campaign ``seed`` is what a client says before (and instead of) logging in:
an optional ApiVersions, a SaslHandshake (v0, v1 or a made-up version; real and made-up
mechanisms), SaslAuthenticate requests (v0-v2) with PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER
tokens, raw v0-style tokens without a Kafka header, and then (or in between) any other request
from the fuzzer's seed corpus. Any step may be mutated by the fuzzer's own :class:`Mutator`.

A SCRAM client-final message depends on the node's server-first message, so it is a placeholder
(:attr:`Step.scram_final`) that the worker fills in with :func:`scram_client_final` at run time.
Correlation ids are ``index * 16 + step``: every answer names its conversation and step.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import random
import struct
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kafkapy.testing.fuzz import schema
from kafkapy.testing.fuzz.mutators import Mutator
from kafkapy.testing.fuzz.seeds import Seed

SASL_HANDSHAKE, SASL_AUTHENTICATE, API_VERSIONS = 17, 36, 18
SASL_KEYS = (SASL_HANDSHAKE, SASL_AUTHENTICATE, API_VERSIONS)
REAL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
MADE_UP_MECHANISMS = ("GSSAPI", "", "plain", "SCRAM-SHA-1", "X" * 300, "PLAIN\0", "OAUTHBEARER ",
                      "SCRAM-SHA-256-PLUS", "\u00e9", "DIGEST-MD5")
STEPS_PER_CONVERSATION = 16  # correlation id = index * 16 + step


@dataclass
class Step:
    """One frame of a conversation. ``frame`` is None for a SCRAM client-final to be computed;
    ``raw`` frames carry a size prefix and a bare token (no Kafka header)."""

    frame: bytes | None
    mutate: bool = False
    raw: bool = False
    scram_final: str = ""  # "real" or "wrong-password" when frame is None
    version: int = 1  # of the SaslAuthenticate a SCRAM final goes in


@dataclass
class Conversation:
    """What one connection says; ``control`` conversations are real, unmutated logins followed
    by a Metadata request, which the node must answer (they show the oracle works)."""

    index: int
    mechanism: str
    steps: list[Step] = field(default_factory=list)
    burst: bool = False  # send every step at once instead of waiting for each answer
    control: bool = False
    user: str = ""
    password: str = ""

    def correlation_id(self, step: int) -> int:
        return (self.index * STEPS_PER_CONVERSATION + step) & 0x7FFFFFFF


def authenticate_frame(version: int, token: bytes, correlation_id: int) -> bytes:
    """SaslAuthenticate v0-v2 (v2 is flexible: compact bytes and tagged fields)."""
    if version >= 2:
        body = schema.uvarint(len(token) + 1) + token + b"\x00"
    else:
        body = struct.pack(">i", len(token)) + token
    return schema.frame(SASL_AUTHENTICATE, version, body, correlation_id=correlation_id)


def handshake_frame(version: int, mechanism: str, correlation_id: int) -> bytes:
    raw = mechanism.encode()
    return schema.frame(SASL_HANDSHAKE, version, struct.pack(">h", len(raw)) + raw,
                        correlation_id=correlation_id)


def api_versions_frame(version: int, correlation_id: int) -> bytes:
    body = b""
    if version >= 3:
        body = b"\x0dfuzz-preauth\x021\x00"  # compact strings: software name and version
    return schema.frame(API_VERSIONS, version, body, correlation_id=correlation_id)


def raw_frame(token: bytes) -> bytes:
    """A token as SaslHandshake v0 clients (and pre-0.10 GSSAPI) send it: size and bytes only."""
    return struct.pack(">i", len(token)) + token


# -- tokens ----------------------------------------------------------------------------------------

def plain_token(rng: random.Random, users: Mapping[str, str]) -> bytes:
    user, password = rng.choice(sorted(users.items()))
    other = rng.choice(sorted(users))
    return rng.choice((
        f"\0{user}\0{password}", f"{user}\0{user}\0{password}", f"{other}\0{user}\0{password}",
        f"admin\0{user}\0{password}", f"\0{user}\0{password}x", f"\0{user}\0", f"\0\0{password}",
        f"\0{user}x\0{password}", f"\0{user.upper()}\0{password}", f"\0{user}\0{password}\0",
        f"\0{user}\0{password[:-1]}", f"{user}\0{password}", "\0\0", "", "\0" * 3,
        f"\0{user}\0{password}\0extra", f"\0{user}\0{password}".replace("\0", "\x01"),
    )).encode() + (rng.randbytes(rng.randrange(1, 40)) if rng.random() < 0.05 else b"")


def _saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def scram_client_first(rng: random.Random, users: Mapping[str, str]) -> tuple[bytes, str, str]:
    """(client-first message, user, password) - mostly a real user's, sometimes a variant."""
    user, password = rng.choice(sorted(users.items()))
    nonce = base64.b64encode(rng.randbytes(18)).decode()
    gs2 = rng.choice(("n,,", "n,,", "n,,", f"n,a={_saslname(user)},", "y,,", "n,a=admin,",
                      "p=tls-server-end-point,,", "n,a=,", "x,,"))
    name = rng.choice((_saslname(user), _saslname(user), _saslname(user), "nobody", "",
                       _saslname(user) + "=2", user.upper()))
    extensions = rng.choice(("", "", "", ",tokenauth=true", ",m=ext", ",e=x"))
    message = f"{gs2}n={name}{extensions},r={nonce}"
    if rng.random() < 0.05:
        message = message.replace(",r=", ",r=" if rng.random() < 0.5 else ",q=")[:rng.randrange(1, len(message))]
    return message.encode(), user, password


def scram_client_final(mechanism: str, client_first: bytes, server_first: bytes,
                       password: str) -> bytes | None:
    """The client-final message (RFC 5802) answering ``server_first``; None when the server-first
    message is not one (an error, say)."""
    try:
        cf = client_first.decode()
        gs2, bare = _split_gs2(cf)
        attrs = dict(part.split("=", 1) for part in server_first.decode().split(","))
        salt, iterations, nonce = base64.b64decode(attrs["s"]), int(attrs["i"]), attrs["r"]
    except (ValueError, KeyError, UnicodeDecodeError):
        return None
    if not 1 <= iterations <= 100_000:
        return None
    without_proof = f"c={base64.b64encode(gs2.encode()).decode()},r={nonce}"
    proof = scram_proof(mechanism, password, salt, iterations,
                        f"{bare},{server_first.decode()},{without_proof}")
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def _split_gs2(client_first: str) -> tuple[str, str]:
    """(gs2 header with its trailing comma, client-first-bare)."""
    first = client_first.index(",")
    second = client_first.index(",", first + 1)
    return client_first[:second + 1], client_first[second + 1:]


_SALTED: dict[tuple[str, str, bytes, int], bytes] = {}


def scram_proof(mechanism: str, password: str, salt: bytes, iterations: int, auth_message: str) -> bytes:
    digest = "sha256" if mechanism == "SCRAM-SHA-256" else "sha512"
    key = (digest, password, salt, iterations)
    salted = _SALTED.get(key)
    if salted is None:
        salted = _SALTED[key] = hashlib.pbkdf2_hmac(digest, password.encode(), salt, iterations)
        if len(_SALTED) > 4096:
            _SALTED.clear()
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    stored = hashlib.new(digest, client_key).digest()
    signature = hmac.new(stored, auth_message.encode(), digest).digest()
    return bytes(a ^ b for a, b in zip(client_key, signature))


def _b64url(data: object) -> str:
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def unsecured_jwt(claims: Mapping[str, object], header: Mapping[str, object] | None = None) -> str:
    return f"{_b64url(dict(header or {'alg': 'none'}))}.{_b64url(dict(claims))}."


def oauth_message(token: str, authzid: str = "", extensions: str = "") -> bytes:
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01{extensions}\x01".encode()


def oauth_token(rng: random.Random, users: Mapping[str, str], now_s: float) -> bytes:
    user = rng.choice(sorted(users))
    exp = now_s + 3600
    good = {"sub": user, "exp": exp, "iat": now_s - 1}
    token = rng.choice((
        unsecured_jwt(good), unsecured_jwt(good),
        unsecured_jwt(good, {"alg": "HS256"}), unsecured_jwt(good, {"alg": "None"}),
        unsecured_jwt(good, {}), unsecured_jwt({"sub": user}), unsecured_jwt({**good, "exp": now_s - 60}),
        unsecured_jwt({**good, "exp": str(exp)}), unsecured_jwt({**good, "sub": ""}),
        unsecured_jwt({**good, "sub": 7}), unsecured_jwt({"exp": exp}),
        unsecured_jwt({**good, "iat": exp + 10}), unsecured_jwt(good)[:-1] + "c2ln",
        unsecured_jwt(good).replace(".", "", 1), "a.b.", "..", ".", "", "e30.e30.",
        _b64url(b"\xff\xfe") + "." + _b64url(b"[1,2]") + ".",
        unsecured_jwt({**good, "scope": 5}), unsecured_jwt(good) + "." + "x",
    ))
    authzid = rng.choice(("", "", "", user, "admin", "nobody"))
    extensions = rng.choice(("", "", "", "k=v\x01", "auth=x\x01", "=\x01", "k\x01"))
    message = oauth_message(token, authzid, extensions)
    if rng.random() < 0.1:
        message = rng.choice((b"\x01", b"n,,\x01\x01", message.replace(b"Bearer", b"bearer"),
                              message.replace(b"\x01", b"", 1), message[:rng.randrange(len(message))]))
    return message


# -- conversations ---------------------------------------------------------------------------------

class ConversationMaker:
    """Makes conversation ``index`` of campaign ``seed``; ``others`` are the non-SASL seeds
    (Metadata, Produce, ...) a conversation may send before it has logged in."""

    def __init__(self, seed: int, users: Mapping[str, str], others: Sequence[Seed], *,
                 mutate_p: float = 0.3, control_p: float = 0.06,
                 clock: object = time.time) -> None:
        if not users or not others:
            raise ValueError("a pre-auth campaign needs users and other requests")
        self.seed, self.users, self.others = seed, dict(users), list(others)
        self.mutate_p, self.control_p = mutate_p, control_p
        self.clock = clock
        self.mutator = Mutator(self.others, seed)
        self.metadata = [s for s in self.others if s.api_key == 3] or self.others

    def make(self, index: int) -> Conversation:
        rng = random.Random(f"{self.seed}:preauth:{index}")
        if rng.random() < self.control_p:
            return self._control(rng, index)
        roll = rng.random()
        mechanism = (rng.choice(REAL_MECHANISMS) if roll < 0.88 else rng.choice(MADE_UP_MECHANISMS))
        conv = Conversation(index, mechanism, burst=rng.random() < 0.2)
        cid = conv.correlation_id
        steps = conv.steps
        if rng.random() < 0.5:
            steps.append(Step(api_versions_frame(rng.choice((0, 1, 2, 3, 3, 4)), cid(len(steps)))))
        if rng.random() < 0.04:
            steps.append(self._other(rng, cid(len(steps))))  # before the handshake: never answered
        handshake_version = rng.choices((1, 0, 2, -1), (85, 6, 4, 5))[0]
        if handshake_version >= 0:
            steps.append(Step(handshake_frame(handshake_version, mechanism, cid(len(steps)))))
        if handshake_version in (0, -1):  # the v0 flow: raw tokens, no Kafka header
            for _ in range(rng.randint(1, 3)):
                steps.append(Step(raw_frame(self._token(rng, mechanism)), raw=True))
        else:
            version = rng.choice((0, 1, 2, 2))
            for _ in range(rng.choices((1, 2, 3), (70, 25, 5))[0]):
                steps.append(Step(authenticate_frame(version, self._token(rng, mechanism), cid(len(steps)))))
                if mechanism.startswith("SCRAM-") and rng.random() < 0.85:
                    kind = "real" if rng.random() < 0.8 else "wrong-password"
                    steps.append(Step(None, scram_final=kind, version=version))
        for _ in range(rng.choices((0, 1, 2), (30, 60, 10))[0]):
            steps.append(self._other(rng, cid(len(steps))))
        for step in steps:
            step.mutate = rng.random() < self.mutate_p
        return conv

    def _control(self, rng: random.Random, index: int) -> Conversation:
        mechanism = rng.choice(REAL_MECHANISMS)
        user, password = rng.choice(sorted(self.users.items()))
        conv = Conversation(index, mechanism, control=True, user=user, password=password)
        cid, version = conv.correlation_id, rng.choice((0, 1, 2))
        conv.steps.append(Step(api_versions_frame(3, cid(0))))
        conv.steps.append(Step(handshake_frame(1, mechanism, cid(1))))
        if mechanism == "PLAIN":
            token = f"\0{user}\0{password}".encode()
        elif mechanism == "OAUTHBEARER":
            now = float(self.clock())  # type: ignore[operator]
            token = oauth_message(unsecured_jwt({"sub": user, "exp": now + 3600, "iat": now - 1}))
        else:
            nonce = base64.b64encode(rng.randbytes(18)).decode()
            token = f"n,,n={_saslname(user)},r={nonce}".encode()
        conv.steps.append(Step(authenticate_frame(version, token, cid(2))))
        if mechanism.startswith("SCRAM-"):
            conv.steps.append(Step(None, scram_final="real", version=version))
        conv.steps.append(self._other(rng, cid(len(conv.steps)), metadata=True))
        return conv

    def _token(self, rng: random.Random, mechanism: str) -> bytes:
        if rng.random() < 0.08:
            return rng.randbytes(rng.randrange(0, 200))
        if mechanism == "PLAIN":
            return plain_token(rng, self.users)
        if mechanism.startswith("SCRAM-"):
            return scram_client_first(rng, self.users)[0]
        if mechanism == "OAUTHBEARER":
            return oauth_token(rng, self.users, float(self.clock()))  # type: ignore[operator]
        return rng.choice((plain_token(rng, self.users), scram_client_first(rng, self.users)[0],
                           b"\x60\x82\x01\x00" + bytes(32)))

    def _other(self, rng: random.Random, correlation_id: int, metadata: bool = False) -> Step:
        seed = rng.choice(self.metadata if metadata or rng.random() < 0.5 else self.others)
        frame = bytearray(seed.frame)
        struct.pack_into(">i", frame, 8, correlation_id)
        return Step(bytes(frame))

    def mutated(self, frame: bytes, correlation_id: int) -> tuple[bytes, tuple[str, ...], bool]:
        """``frame`` mutated (its correlation id kept): the bytes, the mutations, and whether its
        size prefix still tells the truth."""
        mutant = self.mutator.mutate(frame, correlation_id, salt="preauth")
        return mutant.frame, mutant.kinds, mutant.sized


def mutate_raw(rng: random.Random, data: bytes) -> bytes:
    """A raw token's bytes flipped, cut or extended (its size prefix fixed)."""
    token = bytearray(data[4:])
    for _ in range(rng.randint(1, 3)):
        roll = rng.random()
        if token and roll < 0.5:
            token[rng.randrange(len(token))] ^= 1 << rng.randrange(8)
        elif roll < 0.75:
            del token[rng.randrange(len(token) + 1):]
        else:
            token += rng.randbytes(rng.randrange(1, 32))
    return raw_frame(bytes(token))
