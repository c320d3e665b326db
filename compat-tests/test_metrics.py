"""Operating kafkapy with stock tools: the Prometheus endpoint during real client traffic, and
what ``kafka-metadata-quorum`` asks, through a broker and through a controller.

* confluent-kafka produces N records of known sizes, then two group members (separate
  processes) share the topic, one leaves, the other takes over: between a scrape before and
  one after, messages-in grew by exactly N, bytes-in by the batches' size, bytes-out by at
  least what the members read, the Produce/Fetch/JoinGroup/SyncGroup/LeaveGroup request
  counters moved and the group shows with its members and generation.
* The Java AdminClient (kafka-clients 3.9, the library kafka-metadata-quorum runs on) describes
  the cluster and the metadata quorum with ``bootstrap.servers`` (the broker forwards
  DescribeQuorum to the controller) and with ``bootstrap.controllers`` (the controller answers
  DescribeCluster with the controllers).
"""

from __future__ import annotations

import sys
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kafkapy.testing import clients
from kafkapy.testing.node import KafkaNode, compat_target, free_port

sys.path.insert(0, str(Path(__file__).parent))
from test_groups import GROUP_OVERRIDES, Member, create_topic, produce, wait_until  # noqa: E402

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(compat_target() != "kafkapy", reason="kafkapy's own metrics endpoint"),
]

N = 300
PARTITIONS = 2


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    port = free_port()
    n = KafkaNode(tmp_path_factory.mktemp("metrics"), overrides={
        **GROUP_OVERRIDES, "kafkapy.metrics.listener": f"http://127.0.0.1:{port}"})
    n.metrics_port = port
    try:
        n.start()
        yield n
    finally:
        n.cleanup()


def scrape(node) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{node.metrics_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_metrics_follow_produce_consume_and_rebalance(node):
    topic = create_topic(node, PARTITIONS, "metered")
    group = f"metered-group-{time.monotonic_ns()}"
    before = scrape(node)

    values = produce(node, topic, N, PARTITIONS, "metered-value")
    value_bytes = sum(len(v.encode()) for v in values)

    first = Member("confluent", node, group, topic, name="first")
    second = None
    try:
        wait_until(lambda: len(first.assignment()) == PARTITIONS, 60, "the first member's assignment", first)
        second = Member("confluent", node, group, topic, name="second")
        wait_until(lambda: first.assignment() and second.assignment()
                   and len(first.assignment() | second.assignment()) == PARTITIONS,
                   60, "the partitions to be shared", first, second)
        wait_until(lambda: first.values() | second.values() == values, 60, "every record read",
                   first, second)
        during = scrape(node)
        second.stop()  # a clean close: LeaveGroup
        wait_until(lambda: len(first.assignment()) == PARTITIONS, 60, "the first member to take over",
                   first)
        first.stop()
    finally:
        for member in (first, second):
            if member is not None and member.proc.poll() is None:
                member.kill()
    after = scrape(node)

    def delta(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0.0) - before.get(key, 0.0)

    messages_in = delta("kafka_server_brokertopicmetrics_messagesin_total", topic=topic)
    bytes_in = delta("kafka_server_brokertopicmetrics_bytesin_total", topic=topic)
    bytes_out = delta("kafka_server_brokertopicmetrics_bytesout_total", topic=topic)
    requests = {api: delta("kafka_network_requestmetrics_requests_total", request=api)
                for api in ("Produce", "Fetch", "JoinGroup", "SyncGroup", "LeaveGroup", "OffsetCommit")}
    print(f"{N} records, {value_bytes} value bytes: messages in {messages_in}, bytes in {bytes_in}, "
          f"bytes out {bytes_out}; requests {requests}")
    assert messages_in == N
    # Record batches carry the values plus framing: a few bytes per record, 61 per batch.
    assert value_bytes < bytes_in <= value_bytes + 40 * N + 61 * N
    assert bytes_out >= bytes_in  # every record was read at least once
    assert requests["Produce"] >= 1 and requests["Fetch"] >= 2
    assert requests["JoinGroup"] >= 3  # first, second, and the first again after it left
    assert requests["SyncGroup"] >= 3 and requests["LeaveGroup"] >= 1
    assert delta("kafka_server_brokertopicmetrics_totalproducerequests_total", topic=topic) >= PARTITIONS

    # While both members were in, the group showed them.
    members = {labels: v for (name, labels), v in during.items()
               if name == "kafka_coordinator_group_members" and dict(labels)["group"] == group}
    assert list(members.values()) == [2], members
    assert after[("kafka_coordinator_group_generation", (("group", group),))] >= 3
    assert after[("kafka_coordinator_group_groupmetadatamanager_numgroups", ())] >= 1
    assert after[("kafka_network_requestmetrics_totaltime_seconds_count", (("request", "Produce"),))] \
        >= requests["Produce"]


def test_kafka_metadata_quorum_through_the_broker_and_the_controller(node):
    via_broker = clients.ok(clients.run_driver("java", {
        "op": "metadata-quorum", "bootstrap": node.bootstrap}, timeout=90))
    via_controller = clients.ok(clients.run_driver("java", {
        "op": "metadata-quorum", "bootstrap": f"127.0.0.1:{node.controller_port}",
        "controllers": True}, timeout=90))
    print(f"via broker: {via_broker}\nvia controller: {via_controller}")
    for seen in (via_broker, via_controller):
        assert seen["leader"] == 1 and seen["epoch"] >= 1 and seen["high_watermark"] > 0
        assert [v["id"] for v in seen["voters"]] == [1]
        assert seen["controller"] == 1 and seen["nodes"] == [1]
    assert via_broker["cluster_id"] == via_controller["cluster_id"]
