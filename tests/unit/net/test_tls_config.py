"""TLS contexts from each form of Kafka's ssl.* settings, and a clear error naming the setting
for each one kafkapy cannot honour."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
import trustme
from cryptography import x509
from cryptography.hazmat.primitives.serialization import (
    BestAvailableEncryption,
    Encoding,
    PrivateFormat,
    load_pem_private_key,
    pkcs12,
)

from kafkapy.config import BrokerConfig
from kafkapy.net.tls import TlsConfigError, client_context, listener_settings, server_tls
from kafkapy.node.listener_security import NodeSecurity


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    out = {"dir": d, "ca": d / "ca.pem", "server": d / "server.pem", "ca_obj": ca, "cert": cert}
    ca.cert_pem.write_to_path(str(out["ca"]))
    cert.private_key_and_cert_chain_pem.write_to_path(str(out["server"]))
    return out


def pem_props(pki, **extra):
    return {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki["server"]), **extra}


def test_pem_keystore_file(pki):
    tls = server_tls(pem_props(pki), "SSL", "SSL")
    assert tls.context.verify_mode == ssl.CERT_NONE and tls.client_auth == "none"
    assert tls.context.minimum_version == ssl.TLSVersion.TLSv1_2
    assert tls.context.maximum_version == ssl.TLSVersion.TLSv1_3


def test_inline_pem_keystore_with_an_encrypted_key_and_inline_truststore(pki):
    key = load_pem_private_key(pki["cert"].private_key_pem.bytes(), None)
    encrypted = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(b"s3cret")).decode()
    chain = b"".join(b.bytes() for b in pki["cert"].cert_chain_pems).decode()
    props = {"ssl.keystore.type": "PEM", "ssl.keystore.key": encrypted, "ssl.keystore.certificate.chain": chain,
             "ssl.key.password": "s3cret", "ssl.client.auth": "required", "ssl.truststore.type": "PEM",
             "ssl.truststore.certificates": pki["ca_obj"].cert_pem.bytes().decode()}
    tls = server_tls(props, "SSL", "SSL")
    assert tls.context.verify_mode == ssl.CERT_REQUIRED
    with pytest.raises(TlsConfigError, match=r"^ssl.keystore.key \(listener SSL\): no usable private key"):
        server_tls({**props, "ssl.key.password": "wrong"}, "SSL", "SSL")


def test_pkcs12_keystore_and_truststore(pki):
    key = load_pem_private_key(pki["cert"].private_key_pem.bytes(), None)
    certs = [x509.load_pem_x509_certificate(b.bytes()) for b in pki["cert"].cert_chain_pems]
    store = pki["dir"] / "server.p12"
    store.write_bytes(pkcs12.serialize_key_and_certificates(b"server", key, certs[0], certs[1:],
                                                            BestAvailableEncryption(b"pw")))
    trust = pki["dir"] / "trust.p12"
    ca_cert = x509.load_pem_x509_certificate(pki["ca_obj"].cert_pem.bytes())
    trust.write_bytes(pkcs12.serialize_key_and_certificates(None, None, None, [ca_cert],
                                                            BestAvailableEncryption(b"pw")))
    props = {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(store), "ssl.keystore.password": "pw",
             "ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(trust), "ssl.truststore.password": "pw",
             "ssl.client.auth": "requested"}
    assert server_tls(props, "SSL", "SSL").context.verify_mode == ssl.CERT_OPTIONAL
    with pytest.raises(TlsConfigError, match="ssl.keystore.password right"):
        server_tls({**props, "ssl.keystore.password": "nope"}, "SSL", "SSL")


def test_listener_overrides_win(pki):
    props = {"ssl.client.auth": "required", "listener.name.internal.ssl.client.auth": "none",
             "ssl.keystore.type": "PEM", "listener.name.internal.ssl.keystore.location": str(pki["server"])}
    assert listener_settings(props, "INTERNAL")["ssl.client.auth"] == "none"
    assert listener_settings(props, "EXTERNAL")["ssl.client.auth"] == "required"
    assert server_tls(props, "INTERNAL", "SSL").client_auth == "none"
    with pytest.raises(TlsConfigError, match="listener EXTERNAL is SSL but has no keystore"):
        server_tls(props, "EXTERNAL", "SSL")


def test_sasl_ssl_listener_reads_only_its_own_client_auth(pki):
    # KIP-684: the broker-wide ssl.client.auth is for SSL listeners.
    assert server_tls(pem_props(pki, **{"ssl.client.auth": "required"}), "SASL_SSL", "SASL_SSL").client_auth == "none"
    props = pem_props(pki, **{"listener.name.sasl_ssl.ssl.client.auth": "requested"})
    assert server_tls(props, "SASL_SSL", "SASL_SSL").client_auth == "requested"


def test_protocols_and_cipher_suites(pki):
    ctx = server_tls(pem_props(pki, **{"ssl.enabled.protocols": "TLSv1.2",
                                       "ssl.cipher.suites": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}),
                     "SSL", "SSL").context
    assert ctx.maximum_version == ssl.TLSVersion.TLSv1_2
    assert [c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.2"] == ["ECDHE-RSA-AES128-GCM-SHA256"]
    only13 = server_tls(pem_props(pki, **{"ssl.cipher.suites": "TLS_AES_256_GCM_SHA384"}), "SSL", "SSL").context
    assert only13.minimum_version == ssl.TLSVersion.TLSv1_3


@pytest.mark.parametrize("extra, message", [
    ({"ssl.keystore.type": "JKS"}, r"^ssl.keystore.type \(listener SSL\): JKS keystores are not supported"),
    ({"ssl.keystore.type": None}, r"^ssl.keystore.type \(listener SSL\): JKS keystores"),
    ({"ssl.keystore.location": "/nonexistent.pem"}, r"^ssl.keystore.location \(listener SSL\): cannot read /nonex"),
    ({"ssl.client.auth": "always"}, r"^ssl.client.auth \(listener SSL\): 'always' is not one of"),
    ({"ssl.enabled.protocols": "TLSv1.2,SSLv3"}, r"^ssl.enabled.protocols \(listener SSL\): unknown protocol 'SSLv3'"),
    ({"ssl.cipher.suites": "TLS_NOPE_WITH_NOTHING"}, r"^ssl.cipher.suites \(listener SSL\): unknown or unavailable"),
    ({"ssl.principal.mapping.rules": "RULE:x/y/Q/"}, r"ssl.principal.mapping.rules"),
    ({"ssl.client.auth": "required", "ssl.truststore.type": "JKS", "ssl.truststore.location": "/t.jks"},
     r"^ssl.truststore.type \(listener SSL\): JKS truststores are not supported"),
    ({"ssl.engine.factory.class": "com.example.Factory"}, r"^ssl.engine.factory.class \(listener SSL\)"),
    ({"listener.name.ssl.ssl.keystore.location": "/missing.pem"},
     r"^listener.name.ssl.ssl.keystore.location \(listener SSL\): cannot read"),
])
def test_bad_settings_name_the_setting(pki, extra, message):
    props = {k: v for k, v in {**pem_props(pki), **extra}.items() if v is not None}
    with pytest.raises(TlsConfigError, match=message):
        server_tls(props, "SSL", "SSL")


def test_client_endpoint_identification(pki):
    assert client_context({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki["ca"])}).check_hostname
    off = client_context({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki["ca"]),
                          "ssl.endpoint.identification.algorithm": ""})
    assert not off.check_hostname and off.verify_mode == ssl.CERT_REQUIRED
    with pytest.raises(TlsConfigError, match="ssl.endpoint.identification.algorithm"):
        client_context({"ssl.endpoint.identification.algorithm": "ldap"})


def test_node_startup_fails_on_a_bad_listener_setting(pki, tmp_path: Path):
    config = BrokerConfig.from_sources({
        "process.roles": "broker,controller", "node.id": "1", "log.dirs": str(tmp_path),
        "listeners": "SSL://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
        "controller.listener.names": "CONTROLLER", "controller.quorum.voters": "1@127.0.0.1:9093",
        "inter.broker.listener.name": "SSL", "ssl.keystore.location": str(pki["server"])})
    with pytest.raises(TlsConfigError, match="ssl.keystore.type .* JKS"):
        NodeSecurity.from_config(config, is_broker=True, is_controller=True)
    config.props["ssl.keystore.type"] = "PEM"
    security = NodeSecurity.from_config(config, is_broker=True, is_controller=True)
    assert security.listener("SSL")[0] == "SSL" and security.listener("CONTROLLER") == ("PLAINTEXT", None)


def test_an_encrypted_key_without_its_password_is_an_error_not_a_prompt(pki, tmp_path):
    key = load_pem_private_key(pki["cert"].private_key_pem.bytes(), None)
    pem = tmp_path / "encrypted.pem"
    pem.write_bytes(key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(b"pw"))
                    + b"".join(b.bytes() for b in pki["cert"].cert_chain_pems))
    props = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pem)}
    with pytest.raises(TlsConfigError, match=r"^ssl.key.password \(listener SSL\): the private key is encrypted"):
        server_tls(props, "SSL", "SSL")
    assert server_tls({**props, "ssl.key.password": "pw"}, "SSL", "SSL").client_auth == "none"
