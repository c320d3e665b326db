"""Client quotas end to end: Kafka's kafka-configs sets and shows them, a confluent-kafka producer
and consumer over their rates are throttled (throttle_cb) and held near the quota, removing the
quota lifts it, and quotas survive a restart.

The rate bounds are loose on purpose: with 11 one-second samples a fresh client may send about
10 s worth of its quota at once before the first throttle (Kafka's arithmetic), so a run of T
seconds may carry up to about quota x (T + 11) bytes; an unthrottled client carries far more.
"""

from __future__ import annotations

import subprocess
import time

import pytest
from helpers import make_topic, unique_name, wait_for

from kafkapy.testing.apache_kafka import java_command, kafka_home

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.skipif(not (kafka_home() / "libs").is_dir(),
                                reason="Apache Kafka's jars are not fetched (make tools)")

QUOTA = 16 * 1024          # bytes per second
RUN_S = 4.0                # how long each producer/consumer runs
VALUE = b"q" * 2000


def configs(node, *args: str) -> str:
    """kafka-configs (Kafka 4.4's ConfigCommand) against the node; its stdout."""
    p = subprocess.run(java_command("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server",
                                    node.bootstrap, *args),
                       capture_output=True, timeout=120, text=True)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    return p.stdout


def produce_for(node, topic: str, client_id: str, seconds: float, **extra: object) -> tuple[int, list[int]]:
    """Produce as fast as the broker lets a producer for ``seconds``; (bytes acknowledged,
    throttle times librdkafka reported)."""
    throttles: list[int] = []
    delivered = [0]

    def on_delivery(err, msg) -> None:
        if err is None:
            delivered[0] += len(msg.value())

    producer = confluent_kafka.Producer({
        "bootstrap.servers": node.bootstrap, "client.id": client_id, "linger.ms": 5,
        "queue.buffering.max.kbytes": 256, "message.timeout.ms": 60000,
        "throttle_cb": lambda event: throttles.append(event.throttle_time), **extra,
    })
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            producer.produce(topic, VALUE, on_delivery=on_delivery)
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    # What is still queued is abandoned: only acknowledged bytes count.
    producer.purge()
    producer.flush(30)
    return delivered[0], throttles


def consume_for(node, topic: str, client_id: str, seconds: float) -> tuple[int, list[int]]:
    throttles: list[int] = []
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": node.bootstrap, "client.id": client_id, "group.id": unique_name("g"),
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "throttle_cb": lambda event: throttles.append(event.throttle_time),
    })
    consumer.subscribe([topic])
    got = 0
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            for msg in consumer.consume(100, timeout=0.2):
                if msg.error() is None:
                    got += len(msg.value())
    finally:
        consumer.close()
    return got, throttles


def test_producer_quota_throttles_and_lifts(node) -> None:
    topic = make_topic(node, unique_name("quota"), partitions=1)
    client = unique_name("qp")
    configs(node, "--entity-type", "clients", "--entity-name", client, "--alter",
            "--add-config", f"producer_byte_rate={QUOTA}")
    shown = configs(node, "--entity-type", "clients", "--entity-name", client, "--describe")
    assert f"Quota configs for client-id '{client}' are producer_byte_rate={QUOTA}.0" in shown

    start = time.monotonic()
    sent, throttles = produce_for(node, topic, client, RUN_S)
    elapsed = time.monotonic() - start
    assert throttles and max(throttles) > 0, "the producer never saw a throttle"
    assert sent <= QUOTA * (elapsed + 11) * 1.5, (sent, elapsed)

    configs(node, "--entity-type", "clients", "--entity-name", client, "--alter",
            "--delete-config", "producer_byte_rate")
    assert client not in configs(node, "--entity-type", "clients", "--describe")
    # The connection may still be muted for the last throttle: a fresh producer is not.
    start = time.monotonic()
    free, later = produce_for(node, topic, client, RUN_S)
    elapsed = time.monotonic() - start
    assert not [t for t in later if t > 0], later
    assert free > QUOTA * (elapsed + 11) * 1.5, (free, elapsed)


def test_consumer_quota_throttles_fetches(node) -> None:
    topic = make_topic(node, unique_name("cquota"), partitions=1)
    filler = unique_name("fill")
    # Small batches: a fetch returns at least one whole batch, and one larger than the quota
    # allows in a window would be refused forever (as in Kafka).
    sent, _ = produce_for(node, topic, filler, 3.0, **{"batch.size": 8192})
    assert sent > QUOTA * 20  # enough that an unthrottled consumer outruns the quota
    client = unique_name("qc")
    configs(node, "--entity-type", "clients", "--entity-name", client, "--alter",
            "--add-config", f"consumer_byte_rate={QUOTA}")
    start = time.monotonic()
    got, throttles = consume_for(node, topic, client, RUN_S)
    elapsed = time.monotonic() - start
    assert throttles and max(throttles) > 0, "the consumer never saw a throttle"
    assert 0 < got <= QUOTA * (elapsed + 11) * 1.5, (got, elapsed)


