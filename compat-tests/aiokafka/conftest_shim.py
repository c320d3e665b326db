"""kafkapy glue: replaces aiokafka's tests/conftest.py (run.sh copies it there).

Upstream's fixtures start a docker container (``--docker-image``) with PLAINTEXT, SSL,
SASL_PLAINTEXT and SASL_SSL ports, generate certificates with a script inside it, change ACLs
with ``kafka-acls.sh`` against its ZooKeeper, SCRAM users with ``kafka-configs.sh`` and get
Kerberos tickets from its KDC. Here the same fixtures, by the same names and with the same
attributes, point at the report card's node: its listeners, CA and client certificate come from
run.sh's environment (KAFKAPY_*), ACLs and SCRAM users go through the Kafka admin API as the
super user ``admin`` (confluent-kafka's AdminClient, a different client from the one under test).
"""
from __future__ import annotations

import asyncio
import gc
import os
import pathlib
import shutil
from dataclasses import dataclass

import pytest

# The Kafka version whose behaviour kafkapy matches; the tests' @kafka_versions gates read it.
KAFKA_VERSION = "3.9.0"
ADMIN_USER = "admin"
TIMEOUT = 30


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        pytest.exit(f"conftest shim: {name} is not set (run.sh passes the node's endpoints)", 3)
    return value


def _split(host_port: str) -> tuple[str, int]:
    host, _, port = host_port.rpartition(":")
    return host, int(port)


def _users() -> dict[str, str]:
    pairs = (p.split(":", 1) for p in _env("KAFKAPY_SASL_USERS").split(",") if p)
    return {user: password for user, password in pairs}


@dataclass
class KafkaServer:
    """What upstream's kafka_server yields, minus the container."""

    host: str
    port: int
    ssl_port: int
    sasl_plain_port: int
    sasl_ssl_port: int
    container: None = None

    @property
    def hosts(self) -> list[str]:
        return [f"{self.host}:{self.port}"]


def _admin():
    from confluent_kafka.admin import AdminClient

    users = _users()
    return AdminClient({
        "bootstrap.servers": _env("KAFKAPY_SASL_PLAINTEXT_BOOTSTRAP"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": ADMIN_USER,
        "sasl.password": users[ADMIN_USER],
    })


class ACLManager:
    """Upstream's ACLManager (add_acl/remove_acl/list_acl/cleanup, kafka-acls.sh options as
    keyword arguments), over CreateAcls/DeleteAcls/DescribeAcls."""

    def __init__(self) -> None:
        self._admin = _admin()
        self._active_acls: list[dict] = []

    def _binding(self, cluster=None, topic=None, group=None, transactional_id=None,
                 allow_principal=None, deny_principal=None, allow_host=None, deny_host=None,
                 operation=None, producer=None, consumer=None):
        from confluent_kafka.admin import (
            AclBinding,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
            ResourceType,
        )

        if producer or consumer or allow_host or deny_host:
            raise NotImplementedError("conftest shim: --producer/--consumer/--*-host")
        if (allow_principal is None) == (deny_principal is None):
            raise ValueError("exactly one of allow_principal, deny_principal")
        resources = [(ResourceType.BROKER, "kafka-cluster") if cluster else None,
                     (ResourceType.TOPIC, topic) if topic is not None else None,
                     (ResourceType.GROUP, group) if group is not None else None,
                     (ResourceType.TRANSACTIONAL_ID, transactional_id)
                     if transactional_id is not None else None]
        resources = [r for r in resources if r]
        if len(resources) != 1:
            raise ValueError("exactly one resource")
        restype, name = resources[0]
        permission = AclPermissionType.ALLOW if allow_principal else AclPermissionType.DENY
        principal = "User:" + (allow_principal or deny_principal)
        op = AclOperation[operation.upper()]
        return AclBinding(restype, name, ResourcePatternType.LITERAL, principal, "*", op, permission)

    def add_acl(self, **acl_params) -> None:
        binding = self._binding(**acl_params)
        for future in self._admin.create_acls([binding], request_timeout=TIMEOUT).values():
            future.result()
        self._active_acls.append(acl_params)

    def remove_acl(self, **acl_params) -> None:
        from confluent_kafka.admin import AclBindingFilter

        b = self._binding(**acl_params)
        match = AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host,
                                 b.operation, b.permission_type)
        for future in self._admin.delete_acls([match], request_timeout=TIMEOUT).values():
            future.result()
        self._active_acls.remove(acl_params)

    def list_acl(self, principal=None):
        from confluent_kafka.admin import (
            AclBindingFilter,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
            ResourceType,
        )

        any_filter = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY,
                                      f"User:{principal}" if principal else None, None,
                                      AclOperation.ANY, AclPermissionType.ANY)
        return self._admin.describe_acls(any_filter, request_timeout=TIMEOUT).result()

    def cleanup(self) -> None:
        for acl_params in self._active_acls[:]:
            self.remove_acl(**acl_params)


