"""The workloads: what each one sets up (untimed), runs (timed, broker CPU/RSS sampled around it) and
cleans up. Every client is a separate process with a deadline (`run_client`, `run_java`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Sequence
from typing import Any, Callable

from kafkapy.testing.clients import java_jars, run_process
from kafkapy.testing.node import REPO_ROOT, _venv_python

from benchmarks.brokers import COORDINATOR_NOT_AVAILABLE, Broker, find_coordinator
from benchmarks.clients import confluent_bench

BENCH_DIR = Path(__file__).resolve().parent
CONFLUENT_CLIENT = BENCH_DIR / "clients" / "confluent_bench.py"
JAVA_SOURCE = BENCH_DIR / "java" / "Bench.java"
JAVA_CACHE = REPO_ROOT / ".tools" / "bench-java"
# A throughput client wants the C2 JIT and room for 512 MB of buffered batches.
JAVA_OPTS = ["-Xmx1g", "-Xms256m", "-XX:+UseParallelGC"]
KIB = 1024


class WorkloadError(RuntimeError):
    """A client failed or overran its deadline; the run is recorded as an error and the suite goes on."""


@dataclass(frozen=True)
class Volumes:
    """How much each workload moves. The defaults make each throughput run last a few seconds here."""

    kib_records: int = 400_000        # 1 KiB records per produce run (~410 MB)
    small_records: int = 1_000_000    # 100 B records per produce run (100 MB)
    java_records: int = 300_000       # 1 KiB records for the Java producer/consumer (~307 MB)
    latency_seconds: float = 10.0     # at 2,000 msg/s: 20,000 samples, p99.9 from the top 20
    latency_rate: int = 2000
    partition_topics: int = 10
    partitions_per_topic: int = 100
    coordinator_probe_s: float = 5.0
    group_timeout_s: float = 30.0
    txn_records: int = 200_000        # 1 KiB records per idempotent/transactional run (200 transactions)
    txn_commits: int = 500            # small transactions in the commit-latency run

    @classmethod
    def quick(cls) -> "Volumes":
        return cls(kib_records=40_000, small_records=150_000, java_records=30_000,
                   latency_seconds=2.0, partition_topics=10, partitions_per_topic=10,
                   coordinator_probe_s=2.0, group_timeout_s=15.0, txn_records=20_000,
                   txn_commits=100)


@dataclass
class RunContext:
    """State shared by the workloads of one repetition on one broker."""

    broker: Broker
    volumes: Volumes
    rep: int
    # (size, partitions) -> (topic, records): data a produce run left for the consume run of that shape.
    leftovers: dict[tuple[int, int], tuple[str, int]] = field(default_factory=dict)
    to_delete: list[str] = field(default_factory=list)


@dataclass
class Workload:
    """One benchmark. `run` returns the client's figures; `bytes` in them drives CPU-seconds per GB."""

    name: str
    kind: str                 # produce | consume | latency | java-produce | java-consume | partitions | group
    description: str
    run: Callable[[RunContext], dict[str, Any]]
    setup: Callable[[RunContext], None] = lambda ctx: None
    teardown: Callable[[RunContext], None] = lambda ctx: None
    size: int = 0
    partitions: int = 0
    acks: str = ""


# -- client processes ---------------------------------------------------------------------------------

def run_client(job: dict, *, timeout: float, wrap: Sequence[str] = ()) -> dict:
    """Run one confluent-kafka job in its own process group; kill it at the deadline. ``wrap``
    runs it under a command (``ip netns exec NS``: inside a network site)."""
    done = run_process([*wrap, _venv_python(), str(CONFLUENT_CLIENT), json.dumps(job)],
                       timeout=timeout, cwd=BENCH_DIR)
    return _answer(done, f"confluent {job['op']}")


