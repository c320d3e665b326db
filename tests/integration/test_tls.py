"""A real node with TLS listeners, driven by stock clients (confluent-kafka, kcat).

The node listens on PLAINTEXT (for the harness's readiness probe), SSL (server TLS only) and MTLS
(``ssl.client.auth=required``, principals mapped from the certificate DN); the certificates come
from a throwaway trustme CA. Every wait is bounded and the node is stopped by the fixture.
"""

from __future__ import annotations

import re
import socket
import struct
import uuid
from pathlib import Path
from typing import Any

import pytest
import trustme

from kafkapy.testing.clients import run_kcat
from kafkapy.testing.node import KafkaNode, free_port

confluent_kafka = pytest.importorskip("confluent_kafka")
admin_api = pytest.importorskip("confluent_kafka.admin")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    paths = {name: str(d / f"{name}.pem") for name in ("ca", "server", "client", "client_key", "client_cert")}
    ca.cert_pem.write_to_path(paths["ca"])
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(paths["server"])
    client = ca.issue_cert("app.example", common_name="orders-app", organization_unit_name="Apps")
    client.private_key_and_cert_chain_pem.write_to_path(paths["client"])
    client.private_key_pem.write_to_path(paths["client_key"])
    client.cert_chain_pems[0].write_to_path(paths["client_cert"])
    # Java's PEM keystores read PKCS#8 keys only.
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, load_pem_private_key
    key = load_pem_private_key(client.private_key_pem.bytes(), None)
    paths["client_pkcs8"] = str(d / "client_pkcs8.pem")
    Path(paths["client_pkcs8"]).write_bytes(key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
                                            + b"".join(c.bytes() for c in client.cert_chain_pems))
    return paths


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, pki: dict[str, str]) -> Any:
    n = KafkaNode(tmp_path_factory.mktemp("tls-node"))
    n.ssl_port, n.mtls_port = free_port(), free_port()
    n.overrides.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{n.port},SSL://127.0.0.1:{n.ssl_port},"
                     f"MTLS://127.0.0.1:{n.mtls_port},CONTROLLER://127.0.0.1:{n.controller_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": pki["server"],
        "ssl.truststore.type": "PEM", "ssl.truststore.location": pki["ca"],
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.principal.mapping.rules": "RULE:^CN=([^,]+),OU=Apps,.*$/$1/,DEFAULT",
    })
    with n:
        yield n


def ssl_conf(pki: dict[str, str], port: int, *, cert: bool = False) -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL",
                            "ssl.ca.location": pki["ca"], "socket.timeout.ms": 10000}
    if cert:
        conf |= {"ssl.certificate.location": pki["client_cert"], "ssl.key.location": pki["client_key"]}
    return conf


