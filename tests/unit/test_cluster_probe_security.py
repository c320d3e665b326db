"""How `kafkapy cluster` reaches each listener: in its protocol, as the node itself does."""

from __future__ import annotations

from pathlib import Path

from kafkapy.cli.cluster_probe import listener_security
from kafkapy.net.client_security import PLAINTEXT
from kafkapy.testing.node_pki import write_node_pki

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule required"


def props(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:SASL_SSL,CONTROLLER:SSL",
        **write_node_pki(tmp_path).node_settings(),
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.plaintext.plain.sasl.jaas.config":
            f'{PLAIN} username="broker" password="broker-secret" user_broker="broker-secret";',
        **extra,
    }


def test_a_sasl_ssl_listener_is_reached_over_tls_as_the_nodes_own_user(tmp_path: Path) -> None:
    security = listener_security(props(tmp_path), "PLAINTEXT")
    assert security is not None and security.protocol == "SASL_SSL" and security.uses_tls
    assert security.sasl is not None and security.sasl.mechanism == "PLAIN"
    assert security.sasl.username == "broker"


def test_an_ssl_listener_gets_tls_without_sasl(tmp_path: Path) -> None:
    security = listener_security(props(tmp_path), "CONTROLLER")
    assert security is not None and security.protocol == "SSL" and security.uses_tls
    assert security.sasl is None


def test_a_plaintext_listener_stays_plaintext(tmp_path: Path) -> None:
    settings = props(tmp_path, **{"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"})
    assert listener_security(settings, "PLAINTEXT") is PLAINTEXT


def test_without_an_identity_on_a_sasl_listener_only_tls_is_used(tmp_path: Path) -> None:
    settings = props(tmp_path)
    del settings["listener.name.plaintext.plain.sasl.jaas.config"]
    security = listener_security(settings, "PLAINTEXT")
    assert security is not None and security.uses_tls and security.sasl is None


def test_unusable_tls_settings_mean_the_listener_cannot_be_probed(tmp_path: Path) -> None:
    settings = props(tmp_path, **{"ssl.truststore.location": str(tmp_path / "missing.pem")})
    assert listener_security(settings, "CONTROLLER") is None
