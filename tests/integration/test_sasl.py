"""SASL_PLAINTEXT with a stock client (confluent-kafka / librdkafka) against a kafkapy node:
PLAIN, SCRAM-SHA-256/512 (users made with AlterUserScramCredentials and with `storage format
--add-scram`), OAUTHBEARER with unsecured tokens; and the refusals, each with nothing produced."""

from __future__ import annotations

import base64
import json
import socket
import struct
import subprocess
import time
import uuid

import confluent_kafka as ck
import jwt
import pytest
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
from cryptography.hazmat.primitives.asymmetric import rsa

from kafkapy.testing.node import KafkaNode, free_port

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
TIMEOUT = 20


@pytest.fixture(scope="module")
def signing_keys():
    """The identity provider's key (published in a JWKS file) and an impostor's."""
    return (rsa.generate_private_key(public_exponent=65537, key_size=2048),
            rsa.generate_private_key(public_exponent=65537, key_size=2048))


@pytest.fixture(scope="module")
def sasl_node(tmp_path_factory, signing_keys):
    workdir = tmp_path_factory.mktemp("sasl")
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(signing_keys[0].public_key()))
    jwk.update(kid="idp-1", alg="RS256", use="sig")
    jwks = workdir / "jwks.json"
    jwks.write_text(json.dumps({"keys": [jwk]}))
    n = KafkaNode(workdir)
    n.sasl_port, n.oauth_port = free_port(), free_port()
    n.overrides.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{n.port},SASL_PLAINTEXT://127.0.0.1:{n.sasl_port},"
                     f"OAUTH://127.0.0.1:{n.oauth_port},CONTROLLER://127.0.0.1:{n.controller_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                          "OAUTH:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        # KIP-368 on one mechanism only: OAUTHBEARER sessions last 2 s, then re-authenticate.
        "listener.name.sasl_plaintext.oauthbearer.connections.max.reauth.ms": "2000",
        # KIP-768: the OAUTH listener checks signed JWTs against the provider's JWKS.
        "listener.name.oauth.sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.oauth.oauthbearer.sasl.server.callback.handler.class":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
        "listener.name.oauth.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": jwks.as_uri(),
        "sasl.oauthbearer.expected.audience": "kafka",
        # Refusals are answered at once: the tests count on the answer, not the delay.
        "connection.failed.authentication.delay.ms": "0",
    })
    cmd = [n.python, "-m", "kafkapy", "storage", "format",
           "--add-scram", "SCRAM-SHA-512=[name=boot,password=boot-secret,iterations=8192]"]
    for key, value in n._settings().items():
        cmd += ["--override", f"{key}={value}"]
    subprocess.run(cmd, check=True, capture_output=True, timeout=60)
    with n:
        yield n


def sasl_conf(node, mechanism: str, **extra) -> dict:
    return {"bootstrap.servers": f"127.0.0.1:{node.sasl_port}", "security.protocol": "SASL_PLAINTEXT", "log_level": 0,
            "sasl.mechanism": mechanism, **extra}


def produce(conf: dict, topic: str, value: bytes = b"v", timeout_ms: int = 8000) -> ck.KafkaError | None:
    """Produce one record; the delivery error (None: delivered)."""
    errors: list = []
    producer = ck.Producer({**conf, "message.timeout.ms": timeout_ms, "error_cb": lambda e: errors.append(e)})
    outcome: list = []
    producer.produce(topic, value, on_delivery=lambda err, msg: outcome.append(err))
    producer.flush(TIMEOUT)
    assert outcome, "no delivery report within the timeout"
    return outcome[0]


def auth_error(conf: dict) -> ck.KafkaError | None:
    """The authentication error a client gets (None when it got in)."""
    errors: list = []
    admin = AdminClient({**conf, "error_cb": errors.append})
    try:
        # Generous for a client that gets in; a refused one has its error well before.
        admin.list_topics(timeout=3)
        return None
    except ck.KafkaException as exc:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not any(e.code() == ck.KafkaError._AUTHENTICATION for e in errors):
            admin.poll(0.2)
        auth = [e for e in errors if e.code() == ck.KafkaError._AUTHENTICATION]
        return auth[0] if auth else exc.args[0]


def count(node, topic: str) -> int:
    """How many records ``topic`` holds, read over the plaintext listener (0 if no such topic)."""
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    md = admin.list_topics(timeout=TIMEOUT)
    if topic not in md.topics:
        return 0
    consumer = ck.Consumer({"bootstrap.servers": node.bootstrap, "group.id": str(uuid.uuid4())})
    try:
        low, high = consumer.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=TIMEOUT)
        return high - low
    finally:
        consumer.close()


