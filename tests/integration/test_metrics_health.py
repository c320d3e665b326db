"""Metrics, health checks and the quorum-describing APIs on running nodes.

* In-process combined nodes: ``/metrics`` moves with produce and fetch, two nodes in one process
  keep their metrics apart, DescribeQuorum sent to the broker listener is forwarded to the
  controller, DescribeCluster on the controller listener lists the controllers.
* One controller and one broker as processes (``LocalCluster``): DescribeQuorum through the
  broker-only node; the broker's ``/ready`` turns 503 when it loses its controller (the controller process is stopped with SIGSTOP past the
  broker session timeout) and 200 again once the controller runs again.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
import urllib.error
import urllib.request

import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

from helpers import batch, combined_node_config, create_topics, fetch, partition_response, produce, run_trio
from kafkapy.config import BrokerConfig
from kafkapy.net.client import KafkaClient
from kafkapy.node.node import Node
from kafkapy.protocol import ErrorCode, messages as m
from kafkapy.testing.cluster import LocalCluster, eventually


def http_get(port: int, path: str, timeout: float = 5.0) -> tuple[int, str]:
    """(status, body) of one GET against a node's metrics endpoint (blocking)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """A scrape as {(sample name, sorted labels): value}."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


async def scrape(port: int, path: str = "/metrics") -> tuple[int, str]:
    # On a worker thread: the node serves the request on this very Trio loop.
    return await trio.to_thread.run_sync(http_get, port, path)


def _config(data_dir: str) -> BrokerConfig:
    return combined_node_config(data_dir, **{"kafkapy.metrics.listener": "http://127.0.0.1:0"})


async def _send(port: int, request: object, version: int | None = None) -> object:
    async with await KafkaClient.connect("127.0.0.1", port, client_id="metrics-it") as client:
        return await client.send(request, version=version)


def _describe_quorum() -> object:
    req = m.DescribeQuorumRequest
    return req(topics=[req.TopicData(topic_name="__cluster_metadata",
                                     partitions=[req.TopicData.PartitionData(partition_index=0)])])


@run_trio(60)
async def test_metrics_move_with_produce_and_fetch_and_nodes_keep_their_own(tmp_path):
    async with trio.open_nursery() as nursery:
        a, b = Node(_config(str(tmp_path / "a"))), Node(_config(str(tmp_path / "b")))
        ports_a = await nursery.start(a.run)
        await nursery.start(b.run)
        assert a.metrics_port and b.metrics_port and a.metrics_port != b.metrics_port
        assert a.metrics.registry is not b.metrics.registry

        status, body = await scrape(a.metrics_port, "/ready")
        assert status == 200, body
        assert json.loads(body)["ready"] is True
        assert (await scrape(a.metrics_port, "/health"))[0] == 200

        resp = await _send(ports_a["PLAINTEXT"], create_topics(("metered", 1, 1)))
        assert resp.topics[0].error_code == ErrorCode.NONE
        before = samples((await scrape(a.metrics_port))[1])
        values = [b"x" * 100, b"y" * 50, b"z"]
        records = batch(values)
        resp = await _send(ports_a["PLAINTEXT"], produce("metered", 0, records))
        assert partition_response(resp).error_code == ErrorCode.NONE
        resp = await _send(ports_a["PLAINTEXT"], fetch("metered", 0, 0), 12)  # by name
        assert resp.responses[0].partitions[0].error_code == ErrorCode.NONE
        # Failed produces count for topics that exist, not for names nobody created.
        for topic in ("metered", "no-such-topic"):
            resp = await _send(ports_a["PLAINTEXT"], produce(topic, 0, batch([b"v"]), acks=5))
            assert partition_response(resp).error_code == ErrorCode.INVALID_REQUIRED_ACKS
        after = samples((await scrape(a.metrics_port))[1])

        def delta(name: str, **labels: str) -> float:
            key = (name, tuple(sorted(labels.items())))
            return after.get(key, 0.0) - before.get(key, 0.0)

        topic = {"topic": "metered"}
        assert delta("kafka_server_brokertopicmetrics_messagesin_total", **topic) == 3
        assert delta("kafka_server_brokertopicmetrics_bytesin_total", **topic) == len(records)
        assert delta("kafka_server_brokertopicmetrics_bytesout_total", **topic) == len(records)
        assert delta("kafka_server_brokertopicmetrics_failedproducerequests_total", **topic) == 1
        assert not [k for k in after if ("topic", "no-such-topic") in k[1]]
        assert delta("kafka_network_requestmetrics_requests_total", request="Produce") == 3
        assert delta("kafka_network_requestmetrics_requests_total", request="Fetch") == 1
        assert delta("kafka_network_requestmetrics_totaltime_seconds_count", request="Produce") == 3
        part = {"topic": "metered", "partition": "0"}
        assert after[("kafka_log_log_logendoffset", tuple(sorted(part.items())))] == 3
        assert after[("kafka_log_log_size", tuple(sorted(part.items())))] >= len(records)
        for name, want in (("kafka_server_replicamanager_leadercount", 1),
                           ("kafka_server_replicamanager_underreplicatedpartitions", 0),
                           ("kafka_controller_kafkacontroller_activecontrollercount", 1),
                           ("kafka_controller_kafkacontroller_activebrokercount", 1),
                           ("kafka_controller_kafkacontroller_offlinepartitionscount", 0),
                           ("kafka_server_raftmetrics_current_leader", 1),
                           ("kafka_server_kafkaserver_brokerstate", 3)):
            assert after[(name, ())] == want, name
        assert after[("kafka_server_raftmetrics_high_watermark", ())] > 0
        # Each _send was a connection of its own, closed by now.
        assert delta("kafka_server_socketservermetrics_connection_creation_total",
                     listener="PLAINTEXT") == 4
        assert after[("kafka_server_socketservermetrics_connection_count",
                      (("listener", "PLAINTEXT"),))] == 0
        assert after[("process_open_fds", ())] > 0

        # The other node saw none of it.
        other = samples((await scrape(b.metrics_port))[1])
        assert ("kafka_server_brokertopicmetrics_messagesin_total", (("topic", "metered"),)) not in other
        nursery.cancel_scope.cancel()


