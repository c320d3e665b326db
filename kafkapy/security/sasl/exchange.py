"""The SASL exchange of one connection, as Kafka's SaslServerAuthenticator runs it: this module
owns the state machine (sans-I/O: requests and the time come in, verdicts go out).

Before authentication a connection may send ApiVersions, then SaslHandshake (v1: the tokens follow
in SaslAuthenticate requests), then SaslAuthenticate until the mechanism completes. Anything else
closes the connection (Kafka: "Unexpected Kafka request of type X during SASL handshake"). A
failed step is answered with its error and then the connection is closed (after
``connection.failed.authentication.delay.ms``, which the edge applies).

KIP-368: when the session has a lifetime (``connections.max.reauth.ms``, or the credential's own
expiry for OAUTHBEARER tokens) the client is told it in SaslAuthenticate's ``session_lifetime_ms``
and may re-authenticate on the same connection with SaslHandshake + SaslAuthenticate (same
mechanism, same principal). Past its lifetime, any other request closes the connection.

Not supported: SaslHandshake v0's flow (raw SASL tokens without Kafka framing, from pre-1.0
clients and GSSAPI). v0 stays advertised, as Kafka advertises it, because librdkafka before 2.x
tells from it that a broker does SASL handshakes at all (and then uses v1); a client that
actually sends a v0 handshake is answered UNSUPPORTED_VERSION and closed.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kafkapy.protocol import ApiKey, ErrorCode, Request, error_response
from kafkapy.protocol import messages as m
from kafkapy.security.principal import KafkaPrincipal
from kafkapy.security.sasl.mechanism import SaslAuthenticationError, SaslError, SaslServerMechanism

SASL_APIS = (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE)
# Kafka's ranges. A v0 handshake is refused (see above).
SASL_HANDSHAKE_VERSIONS = (0, 1)
SASL_AUTHENTICATE_VERSIONS = (0, 2)


class Verdict(enum.Enum):
    PASS = "pass"  # not for the exchange: the dispatcher serves it
    REPLY = "reply"  # answer with body, carry on
    FAIL = "fail"  # answer with body (if any), then close: authentication failed
    CLOSE = "close"  # close without an answer


@dataclass(frozen=True, slots=True)
class Step:
    """What the edge does with one request; ``reason`` is for the log."""

    verdict: Verdict
    body: Any = None
    reason: str = ""


class _State(enum.Enum):
    HANDSHAKE_OR_VERSIONS = 1
    AUTHENTICATE = 2
    COMPLETE = 3
    FAILED = 4


MechanismFactory = Callable[[], SaslServerMechanism]


class SaslServerExchange:
    """The SASL state of one connection on a SASL listener.

    ``mechanisms`` maps each enabled mechanism (in ``sasl.enabled.mechanisms`` order) to a
    factory of its server; ``max_reauth_ms`` is ``connections.max.reauth.ms`` (0: sessions do
    not expire unless their credential does), one value or one per mechanism (Kafka's
    ``listener.name.<listener>.<mechanism>.connections.max.reauth.ms``). Times: ``now_ms`` is
    the edge's monotonic clock (the session deadline is on it), ``wall_ms`` the wall clock tokens
    are checked against.
    """

    def __init__(self, mechanisms: Mapping[str, MechanismFactory],
                 max_reauth_ms: int | Mapping[str, int] = 0) -> None:
        self._factories = dict(mechanisms)
        self._max_reauth_ms = (dict(max_reauth_ms) if isinstance(max_reauth_ms, Mapping)
                               else dict.fromkeys(self._factories, max_reauth_ms))
        self._state = _State.HANDSHAKE_OR_VERSIONS
        self._server: SaslServerMechanism | None = None
        self._reauthenticating = False
        self.mechanism: str | None = None
        self.principal: KafkaPrincipal | None = None
        self.expires_at_ms: int | None = None

    @property
    def authenticated(self) -> bool:
        return self._state == _State.COMPLETE or self._reauthenticating

    @property
    def enabled_mechanisms(self) -> list[str]:
        return list(self._factories)

    def expired(self, now_ms: int) -> bool:
        return self._state == _State.COMPLETE and self.expires_at_ms is not None and now_ms >= self.expires_at_ms

    def on_request(self, request: Request, now_ms: int, wall_ms: int) -> Step:
        key = request.api_key
        if self._state == _State.FAILED:
            return Step(Verdict.CLOSE, reason="request after a failed authentication")
        if self._state == _State.COMPLETE:
            if key == ApiKey.SASL_HANDSHAKE and self.expires_at_ms is not None:
                self._reauthenticating = True
                self._state = _State.HANDSHAKE_OR_VERSIONS
                return self._handshake(request)
            if self.expired(now_ms):
                return Step(Verdict.CLOSE, reason="the session expired without re-authentication "
                                                  "(connections.max.reauth.ms)")
            if key in SASL_APIS:
                return Step(Verdict.REPLY, _illegal_after_auth(request))
            return Step(Verdict.PASS)
        if self._state == _State.HANDSHAKE_OR_VERSIONS:
            if key == ApiKey.API_VERSIONS and not self._reauthenticating:
                return Step(Verdict.PASS)
            if key == ApiKey.SASL_HANDSHAKE:
                return self._handshake(request)
            return self._fail_closed(f"Unexpected Kafka request of type {key.name} during "
                                     "SASL handshake.")
        # AUTHENTICATE
        if key != ApiKey.SASL_AUTHENTICATE:
            reason = f"Unexpected Kafka request of type {key.name} during SASL authentication."
            self._state = _State.FAILED
            return Step(Verdict.FAIL, _error_body(request, ErrorCode.ILLEGAL_SASL_STATE, reason), reason)
        return self._authenticate(request, now_ms, wall_ms)

    def _fail_closed(self, reason: str) -> Step:
        self._state = _State.FAILED
        return Step(Verdict.FAIL, None, reason)

    def _handshake(self, request: Request) -> Step:
        wanted = request.body.mechanism
        enabled = self.enabled_mechanisms
        if request.api_version == 0:
            self._state = _State.FAILED
            body = m.SaslHandshakeResponse(version=0, error_code=ErrorCode.UNSUPPORTED_VERSION, mechanisms=enabled)
            return Step(Verdict.FAIL, body, "SaslHandshake v0 (raw SASL tokens) is not supported; clients "
                                            "must use v1")
        if wanted not in self._factories:
            self._state = _State.FAILED
            body = m.SaslHandshakeResponse(version=request.response_version,
                                           error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled)
            return Step(Verdict.FAIL, body, f"Unsupported SASL mechanism {wanted}")
        body = m.SaslHandshakeResponse(version=request.response_version, error_code=ErrorCode.NONE,
                                       mechanisms=enabled)
        if self._reauthenticating and wanted != self.mechanism:
            # Kafka answers the handshake, then fails: a session keeps its mechanism.
            self._state = _State.FAILED
            return Step(Verdict.FAIL, body, f"SASL mechanism '{wanted}' requested by client is not "
                                            f"supported for re-authentication of mechanism '{self.mechanism}'")
        self._server = self._factories[wanted]()
        self.mechanism = wanted
        self._state = _State.AUTHENTICATE
        return Step(Verdict.REPLY, body)

    def _authenticate(self, request: Request, now_ms: int, wall_ms: int) -> Step:
        assert self._server is not None and self.mechanism is not None
        what = "re-authentication" if self._reauthenticating else "authentication"
        try:
            token = self._server.evaluate(bytes(request.body.auth_bytes or b""), wall_ms)
            principal = KafkaPrincipal.user(self._server.authorization_id) if self._server.complete else None
            if principal is not None and self._reauthenticating and principal != self.principal:
                raise SaslAuthenticationError(f"Cannot change principals during re-authentication from "
                                              f"{self.principal}: {principal}")
        except SaslAuthenticationError as exc:
            return self._auth_failed(request, str(exc))
        except SaslError as exc:
            generic = (f"Authentication failed during {what} due to invalid credentials with SASL "
                       f"mechanism {self.mechanism}")
            return self._auth_failed(request, generic, log_reason=f"{generic}: {exc}")
        lifetime = 0
        if principal is not None:
            lifetime = self._complete(principal, now_ms, wall_ms)
        body = m.SaslAuthenticateResponse(version=request.response_version, error_code=ErrorCode.NONE,
                                          error_message=None, auth_bytes=token,
                                          session_lifetime_ms=lifetime)
        return Step(Verdict.REPLY, body)

    def _complete(self, principal: KafkaPrincipal, now_ms: int, wall_ms: int) -> int:
        """Authenticated: the session's lifetime (0: none) as Kafka's
        calcCompletionTimesAndReturnSessionLifetimeMs works it out."""
        assert self._server is not None
        self.principal = principal
        self._state = _State.COMPLETE
        self._reauthenticating = False
        credential_expiry = self._server.credential_expires_at_ms
        max_reauth_ms = self._max_reauth_ms.get(self.mechanism or "", 0)
        self.expires_at_ms = None
        if credential_expiry is None and max_reauth_ms <= 0:
            return 0
        lifetimes = []
        if credential_expiry is not None:
            lifetimes.append(credential_expiry - wall_ms)
        if max_reauth_ms > 0:
            lifetimes.append(max_reauth_ms)
        lifetime = max(0, min(lifetimes))
        self.expires_at_ms = now_ms + lifetime
        return lifetime

    def _auth_failed(self, request: Request, message: str, log_reason: str | None = None) -> Step:
        self._state = _State.FAILED
        body = _error_body(request, ErrorCode.SASL_AUTHENTICATION_FAILED, message)
        return Step(Verdict.FAIL, body, log_reason or message)


def _error_body(request: Request, code: int, message: str) -> Any:
    if request.api_key == ApiKey.SASL_AUTHENTICATE:
        return m.SaslAuthenticateResponse(version=request.response_version, error_code=code,
                                          error_message=message, auth_bytes=b"", session_lifetime_ms=0)
    return error_response(request, code, message)


def _illegal_after_auth(request: Request) -> Any:
    """Kafka's KafkaApis answer to SASL requests on an authenticated (or non-SASL) connection."""
    if request.api_key == ApiKey.SASL_HANDSHAKE:
        return m.SaslHandshakeResponse(version=request.response_version,
                                       error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
    return m.SaslAuthenticateResponse(version=request.response_version, error_code=ErrorCode.ILLEGAL_SASL_STATE,
                                      error_message="SaslAuthenticate request received after successful "
                                                    "authentication",
                                      auth_bytes=b"", session_lifetime_ms=0)


def answer_outside_sasl(request: Request) -> Any:
    """The answer to a SASL request on a listener without SASL (Kafka: ILLEGAL_SASL_STATE)."""
    return _illegal_after_auth(request)