def topic_name() -> str:
    return f"sasl-{uuid.uuid4().hex[:8]}"


def assert_refused(node, conf: dict, reason: str) -> None:
    """``conf``'s client fails to authenticate, told ``reason``, and what it tries to produce is
    not written."""
    err = auth_error(conf)
    assert err is not None and err.code() == ck.KafkaError._AUTHENTICATION
    assert reason in err.str()
    topic = topic_name()
    assert produce(conf, topic, timeout_ms=1500) is not None
    assert count(node, topic) == 0


# -- authentication -----------------------------------------------------------------------------

def test_plain_produce_and_consume(sasl_node):
    conf = sasl_conf(sasl_node, "PLAIN", **{"sasl.username": "alice", "sasl.password": "alice-secret"})
    topic = topic_name()
    assert produce(conf, topic, b"hello") is None
    consumer = ck.Consumer({**conf, "group.id": "g-plain", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT
        msg = None
        while time.monotonic() < deadline and (msg is None or msg.error()):
            msg = consumer.poll(1)
        assert msg is not None and msg.value() == b"hello"
    finally:
        consumer.close()


@pytest.mark.parametrize("user, password", [("alice", "wrong"), ("mallory", "alice-secret")])
def test_plain_refusals_produce_nothing(sasl_node, user, password):
    conf = sasl_conf(sasl_node, "PLAIN", **{"sasl.username": user, "sasl.password": password})
    assert_refused(sasl_node, conf, "Invalid username or password")


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_user_created_through_the_admin_api(sasl_node, mechanism):
    admin_conf = sasl_conf(sasl_node, "PLAIN", **{"sasl.username": "admin", "sasl.password": "admin-secret"})
    admin = AdminClient(admin_conf)
    user = f"u{mechanism[-3:]}"
    mech = ScramMechanism.SCRAM_SHA_256 if mechanism.endswith("256") else ScramMechanism.SCRAM_SHA_512
    futures = admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion(user, ScramCredentialInfo(mech, 4096), b"scram-secret")])
    futures[user].result(timeout=TIMEOUT)
    described = admin.describe_user_scram_credentials([user])[user].result(timeout=TIMEOUT)
    assert [i.mechanism for i in described.scram_credential_infos] == [mech]
    conf = sasl_conf(sasl_node, mechanism, **{"sasl.username": user, "sasl.password": "scram-secret"})
    topic = topic_name()
    assert produce(conf, topic) is None
    bad = sasl_conf(sasl_node, mechanism, **{"sasl.username": user, "sasl.password": "nope"})
    err = auth_error(bad)
    assert err is not None and err.code() == ck.KafkaError._AUTHENTICATION
    assert f"invalid credentials with SASL mechanism {mechanism}" in err.str()


def test_scram_user_from_storage_format(sasl_node):
    conf = sasl_conf(sasl_node, "SCRAM-SHA-512", **{"sasl.username": "boot", "sasl.password": "boot-secret"})
    assert auth_error(conf) is None
    # The same user has no SCRAM-SHA-256 credential.
    other = sasl_conf(sasl_node, "SCRAM-SHA-256", **{"sasl.username": "boot", "sasl.password": "boot-secret"})
    assert auth_error(other) is not None


def test_oauthbearer_unsecured_token(sasl_node):
    conf = sasl_conf(sasl_node, "OAUTHBEARER", **{"enable.sasl.oauthbearer.unsecure.jwt": True,
                                                   "sasl.oauthbearer.config": "principal=alice"})
    assert produce(conf, topic_name()) is None


