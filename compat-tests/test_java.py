"""The Java client: default producer settings (idempotent, acks=all) and Spark's Kafka source
access pattern."""

from __future__ import annotations

from kafkapy.testing.recordsets import BASE_TS, assert_same_records, record

PARTITIONS = 3
PER_PARTITION = [7, 0, 12]  # one partition stays empty, as real topics have


def test_spark_source_access_pattern(cluster):
    topic = cluster.create_topic("spark", partitions=PARTITIONS)
    produced = {p: [record(f"p{p}-k{i}".encode(), f"p{p}-v{i}".encode(), headers=[("p", str(p).encode())],
                           timestamp=BASE_TS + 1000 * i, partition=p) for i in range(n)]
                for p, n in enumerate(PER_PARTITION)}
    # The Java producer with its defaults (enable.idempotence=true, acks=all) writes the data.
    deliveries = cluster.produce("java", topic, [r for p in produced for r in produced[p]],
                                 compression="lz4")
    by_partition: dict[int, list[int]] = {}
    for d in deliveries:
        by_partition.setdefault(d["partition"], []).append(d["offset"])
    assert by_partition == {p: list(range(n)) for p, n in enumerate(PER_PARTITION) if n}

    query = BASE_TS + 4500  # first record at or after it: offset 5 where there are more than 5
    res = cluster.run("java", "spark-pattern", topic=topic, timestamps=[query], timeout_s=60, timeout=90)
    parts = {p["partition"]: p for p in res["partitions"]}
    assert sorted(parts) == list(range(PARTITIONS))
    for p, n in enumerate(PER_PARTITION):
        got = parts[p]
        assert (got["earliest"], got["latest"]) == (0, n), got
        assert (got["position_beginning"], got["position_end"]) == (0, n), got
        assert got["by_timestamp"] == [5 if n > 5 else None], got
        assert_same_records(produced[p], got["records"], first_offset=0)


def test_java_default_producer_then_python_consumers(cluster):
    topic = cluster.create_topic("java-default")
    records = [record(f"k{i}".encode(), bytes([i]) * (i + 1), timestamp=BASE_TS + i) for i in range(30)]
    deliveries = cluster.produce("java", topic, records)  # no overrides: idempotent, acks=all
    assert [d["offset"] for d in deliveries] == list(range(30))
    for consumer in ("confluent", "aiokafka"):
        assert_same_records(records, cluster.consume(consumer, topic, offset=0, end_offset=30), first_offset=0)
