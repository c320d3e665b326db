"""Three combined-mode nodes (``process.roles=broker,controller``) on the real metadata quorum.

One node's controller is active (the Raft leader); every broker registers with it over the
controller listener, and admin requests sent to any node are forwarded to it. The nodes are real
processes (``KafkaNode``) so a failover is a real ``kill -9``.

Every wait is bounded; timeouts are shortened (election 500 ms, fetch 1 s) so a failover takes
a couple of seconds.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import trio

from helpers import create_topics, metadata
from kafkapy.net.client import KafkaClient
from kafkapy.protocol import ErrorCode, messages
from kafkapy.testing.cluster import eventually
from kafkapy.testing.node import KafkaNode, free_port

CLUSTER_ID = "S3JhZnRQaGFzZU9uZVRzdA"
NODE_IDS = (1, 2, 3)
QUORUM_OVERRIDES = {
    "controller.quorum.election.timeout.ms": "500",
    "controller.quorum.fetch.timeout.ms": "1000",
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "4000",
}


def _describe_request() -> Any:
    r = messages.DescribeQuorumRequest
    return r(topics=[r.TopicData(topic_name="__cluster_metadata", partitions=[
        r.TopicData.PartitionData(partition_index=0)])])


def _send(port: int, request: Any, *, timeout: float = 10.0) -> Any:
    async def main() -> Any:
        with trio.fail_after(timeout):
            async with await KafkaClient.connect("127.0.0.1", port, client_id="kraft-it") as client:
                return await client.send(request)
    return trio.run(main)


def _quorum_view(nodes: dict[int, KafkaNode]) -> tuple[int, int, Any] | None:
    """(leader id, epoch, partition data) if exactly one running node answers DescribeQuorum as
    the leader and the others refuse with NOT_LEADER_OR_FOLLOWER (Kafka answers it only on the
    leader), else None."""
    leaders = []
    for node_id, node in nodes.items():
        if not node.running():
            continue
        part = _send(node.controller_port, _describe_request()).topics[0].partitions[0]
        if part.error_code == ErrorCode.NONE:
            assert part.leader_id == node_id
            leaders.append(part)
        else:
            assert part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    if len(leaders) != 1:
        return None
    return leaders[0].leader_id, leaders[0].leader_epoch, leaders[0]


def _brokers_everywhere(nodes: dict[int, KafkaNode]) -> bool:
    """Every running node's Metadata lists every running node as a live broker (each has
    registered with the active controller and been unfenced)."""
    running = sorted(i for i, n in nodes.items() if n.running())
    for node in nodes.values():
        if not node.running():
            continue
        if sorted(b.node_id for b in _send(node.port, metadata(allow_auto_create=False)).brokers) != running:
            return False
    return True


def _topic_everywhere(nodes: dict[int, KafkaNode], topic: str, partitions: int) -> bool:
    for node in nodes.values():
        if not node.running():
            continue
        meta = _send(node.port, metadata(topic, allow_auto_create=False))
        t = meta.topics[0]
        if t.error_code != ErrorCode.NONE or len(t.partitions) != partitions:
            return False
    return True


def _create(node: KafkaNode, topic: str, partitions: int) -> int:
    return _send(node.port, create_topics((topic, partitions, 1))).topics[0].error_code


@pytest.fixture
def cluster(tmp_path):
    ports = {i: free_port() for i in NODE_IDS}
    while len(set(ports.values())) < len(ports):
        ports = {i: free_port() for i in NODE_IDS}
    voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in ports.items())
    nodes = {
        i: KafkaNode(tmp_path / f"node{i}", controller_port=ports[i], cluster_id=CLUSTER_ID,
                     overrides={"node.id": i, "controller.quorum.voters": voters,
                                **QUORUM_OVERRIDES})
        for i in NODE_IDS
    }
    try:
        # Each node opens its broker listener before the quorum has a leader, so they start
        # one after another (the first cannot elect itself alone).
        for node in nodes.values():
            node.start()
        yield nodes
    finally:
        for node in nodes.values():
            node.stop()


def test_three_combined_nodes_elect_fail_over_and_rejoin(cluster):
    nodes = cluster
    started = time.monotonic()
    leader, epoch, part = eventually(lambda: _quorum_view(nodes), timeout=20, what="a leader")
    assert sorted(v.replica_id for v in part.current_voters) == list(NODE_IDS)
    eventually(lambda: _brokers_everywhere(nodes), timeout=20,
                what="every broker registered and unfenced")
    print(f"leader {leader} (epoch {epoch}) after {time.monotonic() - started:.1f}s")

    active = nodes[leader]
    assert eventually(lambda: _create(active, "kraft-a", 3) == ErrorCode.NONE, timeout=20,
                       what="CreateTopics on the active controller's node")
    eventually(lambda: _topic_everywhere(nodes, "kraft-a", 3), timeout=10,
                what="kraft-a in every node's Metadata")

    # A standby's broker forwards admin requests to the active controller.
    standby = next(n for i, n in nodes.items() if i != leader)
    assert _create(standby, "kraft-standby", 1) == ErrorCode.NONE
    assert _topic_everywhere(nodes, "kraft-standby", 1)

    # kill -9 the active controller: the two others elect a new leader within a few seconds.
    killed_at = time.monotonic()
    active.kill9()
    new_leader, new_epoch, _ = eventually(
        lambda: (v := _quorum_view(nodes)) and v[0] != leader and v, timeout=10,
        what="a new leader after the kill")
    failover = time.monotonic() - killed_at
    assert new_epoch > epoch
    assert failover < 8, failover
    print(f"new leader {new_leader} (epoch {new_epoch}) {failover:.1f}s after the kill")
    assert _topic_everywhere(nodes, "kraft-a", 3)
    survivor = next(n for i, n in nodes.items() if i not in (leader, new_leader))
    assert eventually(lambda: _create(survivor, "kraft-b", 2) == ErrorCode.NONE,
                       timeout=20, what="CreateTopics forwarded to the new active controller")
    eventually(lambda: _topic_everywhere(nodes, "kraft-b", 2), timeout=10,
                what="kraft-b in every running node's Metadata")

    # The killed node restarts, rejoins as a follower and catches up.
    active.start()

    def caught_up() -> bool:
        view = _quorum_view(nodes)
        if view is None or view[0] != new_leader:
            return False
        part = view[2]
        voters = {v.replica_id: v for v in part.current_voters}
        return voters[leader].log_end_offset >= part.high_watermark > 0

    eventually(caught_up, timeout=20, what=f"node {leader} to catch up as a follower")
    eventually(lambda: _brokers_everywhere(nodes), timeout=20,
                what="the restarted node's broker registered again")
    eventually(lambda: _topic_everywhere(nodes, "kraft-a", 3)
                and _topic_everywhere(nodes, "kraft-b", 2), timeout=10,
                what="both topics in every node's Metadata")
