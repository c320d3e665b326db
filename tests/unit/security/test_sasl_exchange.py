"""The SASL state machine of one connection, as Kafka's SaslServerAuthenticator runs it: what is
allowed before authentication, the errors, and KIP-368 re-authentication."""

from __future__ import annotations

import pytest

from kafkapy.protocol import ApiKey, ErrorCode, Request
from kafkapy.protocol import messages as m
from kafkapy.protocol.events import RequestHeader
from kafkapy.security import KafkaPrincipal
from kafkapy.security.sasl.exchange import SaslServerExchange, Verdict
from kafkapy.security.sasl.oauthbearer import OAuthBearerServer, UnsecuredJwsValidator, client_initial_response
from kafkapy.security.sasl.plain import PlainServer, static_users

from .test_sasl_mechanisms import GOOD, NOW_MS, unsecured

MONO = 5_000


def request(body, version: int) -> Request:
    key = ApiKey(body.API_KEY)
    header = RequestHeader(key, version, 1, "test", 1)
    return Request(key, version, 1, "test", header, body, 10)


def handshake(mechanism: str = "PLAIN", version: int = 1) -> Request:
    return request(m.SaslHandshakeRequest(mechanism=mechanism), version)


def auth(token: bytes, version: int = 2) -> Request:
    return request(m.SaslAuthenticateRequest(auth_bytes=token), version)


METADATA = request(m.MetadataRequest(topics=None), 1)
API_VERSIONS = request(m.ApiVersionsRequest(), 0)


def exchange(max_reauth_ms: int = 0) -> SaslServerExchange:
    users = static_users({"alice": "pw", "bob": "pw"})
    return SaslServerExchange({"PLAIN": lambda: PlainServer(users),
                               "OAUTHBEARER": lambda: OAuthBearerServer(UnsecuredJwsValidator({}))},
                              max_reauth_ms)


def login(ex: SaslServerExchange, user: str = "alice", now: int = MONO):
    assert ex.on_request(handshake(), now, NOW_MS).verdict is Verdict.REPLY
    return ex.on_request(auth(f"\0{user}\0pw".encode()), now, NOW_MS)


def test_api_versions_then_handshake_then_authenticate():
    ex = exchange()
    assert ex.on_request(API_VERSIONS, MONO, NOW_MS).verdict is Verdict.PASS
    step = ex.on_request(handshake(), MONO, NOW_MS)
    assert step.verdict is Verdict.REPLY
    assert step.body.error_code == 0 and step.body.mechanisms == ["PLAIN", "OAUTHBEARER"]
    assert not ex.authenticated
    step = ex.on_request(auth(b"\0alice\0pw"), MONO, NOW_MS)
    assert step.verdict is Verdict.REPLY and step.body.error_code == 0
    assert step.body.session_lifetime_ms == 0
    assert ex.authenticated and ex.principal == KafkaPrincipal.user("alice") and ex.mechanism == "PLAIN"
    assert ex.on_request(METADATA, MONO, NOW_MS).verdict is Verdict.PASS


@pytest.mark.parametrize("first", [METADATA, auth(b"\0alice\0pw")])
def test_anything_else_before_the_handshake_closes_without_an_answer(first):
    ex = exchange()
    step = ex.on_request(first, MONO, NOW_MS)
    assert step.verdict is Verdict.FAIL and step.body is None
    assert "during SASL handshake" in step.reason
    assert ex.on_request(handshake(), MONO, NOW_MS).verdict is Verdict.CLOSE


def test_unsupported_mechanism_lists_the_enabled_ones_then_fails():
    step = exchange().on_request(handshake("GSSAPI"), MONO, NOW_MS)
    assert step.verdict is Verdict.FAIL
    assert step.body.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert step.body.mechanisms == ["PLAIN", "OAUTHBEARER"]