def _answer(done, what: str) -> dict:
    lines = [ln for ln in done.text.splitlines() if ln.startswith("{")]
    if not lines:
        raise WorkloadError(f"{what}: no JSON result\n{done.describe()}")
    answer = json.loads(lines[-1])
    if not answer.get("ok"):
        raise WorkloadError(f"{what}: {answer.get('error')}\n"
                            f"--- stderr ---\n{done.stderr.decode('utf-8', 'replace')[-3000:]}")
    return answer["result"]


def java_classes_dir() -> Path:
    """Compile Bench.java once per (source, jars) content hash under .tools/bench-java/<hash>/."""
    return compile_java(JAVA_SOURCE, java_jars(), "Bench.class")


def compile_java(source: Path, jars: list[Path], made: str) -> Path:
    """Compile ``source`` against ``jars`` once per content hash of both, under
    .tools/bench-java/<hash>/; ``made`` is the class file whose presence marks a finished build."""
    h = hashlib.sha256(source.read_bytes())
    for jar in jars:
        h.update(jar.name.encode())
        h.update(hashlib.sha256(jar.read_bytes()).digest())
    target = JAVA_CACHE / h.hexdigest()[:16]
    if (target / made).exists():
        return target
    JAVA_CACHE.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="compile-", dir=JAVA_CACHE))
    try:
        done = run_process(["javac", "-nowarn", "-encoding", "UTF-8", "-cp",
                            os.pathsep.join(map(str, jars)), "-d", str(tmp), str(source)],
                           timeout=180)
        if done.returncode != 0:
            raise WorkloadError("javac failed\n" + done.describe())
        try:
            tmp.rename(target)  # atomic; a concurrent compile may have won, which is fine
        except OSError:
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def run_java(args: list[str], *, timeout: float) -> dict:
    cp = os.pathsep.join([str(java_classes_dir()), *map(str, java_jars())])
    done = run_process(["java", *JAVA_OPTS, "-cp", cp, "Bench", *map(str, args)], timeout=timeout)
    return _answer(done, f"java {args[0]}")


def _deadline(records: int, size: int, floor_mb_s: float = 5.0) -> float:
    """A deadline no healthy broker gets near: the data at 5 MB/s (or 20k msg/s), plus a minute."""
    return 60.0 + max(records * size / (floor_mb_s * 1e6), records / 20_000)


# -- topics -------------------------------------------------------------------------------------------

def topic_name(ctx: RunContext, label: str) -> str:
    return f"bench-{label}-r{ctx.rep}-{uuid.uuid4().hex[:6]}"


def _admin_call(fn: Callable[[dict], dict], job: dict) -> dict:
    """Topic admin runs in the runner's own process (setup is not measured, and a client process
    per create/delete would add seconds of interpreter start-up to every run)."""
    try:
        return fn(job)
    except Exception as exc:  # KafkaException, TimeoutError, ...: the run is recorded as an error
        raise WorkloadError(f"admin {job['op']}: {type(exc).__name__}: {exc}") from exc


def create_topic(ctx: RunContext, name: str, partitions: int) -> None:
    ctx.to_delete.append(name)
    _admin_call(confluent_bench.op_create, {"op": "create", "bootstrap": ctx.broker.bootstrap,
                                            "topics": [{"name": name, "partitions": partitions}],
                                            "timeout_s": 60})


def delete_topics(ctx: RunContext, names: list[str] | None = None) -> None:
    """Best effort: freeing the data keeps later runs (and Tansu's memory) comparable."""
    names = list(ctx.to_delete if names is None else names)
    if not names:
        return
    try:
        res = _admin_call(confluent_bench.op_delete, {"op": "delete", "bootstrap": ctx.broker.bootstrap,
                                                      "topics": names, "timeout_s": 90})
        if res.get("failed"):
            print(f"  (cleanup on {ctx.broker.name}: {len(res['failed'])} topic(s) not deleted)")
    except WorkloadError as exc:
        print(f"  (cleanup on {ctx.broker.name} failed: {str(exc).splitlines()[0]})")
    for n in names:
        if n in ctx.to_delete:
            ctx.to_delete.remove(n)


