"""Records a topic refuses one by one, as a stock producer sees them: kafkapy next to Apache Kafka.

Kafka refuses a whole batch when some of its records break a topic rule (no key on a compacted
topic, a CreateTime timestamp outside message.timestamp.before/after.max.ms) and lists each of
those records in the Produce response's record_errors. kafka-python's producer turns that list
into one exception per record: the refused records get the broker's message for them, the
others a "part of a batch which had invalid records" error. The same job runs against kafkapy
and a real Apache Kafka 4.4 node (one of each for this module), and the answers must match.
"""

from __future__ import annotations

import time

import pytest

from kafkapy.testing import clients
from kafkapy.testing.apache_kafka import ApacheKafkaNode, kafka_home
from kafkapy.testing.node import KafkaNode
from kafkapy.testing.recordsets import b64 as _b64
from kafkapy.testing.recordsets import unique_topic

pytestmark = [pytest.mark.timeout(300),
              pytest.mark.skipif(not (kafka_home() / "libs").is_dir(), reason="Apache Kafka not fetched (make tools)")]

HOUR_MS = 3_600_000


@pytest.fixture(scope="module")
def brokers():
    with KafkaNode() as ours, ApacheKafkaNode() as reference:
        yield {"kafkapy": ours, "apache-kafka": reference}


def _produce_to_new_topic(node, config: dict[str, str], records: list[dict]) -> tuple[str, list, int]:
    """Create a one-partition topic with ``config``, send ``records`` as one batch (kafka-python,
    long linger) and return the topic, each record's outcome and the partition's end offset."""
    topic = unique_topic("refusals")
    created = clients.ok(clients.run_driver("kafka_python", {
        "op": "create_topics", "bootstrap": node.bootstrap,
        "topics": [{"name": topic, "config": config}]}))
    assert created["topics"][0]["error"] is None, created
    answer = clients.ok(clients.run_driver("kafka_python", {
        "op": "produce", "bootstrap": node.bootstrap, "topic": topic, "linger_ms": 500,
        "records": [{**r, "partition": 0} for r in records]}))
    end = clients.ok(clients.run_driver("kafka_python", {
        "op": "list_offsets", "bootstrap": node.bootstrap, "topic": topic}))["latest"]
    return topic, answer["deliveries"], end


def _outcomes(deliveries: list, topic: str) -> list:
    """What a user compares: each record's exception type and message (topic name neutralised)."""
    out = []
    for d in deliveries:
        err = d.get("error")
        out.append(("ok",) if err is None else (err["type"], err["message"].replace(topic, "T")))
    return out


def _both(brokers, config: dict[str, str], records: list[dict]) -> dict[str, tuple[list, int]]:
    results = {}
    for name, node in brokers.items():
        topic, deliveries, end = _produce_to_new_topic(node, config, records)
        results[name] = (_outcomes(deliveries, topic), end)
    return results


@pytest.mark.parametrize("policy", ["compact", "compact,delete"])
def test_keyless_records_on_a_compacted_topic(brokers, policy: str) -> None:
    records = [{"key": _b64(b"k"), "value": _b64(b"v0")}, {"key": None, "value": _b64(b"v1")},
               {"key": _b64(b""), "value": _b64(b"v2")}, {"key": None, "value": _b64(b"v3")}]
    results = _both(brokers, {"cleanup.policy": policy}, records)
    outcomes, end = results["apache-kafka"]
    why = "Compacted topic cannot accept message without key in topic partition T-0"
    assert outcomes[1] == ("InvalidRecordError", f"[Error 87] InvalidRecordError: {why}"), outcomes
    assert outcomes[3] == outcomes[1], outcomes
    assert outcomes[0][0] != "ok" and outcomes[2][0] != "ok"
    assert end == 0, "nothing of the refused batch is stored"
    assert results["kafkapy"] == results["apache-kafka"]


def test_timestamps_outside_the_topic_bounds(brokers) -> None:
    now = int(time.time() * 1000)
    records = [{"key": _b64(b"k%d" % i), "value": _b64(b"v"), "timestamp": ts}
               for i, ts in enumerate((now, now - 2 * HOUR_MS, now))]
    results = _both(brokers, {"message.timestamp.before.max.ms": str(HOUR_MS),
                              "message.timestamp.after.max.ms": str(HOUR_MS)}, records)
    outcomes, end = results["apache-kafka"]
    # One refused record: kafka-python raises the partition's error type with its message, which
    # names the broker's clock, so only its stable part is compared.
    assert outcomes[1][0] == "InvalidTimestampError", outcomes
    assert outcomes[1][1].startswith(f"[Error 32] InvalidTimestampError: Timestamp {now - 2 * HOUR_MS} of message with offset 1 "
                                     "is out of range. The timestamp should be within [")
    assert end == 0
    ours, our_end = results["kafkapy"]
    assert our_end == end
    assert [o[0] for o in ours] == [o[0] for o in outcomes]
    assert ours[1][1].split("[")[0] == outcomes[1][1].split("[")[0]
    assert ours[0] == outcomes[0] and ours[2] == outcomes[2]