def produce_and_consume(conf: dict[str, Any], topic: str, values: list[bytes]) -> list[bytes]:
    producer = confluent_kafka.Producer({**conf, "acks": "all", "message.timeout.ms": 20000})
    for v in values:
        producer.produce(topic, v)
    assert producer.flush(30) == 0
    consumer = confluent_kafka.Consumer({**conf, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    got: list[bytes] = []
    try:
        consumer.subscribe([topic])
        for _ in range(300):
            if len(got) >= len(values):
                break
            msg = consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
    finally:
        consumer.close()
    return got


def test_confluent_kafka_produces_and_consumes_over_ssl(node, pki):
    values = [f"ssl-{i}".encode() for i in range(20)]
    assert produce_and_consume(ssl_conf(pki, node.ssl_port), "tls-orders", values) == values


def test_kcat_over_ssl(node, pki):
    ssl_args = ["-X", "security.protocol=ssl", "-X", f"ssl.ca.location={pki['ca']}"]
    bootstrap = f"127.0.0.1:{node.ssl_port}"
    done = run_kcat(["-b", bootstrap, "-P", "-t", "tls-kcat", "-p", "0", *ssl_args], input=b"a\nb\nc\n")
    assert done.returncode == 0, done.describe()
    done = run_kcat(["-b", bootstrap, "-C", "-t", "tls-kcat", "-p", "0", "-o", "beginning", "-e", "-q", *ssl_args])
    assert done.returncode == 0, done.describe()
    assert done.text.split() == ["a", "b", "c"]


def test_mtls_client_gets_its_mapped_principal(node, pki):
    values = [b"m1", b"m2"]
    assert produce_and_consume(ssl_conf(pki, node.mtls_port, cert=True), "tls-mtls", values) == values
    lines = re.findall(r"on listener MTLS authenticated by its certificate (CN=orders-app,OU=Apps,.*?) as (\S+) \(",
                       node.log_tail(200_000))
    assert lines and all(principal == "User:orders-app" for _, principal in lines)


def test_mtls_refuses_a_client_without_a_certificate(node, pki):
    admin = admin_api.AdminClient(ssl_conf(pki, node.mtls_port))
    with pytest.raises(confluent_kafka.KafkaException):
        admin.list_topics(timeout=5)
    assert re.search(r"Failed authentication with 127.0.0.1 on listener MTLS .*SSL handshake failed",
                     node.log_tail(200_000))


def test_plaintext_to_the_tls_port_is_refused_and_the_node_keeps_serving(node, pki):
    body = struct.pack(">hhih", 18, 0, 1, 4) + b"test"
    with socket.create_connection(("127.0.0.1", node.ssl_port), timeout=10) as s:
        s.settimeout(10)
        s.sendall(struct.pack(">i", len(body)) + body)
        try:
            answer = s.recv(100)
        except ConnectionResetError:
            answer = b""
    assert answer == b"" or answer[0] == 21  # nothing, or a TLS alert: never a Kafka answer
    admin = admin_api.AdminClient(ssl_conf(pki, node.ssl_port))
    assert admin.list_topics(timeout=10).brokers
    assert node.running()


def test_tls_settings_are_described_with_secrets_hidden(node, pki, tmp_path: Path):
    admin = admin_api.AdminClient({"bootstrap.servers": node.bootstrap})
    resource = admin_api.ConfigResource("BROKER", "1")
    configs = admin.describe_configs([resource])[resource].result(timeout=10)
    assert configs["ssl.keystore.location"].value == pki["server"]
    assert configs["ssl.enabled.protocols"].value == "TLSv1.2,TLSv1.3"
    assert configs["ssl.keystore.key"].is_sensitive


def test_cli_reaches_a_tls_listener_with_command_config(node, pki, tmp_path: Path, capsys):
    from kafkapy.cli.main import main

    produce_and_consume(ssl_conf(pki, node.ssl_port), "tls-cli", [b"x"])
    config = tmp_path / "client.properties"
    config.write_text(f"security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={pki['ca']}\n")
    assert main(["topics", "list", "--bootstrap-server", f"127.0.0.1:{node.ssl_port}",
                 "--command-config", str(config)]) == 0
    assert "tls-cli" in capsys.readouterr().out
    # mTLS: the client's key and certificate from the same file.
    config.write_text(config.read_text() + f"ssl.keystore.type=PEM\nssl.keystore.location={pki['client']}\n")
    assert main(["topics", "list", "--bootstrap-server", f"127.0.0.1:{node.mtls_port}",
                 "--command-config", str(config)]) == 0
    # Without the file, the TLS port gives no answer the CLI could read.
    assert main(["topics", "list", "--bootstrap-server", f"127.0.0.1:{node.ssl_port}",
                 "--command-timeout", "5"]) != 0


def test_cli_produce_and_consume_over_mtls(node, pki, tmp_path: Path):
    import subprocess
    import sys

    config = tmp_path / "client.properties"
    config.write_text(f"security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={pki['ca']}\n"
                      f"ssl.keystore.type=PEM\nssl.keystore.location={pki['client']}\n")
    common = ["--bootstrap-server", f"127.0.0.1:{node.mtls_port}", "--command-config", str(config)]
    done = subprocess.run([sys.executable, "-m", "kafkapy", "produce", "--topic", "tls-cli-mtls", *common],
                          input=b"one\ntwo\n", capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([sys.executable, "-m", "kafkapy", "consume", "--topic", "tls-cli-mtls", "--from-beginning",
                           "--max-messages", "2", "--timeout-ms", "20000", *common], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [b"one", b"two"]


def _mtls_client_config(client: str, pki: dict[str, str]) -> dict[str, str]:
    if client == "java":
        return {"security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": pki["ca"],
                "ssl.keystore.type": "PEM", "ssl.keystore.location": pki["client_pkcs8"]}
    return {"security_protocol": "SSL", "ssl_cafile": pki["ca"], "ssl_certfile": pki["client_cert"],
            "ssl_keyfile": pki["client_key"]}


@pytest.mark.parametrize("client", ["java", "kafka_python"])
def test_other_stock_clients_over_mtls(node, pki, client):
    import base64

    from kafkapy.testing.clients import ok, run_driver

    topic = f"tls-{client.replace('_', '-')}"
    config = _mtls_client_config(client, pki)
    bootstrap = f"127.0.0.1:{node.mtls_port}"
    values = [f"{client}-{i}".encode() for i in range(5)]
    records = [{"key": None, "value": base64.b64encode(v).decode()} for v in values]
    produced = ok(run_driver(client, {"op": "produce", "bootstrap": bootstrap, "topic": topic, "records": records,
                                      "config": config}, timeout=120))
    assert all("error" not in d for d in produced["deliveries"]), produced
    consumed = ok(run_driver(client, {"op": "consume", "bootstrap": bootstrap, "topic": topic, "partition": 0,
                                      "offset": 0, "max_records": 5, "config": config}, timeout=120))
    assert [base64.b64decode(r["value"]) for r in consumed["records"]] == values


def test_kafkas_own_tools_over_mtls_with_command_config(node, pki, tmp_path: Path):
    import subprocess

    from kafkapy.testing.apache_kafka import java_command
    from kafkapy.testing.node import NodeError

    config = tmp_path / "client.properties"
    config.write_text("\n".join(f"{k}={v}" for k, v in _mtls_client_config("java", pki).items()) + "\n")
    bootstrap = f"127.0.0.1:{node.mtls_port}"
    try:
        create = java_command("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bootstrap,
                              "--command-config", str(config), "--create", "--topic", "tls-tools",
                              "--partitions", "2")
    except NodeError as exc:
        pytest.skip(str(exc))
    done = subprocess.run(create, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    listed = subprocess.run(java_command("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bootstrap,
                                         "--command-config", str(config), "--list"),
                            capture_output=True, timeout=120)
    assert listed.returncode == 0, listed.stderr.decode()[-3000:]
    assert "tls-tools" in listed.stdout.decode().split()
