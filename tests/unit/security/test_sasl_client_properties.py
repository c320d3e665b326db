"""Kafka client properties (``--command-config`` files) as SASL credentials."""

from __future__ import annotations

import pytest

from kafkapy.security.sasl.client_properties import sasl_credentials_from_client_properties
from kafkapy.security.sasl.oauthbearer import UnsecuredJwsValidator
from kafkapy.security.sasl_credentials import SaslCredentials

NOW_S = 1_800_000_000


def creds(**props: str) -> SaslCredentials:
    return sasl_credentials_from_client_properties({k.replace("_", "."): v for k, v in props.items()}, now_s=NOW_S)


def test_scram_from_jaas():
    assert creds(sasl_mechanism="SCRAM-SHA-256", sasl_jaas_config=(
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="pw";')) == \
        SaslCredentials("SCRAM-SHA-256", username="alice", password="pw")


def test_plain_from_librdkafka_style_properties():
    assert sasl_credentials_from_client_properties(
        {"sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "pw"}, now_s=NOW_S) == \
        SaslCredentials("PLAIN", username="alice", password="pw")


def test_unsecured_oauthbearer_token_passes_the_unsecured_validator():
    c = sasl_credentials_from_client_properties({
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                            'unsecuredLoginStringClaim_sub="alice" unsecuredLoginExtension_traceId="t1";'},
        now_s=NOW_S)
    assert c.extensions == (("traceId", "t1"),)
    token = UnsecuredJwsValidator({}).validate(c.token, NOW_S * 1000)
    assert token.principal == "alice" and token.expires_at_ms == (NOW_S + 3600) * 1000


@pytest.mark.parametrize("props, message", [
    ({}, "GSSAPI"),
    ({"sasl.mechanism": "PLAIN"}, "needs sasl.jaas.config"),
    ({"sasl.mechanism": "PLAIN", "sasl.jaas.config":
      'org.apache.kafka.common.security.scram.ScramLoginModule required username="a" password="b";'}, "PlainLoginModule"),
    ({"sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config":
      "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"}, "unsecured"),
])
def test_refusals(props, message):
    with pytest.raises(ValueError, match=message):
        sasl_credentials_from_client_properties(props, now_s=NOW_S)