def _unsecured(claims: dict) -> str:
    def b64(obj: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()
    return f"{b64({'alg': 'none'})}.{b64(claims)}."


@pytest.mark.parametrize("claims", [
    {"sub": "alice", "exp": 1_000_000_000, "iat": 999_999_000},  # expired long ago
    {"exp": 4_000_000_000, "iat": 1_000_000_000},  # no subject
])
def test_oauthbearer_bad_tokens_are_refused(sasl_node, claims):
    token = _unsecured(claims)
    conf = sasl_conf(sasl_node, "OAUTHBEARER", oauth_cb=lambda _config: (token, time.time() + 3600))
    assert_refused(sasl_node, conf, "invalid_token")


def test_oauthbearer_session_is_reauthenticated_on_the_same_connection(sasl_node):
    lines: list[str] = []

    class Capture:
        def log(self, level, fmt, *args):
            lines.append(fmt % args if args else fmt)

    conf = sasl_conf(sasl_node, "OAUTHBEARER", **{"enable.sasl.oauthbearer.unsecure.jwt": True,
                                                   "sasl.oauthbearer.config": "principal=alice",
                                                   "debug": "security", "log_level": 7, "logger": Capture()})
    producer = ck.Producer({**conf, "message.timeout.ms": 8000})
    outcomes: list = []
    topic = topic_name()
    # Past two session lifetimes (2 s each): the client re-authenticates when told to.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and sum("Auth in state REAUTH" in line for line in lines) < 2:
        producer.produce(topic, b"x", on_delivery=lambda err, msg: outcomes.append(err))
        producer.flush(TIMEOUT)
        time.sleep(0.5)
    assert sum("Auth in state REAUTH" in line for line in lines) >= 2
    assert "Received session lifetime 2000 ms from broker" in "\n".join(lines)
    assert outcomes and all(err is None for err in outcomes)


def _signed(key, kid: str = "idp-1", **claims) -> str:
    now = int(time.time())
    return jwt.encode({"sub": "alice", "aud": "kafka", "iat": now, "exp": now + 3600, **claims}, key,
                      algorithm="RS256", headers={"kid": kid})


def oauth_conf(node, token: str) -> dict:
    return {"bootstrap.servers": f"127.0.0.1:{node.oauth_port}", "security.protocol": "SASL_PLAINTEXT",
            "log_level": 0, "sasl.mechanism": "OAUTHBEARER",
            "oauth_cb": lambda _config: (token, time.time() + 3600)}


def test_jwks_signed_token(sasl_node, signing_keys):
    assert produce(oauth_conf(sasl_node, _signed(signing_keys[0])), topic_name()) is None


@pytest.mark.parametrize("case", ["impostor's key", "expired", "other audience", "unsecured"])
def test_jwks_refusals_produce_nothing(sasl_node, signing_keys, case):
    good, impostor = signing_keys
    now = int(time.time())
    token = {
        "impostor's key": lambda: _signed(impostor),
        "expired": lambda: _signed(good, iat=now - 7200, exp=now - 3600),
        "other audience": lambda: _signed(good, aud="elsewhere"),
        "unsecured": lambda: _unsecured({"sub": "alice", "aud": "kafka", "exp": now + 3600}),
    }[case]()
    assert_refused(sasl_node, oauth_conf(sasl_node, token), "invalid_token")


def test_no_credentials_is_refused(sasl_node):
    # A plaintext client on the SASL listener: its first request after ApiVersions is not SASL.
    err = auth_error({"bootstrap.servers": f"127.0.0.1:{sasl_node.sasl_port}", "socket.timeout.ms": 3000})
    assert err is not None


# -- the pre-authentication surface -------------------------------------------------------------

def _frame(api_key: int, version: int, body: bytes) -> bytes:
    header = struct.pack(">hhih", api_key, version, 7, 4) + b"test"
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def _closed(sock: socket.socket) -> bool:
    sock.settimeout(5)
    try:
        data = sock.recv(4096)
    except ConnectionResetError:
        return True
    return data == b""


def test_a_request_before_authentication_closes_the_connection(sasl_node):
    with socket.create_connection(("127.0.0.1", sasl_node.sasl_port), timeout=5) as sock:
        sock.sendall(_frame(3, 1, struct.pack(">i", -1)))  # Metadata v1, all topics
        assert _closed(sock)


@pytest.mark.parametrize("garbage", [
    b"\x00\x00\x00\x05hello",
    _frame(17, 1, b"\x7f\xffPLAIN"),  # a mechanism string longer than the frame
    _frame(36, 2, b"\xff\xff\xff\xff\xff"),
    _frame(17, 0, struct.pack(">h", 6) + b"GSSAPI"),  # v0: the raw-token flow kafkapy does not serve
    b"\x60\x82\x01\x00" + bytes(64),  # what a pre-0.10 GSSAPI client opens with
])
def test_garbage_handshakes_leave_the_node_serving(sasl_node, garbage):
    with socket.create_connection(("127.0.0.1", sasl_node.sasl_port), timeout=5) as sock:
        sock.sendall(garbage)
        sock.settimeout(5)
        try:
            while sock.recv(4096):
                pass
        except (ConnectionResetError, TimeoutError):
            pass
    conf = sasl_conf(sasl_node, "PLAIN", **{"sasl.username": "alice", "sasl.password": "alice-secret"})
    assert auth_error(conf) is None


def _read_frame(sock: socket.socket) -> bytes:
    sock.settimeout(5)
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
        chunk = sock.recv(4096)
        assert chunk, "connection closed before a full response"
        data += chunk
    return data[4:]


def test_unsupported_mechanism_lists_the_enabled_ones_then_closes(sasl_node):
    with socket.create_connection(("127.0.0.1", sasl_node.sasl_port), timeout=5) as sock:
        sock.sendall(_frame(17, 1, struct.pack(">h", 6) + b"GSSAPI"))
        response = _read_frame(sock)
        correlation_id, error_code, count = struct.unpack(">ihi", response[:10])
        names, pos = [], 10
        for _ in range(count):
            (length,) = struct.unpack(">h", response[pos:pos + 2])
            names.append(response[pos + 2:pos + 2 + length].decode())
            pos += 2 + length
        assert (correlation_id, error_code) == (7, 33)  # UNSUPPORTED_SASL_MECHANISM
        assert names == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
        assert _closed(sock)


# -- Kafka's own tools (the Java client) --------------------------------------------------------

def _java_tool(main_class: str, *args: str, input: bytes | None = None) -> subprocess.CompletedProcess:
    from kafkapy.testing.apache_kafka import java_command, kafka_home

    if not (kafka_home() / "libs").is_dir():
        pytest.skip("Apache Kafka's tools are not installed (make tools)")
    return subprocess.run(java_command(main_class, *args), input=input, capture_output=True, timeout=120)


def _client_properties(path, mechanism: str, module: str, user: str, password: str):
    path.write_text("security.protocol=SASL_PLAINTEXT\n"
                    f"sasl.mechanism={mechanism}\n"
                    f'sasl.jaas.config={module} required username="{user}" password="{password}";\n')
    return str(path)


def test_kafka_configs_adds_a_scram_user_the_java_producer_authenticates_as(sasl_node, tmp_path):
    bootstrap = f"127.0.0.1:{sasl_node.sasl_port}"
    admin = _client_properties(tmp_path / "admin.properties", "PLAIN",
                               "org.apache.kafka.common.security.plain.PlainLoginModule", "admin", "admin-secret")
    done = _java_tool("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", bootstrap,
                      "--command-config", admin, "--alter", "--add-config",
                      "SCRAM-SHA-256=[iterations=8192,password=carol-secret]",
                      "--entity-type", "users", "--entity-name", "carol")
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    # (kafka-configs --describe of users also asks DescribeClientQuotas, the quotas part's API.)
    plain_admin = AdminClient({"bootstrap.servers": sasl_node.bootstrap})
    described = plain_admin.describe_user_scram_credentials(["carol"])["carol"].result(timeout=TIMEOUT)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_256, 8192)]
    producer = _client_properties(tmp_path / "carol.properties", "SCRAM-SHA-256",
                                  "org.apache.kafka.common.security.scram.ScramLoginModule", "carol", "carol-secret")
    topic = topic_name()
    sent = _java_tool("org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server", bootstrap,
                      "--topic", topic, "--command-config", producer, input=b"one\ntwo\n")
    assert sent.returncode == 0, sent.stderr.decode()[-2000:]
    assert count(sasl_node, topic) == 2
    deleted = _java_tool("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", bootstrap,
                         "--command-config", admin, "--alter", "--delete-config", "SCRAM-SHA-256",
                         "--entity-type", "users", "--entity-name", "carol")
    assert deleted.returncode == 0, deleted.stderr.decode()[-2000:]
    carol = sasl_conf(sasl_node, "SCRAM-SHA-256", **{"sasl.username": "carol", "sasl.password": "carol-secret"})
    assert_refused(sasl_node, carol, "invalid credentials with SASL mechanism SCRAM-SHA-256")


