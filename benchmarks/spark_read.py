"""Batch read of a large topic through Spark, on kafkapy and on Apache Kafka: rows/s and MB/s.

    python -m benchmarks.spark_read             # 1 GB: 1 KiB values, 4 partitions, both brokers
    python -m benchmarks.spark_read --gb 0.1    # quicker
    python -m benchmarks.spark_read --brokers kafkapy   # kafkapy only, as before

A kafkapy node and an Apache Kafka node (``ApacheKafkaNode``: combined mode, its scripts' heap),
both on disk in temp dirs with 256 MiB segments, get the same topic (4 partitions) and the same
records from a confluent-kafka producer (untimed). One Spark session (local[2]) loads Spark's
built-in connector the way users do (``spark.jars.packages``, pre-fetched by ``make tools``, see
``kafkapy/testing/spark_connector.py``) and registers the kafkapy source. Then, for each
repetition and each broker in turn (the order reversed on odd repetitions):

* **Spark connector**: ``spark.read.format("kafka")``, aggregating every row's value length, so
  every record is fetched, decoded and handed to Spark: the same job on both brokers, the
  kafkapy/Kafka figure;
* **kafkapy source**: the same aggregation with ``spark.read.format("kafkapy")``;
* **source alone**: the kafkapy source's read path without Spark (fetch, decode into Arrow
  batches), one partition after another in this process: the source's own cost;
* **baseline**: one confluent-kafka (librdkafka, C) consumer process reading the same records.

Before the clock, every reader reads a small topic (20,000 records) once on every broker: Spark's
first job, its Python workers and the JVMs' JIT are paid there. Medians over the repetitions; the ratios kafkapy/Kafka (same reader, other broker) and reader /
baseline (same broker) are the figures to compare across machines (this box is shared and noisy;
absolute numbers swing). Results go to ``benchmarks/results/spark-read-<UTC>.{json,md}``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import report
from benchmarks.results_io import save_result
from kafkapy.testing.node import KafkaNode

VALUE_SIZE = 1024
PARTITIONS = 4
WARMUP_TOPIC = "bench-spark-warmup"
WARMUP_RECORDS = 20_000


def produce(bootstrap: str, topic: str, count: int, value: bytes) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    time.sleep(1)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                         "acks": "all", "queue.buffering.max.kbytes": 1 << 20})
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


def spark_session() -> tuple[Any, float]:
    """One local[2] session with Spark's Kafka connector (spark.jars.packages) and the kafkapy
    source; and the seconds its start took (not counted in any read)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from kafkapy.spark import register
    from kafkapy.testing import spark_connector

    t0 = time.monotonic()
    builder = (SparkSession.builder.master("local[2]").appName("kafkapy-bench")
               .config("spark.ui.enabled", "false"))
    for key, value in spark_connector.spark_conf().items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark, time.monotonic() - t0