def test_handshake_v0_is_refused():
    step = exchange().on_request(handshake("PLAIN", version=0), MONO, NOW_MS)
    assert step.verdict is Verdict.FAIL and step.body.error_code == ErrorCode.UNSUPPORTED_VERSION


def test_other_request_during_authentication_is_illegal_sasl_state():
    ex = exchange()
    ex.on_request(handshake(), MONO, NOW_MS)
    step = ex.on_request(METADATA, MONO, NOW_MS)
    assert step.verdict is Verdict.FAIL
    assert step.body is not None
    assert "Unexpected Kafka request of type METADATA during SASL authentication" in step.reason


def test_wrong_password_fails_with_kafkas_message():
    ex = exchange()
    ex.on_request(handshake(), MONO, NOW_MS)
    step = ex.on_request(auth(b"\0alice\0nope"), MONO, NOW_MS)
    assert step.verdict is Verdict.FAIL
    assert step.body.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert step.body.error_message == "Authentication failed: Invalid username or password"
    assert not ex.authenticated


def test_malformed_token_gets_the_generic_message():
    ex = exchange()
    ex.on_request(handshake(), MONO, NOW_MS)
    step = ex.on_request(auth(b"garbage"), MONO, NOW_MS)
    assert step.body.error_message == ("Authentication failed during authentication due to invalid "
                                       "credentials with SASL mechanism PLAIN")


def test_sasl_requests_after_authentication_without_a_lifetime_are_illegal_but_harmless():
    ex = exchange()
    login(ex)
    step = ex.on_request(handshake(), MONO, NOW_MS)
    assert step.verdict is Verdict.REPLY and step.body.error_code == ErrorCode.ILLEGAL_SASL_STATE
    step = ex.on_request(auth(b"x"), MONO, NOW_MS)
    assert step.verdict is Verdict.REPLY and step.body.error_code == ErrorCode.ILLEGAL_SASL_STATE
    assert ex.on_request(METADATA, MONO, NOW_MS).verdict is Verdict.PASS


def test_max_reauth_sets_the_session_lifetime_and_expiry_closes():
    ex = exchange(max_reauth_ms=60_000)
    step = login(ex)
    assert step.body.session_lifetime_ms == 60_000
    assert ex.expires_at_ms == MONO + 60_000
    assert ex.on_request(METADATA, MONO + 59_999, NOW_MS).verdict is Verdict.PASS
    step = ex.on_request(METADATA, MONO + 60_000, NOW_MS)
    assert step.verdict is Verdict.CLOSE and "expired" in step.reason


def test_reauthentication_extends_the_session():
    ex = exchange(max_reauth_ms=60_000)
    login(ex)
    later = MONO + 59_000
    step = login(ex, now=later)
    assert step.verdict is Verdict.REPLY and step.body.session_lifetime_ms == 60_000
    assert ex.expires_at_ms == later + 60_000
    assert ex.on_request(METADATA, MONO + 61_000, NOW_MS).verdict is Verdict.PASS


def test_reauthentication_past_expiry_is_still_allowed():
    ex = exchange(max_reauth_ms=1_000)
    login(ex)
    assert login(ex, now=MONO + 5_000).verdict is Verdict.REPLY
    assert ex.authenticated


def test_reauthentication_cannot_change_the_principal():
    ex = exchange(max_reauth_ms=60_000)
    login(ex)
    step = login(ex, user="bob")
    assert step.verdict is Verdict.FAIL
    assert "Cannot change principals during re-authentication from User:alice: User:bob" in step.body.error_message


def test_reauthentication_cannot_change_the_mechanism():
    ex = exchange(max_reauth_ms=60_000)
    login(ex)
    step = ex.on_request(handshake("OAUTHBEARER"), MONO, NOW_MS)
    assert step.verdict is Verdict.FAIL and "re-authentication" in step.reason