@pytest.mark.parametrize("mechanism, user, password", [("PLAIN", "alice", "alice-secret"),
                                                      ("SCRAM-SHA-512", "boot", "boot-secret")])
def test_kcat_produces(sasl_node, mechanism, user, password):
    """kcat on the system librdkafka (Debian's 2.0.2, whose SCRAM client repeats its own nonce in
    the final message: Kafka accepts that, so kafkapy does)."""
    import shutil

    from kafkapy.testing.clients import kcat_produce

    if not (shutil.which("kcat") or shutil.which("kafkacat")):
        pytest.skip("kcat is not installed (make tools)")
    topic = topic_name()
    sasl = ["-X", "security.protocol=SASL_PLAINTEXT", "-X", f"sasl.mechanisms={mechanism}",
            "-X", f"sasl.username={user}", "-X", f"sasl.password={password}"]
    kcat_produce(f"127.0.0.1:{sasl_node.sasl_port}", topic, [(None, "a"), ("k", "b")], extra=sasl)
    assert count(sasl_node, topic) == 2


def test_fuzzed_sasl_exchanges_authenticate_no_one_and_leave_the_node_serving(sasl_node):
    """Seeded random SASL exchanges (handshakes for real and made-up mechanisms, tokens of random
    bytes, mutated PLAIN/SCRAM/OAUTHBEARER messages, frames cut or corrupted), each followed by a
    Metadata request: that request is never answered, no traceback is logged, and a real client
    still gets in afterwards."""
    import random

    rng = random.Random(20261127)
    mechanisms = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI", "", "plain", "X" * 300]
    tokens = [b"\0alice\0wrong", b"\0alice\0", b"alice\0alice\0alice-secret\0", b"n,,n=alice,r=abc",
              b"c=biws,r=abc,p=AAAA", b"n,,\x01auth=Bearer a.b.\x01\x01", b"\x01", b""]

    def string(value: str) -> bytes:
        raw = value.encode()
        return struct.pack(">h", len(raw)) + raw

    def mutate(data: bytes) -> bytes:
        data = bytearray(data)
        for _ in range(rng.randrange(0, 4)):
            if data and rng.random() < 0.5:
                data[rng.randrange(len(data))] = rng.randrange(256)
            elif rng.random() < 0.5:
                del data[rng.randrange(len(data) + 1):]
            else:
                data += rng.randbytes(rng.randrange(1, 16))
        return bytes(data)

    for _ in range(150):
        frames = []
        for _ in range(rng.randrange(1, 5)):
            if rng.random() < 0.4:
                frames.append(_frame(17, rng.choice([0, 1, 1, 1, 2]), string(rng.choice(mechanisms))))
            else:
                token = rng.choice(tokens) if rng.random() < 0.6 else rng.randbytes(rng.randrange(64))
                body = struct.pack(">i", len(token)) + token
                version = rng.choice([0, 1, 2])
                if version == 2:  # flexible: compact bytes, empty tagged fields
                    body = bytes([len(token) + 1]) + token + b"\x00"
                frames.append(_frame(36, version, body))
        wire = b"".join(mutate(f) if rng.random() < 0.3 else f for f in frames)
        metadata_request = struct.pack(">i", 12) + struct.pack(">hhih", 3, 1, 4242, 0) + struct.pack(">i", 0)
        with socket.create_connection(("127.0.0.1", sasl_node.sasl_port), timeout=5) as sock:
            try:
                sock.sendall(wire + metadata_request)
            except OSError:
                continue
            sock.settimeout(5)
            received = b""
            try:
                while chunk := sock.recv(65536):
                    received += chunk
            except (ConnectionResetError, TimeoutError):
                pass
        pos = 0
        while pos + 8 <= len(received):
            size, correlation_id = struct.unpack(">ii", received[pos:pos + 8])
            assert correlation_id != 4242, "a Metadata request was answered without authentication"
            pos += 4 + size
    log = sasl_node.log_tail(2_000_000)
    assert "Traceback" not in log and "Unexpected error" not in log
    conf = sasl_conf(sasl_node, "PLAIN", **{"sasl.username": "alice", "sasl.password": "alice-secret"})
    assert auth_error(conf) is None


@pytest.mark.parametrize("mechanism, user, password", [("PLAIN", "alice", "alice-secret"),
                                                      ("SCRAM-SHA-256", "u256", "scram-secret"),
                                                      ("SCRAM-SHA-512", "boot", "boot-secret")])
def test_kafka_python_produces(sasl_node, mechanism, user, password):
    """kafka-python: a SASL client of its own (its SaslHandshake/SaslAuthenticate and SCRAM)."""
    from kafka import KafkaProducer

    if user == "u256":  # made by the admin-API test; create it here when run alone
        admin = AdminClient(sasl_conf(sasl_node, "PLAIN", **{"sasl.username": "admin", "sasl.password": "admin-secret"}))
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), password.encode())])[user].result(TIMEOUT)
    topic = topic_name()
    producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{sasl_node.sasl_port}", security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password,
                             request_timeout_ms=10000, max_block_ms=10000)
    try:
        producer.send(topic, b"v").get(timeout=TIMEOUT)
    finally:
        producer.close(timeout=5)
    assert count(sasl_node, topic) == 1
