"""Quick local measure: broker CPU-seconds per GB produced and consumed (not the benchmark suite).

Starts one kafkapy node, produces ``--mb`` MB of ``--size``-byte records with confluent-kafka in a
subprocess (linger.ms=5, batch.size=1 MiB, acks=1), then consumes them with ``assign()`` in another
subprocess, and prints the broker's CPU seconds (utime+stime from /proc/<pid>/stat) per GB for each
phase, plus wall-clock throughput. ``--profile DIR`` records each phase with py-spy
(``DIR/produce.txt``/``consume.txt``, collapsed stacks, and .svg flame graphs).

    .venv/bin/python benchmarks/quick_cpu.py [--mb 200] [--size 1024] [--partitions 1]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kafkapy.testing.node import KafkaNode  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")

PRODUCER = textwrap.dedent("""
    import sys, time
    from confluent_kafka import Producer
    bootstrap, topic, n, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1048576,
                  "acks": 1, "compression.type": "none", "queue.buffering.max.kbytes": 262144,
                  "message.max.bytes": 2000000})
    value = b"x" * size
    errors = []
    def cb(err, msg):
        if err is not None:
            errors.append(err)
    for i in range(n):
        while True:
            try:
                p.produce(topic, value, callback=cb)
                break
            except BufferError:
                p.poll(0.01)
        if i % 10000 == 0:
            p.poll(0)
    left = p.flush(120)
    if left or errors:
        sys.exit(f"producer: {left} undelivered, {len(errors)} errors, first {errors[:1]}")
""")

CONSUMER = textwrap.dedent("""
    import sys
    from confluent_kafka import Consumer, TopicPartition
    bootstrap, topic, n, parts = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "quick-cpu",
                  "enable.auto.commit": False, "fetch.max.bytes": 52428800,
                  "max.partition.fetch.bytes": 1048576})
    c.assign([TopicPartition(topic, p, 0) for p in range(parts)])
    got = 0
    while got < n:
        msgs = c.consume(min(10000, n - got), 10.0)
        if not msgs:
            sys.exit(f"consumer: stalled after {got} of {n}")
        for m in msgs:
            if m.error() is None:
                got += 1
    c.close()
""")


def cpu_times(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of ``pid`` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK  # utime, stime


def run_phase(name: str, script: str, args: list[str], pid: int, nbytes: int,
              profile: Path | None) -> tuple[float, float]:
    spy = None
    if profile is not None:
        spy = subprocess.Popen([str(Path(sys.executable).parent / "py-spy"), "record", "-p", str(pid), "-r", "1000", "-f", "raw",
                                "-o", str(profile / f"{name}.txt"), "--nonblocking"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)
    (u0, s0), t0 = cpu_times(pid), time.monotonic()
    subprocess.run([sys.executable, "-c", script, *args], check=True)
    (u1, s1), t1 = cpu_times(pid), time.monotonic()
    cpu0, cpu1 = u0 + s0, u1 + s1
    if spy is not None:
        spy.send_signal(signal.SIGINT)
        spy.wait(30)
    gb = nbytes / 1e9
    cpu_per_gb = (cpu1 - cpu0) / gb
    mb_s = nbytes / 1e6 / (t1 - t0)
    print(f"{name:8s} {cpu1 - cpu0:6.2f} CPU-s  {cpu_per_gb:6.2f} CPU-s/GB "
          f"(user {(u1 - u0) / gb:5.2f}, sys {(s1 - s0) / gb:5.2f})  "
          f"{t1 - t0:6.2f} s wall  {mb_s:7.1f} MB/s", flush=True)
    return cpu_per_gb, mb_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=1, help="repeat on fresh topics; medians shown")
    ap.add_argument("--profile", type=Path, default=None)
    opts = ap.parse_args()
    n = opts.mb * 1_000_000 // opts.size
    nbytes = n * opts.size
    topic = "quick-cpu"
    if opts.profile is not None:
        opts.profile.mkdir(parents=True, exist_ok=True)
    with KafkaNode(overrides={"num.partitions": opts.partitions}) as node:
        pid = node.pid
        assert pid is not None
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        print(f"kafkapy pid {pid}: {n} records of {opts.size} B ({nbytes / 1e6:.0f} MB), "
              f"{opts.partitions} partition(s)")
        # A consumer with a group.id looks up its coordinator, which creates __consumer_offsets
        # (50 partitions) on first use: do that before measuring, so the consume phase measures
        # fetching.
        from confluent_kafka import Consumer
        warm = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "quick-cpu"})
        warm.list_topics(timeout=10)
        warm.consume(1, 3.0)
        warm.close()
        results: dict[str, list[tuple[float, float]]] = {"produce": [], "consume": []}
        for r in range(opts.rounds):
            name = f"{topic}-{r}"
            admin.create_topics([NewTopic(name, opts.partitions, 1)])[name].result(30)
            results["produce"].append(run_phase(
                "produce", PRODUCER, [node.bootstrap, name, str(n), str(opts.size)], pid, nbytes,
                opts.profile if r == 0 else None))
            results["consume"].append(run_phase(
                "consume", CONSUMER, [node.bootstrap, name, str(n), str(opts.partitions)], pid,
                nbytes, opts.profile if r == 0 else None))
        if opts.rounds > 1:
            for phase, rows in results.items():
                cpu = statistics.median(c for c, _ in rows)
                mbs = statistics.median(m for _, m in rows)
                print(f"median {phase:8s} {cpu:6.2f} CPU-s/GB  {mbs:7.1f} MB/s")


if __name__ == "__main__":
    main()
