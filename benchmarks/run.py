"""Run the benchmark suite against kafkapy, Apache Kafka and Tansu, interleaved; report medians and ratios.

    .venv/bin/python -m benchmarks.run                  # all three brokers started here, 3 repetitions
    .venv/bin/python -m benchmarks.run --quick          # 1 repetition, small volumes (< 1 minute)
    .venv/bin/python -m benchmarks.run --only produce-1k,latency --reps 5
    .venv/bin/python -m benchmarks.run --bootstrap kafkapy=127.0.0.1:9092   # an external kafkapy

Writes benchmarks/results/<UTC timestamp>.json and .md and prints the markdown at the end.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
import signal
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import report
from benchmarks.brokers import Broker, external, start_managed
from benchmarks.workloads import (
    RunContext, Volumes, Workload, WorkloadError, all_workloads, delete_topics, git_describe,
    java_classes_dir, select,
)
from kafkapy.testing.clients import ClientError

RESULTS_DIR = Path(__file__).resolve().parent / "results"
GB = 1e9


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="1 repetition, small volumes (< 1 minute)")
    p.add_argument("--reps", type=int, default=None, help="repetitions (default 3, or 1 with --quick)")
    p.add_argument("--only", default=None,
                   help="comma-separated workload names or prefixes (e.g. produce-1k,consume,java)")
    p.add_argument("--brokers", default="kafkapy,apache-kafka,tansu",
                   help="brokers in order; the first is the numerator of the ratios "
                        "(default kafkapy,apache-kafka,tansu)")
    p.add_argument("--bootstrap", action="append", default=[], metavar="NAME=HOST:PORT",
                   help="use an already running broker for NAME instead of starting one (repeatable)")
    p.add_argument("--out", type=Path, default=RESULTS_DIR, help="where the .json/.md go")
    p.add_argument("--list", action="store_true", help="list the workloads and exit")
    p.add_argument("--no-warmup", action="store_true",
                   help="skip the untimed warm-up (one small run of each throughput kind per broker)")
    return p.parse_args(argv)


def _sigterm(_signo: int, _frame: Any) -> None:
    # Turn SIGTERM into the same unwinding as Ctrl-C so every broker and client gets stopped.
    raise KeyboardInterrupt


def measure(workload: Workload, ctx: RunContext) -> dict[str, Any]:
    """setup (untimed) -> reset peak RSS, sample -> run -> sample -> teardown."""
    broker = ctx.broker
    record: dict[str, Any] = {"workload": workload.name, "broker": broker.name, "rep": ctx.rep}
    t0 = time.monotonic()
    try:
        workload.setup(ctx)
        peak_reset = broker.reset_peak()
        # The client processes are waited for, so their CPU lands in RUSAGE_CHILDREN: a client
        # whose CPU-s is close to the run's seconds was the bottleneck, not the broker.
        children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        record["load_before"] = os.getloadavg()[0]
        before = broker.sample()
        metrics = workload.run(ctx)
        after = broker.sample()
        children1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        metrics["client_cpu_s"] = (children1.ru_utime + children1.ru_stime
                                   - children0.ru_utime - children0.ru_stime)
        record["load_after"] = os.getloadavg()[0]
        if before and after:
            cpu = after.cpu_s - before.cpu_s
            metrics["cpu_s"] = cpu
            if metrics.get("bytes"):
                metrics["cpu_s_per_gb"] = cpu / (metrics["bytes"] / GB)
            metrics["peak_rss_mb"] = after.hwm_mb
            metrics["rss_after_mb"] = after.rss_mb
            metrics["peak_rss_scope"] = "run" if peak_reset else "since broker start"
        record["metrics"] = metrics
    except (WorkloadError, ClientError) as exc:
        record["error"] = str(exc)
        record["metrics"] = {}
    finally:
        try:
            workload.teardown(ctx)
        except (WorkloadError, ClientError) as exc:
            print(f"  (teardown of {workload.name} on {broker.name}: {str(exc).splitlines()[0]})")
    record["wall_s"] = time.monotonic() - t0
    if not broker.alive():
        record.setdefault("error", "broker died")
        record["broker_log_tail"] = broker.log_tail()
    return record


def warm_up(workloads: list[Workload], brokers: list[Broker]) -> None:
    """One untimed, small run of each throughput kind on every broker before the clock starts.

    A JVM broker runs interpreted until its JIT has seen the hot paths, so the first seconds of
    load measure its compiler rather than the broker; a steady state is what a user sees. The
    other brokers get the same warm-up (page cache, first segment files, connections).
    """
    first_of_kind: dict[str, Workload] = {}
    for w in workloads:
        if w.kind in report.THROUGHPUT_KINDS or w.kind in report.TXN_KINDS[:2]:
            first_of_kind.setdefault(w.kind, w)
    for broker in brokers:
        ctx = RunContext(broker, Volumes.quick(), -1)
        for w in first_of_kind.values():
            record = measure(w, ctx)
            print(f"[warm-up]   {w.name:28} {broker.name:8} {_line(record)}", flush=True)
        left = sorted({t for t, _ in ctx.leftovers.values()} | set(ctx.to_delete))
        if left and broker.alive():
            delete_topics(ctx, left)


def _line(record: dict[str, Any]) -> str:
    if record.get("error"):
        return f"ERROR {record['error'].splitlines()[0][:160]}"
    m = record["metrics"]
    parts = []
    for key, fmt in (("mb_s", "{:.1f} MB/s"), ("msgs_s", "{:,.0f} msg/s"), ("p50_ms", "p50 {:.2f} ms"),
                     ("p99_ms", "p99 {:.2f} ms"), ("p999_ms", "p99.9 {:.2f} ms"),
                     ("commit_p50_ms", "commit p50 {:.2f} ms"), ("commit_p99_ms", "commit p99 {:.2f} ms"),
                     ("create_until_leaders_s", "create {:.2f} s"), ("metadata_first_s", "metadata {:.3f} s"),
                     ("first_record_s", "first record {:.2f} s"), ("cpu_s_per_gb", "{:.2f} CPU-s/GB"),
                     ("cpu_s", "cpu {:.2f} s"), ("peak_rss_mb", "peak {:.0f} MB"),
                     ("rss_after_mb", "rss {:.0f} MB")):
        if isinstance(m.get(key), (int, float)):
            parts.append(fmt.format(m[key]))
    if m.get("status") and m["status"] != "ok":
        parts.insert(0, m["status"])
    return ", ".join(parts)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workloads = select(all_workloads(), args.only)
    if args.list:
        for w in workloads:
            print(f"{w.name:32} {w.description}")
        return 0
    volumes = Volumes.quick() if args.quick else Volumes()
    reps = args.reps or (1 if args.quick else 3)
    names = [n.strip() for n in args.brokers.split(",") if n.strip()]
    externals = dict(item.split("=", 1) for item in args.bootstrap)
    for name in externals:
        if name not in names:
            names.append(name)

    signal.signal(signal.SIGTERM, _sigterm)
    started = dt.datetime.now(dt.timezone.utc)
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    t_start = time.monotonic()
    brokers: list[Broker] = []
    records: list[dict[str, Any]] = []
    interrupted = False
    try:
        if any(w.kind.startswith("java") for w in workloads):
            print("compiling benchmarks/java/Bench.java (cached by content hash) ...")
            java_classes_dir()
        for name in names:
            broker = external(name, externals[name]) if name in externals else start_managed(name)
            print(f"broker {name}: {broker.bootstrap} pid={broker.pid}"
                  f"{'' if broker.managed else ' (external)'}")
            brokers.append(broker)

        if not args.no_warmup:
            warm_up(workloads, brokers)

        for rep in range(reps):
            # A B C then C B A: no broker always runs first (caches, the other engineer's build...).
            order = brokers if rep % 2 == 0 else list(reversed(brokers))
            contexts = {br.name: RunContext(br, volumes, rep) for br in brokers}
            for workload in workloads:
                for broker in order:
                    if not broker.alive():
                        records.append({"workload": workload.name, "broker": broker.name, "rep": rep,
                                        "error": "broker not running", "metrics": {}})
                        continue
                    record = measure(workload, contexts[broker.name])
                    records.append(record)
                    print(f"[rep {rep + 1}/{reps}] {workload.name:28} {broker.name:8} {_line(record)}",
                          flush=True)
            for broker in brokers:  # whatever a workload left behind in this repetition
                ctx = contexts[broker.name]
                left = sorted({t for t, _ in ctx.leftovers.values()} | set(ctx.to_delete))
                if left and broker.alive():
                    delete_topics(ctx, left)
    except KeyboardInterrupt:
        interrupted = True
        print("\ninterrupted: stopping brokers and writing what was measured", file=sys.stderr)
    finally:
        for broker in brokers:
            broker.stop()

    result = build_result(records, workloads, brokers, names, volumes, reps, args, started,
                          time.monotonic() - t_start, interrupted)
    args.out.mkdir(parents=True, exist_ok=True)
    json_path = args.out / f"{stamp}.json"
    md_path = args.out / f"{stamp}.md"
    json_path.write_text(json.dumps(result, indent=1, default=str) + "\n")
    md = report.markdown(result)
    md_path.write_text(md + "\n")
    print()
    print(md)
    print(f"wrote {json_path.relative_to(Path.cwd()) if json_path.is_relative_to(Path.cwd()) else json_path}"
          f" and {md_path.name}")
    return 130 if interrupted else 0


def build_result(records: list[dict], workloads: list[Workload], brokers: list[Broker], names: list[str],
                 volumes: Volumes, reps: int, args: argparse.Namespace, started: dt.datetime,
                 elapsed: float, interrupted: bool) -> dict[str, Any]:
    summary = report.summarize(records, names)
    for w in workloads:
        for slot in summary.get(w.name, {}).values():
            slot["_meta"] = {"kind": w.kind, "size": w.size, "partitions": w.partitions, "acks": w.acks,
                             "description": w.description}
    described = {}
    for br in brokers:
        described[br.name] = (f"managed, {br.bootstrap}" if br.managed else f"external {br.bootstrap}")
    loads = [r[k] for r in records for k in ("load_before", "load_after") if k in r]
    meta = {
        "load_range": report.load_range(loads),
        "started": started.isoformat(timespec="seconds"),
        "elapsed_s": elapsed,
        "repetitions": reps,
        "quick": args.quick,
        "only": args.only,
        "interrupted": interrupted,
        "volumes": volumes.__dict__,
        "git": git_describe(),
        "host": {"cpus": os.cpu_count(), "platform": platform.platform(),
                 "python": platform.python_version()},
    }
    result = {"meta": meta, "brokers": described, "brokers_order": names, "summary": summary,
              "runs": records}
    if len(names) >= 2:
        # The targets were set against Tansu; with no Tansu, against the second broker.
        against = "tansu" if "tansu" in names[1:] else names[1]
        result["targets"] = report.check_targets(summary, names[0], against)
        result["targets_against"] = against
    return result


if __name__ == "__main__":
    sys.exit(main())