def spark_read(spark: Any, fmt: str, bootstrap: str, topic: str, count: int) -> float:
    """Seconds for ``spark.read.format(fmt)`` to hand every record to an aggregation."""
    from pyspark.sql import functions as F

    df = (spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", topic).load())
    start = time.monotonic()
    rows, size = df.select(F.count(F.lit(1)), F.sum(F.length("value"))).collect()[0]
    seconds = time.monotonic() - start
    if rows != count or size != count * VALUE_SIZE:
        raise RuntimeError(f"read {rows} rows / {size} bytes, expected {count} / {count * VALUE_SIZE}")
    return seconds


# reader key -> label in the table
READERS = {
    "spark_kafka_connector": 'Spark `format("kafka")` (built-in connector)',
    "spark_kafkapy_source": 'Spark `format("kafkapy")` (the kafkapy source)',
    "source_alone": "the kafkapy source's read path alone (no Spark, one process)",
    "baseline_confluent_consumer": "confluent-kafka consumer (baseline)",
}


def readers(spark: Any) -> dict[str, Callable[[str, str, int], float]]:
    """reader key -> fn(bootstrap, topic, records expected) -> seconds."""
    return {
        "spark_kafka_connector": lambda b, t, n: spark_read(spark, "kafka", b, t, n),
        "spark_kafkapy_source": lambda b, t, n: spark_read(spark, "kafkapy", b, t, n),
        "source_alone": source_alone,
        "baseline_confluent_consumer": baseline,
    }


def summarize(seconds: dict[str, dict[str, list[float]]], errors: dict[str, dict[str, str]],
              count: int) -> dict[str, dict[str, dict[str, Any]]]:
    """broker -> reader -> median seconds, rows/s, MB/s (or the error that stopped it)."""
    mb = count * VALUE_SIZE / 1e6
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for broker, by_reader in seconds.items():
        for reader, values in by_reader.items():
            slot: dict[str, Any] = {"runs_s": [round(v, 3) for v in values]}
            if values:
                med = statistics.median(values)
                slot.update(seconds=round(med, 3), rows_per_s=round(count / med), mb_per_s=round(mb / med, 1))
            if reader in errors.get(broker, {}):
                slot["error"] = errors[broker][reader]
            out.setdefault(broker, {})[reader] = slot
    return out


def table(summary: dict[str, dict[str, dict[str, Any]]], brokers: list[str], metric: str) -> list[str]:
    """One row per reader, a column per broker, kafkapy/Kafka for the same reader."""
    rows = []
    for reader, label in READERS.items():
        values: dict[str, report.Cell] = {}
        for broker in brokers:
            slot = summary.get(broker, {}).get(reader, {})
            values[broker] = slot.get(metric, "error" if slot.get("error") else None)
        rows.append((label, values))
    return report.broker_comparison(rows, brokers, 1, first="reader")


def markdown(result: dict[str, Any]) -> str:
    brokers = result["brokers_order"]
    s = result["summary"]
    lines = [
        f"# Spark batch read, kafkapy and Apache Kafka ({result['mb']} MB, {result['records']:,} records "
        f"of {VALUE_SIZE} B, {PARTITIONS} partitions, local[2])",
        "",
        "; ".join(f"`{n}`: {d}" for n, d in result["brokers"].items()) + ". "
        f"{result['reps']} repetition(s), every reader on every broker in turn (the broker order reversed "
        f"on odd repetitions) in one session, medians. kafkapy commit `{result['commit']}`; "
        f"{os.cpu_count()} CPUs; 1-minute load average during the reads {result['load_range']} "
        f"(the box is shared: high load means noisy figures). Spark start-up "
        f"({result['spark_startup_s']} s, the connector from the Ivy cache) is not counted.",
        "",
        "## rows/s (higher is better)",
        "",
        *table(s, brokers, "rows_per_s"),
        "",
        "## MB/s of record values",
        "",
        *table(s, brokers, "mb_per_s"),
        "",
    ]
    base = "baseline_confluent_consumer"
    for broker in brokers:
        b = s.get(broker, {})
        ratios = [f"{READERS[r].split(' (')[0]} **{report.ratio(b[base].get('seconds'), b[r].get('seconds')):.3f}**"
                  for r in READERS if r != base and b.get(r, {}).get("seconds") and b.get(base, {}).get("seconds")]
        if ratios:
            lines.append(f"Throughput against the baseline consumer on {broker}: " + ", ".join(ratios) + ".")
    errors = [(br, r, slot["error"]) for br, by in s.items() for r, slot in by.items() if slot.get("error")]
    if errors:
        lines += ["", "Errors:", *(f"- {r} on {br}: `{e}`" for br, r, e in errors)]
    return "\n".join(lines) + "\n"


def _sigterm(_signo: int, _frame: Any) -> None:
    raise KeyboardInterrupt  # the same unwinding as Ctrl-C: both brokers and Spark get stopped


def _start(name: str, tmp: Path, stack: contextlib.ExitStack) -> tuple[str, str]:
    """Start one broker (stopped by ``stack``); its bootstrap and a description."""
    overrides = {"log.segment.bytes": str(256 << 20)}
    if name == "kafkapy":
        node = stack.enter_context(KafkaNode(tmp / name, overrides=overrides, startup_timeout=60))
        return node.bootstrap, "one node (`KafkaNode`), data on disk"
    if name == "apache-kafka":
        from kafkapy.testing.apache_kafka import BENCH_HEAP, ApacheKafkaNode, kafka_version

        node = stack.enter_context(ApacheKafkaNode(tmp / name, overrides=overrides, heap=BENCH_HEAP,
                                                   log_level="WARN", startup_timeout=180))
        return node.bootstrap, f"Apache Kafka {kafka_version()}, one combined node, `{BENCH_HEAP}`"
    raise ValueError(f"no broker called {name!r} (kafkapy or apache-kafka)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=1.0, help="record values to write and read (10^9 bytes)")
    parser.add_argument("--reps", type=int, default=3, help="repetitions of every read")
    parser.add_argument("--brokers", default="kafkapy,apache-kafka",
                        help="brokers in order; the first is the numerator of the ratios")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.brokers.split(",") if n.strip()]
    count = int(args.gb * 1e9 / VALUE_SIZE)
    # The same bytes on every broker; hex, so they do not compress into a different workload.
    value = os.urandom(VALUE_SIZE // 2).hex().encode()
    topic = "bench-spark-read"
    signal.signal(signal.SIGTERM, _sigterm)
    seconds: dict[str, dict[str, list[float]]] = {n: {r: [] for r in READERS} for n in names}
    errors: dict[str, dict[str, str]] = {n: {} for n in names}
    loads: list[float] = []
    described: dict[str, str] = {}
    produce_s: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="spark-bench-") as tmp, contextlib.ExitStack() as stack:
        bootstraps = {}
        for name in names:
            bootstraps[name], described[name] = _start(name, Path(tmp), stack)
            t0 = time.monotonic()
            produce(bootstraps[name], topic, count, value)
            produce_s[name] = round(time.monotonic() - t0, 1)
            print(f"{name}: {count} records written in {produce_s[name]} s", flush=True)
        spark, startup_s = spark_session()
        stack.callback(spark.stop)
        run = readers(spark)
        # Untimed: one read of a small topic by every reader on every broker first, so no timed
        # read pays for Spark's first job, its Python workers or a JVM's JIT (Spark's or Kafka's).
        for name in names:
            produce(bootstraps[name], WARMUP_TOPIC, WARMUP_RECORDS, value)
            for reader, fn in run.items():
                try:
                    fn(bootstraps[name], WARMUP_TOPIC, WARMUP_RECORDS)
                except Exception as exc:  # noqa: BLE001 - the timed reads record it
                    print(f"warm-up {name} {reader}: {type(exc).__name__}: {exc}", flush=True)
        for rep in range(args.reps):
            for name in (names if rep % 2 == 0 else names[::-1]):
                for reader, fn in run.items():
                    if reader in errors[name]:
                        continue  # it failed once on this broker: a reason, not a figure
                    loads.append(os.getloadavg()[0])
                    try:
                        took = fn(bootstraps[name], topic, count)
                    except Exception as exc:  # noqa: BLE001 - recorded in the table, the others go on
                        errors[name][reader] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
                        print(f"rep {rep} {name} {reader}: {errors[name][reader]}", flush=True)
                        continue
                    seconds[name][reader].append(took)
                    print(f"rep {rep} {name} {reader}: {took:.2f} s, {count / took:,.0f} rows/s", flush=True)
        loads.append(os.getloadavg()[0])
    summary = summarize(seconds, errors, count)
    result = {
        "when": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                 text=True).stdout.strip(),
        "records": count, "value_bytes": VALUE_SIZE, "partitions": PARTITIONS,
        "mb": round(count * VALUE_SIZE / 1e6), "reps": args.reps, "brokers_order": names,
        "brokers": described, "produce_s": produce_s, "spark_startup_s": round(startup_s, 1),
        "load_range": report.load_range(loads), "loads": loads, "summary": summary,
    }
    md = markdown(result)
    path = save_result("spark-read", result, md)
    print(md)
    print(f"written {path} and {path.with_suffix('.md').name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
