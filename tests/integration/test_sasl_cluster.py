"""Three combined nodes whose controller (PLAIN) and inter-broker (SCRAM-SHA-512, a user from
`storage format --add-scram`) listeners are SASL_PLAINTEXT: the quorum elects, brokers register,
replicas fetch, all authenticated.

Clients reach the nodes on a PLAINTEXT listener (also the harness's readiness probe); everything
between nodes goes over SASL_PLAINTEXT. Every wait is bounded; the fixture stops every node.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
from helpers import create_topics, metadata

from kafkapy.net.client import KafkaClient
from kafkapy.net.client_security import ClientSecurity
from kafkapy.protocol import ErrorCode
from kafkapy.testing.cluster import eventually
from kafkapy.testing.node_quorum import NodeQuorum

confluent_kafka = pytest.importorskip("confluent_kafka")

CLUSTER_ID = "VExTQ2x1c3RlclRlc3QwMQ"
NODE_IDS = (1, 2, 3)


@pytest.fixture
def cluster(tmp_path):
    plain = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="ctl" '
             'password="ctl-secret" user_ctl="ctl-secret";')
    scram = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
             'password="broker-secret";')
    quorum = NodeQuorum(tmp_path, CLUSTER_ID, combined=NODE_IDS, overrides={
        "controller.quorum.election.timeout.ms": "1000",
        "broker.heartbeat.interval.ms": "500",
        "offsets.topic.replication.factor": "3",
        "min.insync.replicas": "2",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.internal.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.internal.scram-sha-512.sasl.jaas.config": scram,
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": plain,
    })
    for n in quorum.nodes.values():
        n.add_listener("INTERNAL", "SASL_PLAINTEXT")
        n.format_args = ["--add-scram", "SCRAM-SHA-512=[name=broker,password=broker-secret]"]
    with quorum:
        yield quorum.nodes, None, None


def _send(port: int, request: Any, security: ClientSecurity | None = None) -> Any:
    async def main() -> Any:
        with trio.fail_after(10):
            async with await KafkaClient.connect("127.0.0.1", port, client_id="tls-it", security=security) as c:
                return await c.send(request)
    return trio.run(main)


def test_cluster_with_sasl_controller_and_inter_broker_listeners(cluster):
    nodes, _, _ = cluster

    def all_registered() -> bool:
        return sorted(b.node_id for b in _send(nodes[1].port, metadata(allow_auto_create=False)).brokers) == [1, 2, 3]

    eventually(all_registered, timeout=60, what="every broker registered over the SASL controller listener")
    assert eventually(lambda: _send(nodes[1].port, create_topics(("sasl-rep", 1, 3))).topics[0].error_code
                      in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS), timeout=20, what="topic created")
    producer = confluent_kafka.Producer({"bootstrap.servers": nodes[2].bootstrap, "acks": "all",
                                         "message.timeout.ms": 30000})
    delivered: list[Any] = []
    for i in range(10):
        producer.produce("sasl-rep", f"v{i}".encode(), on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(40) == 0
    assert delivered == [None] * 10

    def fully_replicated() -> bool:
        t = _send(nodes[1].port, metadata("sasl-rep", allow_auto_create=False)).topics[0]
        return len(t.partitions) == 1 and sorted(t.partitions[0].isr_nodes) == [1, 2, 3]

    eventually(fully_replicated, timeout=30, what="all three replicas in sync over the SASL inter-broker listener")
    for n in nodes.values():
        assert "Failed authentication" not in n.log_tail(500_000)
