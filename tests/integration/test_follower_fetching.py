"""Follower fetching (KIP-392) in a running cluster, as confluent-kafka and kafka-python see it.

One controller and three brokers as processes (``LocalCluster``), the brokers in racks a, b and c,
every broker with ``replica.selector.class`` set to Kafka's RackAwareReplicaSelector. A topic with
replicas on all three is led by the rack-a broker. A consumer with ``client.rack=b`` reads
everything, and the brokers' per-partition fetch counters (``/metrics``) show the rack-b follower
served the records and the leader only pointed the consumer there. Then the rack-b broker is
killed: the consumer keeps reading new records, now from the leader, which stops naming a replica
once it is out of the ISR or fenced (librdkafka goes back to the leader when the preferred
replica's connection goes down, kafka-python once the fenced broker leaves its metadata).
"""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from kafkapy.testing.cluster import LocalCluster, eventually
from kafkapy.testing.fetch_counters import partition_fetch_counters

confluent_kafka = pytest.importorskip("confluent_kafka")
admin = pytest.importorskip("confluent_kafka.admin")

SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
OVERRIDES = {
    "controller.quorum.election.timeout.ms": "1000",
    "controller.quorum.fetch.timeout.ms": "2000",
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "3000",
    "replica.lag.time.max.ms": "5000",
    "replica.selector.class": SELECTOR,
    "kafkapy.metrics.listener": "http://127.0.0.1:0",
}
# Node 1 is the controller; brokers 2, 3 and 4 sit in racks a, b and c.
RACKS = {2: "a", 3: "b", 4: "c"}
LEADER, RACK_B = 2, 3
TOPIC = "follower-fetching"
N, M = 200, 50
_SERVING = re.compile(r"Serving metrics and health checks on http://127\.0\.0\.1:(\d+)")


def _metrics_port(cluster: LocalCluster, node_id: int) -> int:
    found = _SERVING.findall(cluster.log(node_id))
    assert found, f"node {node_id} logged no metrics endpoint"
    return int(found[-1])


def fetch_counters(port: int) -> dict[str, float]:
    """This broker's per-partition consumer fetch counters of partition 0 of the topic."""
    return partition_fetch_counters("127.0.0.1", port, TOPIC)


def _produce(bootstrap: str, values: list[bytes]) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                         "message.timeout.ms": 60000})
    for v in values:
        producer.produce(TOPIC, v, partition=0)
    assert producer.flush(90) == 0, "records left unacknowledged"


class _ConfluentConsumer:
    """A confluent-kafka (librdkafka) consumer in rack b, assigned partition 0 from offset 0."""

    def __init__(self, bootstrap: str) -> None:
        self._c = confluent_kafka.Consumer({
            "bootstrap.servers": bootstrap, "group.id": "rack-b", "client.rack": "b",
            "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        self._c.assign([confluent_kafka.TopicPartition(TOPIC, 0, 0)])

    def poll(self) -> list[bytes]:
        msg = self._c.poll(0.2)
        return [msg.value()] if msg is not None and not msg.error() else []

    def close(self) -> None:
        self._c.close()


class _KafkaPythonConsumer:
    """The same with kafka-python, which follows preferred read replicas too (KIP-392)."""

    def __init__(self, bootstrap: str) -> None:
        import kafka

        self._c = kafka.KafkaConsumer(bootstrap_servers=bootstrap, client_rack="b", group_id=None,
                                      enable_auto_commit=False, auto_offset_reset="earliest")
        self._tp = kafka.TopicPartition(TOPIC, 0)
        self._c.assign([self._tp])
        self._c.seek(self._tp, 0)

    def poll(self) -> list[bytes]:
        batches = self._c.poll(timeout_ms=200)
        return [r.value for r in batches.get(self._tp, [])]

    def close(self) -> None:
        self._c.close()


def _poll_until(consumer: Any, got: list[bytes], count: int, secs: float) -> None:
    deadline = time.monotonic() + secs
    while len(got) < count and time.monotonic() < deadline:
        got.extend(consumer.poll())


@pytest.mark.timeout(300)
@pytest.mark.parametrize("client", [_ConfluentConsumer, _KafkaPythonConsumer],
                         ids=["confluent-kafka", "kafka-python"])
def test_a_rack_b_consumer_reads_from_the_rack_b_follower_and_falls_back_to_the_leader(tmp_path, client):
    directory = tmp_path / "cluster"
    # `--sites a:1:1,b:0:1,c:0:1`: the controller and broker 2 in rack a, brokers 3 and 4 in b, c.
    with LocalCluster(directory, sites="a:1:1,b:0:1,c:0:1", overrides=OVERRIDES) as cluster:
        bootstrap = cluster.up()
        ports = {b: eventually(lambda b=b: _metrics_port(cluster, b), timeout=30,
                               what=f"broker {b}'s metrics endpoint") for b in RACKS}
        topics = admin.AdminClient({"bootstrap.servers": bootstrap})
        created = topics.create_topics([admin.NewTopic(TOPIC, num_partitions=1,
                                                       replica_assignment=[[LEADER, RACK_B, 4]])],
                                       request_timeout=30)
        created[TOPIC].result(timeout=60)

        _produce(bootstrap, [b"r%d" % i for i in range(N)])
        consumer = client(bootstrap)
        try:
            got: list[bytes] = []
            _poll_until(consumer, got, N, secs=60)
            assert got == [b"r%d" % i for i in range(N)]

            # The rack-b follower served the records; the leader named it and sent none.
            served = fetch_counters(ports[RACK_B])
            assert served["fetchrequests"] >= 1 and served["bytesout"] > 0
            leader = fetch_counters(ports[LEADER])
            assert leader["preferredreplicaredirects"] >= 1 and leader["bytesout"] == 0
            assert fetch_counters(ports[4]) == {"fetchrequests": 0, "bytesout": 0,
                                                "preferredreplicaredirects": 0}

            # The rack-b broker goes away: new records still reach the consumer, from the leader.
            cluster.kill9(RACK_B)
            _produce(bootstrap, [b"s%d" % i for i in range(M)])
            _poll_until(consumer, got, N + M, secs=90)
            assert got[N:] == [b"s%d" % i for i in range(M)]
            assert fetch_counters(ports[LEADER])["bytesout"] > 0
            assert fetch_counters(ports[4])["bytesout"] == 0
        finally:
            consumer.close()