def test_quotas_survive_a_restart_and_defaults_show(node) -> None:
    configs(node, "--entity-type", "clients", "--entity-default", "--alter",
            "--add-config", "consumer_byte_rate=4096,request_percentage=25.5")
    configs(node, "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients",
            "--entity-name", "app", "--alter", "--add-config", "producer_byte_rate=1024")
    node.restart()

    def shown() -> str | None:
        out = configs(node, "--entity-type", "clients", "--entity-default", "--describe")
        return out if "consumer_byte_rate" in out else None
    out = wait_for("the default client quota after a restart", shown, timeout=60, interval=1)
    assert "Quota configs for the default client-id are" in out
    assert "consumer_byte_rate=4096.0" in out and "request_percentage=25.5" in out
    pair = configs(node, "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients",
                   "--entity-name", "app", "--describe")
    assert "Quota configs for user-principal 'alice', client-id 'app' are producer_byte_rate=1024.0" in pair


def test_invalid_quotas_are_refused_with_kafkas_message(node) -> None:
    p = subprocess.run(java_command("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server",
                                    node.bootstrap, "--entity-type", "clients", "--entity-name", "x",
                                    "--alter", "--add-config", "producer_byte_rate=1.5"),
                       capture_output=True, timeout=120, text=True)
    assert p.returncode != 0
    assert "producer_byte_rate cannot be a fractional value." in p.stdout + p.stderr


def test_request_percentage_throttles_a_busy_client(node) -> None:
    topic = make_topic(node, unique_name("rquota"), partitions=1)
    client = unique_name("qr")
    # 0.01% of the event loop: any real work is over it.
    configs(node, "--entity-type", "clients", "--entity-name", client, "--alter",
            "--add-config", "request_percentage=0.01")
    _, throttles = produce_for(node, topic, client, 2.0)
    assert throttles and max(throttles) > 0
    # Kafka caps a request-quota throttle at one window (quota.window.size.seconds); librdkafka
    # reports throttle times in seconds.
    assert max(throttles) <= 1.0


def test_controller_mutation_rate_refuses_topics_over_it(node) -> None:
    import trio

    from kafkapy.net.client import KafkaClient
    from kafkapy.protocol import messages as m

    client_id = unique_name("qm")
    configs(node, "--entity-type", "clients", "--entity-name", client_id, "--alter",
            "--add-config", "controller_mutation_rate=1")
    a, b = unique_name("mut"), unique_name("mut")
    C = m.CreateTopicsRequest
    body = C(timeout_ms=30000, validate_only=False, topics=[
        C.CreatableTopic(name=n, num_partitions=p, replication_factor=1, assignments=[], configs=[])
        for n, p in ((a, 20), (b, 1))])

    async def main():
        with trio.fail_after(60):
            async with await KafkaClient.connect(node.host, node.port, client_id=client_id) as client:
                return await client.send(body, 7)
    resp = trio.run(main)
    # 1 permit/s with an 11 s burst: the first topic's 20 partitions go through (the bucket ends
    # about 9 below zero), the second is refused, strictly (CreateTopics v7), until it refills.
    assert [(t.name, t.error_code) for t in resp.topics] == [(a, 0), (b, 89)]
    assert resp.topics[1].error_message == "The throttling quota has been exceeded."
    assert 8000 <= resp.throttle_time_ms <= 9000


def test_connection_creation_rate_closes_connections_over_it(node) -> None:
    import trio

    from kafkapy.net.client import KafkaClient

    configs(node, "--entity-type", "ips", "--entity-name", "127.0.0.1", "--alter",
            "--add-config", "connection_creation_rate=2")
    assert "connection_creation_rate=2.0" in configs(node, "--entity-type", "ips", "--entity-name",
                                                     "127.0.0.1", "--describe")

    async def attempt() -> bool:
        try:
            with trio.fail_after(10):
                client = await KafkaClient.connect(node.host, node.port, client_id="conn-rate")
                await client.aclose()
                return True
        except Exception:
            return False

    async def main() -> list[bool]:
        return [await attempt() for _ in range(40)]
    served = trio.run(main)
    # 2 per second, measured over at least 10 s: about 20 of a quick burst of 40 are served.
    assert 5 <= sum(served) <= 30 and not all(served), served
    configs(node, "--entity-type", "ips", "--entity-name", "127.0.0.1", "--alter",
            "--delete-config", "connection_creation_rate")


def test_the_java_producer_sees_the_throttle(node) -> None:
    import re

    topic = make_topic(node, unique_name("jquota"), partitions=1)
    client = unique_name("qj")
    configs(node, "--entity-type", "clients", "--entity-name", client, "--alter",
            "--add-config", "producer_byte_rate=40960")
    # 800 kB at once: twice what the quota allows in its first 10 s window.
    p = subprocess.run(java_command(
        "org.apache.kafka.tools.ProducerPerformance", "--topic", topic, "--num-records", "800",
        "--record-size", "1000", "--throughput", "-1", "--print-metrics", "--producer-props",
        f"bootstrap.servers={node.bootstrap}", f"client.id={client}", "acks=1"),
        capture_output=True, timeout=180, text=True)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    found = re.search(r"producer-metrics:produce-throttle-time-max:\{client-id=[^}]*\}\s*:\s*([0-9.]+)",
                      p.stdout)
    assert found is not None, p.stdout[-3000:]
    assert float(found.group(1)) > 0