# -- workload builders --------------------------------------------------------------------------------

def produce_workload(size: int, partitions: int, acks: str) -> Workload:
    label = f"produce-{_size_label(size)}-acks{acks}-p{partitions}"
    state: dict[str, str] = {}

    def records(ctx: RunContext) -> int:
        return ctx.volumes.kib_records if size >= KIB else ctx.volumes.small_records

    def setup(ctx: RunContext) -> None:
        state.clear()  # the same Workload object runs on every broker in turn
        state["topic"] = topic_name(ctx, label)
        create_topic(ctx, state["topic"], partitions)

    def run(ctx: RunContext) -> dict:
        n = records(ctx)
        res = run_client({"op": "produce", "bootstrap": ctx.broker.bootstrap, "topic": state["topic"],
                          "partitions": partitions, "count": n, "size": size, "acks": acks,
                          "timeout_s": _deadline(n, size)}, timeout=_deadline(n, size) + 30)
        state["done"] = True
        return res

    def teardown(ctx: RunContext) -> None:
        if "topic" not in state:
            return
        if not state.get("done"):  # partial data: useless to the consume run
            delete_topics(ctx, [state["topic"]])
            return
        # Keep the data for the consume run of the same shape; drop what that shape held before.
        old = ctx.leftovers.pop((size, partitions), None)
        if old:
            delete_topics(ctx, [old[0]])
        ctx.leftovers[(size, partitions)] = (state["topic"], records(ctx))

    return Workload(label, "produce",
                    f"confluent-kafka produce, {size} B values, acks={acks}, {partitions} partition(s)",
                    run, setup, teardown, size=size, partitions=partitions, acks=acks)


def consume_workload(size: int, partitions: int) -> Workload:
    label = f"consume-{_size_label(size)}-p{partitions}"
    state: dict[str, Any] = {}

    def setup(ctx: RunContext) -> None:
        state.clear()
        left = ctx.leftovers.pop((size, partitions), None)
        if left is None:  # run on its own (--only): write the data first, untimed
            producer = produce_workload(size, partitions, "1")
            producer.setup(ctx)
            producer.run(ctx)
            producer.teardown(ctx)
            left = ctx.leftovers.pop((size, partitions))
        state["topic"], state["count"] = left

    def run(ctx: RunContext) -> dict:
        n = state["count"]
        return run_client({"op": "consume", "bootstrap": ctx.broker.bootstrap, "topic": state["topic"],
                           "partitions": partitions, "count": n, "timeout_s": _deadline(n, size)},
                          timeout=_deadline(n, size) + 30)

    def teardown(ctx: RunContext) -> None:
        if "topic" in state:
            delete_topics(ctx, [state["topic"]])

    return Workload(label, "consume",
                    f"confluent-kafka assign() consume of the produce run's data, {size} B values, "
                    f"{partitions} partition(s)", run, setup, teardown, size=size, partitions=partitions)


def latency_workload(size: int = KIB) -> Workload:
    state: dict[str, str] = {}

    def setup(ctx: RunContext) -> None:
        state.clear()
        state["topic"] = topic_name(ctx, "latency")
        create_topic(ctx, state["topic"], 1)

    def run(ctx: RunContext) -> dict:
        v = ctx.volumes
        return run_client({"op": "latency", "bootstrap": ctx.broker.bootstrap, "topic": state["topic"],
                           "rate": v.latency_rate, "seconds": v.latency_seconds, "size": size,
                           "acks": "1", "timeout_s": 60}, timeout=v.latency_seconds + 120)

    def teardown(ctx: RunContext) -> None:
        if "topic" in state:
            delete_topics(ctx, [state["topic"]])

    return Workload("latency-2k-msgs", "latency",
                    f"send->ack latency at a fixed 2,000 msg/s, {size} B values, linger.ms=0, acks=1",
                    run, setup, teardown, size=size, partitions=1, acks="1")


