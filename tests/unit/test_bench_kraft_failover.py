"""The KRaft failover benchmark's comparison table: kafkapy against Apache Kafka where both ran,
and a reason in the Kafka column where they could not compare."""

from benchmarks import kraft_failover as k


def _row(size: int, elected: float, writable: float) -> dict:
    return {"partitions": size, "create_s": 0.5, "elected_s": elected, "writable_s": writable,
            "broker_restart": {"ms": 450}, "broker_cold": {"ms": 1000}}


def test_sizes_kafka_ran_get_ratios_the_others_say_why_not():
    lines = k.comparison([_row(1000, 3.0, 4.0), _row(10000, 1.5, 2.0)],
                         [{"partitions": 1000, "create_s": 2.0, "elected_s": 2.0, "writable_s": 4.0}])
    assert lines[0] == "| measurement (medians of the kills) | kafkapy | apache-kafka | kafkapy/apache-kafka |"
    assert "| 1,000 partitions: kill -9 of the active controller -> new leader, s | 3.00 | 2.00 | 1.50× |" in lines
    assert "| 1,000 partitions: kill -9 -> a CreateTopics commits again, s | 4.00 | 4.00 | 1.00× |" in lines
    assert "| 1,000 partitions: broker restart, metadata caught up, s | 0.45 | n/a (no such line in Kafka) | – |" in lines
    assert "| 10,000 partitions: kill -9 -> a CreateTopics commits again, s | 2.00 | not run (see README) | – |" in lines
