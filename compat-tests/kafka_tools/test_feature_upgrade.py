"""``kafka-features`` (Apache Kafka 4.4's FeatureCommand) against kafkapy: a cluster formatted
without KIP-848's consumer groups (``storage format --feature group.version=0``, as a cluster
formatted before them) is upgraded with ``kafka-features upgrade --feature group.version=1``,
after which a confluent-kafka consumer with ``group.protocol=consumer`` joins and reads.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from kafkapy.testing.apache_kafka import kafka_home  # noqa: E402
from kafkapy.testing.node import KafkaNode, compat_target  # noqa: E402
from scenario import MAIN_CLASSES  # noqa: E402
from toolrunner import ToolRunner  # noqa: E402

if not (kafka_home() / "VERSION").exists():
    pytest.skip("Apache Kafka is not installed (run `make tools`)", allow_module_level=True)
if compat_target() != "kafkapy":
    pytest.skip("formats a kafkapy node", allow_module_level=True)

OVERRIDES = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "1"}
TOPIC = "upgraded-groups"


def _group_version_line(describe: str) -> str:
    return next(line for line in describe.splitlines() if line.startswith("Feature: group.version"))


def _read_with_consumer_protocol(bootstrap: str, count: int, secs: float = 60.0) -> int:
    import confluent_kafka
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": "upgraded", "group.protocol": "consumer",
        "auto.offset.reset": "earliest"})
    seen = 0
    try:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + secs
        while seen < count and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                seen += 1
    finally:
        consumer.close()
    return seen


@pytest.mark.timeout(300)
def test_upgrade_group_version_then_consume_with_the_consumer_protocol(tmp_path):
    pytest.importorskip("confluent_kafka")
    import confluent_kafka
    from confluent_kafka.admin import AdminClient, NewTopic
    node = KafkaNode(tmp_path / "kafkapy", overrides=OVERRIDES)
    node.format_args = ["--feature", "group.version=0"]
    with node, ToolRunner(tmp_path / "runner") as runner:
        def features(*args: str):
            return runner.run(MAIN_CLASSES["kafka-features"], ["--bootstrap-server", node.bootstrap, *args])

        before = features("describe")
        assert before.exit_code == 0, before.stderr
        assert "FinalizedVersionLevel: 0" in _group_version_line(before.stdout), before.stdout

        dry = features("upgrade", "--feature", "group.version=1", "--dry-run")
        assert (dry.exit_code, dry.stdout.strip()) == (0, "group.version can be upgraded to 1."), dry
        too_far = features("upgrade", "--feature", "group.version=2")
        assert too_far.exit_code == 1
        assert too_far.stdout.strip() == (
            "Could not upgrade group.version to 2. The update failed for all features since the following feature "
            "had an error: Invalid update version 2 for feature group.version. Local controller 1 only supports "
            "versions 0-1"), too_far
        assert "FinalizedVersionLevel: 0" in _group_version_line(features("describe").stdout)

        upgraded = features("upgrade", "--feature", "group.version=1")
        assert (upgraded.exit_code, upgraded.stdout.strip()) == (0, "group.version was upgraded to 1."), upgraded
        assert "FinalizedVersionLevel: 1" in _group_version_line(features("describe").stdout)

        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(30)
        producer = confluent_kafka.Producer({"bootstrap.servers": node.bootstrap})
        for i in range(10):
            producer.produce(TOPIC, value=f"v{i}".encode(), partition=i % 2)
        assert producer.flush(30) == 0
        assert _read_with_consumer_protocol(node.bootstrap, 10) == 10
