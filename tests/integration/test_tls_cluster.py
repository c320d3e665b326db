"""Three combined nodes whose controller and inter-broker listeners are TLS (the controller one
mTLS): the quorum elects over TLS, brokers register over it, replicas fetch over it, and an
acks=all produce is acknowledged by all three replicas.

Clients reach the nodes on a PLAINTEXT listener (also the harness's readiness probe); everything
between nodes goes over SSL. Every wait is bounded; the fixture stops every node.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

from helpers import create_topics, metadata
from kafkapy.net.client import KafkaClient
from kafkapy.net.client_security import ClientSecurity, from_client_properties
from kafkapy.protocol import ErrorCode, messages
from kafkapy.testing.cluster import eventually
from kafkapy.testing.node_pki import write_node_pki
from kafkapy.testing.node_quorum import NodeQuorum

confluent_kafka = pytest.importorskip("confluent_kafka")

CLUSTER_ID = "VExTQ2x1c3RlclRlc3QwMQ"
NODE_IDS = (1, 2, 3)


@pytest.fixture
def cluster(tmp_path):
    pki = write_node_pki(tmp_path, common_name="kafkapy-node")
    quorum = NodeQuorum(tmp_path, CLUSTER_ID, combined=NODE_IDS, overrides={
        "controller.quorum.election.timeout.ms": "1000",
        "broker.heartbeat.interval.ms": "500",
        "offsets.topic.replication.factor": "3",
        "min.insync.replicas": "2",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SSL,CONTROLLER:SSL",
        "inter.broker.listener.name": "INTERNAL",
        **pki.node_settings(),
        "listener.name.controller.ssl.client.auth": "required",
    })
    for n in quorum.nodes.values():
        n.add_listener("INTERNAL", "SSL")
    with quorum:
        yield quorum.nodes, pki


def _send(port: int, request: Any, security: ClientSecurity | None = None) -> Any:
    async def main() -> Any:
        with trio.fail_after(10):
            async with await KafkaClient.connect("127.0.0.1", port, client_id="tls-it", security=security) as c:
                return await c.send(request)
    return trio.run(main)


def test_cluster_with_tls_controller_and_inter_broker_listeners(cluster):
    nodes, pki = cluster
    r = messages.DescribeQuorumRequest
    describe = r(topics=[r.TopicData(topic_name="__cluster_metadata", partitions=[
        r.TopicData.PartitionData(partition_index=0)])])
    mtls = from_client_properties({"security.protocol": "SSL", **pki.node_settings()})

    def leader() -> int | None:
        parts = [_send(n.controller_port, describe, mtls).topics[0].partitions[0] for n in nodes.values()]
        leaders = [p.leader_id for p in parts if p.error_code == ErrorCode.NONE]
        return leaders[0] if len(leaders) == 1 else None

    eventually(leader, timeout=30, what="one quorum leader, elected over TLS")

    def all_registered() -> bool:
        return sorted(b.node_id for b in _send(nodes[1].port, metadata(allow_auto_create=False)).brokers) == [1, 2, 3]

    eventually(all_registered, timeout=30, what="every broker registered over the TLS controller listener")

    assert eventually(lambda: _send(nodes[1].port, create_topics(("tls-rep", 1, 3))).topics[0].error_code
                      in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS), timeout=20, what="topic created")

    producer = confluent_kafka.Producer({"bootstrap.servers": nodes[2].bootstrap, "acks": "all",
                                         "message.timeout.ms": 30000})
    delivered: list[Any] = []
    for i in range(10):
        producer.produce("tls-rep", f"v{i}".encode(), on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(40) == 0
    assert delivered == [None] * 10

    def fully_replicated() -> bool:
        t = _send(nodes[1].port, metadata("tls-rep", allow_auto_create=False)).topics[0]
        return len(t.partitions) == 1 and sorted(t.partitions[0].isr_nodes) == [1, 2, 3]

    eventually(fully_replicated, timeout=30, what="all three replicas in sync over the TLS inter-broker listener")
    # The controller listener takes only certified nodes: registration and Raft came in over mTLS.
    for n in nodes.values():
        assert "on listener CONTROLLER authenticated by its certificate CN=kafkapy-node" in n.log_tail(500_000)
        assert "Failed authentication" not in n.log_tail(500_000)
