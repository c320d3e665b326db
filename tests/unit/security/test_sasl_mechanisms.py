"""The server side of each SASL mechanism, driven with the client halves (scramp's for SCRAM),
and the JAAS values Kafka's operators write."""

from __future__ import annotations

import base64
import json

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from kafkapy.security.sasl.client_mechanisms import client_mechanism
from kafkapy.security.sasl.jaas import JaasConfigError, parse_jaas_config
from kafkapy.security.sasl.mechanism import SaslAuthenticationError, SaslError
from kafkapy.security.sasl.oauthbearer import (
    ClientInitialResponse,
    JwksValidator,
    OAuthBearerServer,
    TokenRejected,
    UnsecuredJwsValidator,
    client_initial_response,
)
from kafkapy.security.sasl.plain import PlainServer, static_users
from kafkapy.security.sasl.scram import ScramCredential, ScramServer, salted_password
from kafkapy.security.sasl_credentials import SaslCredentials

NOW_MS = 1_800_000_000_000

# -- JAAS ----------------------------------------------------------------------------------------


def test_jaas_plain_login_module_with_users():
    jaas = parse_jaas_config(
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="al\\"ice";')
    assert jaas.login_module == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert jaas.flag == "required"
    assert (jaas.username, jaas.password) == ("admin", "admin-secret")
    assert jaas.plain_users() == {"admin": "admin-secret", "alice": 'al"ice'}


def test_jaas_bare_values_and_no_options():
    assert parse_jaas_config("a.B optional x=1 y=two;").options == {"x": "1", "y": "two"}
    assert parse_jaas_config("  a.B required ; ").options == {}


@pytest.mark.parametrize("text, message", [
    ("a.B required x=1", "not terminated by semi-colon"),
    ("a.B required; c.D required;", "2 login modules"),
    ("a.B maybe x=1;", "Invalid JAAS control flag"),
    ("a.B required x;", "key=value"),
    ("a.B required x=;", "key=value"),
    ("", "empty"),
])
def test_jaas_errors(text, message):
    with pytest.raises(JaasConfigError, match=message):
        parse_jaas_config(text)


def test_jaas_error_never_carries_the_value():
    with pytest.raises(JaasConfigError) as info:
        parse_jaas_config('a.B required password="hunter2"')
    assert "hunter2" not in str(info.value)


# -- PLAIN ---------------------------------------------------------------------------------------

def _plain() -> PlainServer:
    return PlainServer(static_users({"alice": "alice-secret"}))


def test_plain_accepts_a_known_user():
    server = _plain()
    assert server.evaluate(b"\0alice\0alice-secret", NOW_MS) == b""
    assert server.complete and server.authorization_id == "alice"
    assert server.credential_expires_at_ms is None


@pytest.mark.parametrize("token, message", [
    (b"\0alice\0wrong", "Authentication failed: Invalid username or password"),
    (b"\0bob\0alice-secret", "Authentication failed: Invalid username or password"),
    (b"\0\0x", "Authentication failed: username not specified"),
    (b"\0alice\0", "Authentication failed: password not specified"),
    (b"bob\0alice\0alice-secret", "authorization id that is different from username"),
])
def test_plain_refusals_tell_the_client_why(token, message):
    server = _plain()
    with pytest.raises(SaslAuthenticationError, match=message):
        server.evaluate(token, NOW_MS)
    assert not server.complete


@pytest.mark.parametrize("token", [b"alice-secret", b"\0a\0b\0c", b"\xff\0a\0b"])
def test_plain_malformed_messages_are_generic_failures(token):
    with pytest.raises(SaslError):
        _plain().evaluate(token, NOW_MS)


# -- SCRAM ---------------------------------------------------------------------------------------

def _run_scram(mechanism: str, stored: dict[str, ScramCredential], user: str, password: str) -> ScramServer:
    server = ScramServer(mechanism, stored.get)
    client = client_mechanism(SaslCredentials(mechanism, username=user, password=password))
    token: bytes | None = client.first()
    while token is not None:
        token = client.respond(server.evaluate(token, NOW_MS))
    return server


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_round_trip(mechanism):
    stored = {"alice": ScramCredential.from_password(mechanism, "alice-secret", iterations=4096)}
    server = _run_scram(mechanism, stored, "alice", "alice-secret")
    assert server.complete and server.authorization_id == "alice"


@pytest.mark.parametrize("user, password", [("alice", "wrong"), ("bob", "alice-secret")])
def test_scram_wrong_password_or_unknown_user_fail_alike(user, password):
    stored = {"alice": ScramCredential.from_password("SCRAM-SHA-256", "alice-secret")}
    with pytest.raises(SaslError, match="Authentication failed"):
        _run_scram("SCRAM-SHA-256", stored, user, password)


def test_scram_credential_from_the_salted_password_matches_the_password_one():
    salt = b"0123456789abcdef"
    direct = ScramCredential.from_password("SCRAM-SHA-512", "pw", iterations=8192, salt=salt)
    via_api = ScramCredential.from_salted_password(
        "SCRAM-SHA-512", salted_password("SCRAM-SHA-512", "pw", salt, 8192), salt, 8192)
    assert via_api == direct


def test_scram_final_nonce_may_repeat_the_client_part_as_kafka_allows():
    """librdkafka 2.0's final message carries client-nonce + (client-nonce + server-nonce), its
    proof computed over that; Kafka checks only that it ends with the nonce the server sent."""
    import hashlib
    import hmac

    stored = {"alice": ScramCredential.from_password("SCRAM-SHA-256", "pw")}
    server = ScramServer("SCRAM-SHA-256", stored.get)
    first_bare = "n=alice,r=clientnonce"
    server_first = server.evaluate(f"n,,{first_bare}".encode(), NOW_MS).decode()
    attrs = dict(a.split("=", 1) for a in server_first.split(","))
    salted = salted_password("SCRAM-SHA-256", "pw", base64.b64decode(attrs["s"]), int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    without_proof = f"c=biws,r=clientnonce{attrs['r']}"
    auth_message = f"{first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(hashlib.sha256(client_key).digest(), auth_message, "sha256").digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature))).decode()
    server.evaluate(f"{without_proof},p={proof}".encode(), NOW_MS)
    assert server.complete and server.authorization_id == "alice"


def test_scram_final_nonce_must_end_with_the_servers():
    stored = {"alice": ScramCredential.from_password("SCRAM-SHA-256", "pw")}
    server = ScramServer("SCRAM-SHA-256", stored.get)
    client = client_mechanism(SaslCredentials("SCRAM-SHA-256", username="alice", password="pw"))
    server_first = server.evaluate(client.first(), NOW_MS).decode()
    final = client.respond(server_first.encode()).decode()
    nonce = final.split(",")[1][2:]
    with pytest.raises(SaslError):
        server.evaluate(final.replace(nonce, nonce[:-1] + ("x" if nonce[-1] != "x" else "y")).encode(), NOW_MS)


def test_scram_garbage_is_a_generic_failure():
    server = ScramServer("SCRAM-SHA-256", lambda user: None)
    with pytest.raises(SaslError):
        server.evaluate(b"\xff\xfe", NOW_MS)
    with pytest.raises(SaslError):
        ScramServer("SCRAM-SHA-256", lambda user: None).evaluate(b"hello", NOW_MS)


# -- OAUTHBEARER ---------------------------------------------------------------------------------

def _b64(obj: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


def unsecured(claims: dict, header: dict | None = None) -> str:
    return f"{_b64(header or {'alg': 'none'})}.{_b64(claims)}."


GOOD = {"sub": "alice", "exp": NOW_MS / 1000 + 3600, "iat": NOW_MS / 1000, "scope": "a b"}


def test_unsecured_token_names_its_subject_and_expiry():
    token = UnsecuredJwsValidator({}).validate(unsecured(GOOD), NOW_MS)
    assert token.principal == "alice"
    assert token.expires_at_ms == NOW_MS + 3_600_000
    assert token.scope == {"a", "b"}


@pytest.mark.parametrize("claims, header, reason", [
    ({**GOOD, "exp": NOW_MS / 1000 - 1, "iat": NOW_MS / 1000 - 60}, None, "expired"),
    ({k: v for k, v in GOOD.items() if k != "exp"}, None, "exp"),
    ({k: v for k, v in GOOD.items() if k != "sub"}, None, "sub"),
    ({**GOOD, "iat": NOW_MS / 1000 + 60}, None, "future"),
    (GOOD, {"alg": "HS256"}, "alg none"),
])
def test_unsecured_token_refusals(claims, header, reason):
    with pytest.raises(TokenRejected, match=reason):
        UnsecuredJwsValidator({}).validate(unsecured(claims, header), NOW_MS)


def test_unsecured_options_principal_claim_scope_and_skew():
    validator = UnsecuredJwsValidator({"unsecuredValidatorPrincipalClaimName": "user",
                                       "unsecuredValidatorRequiredScope": "a",
                                       "unsecuredValidatorAllowableClockSkewMs": "5000"})
    token = validator.validate(unsecured({"user": "bob", "exp": NOW_MS / 1000 - 1, "scope": ["a"]}), NOW_MS)
    assert token.principal == "bob"
    with pytest.raises(TokenRejected) as info:
        validator.validate(unsecured({"user": "bob", "exp": NOW_MS / 1000 + 10, "scope": "b"}), NOW_MS)
    assert info.value.status == "insufficient_scope"


def test_signed_token_is_not_an_unsecured_one():
    with pytest.raises(TokenRejected, match="empty signature"):
        UnsecuredJwsValidator({}).validate(unsecured(GOOD) + "c2ln", NOW_MS)


def test_oauthbearer_client_message_round_trip():
    message = client_initial_response("a.b.c", extensions=(("traceId", "x1"),))
    parsed = ClientInitialResponse.parse(message)
    assert (parsed.token, parsed.authorization_id, parsed.extensions) == ("a.b.c", "", {"traceId": "x1"})


@pytest.mark.parametrize("message", [b"", b"n,,\x01auth=Bearer\x01\x01", b"n,,\x01auth=Bearer a\x01",
                                     b"x,,\x01auth=Bearer a\x01\x01", b"n,,\x01auth=Bearer a\x01k=1\x01k=2\x01\x01"])
def test_oauthbearer_malformed_client_messages(message):
    with pytest.raises(SaslError):
        ClientInitialResponse.parse(message)


def test_oauthbearer_server_success():
    server = OAuthBearerServer(UnsecuredJwsValidator({}))
    assert server.evaluate(client_initial_response(unsecured(GOOD)), NOW_MS) == b""
    assert server.authorization_id == "alice"
    assert server.credential_expires_at_ms == NOW_MS + 3_600_000


def test_oauthbearer_rejected_token_is_a_challenge_then_a_failure():
    server = OAuthBearerServer(UnsecuredJwsValidator({}))
    challenge = server.evaluate(client_initial_response(unsecured({**GOOD, "exp": 1})), NOW_MS)
    assert json.loads(challenge) == {"status": "invalid_token"}
    assert not server.complete
    with pytest.raises(SaslAuthenticationError, match="invalid_token"):
        server.evaluate(b"\x01", NOW_MS)


def test_oauthbearer_authorization_id_must_be_the_principal():
    server = OAuthBearerServer(UnsecuredJwsValidator({}))
    message = b"n,a=mallory," + client_initial_response(unsecured(GOOD))[3:]
    with pytest.raises(SaslAuthenticationError, match="authorization id"):
        server.evaluate(message, NOW_MS)


# -- JWKS (KIP-768) ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def keys():
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(private.public_key()))
    jwk.update(kid="k1", alg="RS256", use="sig")
    return private, other, jwt.PyJWKSet.from_dict({"keys": [jwk]})


def _signed(key, claims, kid="k1"):
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": kid})


def _jwks(keyset, **kwargs) -> JwksValidator:
    return JwksValidator(lambda: keyset, **kwargs)


def test_jwks_valid_token(keys):
    private, _, keyset = keys
    claims = {**GOOD, "aud": "kafka", "iss": "https://idp"}
    token = _jwks(keyset, expected_audience=["kafka"], expected_issuer="https://idp").validate(
        _signed(private, claims), NOW_MS)
    assert token.principal == "alice" and token.expires_at_ms == NOW_MS + 3_600_000


@pytest.mark.parametrize("case", ["other key", "unknown kid", "expired", "audience", "issuer", "unsigned"])
def test_jwks_refusals(keys, case):
    private, other, keyset = keys
    claims = {**GOOD, "aud": "kafka", "iss": "https://idp"}
    token = {
        "other key": lambda: _signed(other, claims),
        "unknown kid": lambda: _signed(private, claims, kid="k2"),
        "expired": lambda: _signed(private, {**claims, "exp": NOW_MS / 1000 - 31}),
        "audience": lambda: _signed(private, {**claims, "aud": "elsewhere"}),
        "issuer": lambda: _signed(private, {**claims, "iss": "https://evil"}),
        "unsigned": lambda: unsecured(claims, {"alg": "none", "kid": "k1"}),
    }[case]()
    with pytest.raises(TokenRejected):
        _jwks(keyset, expected_audience=["kafka"], expected_issuer="https://idp").validate(token, NOW_MS)


@pytest.mark.parametrize("alg", ["HS256", "ES256"])
def test_jwks_a_token_whose_algorithm_does_not_fit_its_key_is_rejected_not_a_crash(keys, alg):
    # The header picks the algorithm; an HS256 header over an RSA key made pyjwt raise TypeError.
    _, _, keyset = keys
    header = base64.urlsafe_b64encode(json.dumps({"alg": alg, "kid": "k1"}).encode()).rstrip(b"=")
    body = base64.urlsafe_b64encode(json.dumps(GOOD).encode()).rstrip(b"=")
    token = (header + b"." + body + b".c2ln").decode()
    with pytest.raises(TokenRejected, match="does not fit"):
        _jwks(keyset).validate(token, NOW_MS)


def test_jwks_clock_skew_allows_a_just_expired_token(keys):
    private, _, keyset = keys
    token = _signed(private, {**GOOD, "exp": NOW_MS / 1000 - 10})
    assert _jwks(keyset, clock_skew_s=30).validate(token, NOW_MS).principal == "alice"
    with pytest.raises(TokenRejected):
        _jwks(keyset, clock_skew_s=0).validate(token, NOW_MS)


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER"])
def test_oauthbearer_scheme_is_case_insensitive(scheme):
    message = client_initial_response("a.b.c").replace(b"Bearer", scheme.encode())
    assert ClientInitialResponse.parse(message).token == "a.b.c"


def test_jwks_unknown_kid_asks_the_source_to_refresh(keys):
    private, _, keyset = keys
    asked: list[bool] = []
    validator = JwksValidator(lambda: keyset, on_unknown_key=lambda: asked.append(True))
    validator.validate(_signed(private, GOOD), NOW_MS)
    assert asked == []
    with pytest.raises(TokenRejected):
        validator.validate(_signed(private, GOOD, kid="rotated"), NOW_MS)
    assert asked == [True]


def _scram_by_hand(server: ScramServer, gs2: str, user: str, password: str) -> None:
    import hashlib
    import hmac

    first_bare = f"n={user},r=clientnonce"
    server_first = server.evaluate(f"{gs2}{first_bare}".encode(), NOW_MS).decode()
    attrs = dict(a.split("=", 1) for a in server_first.split(","))
    salted = salted_password("SCRAM-SHA-256", password, base64.b64decode(attrs["s"]), int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    binding = base64.b64encode(gs2.encode()).decode()
    without_proof = f"c={binding},r={attrs['r']}"
    auth_message = f"{first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(hashlib.sha256(client_key).digest(), auth_message, "sha256").digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature))).decode()
    server.evaluate(f"{without_proof},p={proof}".encode(), NOW_MS)


def test_scram_authorization_id_equal_to_the_username_is_accepted():
    # franz-go, among others, sends "n,a=<user>," when told to; Kafka accepts it for the user itself.
    server = ScramServer("SCRAM-SHA-256", {"alice": ScramCredential.from_password("SCRAM-SHA-256", "pw")}.get)
    _scram_by_hand(server, "n,a=alice,", "alice", "pw")
    assert server.complete and server.authorization_id == "alice"


def test_scram_authorization_id_of_another_user_is_refused():
    server = ScramServer("SCRAM-SHA-256", {"alice": ScramCredential.from_password("SCRAM-SHA-256", "pw")}.get)
    with pytest.raises(SaslError, match="authorization id that is different from username"):
        _scram_by_hand(server, "n,a=admin,", "alice", "pw")
