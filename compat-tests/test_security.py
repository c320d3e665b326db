"""Stock clients over kafkapy's secured listeners (issue 24's acceptance), each as its own process.

One node serves every protocol at once: PLAINTEXT (the harness's readiness probe), SSL, MTLS (SSL
with ``ssl.client.auth=required``), SASL_PLAINTEXT and SASL_SSL, with PLAIN users from JAAS, SCRAM
users from ``storage format --add-scram`` and unsecured OAUTHBEARER tokens, and the
StandardAuthorizer on with ``User:admin`` as super user (anyone may use a resource without ACLs).
What tests/integration/test_tls.py, test_sasl.py and test_sasl_ssl.py show already
(confluent-kafka and kcat everywhere, kafka-python and Java over mTLS) is not repeated here.
"""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kafkapy.testing.clients import run_driver
from kafkapy.testing.node import KafkaNode, compat_target, free_port
from kafkapy.testing.recordsets import unique_topic

trustme = pytest.importorskip("trustme")

if compat_target() != "kafkapy":
    pytest.skip("the secured node is kafkapy's own (its settings)", allow_module_level=True)

PLAIN_USERS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
               'user_admin="admin-secret" user_alice="alice-secret";')
SCRAM_USER, SCRAM_PASSWORD = "scram-user", "scram-secret"
LISTENERS = ("SSL", "MTLS", "SASL_PLAINTEXT", "SASL_SSL")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    from cryptography.hazmat.primitives.serialization import (Encoding, NoEncryption, PrivateFormat,
                                                              load_pem_private_key)

    d = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    paths = {name: str(d / f"{name}.pem") for name in ("ca", "server", "client_key", "client_cert")}
    ca.cert_pem.write_to_path(paths["ca"])
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(paths["server"])
    client = ca.issue_cert("app.example", common_name="orders-app", organization_unit_name="Apps")
    client.private_key_pem.write_to_path(paths["client_key"])
    client.cert_chain_pems[0].write_to_path(paths["client_cert"])
    # Java's PEM keystores read PKCS#8 keys only.
    key = load_pem_private_key(client.private_key_pem.bytes(), None)
    paths["client_pkcs8"] = str(d / "client_pkcs8.pem")
    Path(paths["client_pkcs8"]).write_bytes(key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
                                            + b"".join(c.bytes() for c in client.cert_chain_pems))
    return paths


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, pki: dict[str, str]) -> Any:
    n = KafkaNode(tmp_path_factory.mktemp("secured"))
    n.ports = {name: free_port() for name in LISTENERS}
    n.overrides.update({
        "listeners": ",".join([f"PLAINTEXT://127.0.0.1:{n.port}",
                               *(f"{name}://127.0.0.1:{port}" for name, port in n.ports.items()),
                               f"CONTROLLER://127.0.0.1:{n.controller_port}"]),
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                          "SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": pki["server"],
        "ssl.truststore.type": "PEM", "ssl.truststore.location": pki["ca"],
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.principal.mapping.rules": "RULE:^CN=([^,]+),OU=Apps,.*$/$1/,DEFAULT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_USERS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_USERS,
        "connection.failed.authentication.delay.ms": "0",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        "allow.everyone.if.no.acl.found": "true",
    })
    cmd = [n.python, "-m", "kafkapy", "storage", "format"]
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        cmd += ["--add-scram", f"{mechanism}=[name={SCRAM_USER},password={SCRAM_PASSWORD},iterations=8192]"]
    for key, value in n._settings().items():
        cmd += ["--override", f"{key}={value}"]
    subprocess.run(cmd, check=True, capture_output=True, timeout=60)
    with n:
        yield n


def bootstrap(node: Any, listener: str) -> str:
    return f"127.0.0.1:{node.ports[listener]}"


# -- per-client settings ---------------------------------------------------------------------------

