"""A cluster link's client security configs: which are taken and checked when the link is
created, how they become the link's ClientSecurity, and which are never described back."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import trustme

from kafkapy.link.link_security import link_client_security
from kafkapy.metadata.image import ClusterLink
from kafkapy.metadata.link_configs import described_link_configs, validate_link_configs
from kafkapy.metadata.records import ClusterLinkRecord, LinkConfig
from kafkapy.protocol.errors import ErrorCode, KafkaError

SCRAM = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="linker" password="s3cret";'
BASE = {"bootstrap.servers": "a:9093"}


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    paths = {"ca": d / "ca.pem", "client": d / "client.pem"}
    ca.cert_pem.write_to_path(str(paths["ca"]))
    ca.issue_cert("linker.example").private_key_and_cert_chain_pem.write_to_path(str(paths["client"]))
    return paths


@pytest.mark.parametrize("configs", [
    {"security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": "/ca.pem",
     "ssl.endpoint.identification.algorithm": ""},
    {"security.protocol": "sasl_ssl", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": SCRAM},
    {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
     "sasl.jaas.config": SCRAM.replace("scram.ScramLoginModule", "plain.PlainLoginModule")},
    {"security.protocol": "SSL", "ssl.keystore.type": "PEM", "ssl.keystore.location": "/me.pem",
     "ssl.key.password": "k"},
])
def test_client_security_configs_make_a_valid_link(configs: dict[str, str]) -> None:
    assert validate_link_configs({**BASE, **configs}) is None


@pytest.mark.parametrize("configs, named", [
    ({"security.protocol": "TLS"}, "security.protocol"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512"}, "sasl.jaas.config"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI", "sasl.jaas.config": SCRAM}, "sasl.mechanism"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.jaas.config": SCRAM}, "sasl.jaas.config"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256", "sasl.jaas.config": "nonsense"},
     "sasl.jaas.config"),
    # A broker's own setting, not a client's.
    ({"security.protocol": "SSL", "ssl.client.auth": "required"}, "ssl.client.auth"),
    ({"acl.sync.enable": "true"}, "acl.sync.enable"),
])
def test_bad_security_configs_are_refused_naming_the_setting(configs: dict[str, str], named: str) -> None:
    problem = validate_link_configs({**BASE, **configs})
    assert problem is not None and named in problem, problem
    assert "s3cret" not in problem


def test_secrets_are_described_without_their_values() -> None:
    configs = {**BASE, "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": SCRAM,
               "ssl.keystore.key": "-----BEGIN PRIVATE KEY-----...", "ssl.keystore.password": "a",
               "ssl.key.password": "b", "ssl.truststore.password": "c", "ssl.truststore.location": "/ca.pem"}
    described = {name: (value, sensitive) for name, value, sensitive in described_link_configs(configs)}
    hidden = {"sasl.jaas.config", "ssl.keystore.key", "ssl.keystore.password", "ssl.key.password",
              "ssl.truststore.password"}
    assert {n for n, (_, sensitive) in described.items() if sensitive} == hidden
    assert all(described[n][0] is None for n in hidden)
    assert described["ssl.truststore.location"] == ("/ca.pem", False)
    assert described["sasl.mechanism"] == ("SCRAM-SHA-512", False)


def test_a_link_connects_with_tls_and_scram_from_its_configs(pki: dict[str, Path]) -> None:
    security = link_client_security("l", {**BASE, "security.protocol": "SASL_SSL", "ssl.truststore.type": "PEM",
                                          "ssl.truststore.location": str(pki["ca"]), "sasl.mechanism": "SCRAM-SHA-512",
                                          "sasl.jaas.config": SCRAM})
    assert security.protocol == "SASL_SSL" and security.ssl_context is not None
    assert security.ssl_context.check_hostname  # https by default, as Kafka's clients
    assert security.sasl is not None and (security.sasl.mechanism, security.sasl.username, security.sasl.password) == \
        ("SCRAM-SHA-512", "linker", "s3cret")


def test_an_mtls_link_presents_its_keystore(pki: dict[str, Path]) -> None:
    security = link_client_security("l", {**BASE, "security.protocol": "SSL", "ssl.truststore.type": "PEM",
                                          "ssl.truststore.certificates": pki["ca"].read_text(),
                                          "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki["client"]),
                                          "ssl.endpoint.identification.algorithm": ""})
    assert security.ssl_context is not None and not security.ssl_context.check_hostname
    assert security.sasl is None


def test_a_truststore_that_does_not_load_is_an_invalid_config(tmp_path: Path) -> None:
    with pytest.raises(KafkaError) as caught:
        link_client_security("l", {**BASE, "security.protocol": "SSL", "ssl.truststore.type": "PEM",
                                   "ssl.truststore.location": str(tmp_path / "missing.pem")})
    assert caught.value.code == ErrorCode.INVALID_CONFIG and "ssl.truststore.location" in str(caught.value.message)


def test_a_links_record_and_image_never_print_its_secrets() -> None:
    configs = {**BASE, "sasl.jaas.config": SCRAM, "ssl.key.password": "s3cret"}
    record = ClusterLinkRecord(uuid.uuid4(), "l", "c", tuple(LinkConfig(k, v) for k, v in sorted(configs.items())))
    for shown in (repr(record), repr(ClusterLink(uuid.uuid4(), "l", "c", configs))):
        assert "s3cret" not in shown and "(redacted)" in shown and "a:9093" in shown
