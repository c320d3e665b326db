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


def _spark_read(cluster, topic: str, **job) -> dict[int, dict]:
    res = cluster.run("java", "spark-pattern", topic=topic, timeout_s=20, timeout=40, **job)
    return {p["partition"]: p for p in res["partitions"]}


def test_spark_source_starting_timestamp(cluster):
    query = BASE_TS + 5000
    # Timestamps rise within each partition, so "at/after the query" is a suffix of the log: an exact
    # match, one that falls between two records, none (all older), and an empty partition.
    timestamps = {0: [BASE_TS + 1000 * i for i in range(8)],       # 5000 at offset 5
                  1: [BASE_TS + 2000 + 250 * i for i in range(6)],  # all older than the query
                  2: [BASE_TS + 700 * i for i in range(10)],        # 4900 at 7, 5600 at 8
                  3: []}
    want_from = {0: 5, 1: None, 2: 8, 3: None}
    topic = cluster.create_topic("spark-ts", partitions=len(timestamps))
    produced = {p: [record(f"p{p}-k{i}".encode(), f"p{p}-v{i}".encode(), timestamp=ts, partition=p)
                    for i, ts in enumerate(tss)] for p, tss in timestamps.items()}
    cluster.produce("java", topic, [r for p in produced for r in produced[p]])

    parts = _spark_read(cluster, topic, start_timestamp=query)
    assert sorted(parts) == sorted(timestamps)
    for p, tss in timestamps.items():
        got = parts[p]
        assert (got["from"], got["until"]) == (want_from[p], len(tss)), got
        assert not got["out_of_range"], got
        if want_from[p] is None:
            assert got["records"] == [], got  # Spark skips a partition with nothing at/after the time
            continue
        assert_same_records(produced[p][want_from[p]:], got["records"], first_offset=want_from[p])
        assert all(r["timestamp"] >= query for r in got["records"]), got["records"]


def test_spark_source_read_committed_without_transactions(cluster):
    per_partition = [9, 0, 4]
    topic = cluster.create_topic("spark-rc", partitions=len(per_partition))
    produced = {p: [record(f"p{p}-k{i}".encode(), bytes([p, i, 0, 255]), headers=[("h", b"")],
                           timestamp=BASE_TS + i, partition=p) for i in range(n)]
                for p, n in enumerate(per_partition)}
    cluster.produce("java", topic, [r for p in produced for r in produced[p]])

    parts = _spark_read(cluster, topic, isolation_level="read_committed")
    for p, n in enumerate(per_partition):
        got = parts[p]
        # No transactions: the last stable offset is the high watermark, for the AdminClient and the
        # read_committed consumer alike.
        assert (got["latest"], got["latest_read_uncommitted"], got["position_end"]) == (n, n, n), got
        assert (got["from"], got["until"]) == (0, n), got
        assert_same_records(produced[p], got["records"], first_offset=0)


def test_spark_source_records_deleted_while_reading(cluster):
    n, k = 10, 4  # the producer batches partition 0 together: k falls inside a batch, not on its start
    topic = cluster.create_topic("spark-del", partitions=2)
    produced = {p: [record(f"p{p}-k{i}".encode(), f"p{p}-v{i}".encode() + bytes([i, 0]),
                           timestamp=BASE_TS + 1000 * i, partition=p) for i in range(m)]
                for p, m in ((0, n), (1, 5))}
    cluster.produce("java", topic, [r for p in produced for r in produced[p]])

    parts = _spark_read(cluster, topic, delete_before={"0": k})
    got = parts[0]
    assert (got["earliest"], got["from"], got["until"]) == (0, 0, n), got  # planned before the delete
    assert (got["deleted_low_watermark"], got["position_beginning"]) == (k, k), got
    assert got["out_of_range"] is True, got
    assert got["available_from"] == k, got
    assert [r["offset"] for r in got["records"]] == list(range(k, n)), got["records"]
    assert_same_records(produced[0][k:], got["records"], first_offset=k)
    # The other partition reads as planned.
    other = parts[1]
    assert (other["out_of_range"], other["available_from"]) == (False, None), other
    assert_same_records(produced[1], other["records"], first_offset=0)


def test_java_default_producer_then_python_consumers(cluster):
    topic = cluster.create_topic("java-default")
    records = [record(f"k{i}".encode(), bytes([i]) * (i + 1), timestamp=BASE_TS + i) for i in range(30)]
    deliveries = cluster.produce("java", topic, records)  # no overrides: idempotent, acks=all
    assert [d["offset"] for d in deliveries] == list(range(30))
    for consumer in ("confluent", "aiokafka"):
        assert_same_records(records, cluster.consume(consumer, topic, offset=0, end_offset=30), first_offset=0)
