"""Batch read of a large topic with the ``kafkapy`` PySpark source: rows/s and MB/s.

    python -m benchmarks.spark_read             # 1 GB: 1 KiB values, 4 partitions
    python -m benchmarks.spark_read --gb 0.1    # quicker

A kafkapy node (on disk, in a temp dir) gets the topic from a confluent-kafka producer
(untimed). Then, in one run on the same machine:

* **spark**: ``spark.read.format("kafkapy")`` on local[2], aggregating every row's value length,
  so every record is fetched, decoded and handed to Spark;
* **source alone**: the same read path without Spark (fetch, decode into Arrow batches), one
  partition after another in this process: the source's own cost;
* **baseline**: one confluent-kafka (librdkafka, C) consumer process reading the same records.

The ratio spark/baseline is the figure to compare across machines (this box is shared and
noisy; absolute numbers swing). Results go to ``benchmarks/results/spark-read-<UTC>.{json,md}``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kafkapy.testing.node import KafkaNode

RESULTS = Path(__file__).parent / "results"
VALUE_SIZE = 1024
PARTITIONS = 4


def produce(bootstrap: str, topic: str, count: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    time.sleep(1)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                         "acks": "all", "queue.buffering.max.kbytes": 1 << 20})
    value = os.urandom(VALUE_SIZE // 2).hex().encode()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value=value, key=b"%d" % i, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(300) != 0:
        raise RuntimeError("records left unsent")


def baseline(bootstrap: str, topic: str, count: int) -> float:
    """Seconds for one librdkafka consumer to read every record (in its own process)."""
    code = f"""
import time
from confluent_kafka import Consumer, TopicPartition
c = Consumer({{"bootstrap.servers": "{bootstrap}", "group.id": "bench", "enable.auto.commit": False,
              "fetch.max.bytes": 52428800}})
c.assign([TopicPartition("{topic}", p, 0) for p in range({PARTITIONS})])
start = time.monotonic(); n = 0; size = 0
while n < {count}:
    for m in c.consume(10000, 0.2):
        if m.error() is None:
            n += 1; size += len(m.value())
print(time.monotonic() - start)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=1800,
                         check=True)
    return float(out.stdout.strip().splitlines()[-1])


def source_alone(bootstrap: str, topic: str, count: int) -> float:
    """Seconds for the source's read path (no Spark) to turn every record into Arrow rows."""
    from kafkapy.spark import rows
    from kafkapy.spark.kafka_access import KafkaAccess
    from kafkapy.spark.partition_reader import read_batches

    start = time.monotonic()
    total = 0
    with KafkaAccess(bootstrap) as access:
        ends = access.list_offsets([(topic, p) for p in range(PARTITIONS)], -1)
        for (t, p), end in ends.items():
            for batches in read_batches(access, (t, p), 0, end or 0):
                out = rows.batches_to_arrow(t, p, batches, end or 0)
                total += out.num_rows if out is not None else 0
    seconds = time.monotonic() - start
    if total != count:
        raise RuntimeError(f"read {total} rows, expected {count}")
    return seconds


def spark_read(bootstrap: str, topic: str, count: int) -> tuple[float, float]:
    """(seconds for the read, seconds of Spark start-up before it) on local[2]."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from kafkapy.spark import register

    t0 = time.monotonic()
    spark = (SparkSession.builder.master("local[2]").appName("kafkapy-bench")
             .config("spark.ui.enabled", "false").getOrCreate())
    register(spark)
    startup = time.monotonic() - t0
    try:
        df = (spark.read.format("kafkapy").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).load())
        start = time.monotonic()
        rows, size = df.select(F.count(F.lit(1)), F.sum(F.length("value"))).collect()[0]
        seconds = time.monotonic() - start
        if rows != count or size != count * VALUE_SIZE:
            raise RuntimeError(f"read {rows} rows / {size} bytes, expected {count} / {count * VALUE_SIZE}")
        return seconds, startup
    finally:
        spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=1.0, help="record values to write and read (10^9 bytes)")
    args = parser.parse_args()
    count = int(args.gb * 1e9 / VALUE_SIZE)
    with tempfile.TemporaryDirectory(prefix="spark-bench-") as tmp, \
            KafkaNode(tmp, overrides={"log.segment.bytes": str(256 << 20)}) as node:
        topic = "bench-spark-read"
        t0 = time.monotonic()
        produce(node.bootstrap, topic, count)
        produce_s = time.monotonic() - t0
        base_s = baseline(node.bootstrap, topic, count)
        alone_s = source_alone(node.bootstrap, topic, count)
        spark_s, startup_s = spark_read(node.bootstrap, topic, count)
    mb = count * VALUE_SIZE / 1e6
    result = {
        "when": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                 text=True).stdout.strip(),
        "records": count, "value_bytes": VALUE_SIZE, "partitions": PARTITIONS, "mb": round(mb),
        "produce_s": round(produce_s, 1),
        "spark": {"seconds": round(spark_s, 2), "rows_per_s": round(count / spark_s),
                  "mb_per_s": round(mb / spark_s, 1), "startup_s": round(startup_s, 1)},
        "source_alone": {"seconds": round(alone_s, 2), "rows_per_s": round(count / alone_s),
                         "mb_per_s": round(mb / alone_s, 1)},
        "baseline_confluent_consumer": {"seconds": round(base_s, 2), "rows_per_s": round(count / base_s),
                                        "mb_per_s": round(mb / base_s, 1)},
        "ratio_spark_to_baseline": round(base_s / spark_s, 3),
        "ratio_source_alone_to_baseline": round(base_s / alone_s, 3),
    }
    RESULTS.mkdir(exist_ok=True)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    (RESULTS / f"spark-read-{stamp}.json").write_text(json.dumps(result, indent=2) + "\n")
    table = (
        f"# Spark batch read with the kafkapy source ({result['mb']} MB, {count} records of "
        f"{VALUE_SIZE} B, {PARTITIONS} partitions, local[2], commit {result['commit']})\n\n"
        "| reader | seconds | rows/s | MB/s |\n|---|---:|---:|---:|\n"
        f"| kafkapy PySpark source | {result['spark']['seconds']} | {result['spark']['rows_per_s']} | "
        f"{result['spark']['mb_per_s']} |\n"
        f"| the source's read path alone (no Spark, one process) | {result['source_alone']['seconds']} | "
        f"{result['source_alone']['rows_per_s']} | {result['source_alone']['mb_per_s']} |\n"
        f"| confluent-kafka consumer (baseline) | {result['baseline_confluent_consumer']['seconds']} | "
        f"{result['baseline_confluent_consumer']['rows_per_s']} | "
        f"{result['baseline_confluent_consumer']['mb_per_s']} |\n\n"
        f"Throughput against the baseline: Spark with the source **{result['ratio_spark_to_baseline']}**, "
        f"the source's read path alone **{result['ratio_source_alone_to_baseline']}** "
        f"(Spark start-up, {result['spark']['startup_s']} s, not counted).\n")
    (RESULTS / f"spark-read-{stamp}.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
