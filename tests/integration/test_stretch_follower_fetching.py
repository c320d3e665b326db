"""Follower fetching across real sites: a consumer in the east reads from the east replica, not
across the WAN, and goes back to the west leader when that replica is gone.

Two network-namespace sites 5 ms apart (kafkapy.testing.sites): a combined node in ``west``, a
broker in ``east``, both with Kafka's RackAwareReplicaSelector. A topic led in the west has its
second replica in the east. A stock consumer (librdkafka, ``client.rack=east``) runs inside the
east site; the brokers' per-partition fetch counters (``/metrics``) say who served its reads.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafkapy.cli.cluster_config import Site
from kafkapy.testing.cluster import eventually
from kafkapy.testing.fetch_counters import partition_fetch_counters
from kafkapy.testing.sites.network import SiteNetwork, unavailable_reason
from kafkapy.testing.stretch.cluster import StretchCluster
from kafkapy.testing.stretch.measure import read_reads
from kafkapy.testing.stretch.recipes import FAST_OVERRIDES, Recipe

pytestmark = pytest.mark.skipif(unavailable_reason() is not None,
                                reason=unavailable_reason() or "")
confluent_kafka = pytest.importorskip("confluent_kafka")
admin_api = pytest.importorskip("confluent_kafka.admin")

RECIPE = Recipe(
    name="follower-fetching",
    sites=(Site("west", 0, 0, 1), Site("east", 0, 1, 0)),
    delays_ms={("west", "east"): 5.0},
    topic_configs={},
    overrides=(*FAST_OVERRIDES, ("kafkapy.metrics.listener", "http://0.0.0.0:0")),
)
TOPIC = "nearest"
REPO = Path(__file__).resolve().parents[2]
_SERVING = re.compile(r"Serving metrics and health checks on http://[0-9.]+:(\d+)")


def counters(cluster: StretchCluster, node_id: int) -> dict[str, float]:
    """The node's per-partition consumer fetch counters for partition 0 of ``TOPIC``."""
    ports = _SERVING.findall((cluster.directory / f"node-{node_id}" / "node.log").read_text())
    assert ports, f"node {node_id} logged no metrics endpoint"
    return partition_fetch_counters(cluster.broker_address(node_id)[0], int(ports[-1]), TOPIC)


def isr(cluster: StretchCluster, via: list[int] | None = None) -> tuple[int, ...]:
    parts = cluster.partitions(TOPIC, via=via)
    return parts[0][2] if parts else ()


def produce(cluster: StretchCluster, values: list[bytes]) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.all_bootstrap(), "acks": "all"})
    for v in values:
        producer.produce(TOPIC, v, partition=0)
    assert producer.flush(30) == 0, "records not acknowledged within 30 s"


def test_an_east_consumer_reads_from_the_east_replica_then_falls_back_to_the_west_leader(tmp_path):
    with SiteNetwork() as net, StretchCluster(net, RECIPE, tmp_path / "cluster") as cluster:
        [leader], [east] = cluster.brokers("west"), cluster.brokers("east")
        admin = admin_api.AdminClient({"bootstrap.servers": cluster.all_bootstrap()})
        admin.create_topics([admin_api.NewTopic(
            TOPIC, num_partitions=1, replica_assignment=[[leader, east]])])[TOPIC].result(timeout=30)
        eventually(lambda: sorted(isr(cluster)) == sorted([leader, east]), timeout=30,
                   what="both replicas in sync")
        produce(cluster, [b"first-%d" % i for i in range(100)])

        # The consumer inside the east site, client.rack=east (kafkapy.testing.stretch.reader).
        reads = tmp_path / "east.reads"
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        with open(tmp_path / "east.reader.out", "ab") as out:
            reader = cluster.site("east").popen(
                [sys.executable, "-m", "kafkapy.testing.stretch.reader", "--bootstrap",
                 cluster.bootstrap("east"), "--topic", TOPIC, "--rack", "east", "--log", str(reads)],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env)
        try:
            eventually(lambda: len(read_reads(reads)) >= 100, timeout=60,
                       what="the east consumer to read the first 100 records")
            served, led = counters(cluster, east), counters(cluster, leader)
            assert served["bytesout"] > 0 and served["fetchrequests"] > 0, served
            assert led["preferredreplicaredirects"] >= 1 and led["bytesout"] == 0, led

            # The east replica goes (its process killed; the consumer in its site stays).
            cluster.processes[east].kill()
            cluster.processes[east].wait(timeout=10)
            eventually(lambda: isr(cluster, via=[leader]) == (leader,), timeout=30,
                       what="the east replica to leave the ISR")
            produce(cluster, [b"second-%d" % i for i in range(50)])
            started = time.monotonic()
            eventually(lambda: len(read_reads(reads)) >= 150, timeout=60,
                       what="the east consumer to read on from the west leader")
            print(f"east consumer back on the leader {time.monotonic() - started:.1f}s after the produce")
            assert counters(cluster, leader)["bytesout"] > 0, "the leader served the later reads"
        finally:
            reader.terminate()
            try:
                reader.wait(timeout=10)
            except subprocess.TimeoutExpired:
                reader.kill()
                reader.wait(timeout=10)
