"""SASL/OAUTHBEARER (RFC 7628) on the server, as Kafka's OAuthBearerSaslServer, with its two token
validators: the unsecured-JWS development one (OAuthBearerUnsecuredValidatorCallbackHandler) and
KIP-768's JWT-against-a-JWKS one (OAuthBearerValidatorCallbackHandler).

A rejected token is not a SASL failure straight away: the server answers with an RFC 7628 error
challenge (``{"status":"invalid_token"}``), the client acknowledges it with a lone 0x01, and only
then does the exchange fail, with that JSON as the message.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

import jwt

from kafkapy.security.sasl.mechanism import SaslAuthenticationError, SaslError

OAUTHBEARER: Final = "OAUTHBEARER"
UNSECURED_VALIDATOR_CLASS: Final = (
    "org.apache.kafka.common.security.oauthbearer.internals.unsecured."
    "OAuthBearerUnsecuredValidatorCallbackHandler")
JWKS_VALIDATOR_CLASSES: Final = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler")
_CONTROL_A: Final = b"\x01"
# The scheme is matched regardless of case, as Kafka's OAuthBearerClientInitialResponse does.
_AUTH_VALUE = re.compile(r"(?i:bearer) +([-_.a-zA-Z0-9]+)$")
_EXTENSION_KEY = re.compile(r"[A-Za-z]+$")


#: JWS algorithm prefixes by JWK key type (RFC 7518): what a key of that type can verify.
_ALGORITHM_FAMILIES: dict[str, tuple[str, ...]] = {"RSA": ("RS", "PS"), "EC": ("ES",), "OKP": ("EdDSA",)}


@dataclass(frozen=True, slots=True)
class ValidatedToken:
    """A token that passed validation: who it names, its scope and when it expires."""

    principal: str
    scope: frozenset[str]
    expires_at_ms: int


class TokenRejected(Exception):
    """A token failed validation: ``status`` is RFC 7628's (invalid_token, insufficient_scope)."""

    def __init__(self, reason: str, status: str = "invalid_token", scope: str | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.scope = scope


class TokenValidator(Protocol):
    def validate(self, token: str, now_ms: int) -> ValidatedToken:
        """The token's principal, scope and expiry; raises TokenRejected."""
        ...


def _b64_json(segment: str, what: str) -> dict[str, Any]:
    try:
        decoded = base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))
        value = json.loads(decoded)
    except (binascii.Error, ValueError) as exc:
        raise TokenRejected(f"Invalid JWS {what}: {exc}") from None
    if not isinstance(value, dict):
        raise TokenRejected(f"Invalid JWS {what}: not a JSON object")
    return value


def _scope(claims: Mapping[str, Any], name: str) -> frozenset[str]:
    raw = claims.get(name)
    if raw is None:
        return frozenset()
    if isinstance(raw, str):
        return frozenset(s for s in raw.split(" ") if s)
    if isinstance(raw, list) and all(isinstance(s, str) for s in raw):
        return frozenset(raw)
    raise TokenRejected(f"The scope claim ({name}) is neither a string nor a list of strings")


def _number(claims: Mapping[str, Any], name: str, required: bool) -> float | None:
    value = claims.get(name)
    if value is None:
        if required:
            raise TokenRejected(f"Required claim missing: {name}")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TokenRejected(f"The {name} claim is not a number")
    return float(value)


def _principal(claims: Mapping[str, Any], name: str) -> str:
    value = claims.get(name)
    if not isinstance(value, str) or not value.strip():
        raise TokenRejected(f"Required claim missing or empty: {name}")
    return value


