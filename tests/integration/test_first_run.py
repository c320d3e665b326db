"""A first run as an operator does it: issue 18's SASL and authorizer settings serve, security
settings kafkapy cannot honour (Kerberos) stop the node, overriding only `listeners` works, and
start-up failures are one clear line."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import batch, create_topics, fetch, produce, run_client
from kafkapy.testing.node import KafkaNode, api_versions_round_trip, free_port

# The operator's configuration from issue 18 (SASL/PLAIN and the standard authorizer).
SASL_AUTHORIZER = """\
process.roles=broker,controller
node.id=1
listeners=SASL_PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}
advertised.listeners=SASL_PLAINTEXT://127.0.0.1:{port}
listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=SASL_PLAINTEXT
controller.listener.names=CONTROLLER
controller.quorum.voters=1@127.0.0.1:{cport}
sasl.enabled.mechanisms=PLAIN
sasl.mechanism.inter.broker.protocol=PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule \\
    required username="admin" password="admin-secret" user_admin="admin-secret";
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=false
# The node reaches its own controller over the PLAINTEXT controller listener, as User:ANONYMOUS:
# the controller grants its RPCs (registration, heartbeats) only to a principal with CLUSTER_ACTION,
# so that principal is a super user, as Kafka requires of inter-node principals.
super.users=User:admin;User:ANONYMOUS
log.dirs={data}
offsets.topic.replication.factor=1
"""

# The same with Kafka's default mechanism, GSSAPI: kafkapy has no Kerberos.
KERBEROS = SASL_AUTHORIZER.replace("sasl.enabled.mechanisms=PLAIN", "sasl.enabled.mechanisms=GSSAPI").replace(
    "sasl.mechanism.inter.broker.protocol=PLAIN", "sasl.mechanism.inter.broker.protocol=GSSAPI")

START_LIMIT_S = 30.0


def _server(args: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "kafkapy", "server", *args], cwd=cwd,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def _exit_of(proc: subprocess.Popen) -> tuple[int | None, str]:
    """The exit code (None when it was still running after the limit: then it is killed) and stderr."""
    try:
        _, err = proc.communicate(timeout=START_LIMIT_S)
        return proc.returncode, err
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate(timeout=10)
        return None, err


def test_kerberos_refuses_to_start(tmp_path):
    port, cport = free_port(), free_port()
    data = tmp_path / "data"
    config = tmp_path / "server.properties"
    config.write_text(KERBEROS.format(port=port, cport=cport, data=data))
    proc = _server(["--config", str(config)], tmp_path)
    try:
        code, err = _exit_of(proc)
        # Before the fix the node served everyone here; the probe says so if it still does.
        assert code is not None, f"the node started and serves clients: {err[-2000:]}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert code != 0
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("kafkapy: refusing to start: kafkapy does not implement")
    assert "sasl.enabled.mechanisms (GSSAPI on listener SASL_PLAINTEXT: no Kerberos)" in lines[0]
    assert "admin-secret" not in err
    assert not data.exists()
    assert not api_versions_round_trip("127.0.0.1", port)
    assert not api_versions_round_trip("127.0.0.1", cport)


@pytest.mark.skipif(shutil.which("kcat") is None, reason="needs kcat")
def test_the_issues_sasl_authorizer_config_serves_only_authenticated_clients(tmp_path):
    port, cport = free_port(), free_port()
    config = tmp_path / "server.properties"
    config.write_text(SASL_AUTHORIZER.format(port=port, cport=cport, data=tmp_path / "data"))
    proc = _server(["--config", str(config)], tmp_path)
    sasl = ["-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=PLAIN", "-X", "sasl.username=admin"]

    def kcat_list(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(["kcat", "-b", f"127.0.0.1:{port}", "-L", "-m", "5", *extra], capture_output=True,
                              text=True, timeout=30)
    try:
        listing = kcat_list(*sasl, "-X", "sasl.password=admin-secret")
        for _ in range(int(START_LIMIT_S)):  # the node may still be starting
            if listing.returncode == 0 or proc.poll() is not None:
                break
            listing = kcat_list(*sasl, "-X", "sasl.password=admin-secret")
        assert listing.returncode == 0, listing.stderr
        assert "1 brokers" in listing.stdout
        assert kcat_list().returncode != 0  # no credentials
        assert kcat_list(*sasl, "-X", "sasl.password=wrong").returncode != 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=10)


class ListenersOnlyNode(KafkaNode):
    """`kafkapy server --override listeners=… --override log.dirs=…`: nothing else set, as an
    operator moving the development node to other ports would run it."""

    def _settings(self) -> dict[str, str]:
        return {"listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
                "log.dirs": str(self.data_dir)}


def test_overriding_only_listeners_serves_clients(tmp_path):
    with ListenersOnlyNode(tmp_path, format_storage=False, startup_timeout=START_LIMIT_S) as node:
        created = run_client(node, lambda c: c.send(create_topics(("first-run", 1, 1))))
        assert created.topics[0].error_code == 0
        produced = run_client(node, lambda c: c.send(produce("first-run", 0, batch([b"hello"]))))
        assert produced.responses[0].partition_responses[0].error_code == 0
        fetched = run_client(node, lambda c: c.send(fetch("first-run", 0, 0), version=12))
        part = fetched.responses[0].partitions[0]
        assert part.error_code == 0 and part.high_watermark == 1
        assert b"hello" in bytes(part.records)


def test_a_port_in_use_is_named_in_one_line(tmp_path):
    cport = free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = _server(["--override", f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}",
                        "--override", f"log.dirs={tmp_path / 'data'}"], tmp_path)
        code, err = _exit_of(proc)
    assert code not in (None, 0), err[-2000:]
    errors = [line for line in err.splitlines() if " ERROR " in line]
    assert len(errors) == 1, err[-2000:]
    assert f"cannot listen on 127.0.0.1:{port} (listener PLAINTEXT): address already in use" in errors[0]
    assert "Traceback" not in err


def test_a_missing_config_file_is_one_line(tmp_path):
    code, err = _exit_of(_server(["--config", "missing.properties"], tmp_path))
    assert code not in (None, 0)
    assert err.strip() == "kafkapy: cannot read the --config file missing.properties: No such file or directory"