def java_workloads(size: int = KIB, partitions: int = 8) -> list[Workload]:
    state: dict[str, Any] = {}

    def setup_produce(ctx: RunContext) -> None:
        state.clear()  # the same Workload object runs on every broker in turn
        java_classes_dir()  # compile outside the timed section
        state["topic"] = topic_name(ctx, "java")
        create_topic(ctx, state["topic"], partitions)

    def run_produce(ctx: RunContext) -> dict:
        n = ctx.volumes.java_records
        res = run_java(["produce", ctx.broker.bootstrap, state["topic"], partitions, n, size, "all"],
                       timeout=_deadline(n, size) + 30)
        state["done"] = True
        return res

    def teardown_produce(ctx: RunContext) -> None:
        if "topic" not in state:
            return
        if not state.get("done"):
            delete_topics(ctx, [state["topic"]])
            return
        ctx.leftovers[("java", size, partitions)] = (state["topic"], ctx.volumes.java_records)

    def setup_consume(ctx: RunContext) -> None:
        left = ctx.leftovers.pop(("java", size, partitions), None)
        if left is None:  # run on its own (--only): write the data first, untimed
            setup_produce(ctx)
            run_produce(ctx)
            left = (state["topic"], ctx.volumes.java_records)
        state["consume"] = left

    def run_consume(ctx: RunContext) -> dict:
        topic, n = state["consume"]
        return run_java(["consume", ctx.broker.bootstrap, topic, partitions, n, _deadline(n, size)],
                        timeout=_deadline(n, size) + 30)

    def teardown_consume(ctx: RunContext) -> None:
        if "consume" in state:
            delete_topics(ctx, [state.pop("consume")[0]])

    return [
        Workload("java-produce-1k-acksall-p8", "java-produce",
                 f"Java KafkaProducer (defaults: idempotent, acks=all; batch.size 1 MB, linger.ms 5), "
                 f"{size} B values, {partitions} partitions", run_produce, setup_produce,
                 teardown_produce, size=size, partitions=partitions, acks="all"),
        Workload("java-consume-1k-p8", "java-consume",
                 f"Java KafkaConsumer assign() of the Java producer's data, {partitions} partitions",
                 run_consume, setup_consume, teardown_consume, size=size, partitions=partitions),
    ]


def partitions_workload() -> Workload:
    state: dict[str, str] = {}

    def run(ctx: RunContext) -> dict:
        v = ctx.volumes
        state.clear()
        state["prefix"] = topic_name(ctx, "parts")
        return run_client({"op": "partitions", "bootstrap": ctx.broker.bootstrap, "prefix": state["prefix"],
                           "topics": v.partition_topics, "partitions": v.partitions_per_topic,
                           "timeout_s": 120}, timeout=180)

    def teardown(ctx: RunContext) -> None:
        if "prefix" in state:
            delete_topics(ctx, [f"{state['prefix']}-{i}" for i in range(ctx.volumes.partition_topics)])

    return Workload("partitions-1000", "partitions",
                    "AdminClient: create 10 topics x 100 partitions, wait for leaders, fetch full metadata",
                    run, teardown=teardown)


def group_workload() -> Workload:
    state: dict[str, str] = {}

    def setup(ctx: RunContext) -> None:
        state.clear()
        state["topic"] = topic_name(ctx, "group")
        create_topic(ctx, state["topic"], 1)

    def run(ctx: RunContext) -> dict:
        v = ctx.volumes
        # Ask first: librdkafka would retry FindCoordinator forever against a broker without groups.
        probe = find_coordinator(ctx.broker.bootstrap, f"bench-probe-{uuid.uuid4().hex[:8]}",
                                 deadline_s=v.coordinator_probe_s)
        if probe.error_code != 0:
            why = ("no group coordinator" if probe.error_code == COORDINATOR_NOT_AVAILABLE
                   else f"FindCoordinator error {probe.error_code} {probe.detail}".strip())
            return {"status": f"n/a ({why})", "first_record_s": None,
                    "probe": {"error_code": probe.error_code, "attempts": probe.attempts,
                              "seconds": round(probe.seconds, 2)}}
        # Tansu holds the first JoinGroup for about half the rebalance timeout (max.poll.interval.ms,
        # 300 s by default), so both brokers get a 6 s one, still above Kafka's 3 s initial delay.
        res = run_client({"op": "group", "bootstrap": ctx.broker.bootstrap, "topic": state["topic"],
                          "timeout_s": v.group_timeout_s,
                          "config": {"max.poll.interval.ms": 6000, "session.timeout.ms": 6000}},
                         timeout=v.group_timeout_s + 30)
        res["status"] = "timed out" if res.get("timed_out") else "ok"
        return res

    def teardown(ctx: RunContext) -> None:
        if "topic" in state:
            delete_topics(ctx, [state["topic"]])

    return Workload("group-first-record", "group",
                    "confluent-kafka subscribe() with a new group -> first record (bounded)",
                    run, setup, teardown)


