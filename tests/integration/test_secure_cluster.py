"""Issue 24's acceptance: three controller-only and three broker-only nodes, every listener
SASL_SSL, with the StandardAuthorizer, as a production operator would run them.

* controller listener: SASL_SSL with PLAIN (user ``ctl``);
* inter-broker listener: SASL_SSL with SCRAM-SHA-512 (user ``broker`` from
  ``storage format --add-scram``);
* client listener: SASL_SSL with SCRAM-SHA-512 (``admin``, a super user, and ``alice``, who has
  no ACLs);
* one trustme CA; ``super.users`` names the node principals and the admin.

The harness probes each node over TLS on its one listener (there is no plaintext port): a SASL_SSL
listener answers ApiVersions before authentication. Every wait is bounded; the fixture kills
every node.
"""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

import pytest

from kafkapy.net.client_security import from_client_properties
from kafkapy.testing.cluster import eventually
from kafkapy.testing.node import KafkaNode, free_port
from kafkapy.testing.node_pki import write_node_pki
from kafkapy.testing.node_quorum import NodeQuorum

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

CLUSTER_ID = "U2VjdXJlQ2x1c3RlcjAwMQ"
CONTROLLERS = (1, 2, 3)
BROKERS = (4, 5, 6)
HOST = "127.0.0.1"

CTL_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="ctl" '
            'password="ctl-secret" user_ctl="ctl-secret";')
BROKER_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
               'password="broker-secret";')
SCRAM_USERS = ("SCRAM-SHA-512=[name=broker,password=broker-secret]",
               "SCRAM-SHA-512=[name=admin,password=admin-secret]",
               "SCRAM-SHA-512=[name=alice,password=alice-secret]")


@pytest.fixture
def cluster(tmp_path):
    pki = write_node_pki(tmp_path, (HOST, "localhost"))
    common = {
        "controller.listener.names": "CONTROLLER",
        "controller.quorum.election.timeout.ms": "1000",
        "controller.quorum.fetch.timeout.ms": "2000",
        "broker.heartbeat.interval.ms": "500",
        "broker.session.timeout.ms": "4000",
        "offsets.topic.replication.factor": "3",
        **pki.node_settings(),
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": CTL_JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ctl;User:broker;User:admin",
        "allow.everyone.if.no.acl.found": "false",
    }
    tls_only = from_client_properties({"security.protocol": "SSL", **pki.truststore()})
    quorum = NodeQuorum(tmp_path, CLUSTER_ID, controllers=CONTROLLERS, brokers=BROKERS, overrides=common,
                        probe_security=tls_only, startup_timeout=60)
    for n in quorum.controllers.values():
        n.overrides["listener.security.protocol.map"] = "CONTROLLER:SASL_SSL"
        n.format_args = [arg for user in SCRAM_USERS for arg in ("--add-scram", user)]
    for n in quorum.brokers.values():
        n.overrides.update({
            "listeners": f"CLIENT://{HOST}:{n.port},INTERNAL://{HOST}:{free_port()}",
            "listener.security.protocol.map": "CLIENT:SASL_SSL,INTERNAL:SASL_SSL,CONTROLLER:SASL_SSL",
            "inter.broker.listener.name": "INTERNAL",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.internal.sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "listener.name.internal.scram-sha-512.sasl.jaas.config": BROKER_JAAS,
            "listener.name.client.sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "listener.name.client.scram-sha-512.sasl.jaas.config":
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        })
    with quorum:
        yield quorum.nodes, str(pki.ca_pem)


def client_config(nodes: dict[int, KafkaNode], ca: str, user: str, password: str,
                  **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": ",".join(nodes[b].bootstrap for b in BROKERS),
            "security.protocol": "SASL_SSL", "ssl.ca.location": ca,
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": password,
            "log_level": 0, **extra}