def python_config(listener: str, pki: dict[str, str], mechanism: str | None = None,
                  user: str | None = None, password: str | None = None) -> dict[str, Any]:
    """aiokafka / kafka-python settings (both take kafka-python's names)."""
    protocol = "SSL" if listener == "MTLS" else listener
    config: dict[str, Any] = {"security_protocol": protocol}
    if "SSL" in protocol:
        config["ssl_cafile"] = pki["ca"]
    if listener == "MTLS":
        config |= {"ssl_certfile": pki["client_cert"], "ssl_keyfile": pki["client_key"]}
    if mechanism:
        config |= {"sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": password}
    return config


JAAS_MODULES = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
                "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
                "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule"}


def java_config(pki: dict[str, str], mechanism: str, user: str, password: str | None = None) -> dict[str, str]:
    """Java client (and Kafka's tools) settings for the SASL_SSL listener."""
    if mechanism == "OAUTHBEARER":  # the client's default login handler makes unsecured tokens
        jaas = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                f'unsecuredLoginStringClaim_sub="{user}";')
    else:
        jaas = f'{JAAS_MODULES[mechanism]} required username="{user}" password="{password}";'
    return {"security.protocol": "SASL_SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": pki["ca"],
            "sasl.mechanism": mechanism, "sasl.jaas.config": jaas}


# -- produce and consume through a driver ---------------------------------------------------------

def round_trip(client: str, address: str, config: dict[str, Any], topic: str) -> None:
    values = [f"{client}-{i}".encode() for i in range(5)]
    records = [{"key": None, "value": base64.b64encode(v).decode()} for v in values]
    produced = run_driver(client, {"op": "produce", "bootstrap": address, "topic": topic, "records": records,
                                   "config": config}, timeout=120)
    assert produced["ok"], produced
    assert all("error" not in d for d in produced["result"]["deliveries"]), produced
    consumed = run_driver(client, {"op": "consume", "bootstrap": address, "topic": topic, "partition": 0,
                                   "offset": 0, "max_records": 5, "config": config}, timeout=120)
    assert consumed["ok"], consumed
    assert [base64.b64decode(r["value"]) for r in consumed["result"]["records"]] == values


def refused(client: str, address: str, config: dict[str, Any]) -> dict:
    """A produce with wrong credentials: the client's own error (nothing may be delivered), with
    its stderr (some clients only log the authentication error, then give up connecting)."""
    records = [{"key": None, "value": base64.b64encode(b"never").decode()}]
    answer = run_driver(client, {"op": "produce", "bootstrap": address, "topic": unique_topic("refused"),
                                 "records": records, "config": config, "timeout_s": 15}, timeout=120)
    if answer["ok"]:
        errors = [d["error"] for d in answer["result"]["deliveries"] if "error" in d]
        assert errors, f"{client} delivered with wrong credentials: {answer}"
        return {**errors[0], "stderr": answer["_stderr"]}
    return {**answer["error"], "stderr": answer["_stderr"]}


