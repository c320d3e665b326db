"""What replication costs: produce throughput with RF=3/acks=all against RF=1/acks=1, and the
latency of an acks=all write, on kafkapy and on Apache Kafka.

``python -m benchmarks.replication [--records 100000] [--size 1024] [--reps 3]
[--brokers kafkapy,apache-kafka] [--tansu] [--layout combined|split]``

Each broker runs as a three-node cluster of real processes with data on disk: kafkapy from
``kafkapy cluster up``, Apache Kafka from ``ApacheKafkaCluster(3)`` (Kafka 4.x, its scripts' heap
and GC flags). Kafka's nodes are combined (broker and controller in one JVM), and so are
kafkapy's by default (``--layout combined``); ``--layout split`` runs kafkapy as three
controllers and three brokers (six processes) as before, while Kafka stays combined. Each cluster
holds two topics of three partitions: ``rf1`` with one replica, ``rf3`` with three and
``min.insync.replicas=2``. Both clusters are up for the whole run; each repetition runs every
broker in turn (the order reversed on odd repetitions), and on each broker confluent-kafka (the
``benchmarks/clients/confluent_bench.py`` runner) produces the same records to ``rf1`` with
acks=1 and to ``rf3`` with acks=all (that order reversed on odd repetitions too). Then, per
broker, fixed-rate latency runs measure send->ack times (librdkafka's own per-message latency):
acks=all on ``rf3`` with an idempotent producer (the Java client's default: at most five
requests in flight, the rest batched) at ``--latency-rate``, acks=all one record at a time (each
waits for its answer: the bare replication round trip), and acks=1 on ``rf1``.

A broker answers one connection's requests one at a time, in order (Kafka's channel muting), so
a producer that sends every record as its own request (non-idempotent, linger.ms=0) can have at
most one acks=all request per replication round trip answered; past that rate its queue grows
without bound, on Kafka as here.

An acks=all record is answered after every in-sync follower has fetched it (a fetch round trip
on each follower, then the follower's next fetch tells the leader), so throughput depends on how
much the followers' copying competes with the leaders for the CPU: on a 2-core machine running
both clusters and the client, that is most of the cost. The figures are medians of interleaved
runs in one session; read the ratios.

Before the timed repetitions every broker gets an untimed warm-up (``--warmup-records``, 200,000
by default, to each topic; ``--no-warmup`` skips it): Kafka's JIT compiles its hot paths under the
first hundreds of MB of load, and its throughput kept growing over the repetitions after a
warm-up of 20,000 records.

``--tansu`` adds the same RF=1 runs against Tansu (memory storage, no replication: it has no
followers, so only the RF=1 rows compare). Results go to
``benchmarks/results/replication-<UTC time>.{json,md}``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import shutil
import signal
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from benchmarks import report
from benchmarks.results_io import save_result
from benchmarks.workloads import git_describe, run_client
from kafkapy.net.client import KafkaClient
from kafkapy.protocol import ErrorCode, messages as m
from kafkapy.testing.cluster import LocalCluster, eventually

PARTITIONS = 3
BROKERS = ("kafkapy", "apache-kafka", "tansu")
# Workload labels: (topic, acks). Tansu has no replication, so it runs the first one only.
RF1, RF3 = "rf1-acks1", "rf3-acksall"
WORKLOADS = {RF1: ("rf1", "1"), RF3: ("rf3", "all")}


@dataclass
class Target:
    """One broker under test: a cluster (or Tansu's single node) and how to reach it."""

    name: str
    bootstrap: str
    admin: tuple[str, int]
    replicated: bool
    describe: str


def _create(address: tuple[str, int], name: str, rf: int, configs: dict[str, str]) -> None:
    Req = m.CreateTopicsRequest
    T = Req.CreatableTopic
    request = Req(topics=[T(name=name, num_partitions=PARTITIONS, replication_factor=rf, assignments=[],
                            configs=[T.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])],
                  timeout_ms=30000, validate_only=False)

    async def main() -> Any:
        with trio.fail_after(60):
            async with await KafkaClient.connect(*address, client_id="bench-replication") as c:
                return await c.send(request)
    code = trio.run(main).topics[0].error_code
    if code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
        raise RuntimeError(f"creating {name}: {ErrorCode(code).name}")


def _in_sync(bootstrap: str, topic: str, rf: int) -> None:
    """Wait (bounded) until every partition of ``topic`` has a leader and ``rf`` in-sync replicas,
    so the first timed run does not measure leader elections or followers catching up."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})

    def ready() -> bool:
        t = admin.list_topics(topic, timeout=5).topics.get(topic)
        return (t is not None and t.error is None and len(t.partitions) == PARTITIONS
                and all(p.leader >= 0 and len(p.isrs) == rf for p in t.partitions.values()))

    eventually(ready, timeout=60, what=f"{topic} to have leaders and {rf} in-sync replicas", interval=0.2)


def _produce(bootstrap: str, topic: str, acks: str, records: int, size: int) -> dict:
    timeout = max(120.0, records * size / 2e6)
    return run_client({"op": "produce", "bootstrap": bootstrap, "topic": topic, "partitions": PARTITIONS,
                       "count": records, "size": size, "acks": acks, "timeout_s": timeout},
                      timeout=timeout + 30)


def _latency(bootstrap: str, topic: str, acks: str, size: int, rate: int, seconds: int,
             idempotent: bool = False) -> dict:
    return run_client({"op": "latency", "bootstrap": bootstrap, "topic": topic, "rate": rate,
                       "seconds": seconds, "size": size, "acks": acks, "timeout_s": 60,
                       "config": {"enable.idempotence": idempotent}},
                      timeout=seconds + 120)


def _round_trips(bootstrap: str, topic: str, size: int, count: int = 300) -> dict:
    """Send one record at a time and wait for its acks=all answer: the replication round trip
    with nothing queued. (librdkafka's per-message latency is taken when the delivery report is
    served, so at a low fixed rate it measures the send interval instead.)"""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                         "socket.nagle.disable": True})
    producer.list_topics(topic, timeout=10)
    value = b"x" * size
    times = []
    for i in range(count):
        t0 = time.perf_counter()
        producer.produce(topic, value, partition=0)
        if producer.flush(10) != 0:
            raise RuntimeError("an acks=all record was not acknowledged within 10 s")
        if i >= 20:  # warm-up
            times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return {"samples": len(times), "p50_ms": times[len(times) // 2],
            "p99_ms": times[int(len(times) * 0.99)], "max_ms": times[-1]}


def _start(name: str, base: Path, layout: str, stack: contextlib.ExitStack) -> Target:
    """Start one broker's cluster; ``stack`` stops it (on errors and Ctrl-C too)."""
    if name == "kafkapy":
        shape = {"combined": 3} if layout == "combined" else {"controllers": 3, "brokers": 3}
        cluster = stack.enter_context(LocalCluster(base / "kafkapy", **shape))
        bootstrap = cluster.up()
        eventually(lambda: cluster.active_controller(), timeout=60, what="an active controller")
        described = ("3 combined nodes" if layout == "combined"
                     else "3 controllers + 3 brokers") + " (`kafkapy cluster up`)"
        return Target(name, bootstrap, cluster.broker_address(cluster.broker_ids()[0]), True, described)
    if name == "apache-kafka":
        from kafkapy.testing.apache_kafka import BENCH_HEAP, ApacheKafkaCluster, kafka_version

        kafka = stack.enter_context(ApacheKafkaCluster(3, base / "apache-kafka", heap=BENCH_HEAP,
                                                       log_level="WARN", startup_timeout=180))
        node = kafka.nodes[0]
        return Target(name, kafka.bootstrap, (node.host, node.port), True,
                      f"Apache Kafka {kafka_version()}, 3 combined nodes, `{BENCH_HEAP}` each")
    if name == "tansu":
        from benchmarks.brokers import start_managed

        broker = start_managed("tansu", workdir=base / "tansu")
        stack.callback(broker.stop)
        host, _, port = broker.bootstrap.rpartition(":")
        return Target(name, broker.bootstrap, (host, int(port)), False, "one node, memory storage")
    raise ValueError(f"no broker called {name!r} (one of {', '.join(BROKERS)})")


def _setup(target: Target) -> None:
    _create(target.admin, "rf1", 1, {})
    _in_sync(target.bootstrap, "rf1", 1)
    if target.replicated:
        _create(target.admin, "rf3", 3, {"min.insync.replicas": "2"})
        _in_sync(target.bootstrap, "rf3", 3)


def _sigterm(_signo: int, _frame: Any) -> None:
    raise KeyboardInterrupt  # the same unwinding as Ctrl-C: every cluster gets stopped


def run(args: argparse.Namespace, names: list[str], loads: list[float]) -> tuple[dict, dict, dict]:
    """Start every broker, run the interleaved repetitions and the latency runs; stop them all."""
    own_dir = not os.environ.get("KAFKAPY_BENCH_DIR")
    base = Path(os.environ.get("KAFKAPY_BENCH_DIR") or tempfile.mkdtemp(prefix="bench-replication-"))
    runs: dict[str, dict[str, list[dict]]] = {n: {RF1: [], RF3: []} for n in names}
    latency: dict[str, dict[str, dict]] = {n: {} for n in names}
    described: dict[str, str] = {}

    def timed(fn: Callable[[], dict]) -> dict:
        loads.append(os.getloadavg()[0])
        out = fn()
        loads.append(os.getloadavg()[0])
        return out

    with contextlib.ExitStack() as stack:
        targets = []
        for name in names:
            print(f"starting {name} ...", flush=True)
            targets.append(_start(name, base, args.layout, stack))
            described[name] = targets[-1].describe
        for target in targets:
            _setup(target)
        if not args.no_warmup:
            # Untimed: a JVM broker runs interpreted until its JIT has seen the hot paths, and a
            # steady state is what users see (as benchmarks/run.py's warm-up).
            for target in targets:
                for label in ([RF1, RF3] if target.replicated else [RF1]):
                    topic, acks = WORKLOADS[label]
                    _produce(target.bootstrap, topic, acks, args.warmup_records, args.size)
        time.sleep(2)  # followers fetching at their steady pace
        for rep in range(args.reps):
            for target in (targets if rep % 2 == 0 else targets[::-1]):
                labels = [RF1, RF3] if target.replicated else [RF1]
                for label in (labels if rep % 2 == 0 else labels[::-1]):
                    topic, acks = WORKLOADS[label]
                    res = timed(lambda: _produce(target.bootstrap, topic, acks, args.records, args.size))
                    runs[target.name][label].append(res)
                    print(f"rep {rep} {target.name} {label}: {res['mb_s']:.1f} MB/s, "
                          f"{res['msgs_s']:.0f} records/s", flush=True)
        # The Java client's defaults (idempotent, so at most 5 requests in flight and the rest
        # batched), then one record at a time: the replication round trip.
        for target in targets:
            lat = latency[target.name]
            if target.replicated:
                lat[RF3] = timed(lambda: _latency(target.bootstrap, "rf3", "all", args.size,
                                                  args.latency_rate, args.latency_seconds, idempotent=True))
                lat[f"{RF3}-unloaded"] = timed(lambda: _round_trips(target.bootstrap, "rf3", args.size))
            lat[RF1] = timed(lambda: _latency(target.bootstrap, "rf1", "1", args.size, args.latency_rate,
                                              args.latency_seconds))
            print(f"{target.name} latency: " + ", ".join(f"{k} p50 {v['p50_ms']:.2f} ms p99 {v['p99_ms']:.2f} ms"
                                                        for k, v in lat.items()), flush=True)
    if own_dir:  # kept, with the nodes' logs, when a run fails
        shutil.rmtree(base, ignore_errors=True)
    return runs, latency, described


def summarize(runs: dict[str, dict[str, list[dict]]], latency: dict[str, dict[str, dict]]) -> dict[str, dict]:
    """broker -> the medians and latencies the table shows (absent when the broker has no such run)."""
    out: dict[str, dict] = {}
    for name, by_label in runs.items():
        s: dict[str, float] = {}
        for label, key in ((RF1, "rf1_acks1_mb_s"), (RF3, "rf3_acksall_mb_s")):
            if by_label.get(label):
                s[key] = statistics.median(r["mb_s"] for r in by_label[label])
        if "rf3_acksall_mb_s" in s and s.get("rf1_acks1_mb_s"):
            s["rf3_acksall_over_rf1_acks1"] = s["rf3_acksall_mb_s"] / s["rf1_acks1_mb_s"]
        lat = latency.get(name, {})
        for label, prefix in ((RF3, "acksall"), (f"{RF3}-unloaded", "acksall_unloaded"), (RF1, "acks1_rf1")):
            if label in lat:
                s[f"{prefix}_p50_ms"] = lat[label]["p50_ms"]
                s[f"{prefix}_p99_ms"] = lat[label]["p99_ms"]
        out[name] = s
    return out


# (label, summary key, whether the row needs replication)
ROWS = (
    ("RF=1, acks=1: produce MB/s", "rf1_acks1_mb_s", False),
    ("RF=3, acks=all: produce MB/s", "rf3_acksall_mb_s", True),
    ("RF=3 acks=all / RF=1 acks=1 (same broker)", "rf3_acksall_over_rf1_acks1", True),
    ("acks=all, idempotent, {rate}/s: p50 ms", "acksall_p50_ms", True),
    ("acks=all, idempotent, {rate}/s: p99 ms", "acksall_p99_ms", True),
    ("acks=all, one record at a time: p50 ms", "acksall_unloaded_p50_ms", True),
    ("acks=all, one record at a time: p99 ms", "acksall_unloaded_p99_ms", True),
    ("acks=1 RF=1, {rate}/s: p50 ms", "acks1_rf1_p50_ms", False),
    ("acks=1 RF=1, {rate}/s: p99 ms", "acks1_rf1_p99_ms", False),
)
UNREPLICATED = "n/a (no replication)"


def table(summary: dict[str, dict], names: list[str], rate: int,
          unreplicated: frozenset[str] = frozenset({"tansu"})) -> list[str]:
    """The comparison table: a column per broker, kafkapy's ratio to each other one. A broker
    without replication (Tansu) says so in its RF=3 rows."""
    rows = []
    for label, key, replicated in ROWS:
        values: dict[str, report.Cell] = {}
        for name in names:
            missing = UNREPLICATED if replicated and name in unreplicated else None
            values[name] = summary.get(name, {}).get(key, missing)
        rows.append((label.format(rate=f"{rate:,}"), values))
    return report.broker_comparison(rows, names)


def markdown(result: dict[str, Any]) -> str:
    a = result["args"]
    names = result["brokers_order"]
    lines = [
        f"# Replication cost, {result['started']}",
        "",
        "; ".join(f"`{n}`: {d}" for n, d in result["brokers"].items()) + ". "
        f"{a['reps']} repetition(s) of {a['records']:,} × {a['size']} B records over {PARTITIONS} "
        f"partitions, interleaved in one session (brokers and RF=1/RF=3 order reversed on odd "
        f"repetitions), medians; one latency run per broker ({a['latency_seconds']} s at "
        f"{a['latency_rate']:,}/s). kafkapy commit `{result['git'].get('commit', '')[:10]}`"
        f"{' (+ uncommitted changes)' if result['git'].get('dirty') else ''}; {os.cpu_count()} CPUs, "
        f"took {result['elapsed_s']:.0f} s; 1-minute load average during the runs "
        f"{result['load_range']} (the box is shared: high load means noisy figures).",
        "",
        *table(result["summary"], names, a["latency_rate"]),
        "",
        "MB/s: higher is better; latency: lower is better. The ratio row RF=3/RF=1 is each "
        "broker's own cost of replication.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--latency-rate", type=int, default=1000)
    ap.add_argument("--latency-seconds", type=int, default=10)
    ap.add_argument("--brokers", default="kafkapy,apache-kafka",
                    help="brokers in order; the first is the numerator of the ratios "
                         "(default kafkapy,apache-kafka; tansu runs the RF=1 rows only)")
    ap.add_argument("--tansu", action="store_true", help="add tansu to --brokers")
    ap.add_argument("--warmup-records", type=int, default=200_000,
                    help="records of the untimed warm-up, to each topic of each broker (default 200,000)")
    ap.add_argument("--no-warmup", action="store_true", help="skip the untimed warm-up")
    ap.add_argument("--layout", choices=("combined", "split"), default="combined",
                    help="kafkapy's cluster: 3 combined nodes, as Kafka's (default), or "
                         "3 controllers + 3 brokers")
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.brokers.split(",") if n.strip()]
    if args.tansu and "tansu" not in names:
        names.append("tansu")

    signal.signal(signal.SIGTERM, _sigterm)
    started = dt.datetime.now(dt.timezone.utc)
    t0 = time.monotonic()
    loads: list[float] = []
    runs, latency, described = run(args, names, loads)
    summary = summarize(runs, latency)
    result = {
        "started": started.isoformat(timespec="seconds"), "elapsed_s": time.monotonic() - t0,
        "args": vars(args), "brokers_order": names, "brokers": described, "git": git_describe(),
        "load_range": report.load_range(loads), "loads": loads,
        "summary": summary, "runs": runs, "latency": latency,
    }
    md = markdown(result)
    path = save_result("replication", result, md)
    print()
    print(md)
    print(f"written {path} and {path.with_suffix('.md').name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
