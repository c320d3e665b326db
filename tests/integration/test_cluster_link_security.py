"""Cluster links to a source whose client listeners are SASL_SSL (SCRAM-SHA-512 over TLS) and SSL
requiring a client certificate (mTLS): the mirror copies records at the same offsets, the link's
secrets are never described back, and a wrong password or an unloadable truststore refuse the
link with Kafka's codes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import trustme
from helpers import wait_for
from test_cluster_links import bootstrap, call, create_topic, end_offset, kafkapy, same_logs, write

from kafkapy.protocol import messages as m
from kafkapy.testing.node import KafkaNode, free_port

SECRET = "linker-secret-6d1f"
SCRAM = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
         f'username="linker" password="{SECRET}";')


@pytest.fixture(scope="module")
def ca_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(str(d / "node.pem"))
    ca.issue_cert("osaka-link.example", common_name="osaka-link").private_key_and_cert_chain_pem.write_to_path(
        str(d / "link.pem"))
    return d / "ca.pem"


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory, ca_path: Path) -> Any:
    n = KafkaNode(tmp_path_factory.mktemp("source"))
    n.sasl_ssl_port, n.ssl_port = free_port(), free_port()
    n.overrides.update({
        # PLAINTEXT stays for the test's own set-up and checks; the links use the other two.
        "listeners": f"PLAINTEXT://127.0.0.1:{n.port},SASL_SSL://127.0.0.1:{n.sasl_ssl_port},"
                     f"SSL://127.0.0.1:{n.ssl_port},CONTROLLER://127.0.0.1:{n.controller_port}",
        "listener.name.ssl.ssl.client.auth": "required",
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca_path),
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(ca_path.parent / "node.pem"),
        "connection.failed.authentication.delay.ms": "0",
    })
    cmd = [n.python, "-m", "kafkapy", "storage", "format",
           "--add-scram", f"SCRAM-SHA-512=[name=linker,password={SECRET},iterations=8192]"]
    for key, value in n._settings().items():
        cmd += ["--override", f"{key}={value}"]
    subprocess.run(cmd, check=True, capture_output=True, timeout=60)
    with n:
        yield n


@pytest.fixture(scope="module")
def dest(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with KafkaNode(tmp_path_factory.mktemp("dest")) as n:
        yield n


def link_configs(ca_path: Path, jaas: str = SCRAM) -> dict[str, str]:
    return {"security.protocol": "SASL_SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca_path),
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": jaas}


def create_link(dest: Any, name: str, source: Any, configs: dict[str, str], tmp_path: Path, ok: bool = True,
                port: int | None = None) -> Any:
    props = tmp_path / f"{name}.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in configs.items()))
    port = port or source.sasl_ssl_port
    return kafkapy("link", "create", name, "--source-bootstrap-server", f"127.0.0.1:{port}",
                   "--config-file", str(props), "--bootstrap-server", bootstrap(dest), ok=ok)


def test_a_mirror_over_a_sasl_ssl_link_keeps_offsets_and_hides_secrets(source, dest, ca_path, tmp_path) -> None:
    create_topic(source, "payments", 2)
    for p in range(2):
        for i in range(4):
            assert write(source, "payments", p, [f"p{p}-{i}-{j}".encode() for j in range(5)]) == 0
    create_link(dest, "secure", source, link_configs(ca_path), tmp_path)
    kafkapy("mirror", "create", "payments", "--link", "secure", "--bootstrap-server", bootstrap(dest))
    wait_for("the mirror to catch up", lambda: same_logs(source, dest, "payments", 2), timeout=60)
    assert write(source, "payments", 1, [b"later"] * 3) == 0
    wait_for("the new records on the mirror", lambda: same_logs(source, dest, "payments", 2), timeout=30)
    assert end_offset(dest, "payments", 1) == 23

    # The wire: secrets are null and marked sensitive; the rest is as given.
    [described] = call(dest, m.DescribeClusterLinksRequest(link_names=["secure"]), version=0).links
    configs = {c.name: (c.value, c.is_sensitive) for c in described.configs}
    assert configs["sasl.jaas.config"] == (None, True)
    assert configs["sasl.mechanism"] == ("SCRAM-SHA-512", False)
    assert configs["ssl.truststore.location"] == (str(ca_path), False)
    assert described.state == "ACTIVE"
    # The CLI, in both forms.
    text = kafkapy("link", "describe", "secure", "--bootstrap-server", bootstrap(dest)).stdout
    as_json = kafkapy("link", "describe", "secure", "--bootstrap-server", bootstrap(dest), "--json").stdout
    assert SECRET not in text and SECRET not in as_json and "sasl.jaas.config=******" in text
    assert json.loads(as_json)[0]["configs"]["sasl.jaas.config"] is None


def test_a_wrong_password_or_a_truststore_that_does_not_load_refuses_the_link(source, dest, ca_path,
                                                                             tmp_path) -> None:
    wrong = create_link(dest, "wrong", source, link_configs(ca_path, SCRAM.replace(SECRET, "nope")), tmp_path,
                        ok=False)
    assert wrong.returncode != 0 and "SASL_AUTHENTICATION_FAILED" in wrong.stderr + wrong.stdout, wrong
    missing = create_link(dest, "notrust", source, {**link_configs(ca_path),
                                                   "ssl.truststore.location": str(tmp_path / "none.pem")},
                          tmp_path, ok=False)
    out = missing.stderr + missing.stdout
    assert missing.returncode != 0 and "INVALID_CONFIG" in out and "ssl.truststore.location" in out, missing
    names = [x.link_name for x in call(dest, m.DescribeClusterLinksRequest(link_names=None), version=0).links]
    assert "wrong" not in names and "notrust" not in names


def test_a_link_with_a_client_certificate_mirrors_from_an_mtls_listener(source, dest, ca_path, tmp_path) -> None:
    create_topic(source, "audit", 1)
    assert write(source, "audit", 0, [f"a{i}".encode() for i in range(9)]) == 0
    mtls = {"security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca_path),
            "ssl.keystore.type": "PEM", "ssl.keystore.location": str(ca_path.parent / "link.pem")}
    # Without its certificate the source will not take the link.
    no_cert = {k: v for k, v in mtls.items() if not k.startswith("ssl.keystore")}
    assert create_link(dest, "nocert", source, no_cert, tmp_path, ok=False, port=source.ssl_port).returncode != 0
    create_link(dest, "mtls", source, mtls, tmp_path, port=source.ssl_port)
    kafkapy("mirror", "create", "audit", "--link", "mtls", "--bootstrap-server", bootstrap(dest))
    wait_for("the mirror to catch up", lambda: same_logs(source, dest, "audit", 1), timeout=60)
    assert end_offset(dest, "audit", 0) == 9
