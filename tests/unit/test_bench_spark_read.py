"""The Spark read benchmark's tables: the same readers on kafkapy and on Apache Kafka."""

from benchmarks import spark_read as s


def test_medians_become_rows_per_second_and_a_kafka_ratio_per_reader():
    count = 1000
    seconds = {"kafkapy": {r: [] for r in s.READERS}, "apache-kafka": {r: [] for r in s.READERS}}
    seconds["kafkapy"]["spark_kafka_connector"] = [1.0, 4.0, 2.0]
    seconds["apache-kafka"]["spark_kafka_connector"] = [4.0, 4.0, 5.0]
    seconds["kafkapy"]["baseline_confluent_consumer"] = [0.5]
    seconds["apache-kafka"]["baseline_confluent_consumer"] = [0.25]
    errors = {"kafkapy": {}, "apache-kafka": {"spark_kafkapy_source": "RuntimeError: boom"}}
    summary = s.summarize(seconds, errors, count)
    assert summary["kafkapy"]["spark_kafka_connector"]["rows_per_s"] == 500
    assert summary["kafkapy"]["spark_kafka_connector"]["mb_per_s"] == 0.5
    lines = s.table(summary, ["kafkapy", "apache-kafka"], "rows_per_s")
    assert lines[0] == "| reader | kafkapy | apache-kafka | kafkapy/apache-kafka |"
    assert '| Spark `format("kafka")` (built-in connector) | 500 | 250 | 2.00× |' in lines
    assert '| Spark `format("kafkapy")` (the kafkapy source) | – | error | – |' in lines
    assert "| confluent-kafka consumer (baseline) | 2,000 | 4,000 | 0.50× |" in lines