@run_trio(60)
async def test_describe_quorum_on_the_broker_and_describe_cluster_on_the_controller(tmp_path):
    async with trio.open_nursery() as nursery:
        node = Node(_config(str(tmp_path / "data")))
        ports = await nursery.start(node.run)
        broker, controller = ports["PLAINTEXT"], ports["CONTROLLER"]

        # Both listeners advertise what they now serve.
        async with await KafkaClient.connect("127.0.0.1", broker) as client:
            assert m.DescribeQuorumRequest.API_KEY in client.peer_versions
        async with await KafkaClient.connect("127.0.0.1", controller) as client:
            assert m.DescribeClusterRequest.API_KEY in client.peer_versions

        for version in (0, 1, 2):
            resp = await _send(broker, _describe_quorum(), version)
            part = resp.topics[0].partitions[0]
            assert part.error_code == 0 and part.leader_id == 1, resp
            assert [v.replica_id for v in part.current_voters] == [1]
            assert part.high_watermark > 0
            if version >= 2:
                assert [n.node_id for n in resp.nodes] == [1]
                assert resp.nodes[0].listeners[0].port == controller

        resp = await _send(controller, m.DescribeClusterRequest(
            include_cluster_authorized_operations=False, endpoint_type=2), 1)
        assert resp.error_code == 0, resp
        assert resp.endpoint_type == 2 and resp.controller_id == 1
        assert resp.cluster_id == node.cluster_id
        assert [(n.broker_id, n.port) for n in resp.brokers] == [(1, controller)]

        # Asking either side for the other kind of endpoint: Kafka's MISMATCHED_ENDPOINT_TYPE.
        resp = await _send(controller, m.DescribeClusterRequest(
            include_cluster_authorized_operations=False, endpoint_type=1), 1)
        assert resp.error_code == ErrorCode.MISMATCHED_ENDPOINT_TYPE
        resp = await _send(broker, m.DescribeClusterRequest(
            include_cluster_authorized_operations=False, endpoint_type=2), 1)
        assert resp.error_code == ErrorCode.MISMATCHED_ENDPOINT_TYPE
        resp = await _send(broker, m.DescribeClusterRequest(
            include_cluster_authorized_operations=False, endpoint_type=1), 1)
        assert resp.error_code == 0 and [b.broker_id for b in resp.brokers] == [1]
        nursery.cancel_scope.cancel()


# -- readiness across fencing, with real processes ---------------------------------------------