class UnsecuredJwsValidator:
    """Kafka's development-only validator: an unsigned JWS (``alg: none``) whose claims are
    trusted as they are, given an ``exp`` in the future and a principal claim. Its JAAS options:
    unsecuredValidatorPrincipalClaimName (sub), unsecuredValidatorScopeClaimName (scope),
    unsecuredValidatorRequiredScope, unsecuredValidatorAllowableClockSkewMs (0)."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.principal_claim = options.get("unsecuredValidatorPrincipalClaimName", "").strip() or "sub"
        self.scope_claim = options.get("unsecuredValidatorScopeClaimName", "").strip() or "scope"
        self.required_scope = frozenset(
            s for s in re.split(r"[ ,]+", options.get("unsecuredValidatorRequiredScope", "")) if s)
        skew = options.get("unsecuredValidatorAllowableClockSkewMs", "").strip()
        try:
            self.skew_ms = int(skew) if skew else 0
        except ValueError:
            raise ValueError(f"unsecuredValidatorAllowableClockSkewMs is not a number: {skew!r}") from None
        if self.skew_ms < 0:
            raise ValueError("unsecuredValidatorAllowableClockSkewMs must not be negative")

    def validate(self, token: str, now_ms: int) -> ValidatedToken:
        parts = token.split(".")
        if len(parts) != 3:
            raise TokenRejected("Unsecured JWS compact serializations must have 3 dot-separated "
                                f"Base64URL-encoded values, not {len(parts)}")
        if parts[2]:
            raise TokenRejected("Unsecured JWS compact serializations must have an empty signature")
        header = _b64_json(parts[0], "header")
        if header.get("alg") != "none":
            raise TokenRejected("Unsecured JWS must have alg none")
        claims = _b64_json(parts[1], "payload")
        principal = _principal(claims, self.principal_claim)
        exp = _number(claims, "exp", required=True)
        iat = _number(claims, "iat", required=False)
        assert exp is not None
        exp_ms = int(exp * 1000)
        if iat is not None and exp_ms <= iat * 1000:
            raise TokenRejected(f"The expiration time ({exp_ms} ms) is not after the issued-at time")
        if now_ms - self.skew_ms >= exp_ms:
            raise TokenRejected(f"The token expired at {exp_ms} ms (now {now_ms} ms)")
        if iat is not None and iat * 1000 > now_ms + self.skew_ms:
            raise TokenRejected(f"The token's issued-at time ({int(iat * 1000)} ms) is in the future")
        scope = _scope(claims, self.scope_claim)
        missing = self.required_scope - scope
        if missing:
            raise TokenRejected(f"The token's scope lacks {sorted(missing)}", "insufficient_scope",
                                " ".join(sorted(self.required_scope)))
        return ValidatedToken(principal, scope, exp_ms)


class JwksValidator:
    """KIP-768's broker-side validation: the JWT's signature against a key of the JWKS (chosen
    by ``kid``), ``exp`` required, ``iat``/``nbf`` honoured, audience and issuer when configured,
    all with ``sasl.oauthbearer.clock.skew.seconds`` of slack."""

    def __init__(self, keys: Callable[[], jwt.PyJWKSet], *, expected_audience: list[str] | None = None,
                 expected_issuer: str | None = None, sub_claim: str = "sub", scope_claim: str = "scope",
                 clock_skew_s: int = 30, on_unknown_key: Callable[[], None] | None = None) -> None:
        """``on_unknown_key`` is told when a token names a key id the JWKS lacks (so the
        source can read the set again: the provider may have rotated its keys)."""
        self._keys = keys
        self._on_unknown_key = on_unknown_key
        self.expected_audience = expected_audience or None
        self.expected_issuer = expected_issuer or None
        self.sub_claim = sub_claim
        self.scope_claim = scope_claim
        self.skew_ms = clock_skew_s * 1000

    def _key(self, token: str) -> jwt.PyJWK:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise TokenRejected(f"Malformed JWT: {exc}") from None
        kid = header.get("kid")
        keys = self._keys().keys
        matching = [k for k in keys if kid is None or k.key_id == kid]
        if not matching:
            if self._on_unknown_key is not None:
                self._on_unknown_key()
            raise TokenRejected(f"No key in the JWKS for kid {kid!r}")
        if header.get("alg") in (None, "none"):
            raise TokenRejected("The JWT is not signed")
        return matching[0]

    def validate(self, token: str, now_ms: int) -> ValidatedToken:
        key = self._key(token)
        alg = jwt.get_unverified_header(token)["alg"]
        # The token names its algorithm; only one of its key's family may verify it (an HS256
        # header over an RSA key is the classic confusion, and pyjwt raises TypeError on it).
        if not str(alg).startswith(_ALGORITHM_FAMILIES.get(str(key.key_type), ("\0",))):
            raise TokenRejected(f"The JWT's algorithm {alg!r} does not fit its {key.key_type} key")
        try:
            # The times are checked below against now_ms: pyjwt would read the system clock.
            claims = jwt.decode(token, key.key, algorithms=[alg],
                                audience=self.expected_audience, issuer=self.expected_issuer,
                                options={"verify_exp": False, "verify_iat": False,
                                         "verify_nbf": False, "verify_aud": self.expected_audience is not None,
                                         "verify_iss": self.expected_issuer is not None})
        except (jwt.PyJWTError, TypeError, ValueError) as exc:
            raise TokenRejected(f"JWT validation failed: {exc}") from None
        exp = _number(claims, "exp", required=True)
        assert exp is not None
        exp_ms = int(exp * 1000)
        if now_ms - self.skew_ms >= exp_ms:
            raise TokenRejected(f"The token expired at {exp_ms} ms (now {now_ms} ms)")
        for name in ("nbf", "iat"):
            at = _number(claims, name, required=False)
            if at is not None and at * 1000 > now_ms + self.skew_ms:
                raise TokenRejected(f"The token's {name} time is in the future")
        return ValidatedToken(_principal(claims, self.sub_claim), _scope(claims, self.scope_claim), exp_ms)


@dataclass(frozen=True, slots=True)
class ClientInitialResponse:
    """RFC 7628's client message: the token, an optional authorization id, KIP-342 extensions."""

    token: str
    authorization_id: str
    extensions: dict[str, str]

    @classmethod
    def parse(cls, message: bytes) -> ClientInitialResponse:
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslError("Invalid OAUTHBEARER client first message: not UTF-8") from None
        header, sep, rest = text.partition("\x01")
        if not sep or not rest.endswith("\x01\x01") or not header.startswith(("n,", "y,")):
            raise SaslError("Invalid OAUTHBEARER client first message")
        gs2 = header.split(",")
        if len(gs2) != 3 or gs2[2] or (gs2[1] and not gs2[1].startswith("a=")):
            raise SaslError("Invalid OAUTHBEARER client first message: bad GS2 header")
        authzid = gs2[1][2:]
        pairs: dict[str, str] = {}
        for item in rest[:-2].split("\x01"):
            key, eq, value = item.partition("=")
            if not eq or key in pairs:
                raise SaslError("Invalid OAUTHBEARER client first message: bad key/value pair")
            pairs[key] = value
        auth = _AUTH_VALUE.match(pairs.pop("auth", ""))
        if auth is None:
            raise SaslError("Invalid OAUTHBEARER client first message: no bearer token")
        for key in pairs:
            if not _EXTENSION_KEY.match(key):
                raise SaslError(f"Invalid OAUTHBEARER extension key {key!r}")
        return cls(auth.group(1), authzid, pairs)


