"""A node's SASL settings from its configuration: Kafka's per-listener and per-mechanism keys,
what a SASL listener serves, and the credentials the node presents to other nodes."""

from __future__ import annotations

import pytest

from kafkapy.config import BrokerConfig
from kafkapy.node.sasl_settings import listener_sasl, listener_value, node_sasl_credentials_for
from kafkapy.security.sasl.oauthbearer import UnsecuredJwsValidator
from kafkapy.security.sasl.plain import PlainServer
from kafkapy.security.sasl.scram import ScramServer
from kafkapy.security.sasl_credentials import SaslCredentials

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret";')
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
              'password="broker-secret";')


def test_lookup_order_listener_mechanism_then_listener_then_global():
    c = BrokerConfig({"sasl.jaas.config": "g", "listener.name.ext.sasl.jaas.config": "l",
                      "listener.name.ext.plain.sasl.jaas.config": "m"})
    assert listener_value(c, "EXT", "sasl.jaas.config", "PLAIN") == "m"
    assert listener_value(c, "EXT", "sasl.jaas.config", "SCRAM-SHA-256") == "l"
    assert listener_value(c, "INT", "sasl.jaas.config", "PLAIN") == "g"


def test_listener_sasl_builds_each_enabled_mechanism():
    c = BrokerConfig({"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512,OAUTHBEARER",
                      "listener.name.ext.plain.sasl.jaas.config": PLAIN_JAAS,
                      "listener.name.ext.oauthbearer.connections.max.reauth.ms": "9000",
                      "connection.failed.authentication.delay.ms": "250"})
    settings = listener_sasl(c, "EXT", lambda mech, user: None)
    assert list(settings.mechanisms) == ["PLAIN", "SCRAM-SHA-512", "OAUTHBEARER"]
    assert isinstance(settings.mechanisms["PLAIN"](), PlainServer)
    assert isinstance(settings.mechanisms["SCRAM-SHA-512"](), ScramServer)
    assert settings.max_reauth_ms == {"PLAIN": 0, "SCRAM-SHA-512": 0, "OAUTHBEARER": 9000}
    assert settings.failed_delay_ms == 250


@pytest.mark.parametrize("props, message", [
    ({"sasl.enabled.mechanisms": "PLAIN"}, "PLAIN needs"),
    ({"sasl.enabled.mechanisms": "GSSAPI"}, "not supported"),
    ({"sasl.enabled.mechanisms": "OAUTHBEARER",
      "listener.name.ext.oauthbearer.sasl.server.callback.handler.class": "com.example.Handler"}, "not supported"),
    ({"sasl.enabled.mechanisms": "OAUTHBEARER", "sasl.server.callback.handler.class":
      "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"}, "jwks.endpoint.url"),
])
def test_listener_sasl_refuses_what_it_cannot_serve(props, message):
    with pytest.raises(ValueError, match=message):
        listener_sasl(BrokerConfig(props), "EXT", lambda mech, user: None)


def test_unsecured_validator_options_come_from_the_jaas_entry():
    c = BrokerConfig({"sasl.enabled.mechanisms": "OAUTHBEARER",
                      "listener.name.ext.oauthbearer.sasl.jaas.config":
                          "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                          "unsecuredValidatorPrincipalClaimName=user;"})
    server = listener_sasl(c, "EXT", lambda mech, user: None).mechanisms["OAUTHBEARER"]()
    validator = server._validator
    assert isinstance(validator, UnsecuredJwsValidator) and validator.principal_claim == "user"


def test_node_credentials_per_listener_role():
    props = {"controller.listener.names": "CONTROLLER",
             "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
             "sasl.mechanism.controller.protocol": "PLAIN",
             "listener.name.internal.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
             "listener.name.controller.plain.sasl.jaas.config": PLAIN_JAAS}
    creds = node_sasl_credentials_for(props)
    assert creds("INTERNAL", "SASL_PLAINTEXT") == SaslCredentials("SCRAM-SHA-512", "broker", "broker-secret")
    assert creds("CONTROLLER", "SASL_PLAINTEXT") == SaslCredentials("PLAIN", "admin", "admin-secret")
    assert creds("INTERNAL", "SSL") is None


def test_node_credentials_missing_identity_stops_the_node():
    creds = node_sasl_credentials_for({"sasl.mechanism.inter.broker.protocol": "PLAIN"})
    with pytest.raises(ValueError, match="needs username and password"):
        creds("INTERNAL", "SASL_PLAINTEXT")
    with pytest.raises(ValueError, match="GSSAPI"):
        node_sasl_credentials_for({})("INTERNAL", "SASL_PLAINTEXT")


def _jwks_file(path, kid: str) -> str:
    import json

    import jwt
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    jwk.update(kid=kid, alg="RS256", use="sig")
    path.write_text(json.dumps({"keys": [jwk]}))
    return path.as_uri()


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def test_jwks_refresh_runs_off_the_event_loop_and_picks_up_rotated_keys(tmp_path, monkeypatch):
    import threading

    from kafkapy.node import sasl_settings

    clock = _Clock()
    monkeypatch.setattr(sasl_settings, "time", clock)
    url = _jwks_file(tmp_path / "jwks.json", "old")
    source = sasl_settings.JwksSource(url, refresh_ms=3_600_000)
    assert [k.key_id for k in source().keys] == ["old"]
    _jwks_file(tmp_path / "jwks.json", "new")

    # A provider that hangs: the caller still gets the keys it had, at once.
    release, fetching = threading.Event(), threading.Event()
    real_fetch = source._fetch

    def slow_fetch():
        fetching.set()
        assert release.wait(10)
        return real_fetch()

    monkeypatch.setattr(source, "_fetch", slow_fetch)
    clock.now += 3600
    assert [k.key_id for k in source().keys] == ["old"]
    assert fetching.wait(10)
    source.expedite()  # one refresh at a time: no second thread while the first hangs
    release.set()
    for _ in range(200):
        if [k.key_id for k in source().keys] == ["new"]:
            break
        threading.Event().wait(0.05)
    assert [k.key_id for k in source().keys] == ["new"]


def test_jwks_unknown_key_expedites_a_refresh_at_most_every_ten_seconds(tmp_path, monkeypatch):
    from kafkapy.node import sasl_settings

    clock = _Clock()
    monkeypatch.setattr(sasl_settings, "time", clock)
    source = sasl_settings.JwksSource(_jwks_file(tmp_path / "jwks.json", "a"), refresh_ms=3_600_000)
    started: list[bool] = []
    monkeypatch.setattr(source, "_refresh_in_background", lambda: started.append(True))
    source.expedite()
    assert started == []  # read just now
    clock.now += 11
    source.expedite()
    assert started == [True]