def active_controller(nodes: dict[int, KafkaNode]) -> int | None:
    """The controller that last logged becoming active with the highest epoch."""
    best: tuple[int, int] | None = None
    for i in CONTROLLERS:
        if not nodes[i].running():
            continue
        for epoch in re.findall(rf"Node {i} is the active controller \(epoch (\d+)\)", nodes[i].log_tail(2_000_000)):
            if best is None or int(epoch) > best[0]:
                best = (int(epoch), i)
    return best[1] if best else None


def produce(config: dict[str, Any], topic: str, values: list[bytes]) -> list[Any]:
    producer = ck.Producer({**config, "acks": "all", "enable.idempotence": True,
                            "message.timeout.ms": 30000})
    errors: list[Any] = []
    for v in values:
        producer.produce(topic, v, on_delivery=lambda err, msg: errors.append(err))
    producer.flush(40)
    return errors


def consume(config: dict[str, Any], topic: str, count: int) -> list[bytes]:
    consumer = ck.Consumer({**config, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                            "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 40
    try:
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
    finally:
        consumer.close()
    return got


def test_three_plus_three_cluster_all_sasl_ssl(cluster):
    nodes, ca = cluster
    admin_config = client_config(nodes, ca, "admin", "admin-secret")
    admin = AdminClient(admin_config)

    def brokers_unfenced() -> bool:
        return sorted(admin.list_topics(timeout=5).brokers) == list(BROKERS)

    eventually(brokers_unfenced, timeout=60, what="the three brokers registered and unfenced")
    assert active_controller(nodes) in CONTROLLERS

    topic = "secure-orders"
    futures = admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})])
    futures[topic].result(30)

    def fully_replicated() -> bool:
        partition = admin.list_topics(topic, timeout=5).topics[topic].partitions[0]
        return sorted(partition.isrs) == list(BROKERS)

    eventually(fully_replicated, timeout=30, what="three in-sync replicas over the inter-broker listener")
    values = [f"v{i}".encode() for i in range(20)]
    assert produce(admin_config, topic, values) == [None] * 20
    assert consume(admin_config, topic, 20) == values

    # A wrong password is refused: the client is told it failed to authenticate, nothing is delivered.
    client_errors: list[Any] = []
    bad = produce(client_config(nodes, ca, "admin", "wrong", error_cb=client_errors.append,
                                **{"message.timeout.ms": 3000}), topic, [b"x"])
    assert len(bad) == 1 and bad[0] is not None
    assert ck.KafkaError._AUTHENTICATION in {e.code() for e in client_errors}

    # alice authenticates but has no ACLs.
    refused = produce(client_config(nodes, ca, "alice", "alice-secret"), topic, [b"y"])
    assert len(refused) == 1 and refused[0].code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED

    # The active controller dies: another is elected and metadata writes succeed again.
    victim = active_controller(nodes)
    assert victim is not None
    nodes[victim].kill9()
    eventually(lambda: active_controller(nodes) not in (None, victim), timeout=30,
               what="a new active controller")
    admin.create_topics([NewTopic("after-failover", 1, 3)])["after-failover"].result(30)

    # The partition leader dies: leadership moves, and acks=all produce goes on with 2 in sync.
    leader = admin.list_topics(topic, timeout=5).topics[topic].partitions[0].leader
    nodes[leader].kill9()
    eventually(lambda: admin.list_topics(topic, timeout=5).topics[topic].partitions[0].leader
               not in (-1, leader), timeout=30, what="a new partition leader")
    more = [f"w{i}".encode() for i in range(10)]
    assert produce(admin_config, topic, more) == [None] * 10
    assert consume(admin_config, topic, 30) == values + more
    for i, n in nodes.items():
        log = n.log_tail(2_000_000)
        assert "Traceback" not in log, f"node {i}"
        if i in CONTROLLERS:  # only clients (the wrong password) failed SASL, never a node
            assert "Authentication failed" not in log, f"node {i}"