SESSION_MS = 3000
OVERRIDES = {
    "controller.quorum.election.timeout.ms": 1000,
    "controller.quorum.fetch.timeout.ms": 2000,
    "broker.heartbeat.interval.ms": 500,
    "broker.session.timeout.ms": SESSION_MS,
    "kafkapy.metrics.listener": "http://127.0.0.1:0",
}
CONTROLLER, BROKER = 1, 2
_SERVING = re.compile(r"Serving metrics and health checks on http://127\.0\.0\.1:(\d+)")


def metrics_port(cluster: LocalCluster, node_id: int) -> int:
    found = _SERVING.findall(cluster.log(node_id))
    assert found, f"node {node_id} logged no metrics endpoint"
    return int(found[-1])


def ready(port: int) -> tuple[int, dict]:
    status, body = http_get(port, "/ready")
    return status, json.loads(body)


@pytest.mark.timeout(180)
def test_ready_follows_the_broker_losing_and_regaining_its_controller(tmp_path):
    with LocalCluster(tmp_path / "cluster", controllers=1, brokers=1, overrides=OVERRIDES) as cluster:
        cluster.up()
        ports = {n: eventually(lambda n=n: metrics_port(cluster, n), timeout=30,
                               what=f"node {n}'s metrics endpoint") for n in (CONTROLLER, BROKER)}
        eventually(lambda: ready(ports[BROKER])[0] == 200, timeout=30, what="the broker to be ready")
        assert ready(ports[CONTROLLER])[0] == 200
        status, body = http_get(ports[CONTROLLER], "/metrics")
        controller_metrics = samples(body)
        assert controller_metrics[("kafka_controller_kafkacontroller_activecontrollercount", ())] == 1
        assert controller_metrics[("kafka_controller_kafkacontroller_activebrokercount", ())] == 1
        assert controller_metrics[("kafka_controller_kafkacontroller_fencedbrokercount", ())] == 0
        broker_metrics = samples(http_get(ports[BROKER], "/metrics")[1])
        assert broker_metrics[("kafka_server_raftmetrics_current_leader", ())] == CONTROLLER

        # A broker-only node forwards DescribeQuorum to the controller process; the broker
        # shows as the quorum's observer.
        resp = trio.run(_send, cluster.broker_address(BROKER)[1], _describe_quorum())
        part = resp.topics[0].partitions[0]
        assert part.error_code == 0 and part.leader_id == CONTROLLER
        assert [v.replica_id for v in part.current_voters] == [CONTROLLER]
        assert [o.replica_id for o in part.observers] == [BROKER]

        pid = cluster.state().node(CONTROLLER).pid
        assert pid is not None
        stopped_at = time.monotonic()
        os.kill(pid, signal.SIGSTOP)
        try:
            # First the broker's metadata fetches time out (no leader known), then its session
            # runs out without an answer: it has fenced itself.
            status, report = eventually(
                lambda: (lambda r: r if r[0] == 503 else None)(ready(ports[BROKER])),
                timeout=SESSION_MS / 1000 + 20, what="the broker's /ready to turn 503")
            print(f"/ready 503 after {time.monotonic() - stopped_at:.1f}s: {report}")
            assert any("controller" in reason for reason in report["reasons"]), report
            status, report = eventually(
                lambda: (lambda r: r if any("lost contact" in x for x in r[1]["reasons"]) else None)(
                    ready(ports[BROKER])),
                timeout=SESSION_MS / 1000 + 20, what="the broker to report lost contact")
            assert status == 503
            print(f"lost contact after {time.monotonic() - stopped_at:.1f}s: {report}")
            assert http_get(ports[BROKER], "/health")[0] == 200
            assert samples(http_get(ports[BROKER], "/metrics")[1])[("kafkapy_broker_fenced", ())] == 1
        finally:
            os.kill(pid, signal.SIGCONT)
        resumed_at = time.monotonic()
        eventually(lambda: ready(ports[BROKER])[0] == 200, timeout=60,
                   what="the broker's /ready to turn 200 again")
        print(f"/ready 200 again {time.monotonic() - resumed_at:.1f}s after SIGCONT")
        controller_metrics = samples(http_get(ports[CONTROLLER], "/metrics")[1])
        assert controller_metrics[("kafka_controller_kafkacontroller_activebrokercount", ())] == 1
