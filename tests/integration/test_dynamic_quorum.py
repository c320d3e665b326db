"""A dynamic metadata quorum (KIP-853): controllers added to and removed from a running quorum.

Three controllers are formatted with ``storage format --initial-controllers`` and configured with
``controller.quorum.bootstrap.servers`` (no ``controller.quorum.voters``), with one broker beside
them. A fourth controller, formatted with ``--no-initial-controllers``, catches up as an observer
and is added with AddRaftVoter (``kafkapy.quorum.admin``); then the leader, one of the original
voters, is removed with RemoveRaftVoter and stopped. Topics and records written before, between
and after the changes must all be there after every remaining node restarts. Last, a voter
restarts on another port and has its entry updated (UpdateRaftVoter).

Every node is a real process (``KafkaNode``); every wait is bounded.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from helpers import batch, create_topics, fetch, metadata, partition_response, produce, send_to, wait_for
from kafkapy.config import BrokerConfig
from kafkapy.net.client import KafkaClient
from kafkapy.protocol import ErrorCode, messages as m
from kafkapy.quorum.admin import (
    QuorumAdminError, QuorumInfo, add_controller, controller_identity, describe_quorum, remove_controller,
)
from kafkapy.storage import random_kafka_uuid
from kafkapy.testing.node import KafkaNode, free_port

CLUSTER_ID = "RHluYW1pY1F1b3J1bVRlcw"
CONTROLLERS = (1, 2, 3, 4)
BROKER_ID = 10
TIMEOUTS = {
    "controller.quorum.election.timeout.ms": "500",
    "controller.quorum.fetch.timeout.ms": "1000",
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "4000",
}


def _ports(n: int) -> list[int]:
    ports: list[int] = []
    while len(ports) < n:
        p = free_port()
        if p not in ports:
            ports.append(p)
    return ports


class DynamicCluster:
    """Four controller processes (three initial voters, one spare) and a broker."""

    def __init__(self, root: Path) -> None:
        ports = _ports(len(CONTROLLERS))
        self.addresses = {cid: ("127.0.0.1", port) for cid, port in zip(CONTROLLERS, ports)}
        bootstrap = ",".join(f"{h}:{p}" for h, p in self.addresses.values())
        self.dir_ids = {cid: random_kafka_uuid() for cid in CONTROLLERS}
        self.controllers: dict[int, KafkaNode] = {}
        for cid in CONTROLLERS:
            node = KafkaNode(root / f"controller{cid}", controller_port=self.addresses[cid][1],
                             cluster_id=CLUSTER_ID, format_storage=False, overrides={
                                 "node.id": cid, "process.roles": "controller",
                                 "listeners": f"CONTROLLER://127.0.0.1:{self.addresses[cid][1]}",
                                 "controller.quorum.voters": "",
                                 "controller.quorum.bootstrap.servers": bootstrap, **TIMEOUTS})
            node.port = node.controller_port  # ready = ApiVersions on the controller listener
            self.controllers[cid] = node
        self.broker = KafkaNode(root / "broker", cluster_id=CLUSTER_ID, overrides={
            "node.id": BROKER_ID, "process.roles": "broker",
            "listeners": "PLACEHOLDER", "controller.quorum.voters": "",
            "controller.quorum.bootstrap.servers": bootstrap,
            "offsets.topic.replication.factor": "1", **TIMEOUTS})
        self.broker.overrides["listeners"] = f"PLAINTEXT://127.0.0.1:{self.broker.port}"

    def format(self, cid: int, *flags: str) -> None:
        node = self.controllers[cid]
        cmd = [sys.executable, "-m", "kafkapy", "storage", "format", "-t", CLUSTER_ID, *flags]
        for key, value in node._settings().items():
            cmd += ["--override", f"{key}={value}"]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr

    def config(self, cid: int) -> BrokerConfig:
        return BrokerConfig.from_sources(self.controllers[cid]._settings())

    def initial_controllers(self, ids: tuple[int, ...]) -> str:
        return ",".join(f"{c}@{self.addresses[c][0]}:{self.addresses[c][1]}:{self.dir_ids[c]}" for c in ids)

    def running_addresses(self) -> list[tuple[str, int]]:
        return [self.addresses[c] for c, n in self.controllers.items() if n.running()]

    def describe(self) -> QuorumInfo:
        return trio.run(lambda: describe_quorum(self.running_addresses(), timeout=20))

    def quorum(self) -> QuorumInfo | None:
        """DescribeQuorum from the leader, or None while there is none."""
        try:
            return self.describe()
        except QuorumAdminError:
            return None

    def stop(self) -> None:
        self.broker.stop()
        for node in self.controllers.values():
            node.stop()


@pytest.fixture
def dyn(tmp_path):
    cluster = DynamicCluster(tmp_path)
    try:
        yield cluster
    finally:
        cluster.stop()


def _describe_cluster(address: tuple[str, int]) -> Any:
    async def main() -> Any:
        with trio.fail_after(15):
            async with await KafkaClient.connect(*address) as client:
                return await client.send(m.DescribeClusterRequest(
                    version=1, include_cluster_authorized_operations=False, endpoint_type=2), version=1)
    return trio.run(main)


def _broker_ready(cluster: DynamicCluster) -> bool:
    meta = send_to(("127.0.0.1", cluster.broker.port), metadata(allow_auto_create=False))
    return [b.node_id for b in meta.brokers] == [BROKER_ID]


def _create_and_fill(cluster: DynamicCluster, topic: str, partitions: int) -> dict[int, list[bytes]]:
    address = ("127.0.0.1", cluster.broker.port)
    created = send_to(address, create_topics((topic, partitions, 1)))
    assert created.topics[0].error_code == ErrorCode.NONE, created
    written = {}
    for p in range(partitions):
        values = [f"{topic}-{p}-{i}".encode() for i in range(5)]
        wait_for(f"{topic}-{p} produce", lambda: partition_response(
            send_to(address, produce(topic, p, batch(values)))).error_code == ErrorCode.NONE, timeout=30)
        written[p] = values
    return written


def _read_all(cluster: DynamicCluster, topic: str, partition: int) -> list[bytes]:
    from kafkapy.records.reader import iter_batches, iter_records

    async def main() -> Any:
        with trio.fail_after(15):
            async with await KafkaClient.connect("127.0.0.1", cluster.broker.port) as client:
                return await client.send(fetch(topic, partition, 0), version=12)  # by topic name

    resp = trio.run(main)
    part = resp.responses[0].partitions[0]
    if part.error_code != ErrorCode.NONE:
        return []
    out: list[bytes] = []
    for _h, view in iter_batches(memoryview(part.records or b"")):
        out.extend(bytes(r.value) for r in iter_records(view) if r.value is not None)
    return out


def _everything_there(cluster: DynamicCluster, topics: dict[str, dict[int, list[bytes]]]) -> bool:
    for topic, parts in topics.items():
        meta = send_to(("127.0.0.1", cluster.broker.port), metadata(topic, allow_auto_create=False))
        if meta.topics[0].error_code != ErrorCode.NONE or len(meta.topics[0].partitions) != len(parts):
            return False
        for p, values in parts.items():
            if _read_all(cluster, topic, p) != values:
                return False
    return True


def test_add_and_remove_controllers_without_losing_metadata(dyn: DynamicCluster) -> None:
    original = (1, 2, 3)
    for cid in original:
        dyn.format(cid, "--initial-controllers", dyn.initial_controllers(original))
    for cid in original:
        dyn.controllers[cid].start()
    first = wait_for("a leader of the 3 initial voters", lambda: (
        lambda q: q if q and q.voter_ids == [1, 2, 3] else None)(dyn.quorum()), timeout=60)
    dyn.broker.start()
    wait_for("the broker registered and unfenced", lambda: _broker_ready(dyn), timeout=60)
    topics = {"before-a": _create_and_fill(dyn, "before-a", 2), "before-b": _create_and_fill(dyn, "before-b", 1)}

    # A fourth controller joins: formatted without voters, it catches up as an observer first.
    dyn.format(4, "--no-initial-controllers")
    dyn.controllers[4].start()
    wait_for("controller 4 observing the quorum", lambda: any(
        o.replica_id == 4 and o.log_end_offset >= q.high_watermark > 0
        for q in [dyn.quorum()] if q for o in q.observers), timeout=60)
    voter4 = controller_identity(dyn.config(4))
    assert str(voter4.directory_id) != "00000000-0000-0000-0000-000000000000"
    trio.run(lambda: add_controller(dyn.running_addresses(), voter4, cluster_id=CLUSTER_ID, timeout=60))
    after_add = dyn.describe()
    assert after_add.voter_ids == [1, 2, 3, 4]
    assert {v.replica_id: v.directory_id for v in after_add.voters}[4] == voter4.directory_id
    # Adding it again is refused as Kafka refuses it.
    with pytest.raises(QuorumAdminError) as dup:
        trio.run(lambda: add_controller(dyn.running_addresses(), voter4, timeout=20))
    assert dup.value.code == ErrorCode.DUPLICATE_VOTER
    topics["between"] = _create_and_fill(dyn, "between", 2)

    # Remove the leader (one of the original voters): it resigns once the change commits.
    leader = after_add.leader_id
    assert leader in original, after_add
    trio.run(lambda: remove_controller(dyn.running_addresses(), leader, timeout=60))
    after_remove = wait_for("a new leader among the remaining voters", lambda: (
        lambda q: q if q and q.leader_id != leader and q.leader_id in q.voter_ids else None)(dyn.quorum()),
        timeout=60)
    remaining = [c for c in CONTROLLERS if c != leader]
    assert after_remove.voter_ids == remaining
    assert after_remove.leader_epoch > first.leader_epoch
    dyn.controllers[leader].stop()
    topics["after"] = _create_and_fill(dyn, "after", 3)
    assert wait_for("every topic and record before the restart", lambda: _everything_there(dyn, topics),
                    timeout=60)

    # Restart everything that is left: the voter set comes back from the metadata log.
    dyn.broker.stop()
    for cid in remaining:
        dyn.controllers[cid].stop()
    for cid in remaining:
        dyn.controllers[cid].start()
    final = wait_for("a leader after the restart", lambda: (
        lambda q: q if q and q.leader_id in remaining else None)(dyn.quorum()), timeout=60)
    assert final.voter_ids == remaining
    # What Kafka's admin client asks first with bootstrap.controllers (KIP-919).
    described = _describe_cluster(dyn.addresses[remaining[0]])
    assert described.error_code == ErrorCode.NONE and described.endpoint_type == 2
    assert described.controller_id == final.leader_id and described.cluster_id == CLUSTER_ID
    assert sorted(b.broker_id for b in described.brokers) == remaining
    dyn.broker.start()
    wait_for("the broker back", lambda: _broker_ready(dyn), timeout=60)
    assert wait_for("every topic and record after the restart", lambda: _everything_there(dyn, topics),
                    timeout=60)

    # Controller 4 comes back on another port: it has the leader update its entry
    # (UpdateRaftVoter), and the quorum goes on with the new address.
    mover = next(c for c in remaining if c != final.leader_id)
    node = dyn.controllers[mover]
    node.stop()
    new_port = next(p for p in _ports(8) if p not in [a[1] for a in dyn.addresses.values()])
    node.controller_port = node.port = new_port
    node.overrides["listeners"] = f"CONTROLLER://127.0.0.1:{new_port}"
    dyn.addresses[mover] = ("127.0.0.1", new_port)
    node.start()
    wait_for(f"controller {mover}'s new endpoint in the voter set", lambda: (
        lambda q: q and q.endpoints.get(mover, {}).get("CONTROLLER") == ("127.0.0.1", new_port))(dyn.quorum()),
        timeout=60)
    topics["moved"] = _create_and_fill(dyn, "moved", 1)
    assert wait_for("every topic and record at the end", lambda: _everything_there(dyn, topics), timeout=60)