class KafkaConfig:
    """Upstream's KafkaConfig.add_scram_user (kafka-configs.sh --alter --add-config
    SCRAM-SHA-256=[...],SCRAM-SHA-512=[...]), over AlterUserScramCredentials."""

    def __init__(self) -> None:
        self._admin = _admin()

    def add_scram_user(self, username: str, password: str) -> None:
        from confluent_kafka.admin import (
            ScramCredentialInfo,
            ScramMechanism,
            UserScramCredentialUpsertion,
        )

        # One request per mechanism: a KRaft controller (ScramControlManager) takes one change per
        # user per request and answers DUPLICATE_RESOURCE to two; kafka-configs.sh does the same.
        for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
            upsert = UserScramCredentialUpsertion(username, ScramCredentialInfo(mechanism, 4096),
                                                  password.encode())
            for future in self._admin.alter_user_scram_credentials([upsert], request_timeout=TIMEOUT).values():
                future.result()


class NoKerberos:
    """kafkapy has no GSSAPI: a test that asks for a Kerberos ticket is skipped there."""

    def kinit(self, principal):
        pytest.skip("GSSAPI (Kerberos) is not supported by kafkapy")

    def kdestroy(self):
        pass


@pytest.fixture(scope="session")
def kafka_server():
    host, port = _split(_env("KAFKAPY_BOOTSTRAP"))
    _, ssl_port = _split(_env("KAFKAPY_SSL_BOOTSTRAP"))
    _, sasl_plain_port = _split(_env("KAFKAPY_SASL_PLAINTEXT_BOOTSTRAP"))
    _, sasl_ssl_port = _split(_env("KAFKAPY_SASL_SSL_BOOTSTRAP"))
    return KafkaServer(host, port, ssl_port, sasl_plain_port, sasl_ssl_port)


@pytest.fixture(scope="session")
def ssl_folder(tmp_path_factory):
    """Upstream's tests/ssl_cert, by its file names: the node's CA and a client certificate."""
    folder = tmp_path_factory.mktemp("ssl_cert")
    for env, name in (("KAFKAPY_SSL_CA_PEM", "ca.crt"), ("KAFKAPY_SSL_CLIENT_CERT_PEM", "client.crt"),
                      ("KAFKAPY_SSL_CLIENT_KEY_PEM", "client.key")):
        shutil.copyfile(_env(env), folder / name)
    return pathlib.Path(folder)


@pytest.fixture(scope="class")
def acl_manager(kafka_server):
    return ACLManager()


@pytest.fixture(scope="class")
def kafka_config(kafka_server):
    return KafkaConfig()


@pytest.fixture(scope="class")
def kerberos_utils(kafka_server):
    return NoKerberos()


@pytest.fixture(scope="session")
def docker_ip_address():
    return _split(_env("KAFKAPY_BOOTSTRAP"))[0]


@pytest.fixture(scope="class")
def loop(request):
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield loop
    if not loop.is_closed():
        loop.call_soon(loop.stop)
        loop.run_forever()
        loop.close()
    gc.collect()
    asyncio.set_event_loop(None)


@pytest.fixture(autouse=True)
def collect_garbage():
    yield
    gc.collect()


@pytest.fixture(scope="class")
def setup_test_class_serverless(request, loop):
    request.cls.loop = loop


@pytest.fixture(scope="class")
def setup_test_class(request, loop, kafka_server, ssl_folder, acl_manager, kerberos_utils, kafka_config):
    request.cls.loop = loop
    request.cls.kafka_host = kafka_server.host
    request.cls.kafka_port = kafka_server.port
    request.cls.kafka_ssl_port = kafka_server.ssl_port
    request.cls.kafka_sasl_plain_port = kafka_server.sasl_plain_port
    request.cls.kafka_sasl_ssl_port = kafka_server.sasl_ssl_port
    request.cls.ssl_folder = ssl_folder
    request.cls.acl_manager = acl_manager
    request.cls.kerberos_utils = kerberos_utils
    request.cls.kafka_config = kafka_config
    request.cls.hosts = kafka_server.hosts
    request.cls.kafka_version = KAFKA_VERSION