AIOKAFKA_CASES = [
    ("SSL", None, None, None),
    ("MTLS", None, None, None),
    ("SASL_PLAINTEXT", "PLAIN", "alice", "alice-secret"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-256", SCRAM_USER, SCRAM_PASSWORD),
    ("SASL_PLAINTEXT", "SCRAM-SHA-512", SCRAM_USER, SCRAM_PASSWORD),
    ("SASL_SSL", "PLAIN", "alice", "alice-secret"),
    ("SASL_SSL", "SCRAM-SHA-512", SCRAM_USER, SCRAM_PASSWORD),
]


@pytest.mark.parametrize("listener, mechanism, user, password", AIOKAFKA_CASES,
                         ids=[f"{c[0]}-{c[1] or 'cert'}" for c in AIOKAFKA_CASES])
def test_aiokafka(node, pki, listener, mechanism, user, password):
    config = python_config(listener, pki, mechanism, user, password)
    round_trip("aiokafka", bootstrap(node, listener), config, unique_topic(f"aiokafka-{listener}"))


# What the node tells a client with a wrong password, in Kafka's words.
REFUSALS = {"PLAIN": "Invalid username or password",
            "SCRAM-SHA-256": "invalid credentials with SASL mechanism SCRAM-SHA-256",
            "SCRAM-SHA-512": "invalid credentials with SASL mechanism SCRAM-SHA-512"}


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_aiokafka_wrong_password(node, pki, mechanism):
    """aiokafka logs the node's refusal (SaslAuthenticationFailed), then fails to bootstrap."""
    user = "alice" if mechanism == "PLAIN" else SCRAM_USER
    error = refused("aiokafka", bootstrap(node, "SASL_SSL"), python_config("SASL_SSL", pki, mechanism, user, "wrong"))
    assert error["name"] == "KafkaConnectionError", error
    assert "SaslAuthenticationFailed" in error["stderr"] and REFUSALS[mechanism] in error["stderr"], error


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_kafka_python_over_sasl_ssl(node, pki, mechanism):
    user, password = ("alice", "alice-secret") if mechanism == "PLAIN" else (SCRAM_USER, SCRAM_PASSWORD)
    config = python_config("SASL_SSL", pki, mechanism, user, password)
    round_trip("kafka_python", bootstrap(node, "SASL_SSL"), config, unique_topic("kafka-python-sasl-ssl"))


def test_kafka_python_wrong_password(node, pki):
    error = refused("kafka_python", bootstrap(node, "SASL_SSL"),
                    python_config("SASL_SSL", pki, "SCRAM-SHA-512", SCRAM_USER, "wrong"))
    text = f"{error['name']} {error['message']} {error['stderr']}"
    assert "AuthenticationFailed" in text and REFUSALS["SCRAM-SHA-512"] in text, error


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"])
def test_java_client_over_sasl_ssl(node, pki, mechanism):
    config = java_config(pki, mechanism, SCRAM_USER if mechanism != "OAUTHBEARER" else "alice", SCRAM_PASSWORD)
    round_trip("java", bootstrap(node, "SASL_SSL"), config, unique_topic(f"java-{mechanism.lower()}"))


def test_java_client_wrong_password(node, pki):
    error = refused("java", bootstrap(node, "SASL_SSL"), java_config(pki, "SCRAM-SHA-256", SCRAM_USER, "wrong"))
    text = f"{error['name']} {error['type']} {error['message']}"
    assert "SaslAuthenticationException" in text and REFUSALS["SCRAM-SHA-256"] in text, error


# -- Kafka's own tools with --command-config ------------------------------------------------------

# The tools' WARN and ERROR lines on stderr (a console producer reports a failed send only there).
TOOL_LOG4J = """status = error
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = %p %c: %m%n
rootLogger.level = warn
rootLogger.appenderRef.err.ref = STDERR
"""


def kafka_tool(main_class: str, *args: str, input: bytes | None = None,
               log4j: Path | None = None) -> subprocess.CompletedProcess:
    from kafkapy.testing.apache_kafka import java_command, kafka_home

    if not (kafka_home() / "libs").is_dir():
        pytest.skip("Apache Kafka's tools are not installed (make tools)")
    return subprocess.run(java_command(main_class, *args, log4j_config=log4j), input=input, capture_output=True,
                          timeout=120)


def command_config(path: Path, settings: dict[str, str]) -> str:
    path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return str(path)


def test_console_producer_and_consumer_as_admin(node, pki, tmp_path):
    admin = command_config(tmp_path / "admin.properties", java_config(pki, "PLAIN", "admin", "admin-secret"))
    address, topic = bootstrap(node, "SASL_SSL"), unique_topic("console")
    sent = kafka_tool("org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server", address, "--topic", topic,
                      "--command-config", admin, input=b"one\ntwo\nthree\n")
    assert sent.returncode == 0, sent.stderr.decode()[-3000:]
    got = kafka_tool("org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", address,
                     "--topic", topic, "--from-beginning", "--max-messages", "3", "--timeout-ms", "30000",
                     "--command-config", admin)
    assert got.returncode == 0, got.stderr.decode()[-3000:]
    assert got.stdout.decode().split() == ["one", "two", "three"]


def test_console_producer_wrong_password(node, pki, tmp_path):
    bad = command_config(tmp_path / "bad.properties", java_config(pki, "PLAIN", "admin", "wrong"))
    log4j = tmp_path / "log4j2.properties"
    log4j.write_text(TOOL_LOG4J)
    sent = kafka_tool("org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server", bootstrap(node, "SASL_SSL"),
                      "--topic", unique_topic("console-bad"), "--command-config", bad,
                      "--command-property", "max.block.ms=10000", input=b"never\n", log4j=log4j)
    output = sent.stdout.decode() + sent.stderr.decode()  # Kafka's tools log to stdout
    assert "SaslAuthenticationException" in output and REFUSALS["PLAIN"] in output, output[-3000:]


def test_kafka_acls_as_admin(node, pki, tmp_path):
    admin = command_config(tmp_path / "admin.properties", java_config(pki, "PLAIN", "admin", "admin-secret"))
    address, topic = bootstrap(node, "SASL_SSL"), unique_topic("acl")
    common = ["--bootstrap-server", address, "--command-config", admin]
    added = kafka_tool("org.apache.kafka.tools.AclCommand", *common, "--add", "--allow-principal", "User:alice",
                       "--operation", "Read", "--operation", "Write", "--topic", topic)
    assert added.returncode == 0, added.stderr.decode()[-3000:]
    listed = kafka_tool("org.apache.kafka.tools.AclCommand", *common, "--list", "--topic", topic)
    assert listed.returncode == 0, listed.stderr.decode()[-3000:]
    out = listed.stdout.decode()
    assert "principal=User:alice" in out and "operation=READ" in out and "operation=WRITE" in out, out
    # The topic now has ACLs, so a principal none of them names (mTLS's User:orders-app) is refused.
    mtls = python_config("MTLS", pki)
    records = [{"key": None, "value": base64.b64encode(b"x").decode()}]
    denied = run_driver("kafka_python", {"op": "produce", "bootstrap": bootstrap(node, "MTLS"), "topic": topic,
                                         "records": records, "config": mtls, "timeout_s": 15}, timeout=120)
    text = str(denied)
    assert "TopicAuthorizationFailed" in text, denied


def test_kafka_acls_wrong_password(node, pki, tmp_path):
    bad = command_config(tmp_path / "bad.properties", java_config(pki, "PLAIN", "admin", "wrong"))
    listed = kafka_tool("org.apache.kafka.tools.AclCommand", "--bootstrap-server", bootstrap(node, "SASL_SSL"),
                        "--command-config", bad, "--list")
    output = listed.stdout.decode() + listed.stderr.decode()
    assert listed.returncode != 0, output[-3000:]
    assert "SaslAuthenticationException" in output and REFUSALS["PLAIN"] in output, output[-3000:]


# -- kcat (the system librdkafka) ----------------------------------------------------------------

def kcat_sasl_ssl(pki: dict[str, str], password: str) -> list[str]:
    return ["-X", "security.protocol=sasl_ssl", "-X", f"ssl.ca.location={pki['ca']}",
            "-X", "sasl.mechanisms=SCRAM-SHA-256", "-X", f"sasl.username={SCRAM_USER}",
            "-X", f"sasl.password={password}"]


def test_kcat_over_sasl_ssl(node, pki):
    import shutil

    from kafkapy.testing.clients import run_kcat

    if not (shutil.which("kcat") or shutil.which("kafkacat")):
        pytest.skip("kcat is not installed (make tools)")
    address, topic = bootstrap(node, "SASL_SSL"), unique_topic("kcat-sasl-ssl")
    sent = run_kcat(["-b", address, "-P", "-t", topic, "-p", "0", *kcat_sasl_ssl(pki, SCRAM_PASSWORD)],
                    input=b"a\nb\nc\n", timeout=60)
    assert sent.returncode == 0, sent.describe()
    got = run_kcat(["-b", address, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q",
                    *kcat_sasl_ssl(pki, SCRAM_PASSWORD)], timeout=60)
    assert got.returncode == 0, got.describe()
    assert got.text.split() == ["a", "b", "c"]
    refused = run_kcat(["-b", address, "-L", "-m", "5", *kcat_sasl_ssl(pki, "wrong")], timeout=60)
    assert refused.returncode != 0, refused.describe()
    assert REFUSALS["SCRAM-SHA-256"] in refused.describe(), refused.describe()