def client_initial_response(token: str, authorization_id: str = "",
                            extensions: tuple[tuple[str, str], ...] = ()) -> bytes:
    """The client's first (and only) OAUTHBEARER message."""
    gs2 = f"n,a={authorization_id}," if authorization_id else "n,,"
    ext = "".join(f"{k}={v}\x01" for k, v in extensions)
    return f"{gs2}\x01auth=Bearer {token}\x01{ext}\x01".encode()


class OAuthBearerServer:
    """One OAUTHBEARER exchange against ``validator``."""

    def __init__(self, validator: TokenValidator) -> None:
        self._validator = validator
        self._token: ValidatedToken | None = None
        self._error: str | None = None

    @property
    def complete(self) -> bool:
        return self._token is not None

    @property
    def authorization_id(self) -> str:
        if self._token is None:
            raise SaslError("Authentication exchange has not completed")
        return self._token.principal

    @property
    def credential_expires_at_ms(self) -> int | None:
        return None if self._token is None else self._token.expires_at_ms

    def evaluate(self, token: bytes, now_ms: int) -> bytes:
        if self._token is not None:
            raise SaslError("Authentication exchange has already completed")
        if token == _CONTROL_A and self._error is not None:
            raise SaslAuthenticationError(self._error)
        self._error = None
        response = ClientInitialResponse.parse(token)
        try:
            validated = self._validator.validate(response.token, now_ms)
        except TokenRejected as exc:
            body: dict[str, str] = {"status": exc.status}
            if exc.scope:
                body["scope"] = exc.scope
            self._error = json.dumps(body, separators=(",", ":"))
            return self._error.encode()
        if response.authorization_id and response.authorization_id != validated.principal:
            raise SaslAuthenticationError(
                f"Authentication failed: Client requested an authorization id "
                f"({response.authorization_id}) that is different from the token's principal name "
                f"({validated.principal})")
        self._token = validated
        return b""
