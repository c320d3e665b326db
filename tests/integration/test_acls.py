"""The ACL authorizer with stock clients: confluent-kafka's AdminClient, producer and consumer, and
Kafka's own kafka-acls (AclCommand), against one node running StandardAuthorizer.

Every connection is User:ANONYMOUS until TLS and SASL land, so the test first runs the node with
``super.users=User:ANONYMOUS`` to grant ANONYMOUS the right to manage ACLs (ALTER and DESCRIBE on
the cluster) and to forward requests to the controller (CLUSTER_ACTION), then restarts it without
super users: from there on ANONYMOUS may do exactly what its ACLs allow, and
``allow.everyone.if.no.acl.found`` stays false. Admin requests reach the controller in Envelopes
naming the client, and the controller authorizes them again.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from kafkapy.testing.apache_kafka import java_command, kafka_home
from kafkapy.testing.cluster import LocalCluster
from kafkapy.testing.node import KafkaNode

ANON = "User:ANONYMOUS"
TOPIC, OTHER = "acl-orders", "acl-secret"
NODE_SETTINGS = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "false",
    "offsets.topic.replication.factor": 1,
    "offsets.topic.num.partitions": 1,
}


def binding(rtype: Any, name: str, op: Any, perm: Any = AclPermissionType.ALLOW,
            pattern: Any = ResourcePatternType.LITERAL) -> AclBinding:
    return AclBinding(rtype, name, pattern, ANON, "*", op, perm)


def wait(futures: dict[Any, Any], timeout: float = 30) -> dict[Any, Any]:
    return {k: f.result(timeout=timeout) for k, f in futures.items()}


def eventually(check: Callable[[], bool], timeout: float = 20, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    settings = {**NODE_SETTINGS, "super.users": ANON}
    with KafkaNode(tmp_path_factory.mktemp("acls"), overrides=settings) as n:
        admin = AdminClient({"bootstrap.servers": n.bootstrap})
        wait(admin.create_topics([NewTopic(t, 1, 1) for t in (TOPIC, OTHER)]))
        # CLUSTER_ACTION: the node forwards admin requests to its controller as ANONYMOUS too
        # (in Envelopes naming the client), as inter-broker principals need it in Kafka.
        wait(admin.create_acls([binding(ResourceType.BROKER, "kafka-cluster", op) for op in (
            AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.CLUSTER_ACTION)]))
        # The node creates __consumer_offsets as itself (its connection to the controller is
        # ANONYMOUS too, and the controller checks it, as Kafka's): let a group lookup create it
        # while ANONYMOUS may, as an operator gives the brokers' principal its rights.
        wait(admin.describe_consumer_groups(["acl-warmup"]))
        eventually(lambda: "__consumer_offsets" in admin.list_topics(timeout=10).topics,
                   what="__consumer_offsets to be created")
        # From here on ANONYMOUS is no super user.
        n.overrides["super.users"] = ""
        n.restart()
        yield n


def admin_of(node: KafkaNode) -> AdminClient:
    return AdminClient({"bootstrap.servers": node.bootstrap})


def produce_error(bootstrap: str, topic: str) -> Any:
    """The delivery error of one record (None when it was written)."""
    errors: list[Any] = []
    p = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10000, "enable.idempotence": False,
                  "retries": 0})
    p.produce(topic, b"v", on_delivery=lambda err, msg: errors.append(err))
    assert p.flush(20) == 0
    return errors[0]


def consume(node: KafkaNode, topic: str, group: str) -> tuple[list[bytes], Any]:
    """(values read, the first error the consumer reported)."""
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    values: list[bytes] = []
    error = None
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not values and error is None:
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                error = msg.error()
            else:
                values.append(msg.value())
                c.commit(msg, asynchronous=False)
    except KafkaException as exc:
        error = exc.args[0]
    finally:
        c.close()
    return values, error


def error_code(exc: BaseException) -> int:
    err = exc.args[0]
    return err.code() if isinstance(err, KafkaError) else -1


def test_admin_client_creates_describes_and_deletes_acls(node) -> None:
    admin = admin_of(node)
    extra = binding(ResourceType.TOPIC, "acl-tmp", AclOperation.READ)
    wait(admin.create_acls([extra]))
    listed = admin.describe_acls(AclBindingFilter(ResourceType.TOPIC, "acl-tmp", ResourcePatternType.LITERAL,
                                                  None, None, AclOperation.ANY, AclPermissionType.ANY)).result(30)
    assert listed == [extra]
    deleted = wait(admin.delete_acls([AclBindingFilter(ResourceType.TOPIC, "acl-tmp", ResourcePatternType.ANY,
                                                       None, None, AclOperation.ANY, AclPermissionType.ANY)]))
    assert list(deleted.values()) == [[extra]]
    every = admin.describe_acls(AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                                 AclOperation.ANY, AclPermissionType.ANY)).result(30)
    assert {(b.restype, b.operation) for b in every} == {(ResourceType.BROKER, AclOperation.ALTER),
                                                         (ResourceType.BROKER, AclOperation.DESCRIBE),
                                                         (ResourceType.BROKER, AclOperation.CLUSTER_ACTION)}


def test_without_acls_every_operation_is_refused_and_then_allowed(node) -> None:
    admin = admin_of(node)
    # Metadata hides every topic ANONYMOUS may not describe.
    assert not {TOPIC, OTHER} & set(admin.list_topics(timeout=10).topics)
    assert produce_error(node.bootstrap, TOPIC).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    values, error = consume(node, TOPIC, "acl-group")
    assert values == [] and error is not None and error.code() in (
        KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED)
    with pytest.raises(KafkaException) as created:
        admin.create_topics([NewTopic("acl-new", 1, 1)])["acl-new"].result(30)
    assert error_code(created.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as deleted:
        admin.delete_topics([OTHER])[OTHER].result(30)
    assert error_code(deleted.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    resource = ConfigResource("topic", TOPIC, incremental_configs=[
        ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as altered:
        list(admin.incremental_alter_configs([resource]).values())[0].result(30)
    assert error_code(altered.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED

    wait(admin.create_acls([
        binding(ResourceType.TOPIC, TOPIC, AclOperation.WRITE), binding(ResourceType.TOPIC, TOPIC, AclOperation.READ),
        binding(ResourceType.GROUP, "acl-", AclOperation.READ, pattern=ResourcePatternType.PREFIXED),
        binding(ResourceType.TOPIC, "acl-new", AclOperation.CREATE)]))
    eventually(lambda: TOPIC in admin.list_topics(timeout=10).topics, what="the topic to be describable")
    assert OTHER not in admin.list_topics(timeout=10).topics
    assert produce_error(node.bootstrap, TOPIC) is None
    values, error = consume(node, TOPIC, "acl-group")
    assert error is None and values == [b"v"]
    admin.create_topics([NewTopic("acl-new", 1, 1)])["acl-new"].result(30)


def test_a_prefixed_deny_beats_a_literal_allow(node) -> None:
    admin = admin_of(node)
    wait(admin.create_acls([binding(ResourceType.TOPIC, "acl-p", AclOperation.WRITE),
                            binding(ResourceType.TOPIC, "acl-p", AclOperation.DESCRIBE)]))
    wait(admin.create_acls([binding(ResourceType.TOPIC, "acl-", AclOperation.WRITE, AclPermissionType.DENY,
                                    ResourcePatternType.PREFIXED)]))
    assert produce_error(node.bootstrap, "acl-p").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


@pytest.mark.skipif(not (kafka_home() / "libs").is_dir() or shutil.which("java") is None,
                    reason="needs Apache Kafka's tools (make tools) and java")
def test_kafka_acls_lists_what_was_created(node) -> None:
    admin = admin_of(node)
    wait(admin.create_acls([binding(ResourceType.TOPIC, "acl-listed", AclOperation.READ)]))
    out = subprocess.run(java_command("org.apache.kafka.tools.AclCommand", "--bootstrap-server", node.bootstrap,
                                      "--list", "--topic", "acl-listed"),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "acl-listed" in out.stdout and "principal=User:ANONYMOUS" in out.stdout and "operation=READ" in out.stdout


def test_acls_reach_a_separate_controller_and_back(tmp_path) -> None:
    """A broker-only node forwards CreateAcls/DeleteAcls to the controller on its own process and
    answers DescribeAcls, and decisions, from the ACLs the metadata log brings back."""
    settings = {**NODE_SETTINGS, "allow.everyone.if.no.acl.found": "true"}
    with LocalCluster(tmp_path, controllers=1, brokers=1, overrides=settings) as cluster:
        bootstrap = cluster.up()
        admin = AdminClient({"bootstrap.servers": bootstrap})
        wait(admin.create_topics([NewTopic("acl-split", 1, 1)]))
        deny = binding(ResourceType.TOPIC, "acl-split", AclOperation.WRITE, AclPermissionType.DENY)
        wait(admin.create_acls([deny]))
        listed = admin.describe_acls(AclBindingFilter(ResourceType.TOPIC, None, ResourcePatternType.ANY, None, None,
                                                      AclOperation.ANY, AclPermissionType.ANY)).result(30)
        assert listed == [deny]
        assert produce_error(bootstrap, "acl-split").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        wait(admin.delete_acls([AclBindingFilter(ResourceType.TOPIC, "acl-split", ResourcePatternType.LITERAL, None,
                                                 None, AclOperation.ANY, AclPermissionType.ANY)]))
        assert produce_error(bootstrap, "acl-split") is None