def test_token_expiry_bounds_the_session_without_max_reauth():
    ex = exchange()
    ex.on_request(handshake("OAUTHBEARER"), MONO, NOW_MS)
    step = ex.on_request(auth(client_initial_response(unsecured(GOOD))), MONO, NOW_MS)
    assert step.body.session_lifetime_ms == 3_600_000
    assert ex.expires_at_ms == MONO + 3_600_000


def test_token_expiry_and_max_reauth_take_the_sooner():
    ex = exchange(max_reauth_ms=60_000)
    ex.on_request(handshake("OAUTHBEARER"), MONO, NOW_MS)
    step = ex.on_request(auth(client_initial_response(unsecured(GOOD))), MONO, NOW_MS)
    assert step.body.session_lifetime_ms == 60_000


def test_oauthbearer_refusal_takes_two_rounds():
    ex = exchange()
    ex.on_request(handshake("OAUTHBEARER"), MONO, NOW_MS)
    bad = {**GOOD, "exp": NOW_MS / 1000 - 1, "iat": NOW_MS / 1000 - 10}
    step = ex.on_request(auth(client_initial_response(unsecured(bad))), MONO, NOW_MS)
    assert step.verdict is Verdict.REPLY and b"invalid_token" in step.body.auth_bytes
    step = ex.on_request(auth(b"\x01"), MONO, NOW_MS)
    assert step.verdict is Verdict.FAIL and step.body.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert not ex.authenticated


def test_max_reauth_per_mechanism():
    users = static_users({"alice": "pw"})
    ex = SaslServerExchange({"PLAIN": lambda: PlainServer(users),
                             "OAUTHBEARER": lambda: OAuthBearerServer(UnsecuredJwsValidator({}))},
                            {"PLAIN": 0, "OAUTHBEARER": 5_000})
    assert login(ex).body.session_lifetime_ms == 0
    ex = SaslServerExchange({"OAUTHBEARER": lambda: OAuthBearerServer(UnsecuredJwsValidator({}))},
                            {"OAUTHBEARER": 5_000})
    ex.on_request(handshake("OAUTHBEARER"), MONO, NOW_MS)
    step = ex.on_request(auth(client_initial_response(unsecured(GOOD))), MONO, NOW_MS)
    assert step.body.session_lifetime_ms == 5_000


# -- fuzzing the pre-authentication surface -------------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from kafkapy.security.sasl.scram import ScramCredential, ScramServer  # noqa: E402

_STORED = {"alice": ScramCredential.from_password("SCRAM-SHA-256", "pw")}
_STEPS = st.one_of(
    st.sampled_from(["PLAIN", "SCRAM-SHA-256", "OAUTHBEARER", "GSSAPI", ""]).map(lambda mech: handshake(mech)),
    st.binary(max_size=200).map(lambda token: auth(token)),
    st.sampled_from([b"\0alice\0", b"\0alice\0p", b"n,,n=alice,r=abc", b"\x01",
                     client_initial_response(unsecured({**GOOD, "exp": 1}))]).map(lambda token: auth(token)),
    st.just(API_VERSIONS), st.just(METADATA),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_STEPS, max_size=8))
def test_no_sequence_of_wrong_tokens_authenticates_or_raises(requests):
    users = static_users({"alice": "pw"})
    ex = SaslServerExchange({"PLAIN": lambda: PlainServer(users),
                             "SCRAM-SHA-256": lambda: ScramServer("SCRAM-SHA-256", _STORED.get),
                             "OAUTHBEARER": lambda: OAuthBearerServer(UnsecuredJwsValidator({}))})
    for req in requests:
        step = ex.on_request(req, MONO, NOW_MS)
        assert step.verdict in (Verdict.PASS, Verdict.REPLY, Verdict.FAIL, Verdict.CLOSE)
        if step.verdict is Verdict.PASS:
            assert req.api_key == ApiKey.API_VERSIONS
        if step.verdict in (Verdict.FAIL, Verdict.CLOSE):
            break
    assert not ex.authenticated