def rebalance_workload() -> Workload:
    state: dict[str, str] = {}
    members = 10

    def setup(ctx: RunContext) -> None:
        state.clear()
        state["topic"] = topic_name(ctx, "rebalance")
        create_topic(ctx, state["topic"], members)

    def run(ctx: RunContext) -> dict:
        v = ctx.volumes
        probe = find_coordinator(ctx.broker.bootstrap, f"bench-probe-{uuid.uuid4().hex[:8]}",
                                 deadline_s=v.coordinator_probe_s)
        if probe.error_code != 0:
            return {"status": "n/a (no group coordinator)", "rebalance_s": None}
        # Same timeouts as group-first-record, for the same reason (Tansu's initial join hold).
        res = run_client({"op": "rebalance", "bootstrap": ctx.broker.bootstrap, "topic": state["topic"],
                          "members": members, "timeout_s": v.group_timeout_s * 2,
                          "config": {"max.poll.interval.ms": 6000, "session.timeout.ms": 6000}},
                         timeout=v.group_timeout_s * 2 + 30)
        res["status"] = "timed out" if res.get("timed_out") else "ok"
        return res

    def teardown(ctx: RunContext) -> None:
        if "topic" in state:
            delete_topics(ctx, [state["topic"]])

    return Workload("group-rebalance-10", "rebalance",
                    "10 confluent-kafka members on 10 partitions: 9 settle, a 10th joins -> all reassigned",
                    run, setup, teardown)


def _size_label(size: int) -> str:
    return f"{size // KIB}k" if size >= KIB and size % KIB == 0 else f"{size}b"


def all_workloads() -> list[Workload]:
    """In run order: each produce shape before the consume of the same shape."""
    out: list[Workload] = []
    for size in (KIB, 100):
        for parts in (1, 8):
            for acks in ("1", "all"):
                out.append(produce_workload(size, parts, acks))
            out.append(consume_workload(size, parts))
    out.append(latency_workload())
    out.extend(java_workloads())
    out.append(partitions_workload())
    out.append(group_workload())
    out.append(rebalance_workload())
    from benchmarks.txn import txn_workloads  # here: benchmarks.txn builds on this module
    out.extend(txn_workloads())
    return out


def select(workloads: list[Workload], only: str | None) -> list[Workload]:
    """`--only a,b`: exact names or prefixes ("produce", "consume-1k", "java")."""
    if not only:
        return workloads
    wanted = [w.strip() for w in only.split(",") if w.strip()]
    chosen = [w for w in workloads if any(w.name == x or w.name.startswith(x) or w.kind == x
                                          for x in wanted)]
    unknown = [x for x in wanted if not any(w.name == x or w.name.startswith(x) or w.kind == x
                                            for w in workloads)]
    if unknown:
        raise SystemExit(f"unknown workload(s) {unknown}; known: {[w.name for w in workloads]}")
    return chosen


def git_describe() -> dict[str, Any]:
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True,
                                  timeout=10).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return ""
    return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain", "--",
                                                                   "kafkapy", "ext"))}
