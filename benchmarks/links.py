"""Cluster links against MirrorMaker 2 on the same pair of clusters: copy throughput and lag.

``python -m benchmarks.links [--records 100000] [--size 512] [--partitions 4] [--rate 2000]
[--seconds 15] [--reps 2] [--replicators link,mm2]``

Two kafkapy clusters (one combined node each, data on disk) run for the whole session: "source"
and "dest". Each repetition gives every replicator in turn (the order reversed on odd
repetitions) a fresh source topic and measures:

* **copy**: ``--records`` records of ``--size`` bytes are written to the source first, then the
  replicator starts (the link: ``kafkapy mirror create``; MM2: a dedicated MirrorMaker 2 process,
  ``kafkapy.testing.mirrormaker``, for that topic). Reported: the time until the first record is
  on the destination (MM2 pays a JVM and Connect's start here) and the copy rate while the
  destination goes from 10% to 90% of the records (sampled every 20 ms; start-up excluded);
* **steady lag**: with the replicator running, a producer sends ``--rate`` records/s for
  ``--seconds`` (round robin over the partitions, acks=1); every 0.25 s the source's and the
  destination's high watermarks are read and their difference summed over the partitions is the
  lag. Reported: its p50, p99 and max in records and in milliseconds of produce (lag / rate),
  and how long the destination takes to hold everything once the producer stops.

MM2 copies records through a consumer and a producer (new offsets, its own batches); the link
appends the source's batches as they are. Both read the source up to its high watermark. The
figures are medians of interleaved runs in one session on a shared machine: read the ratios.
Results go to ``benchmarks/results/links-<UTC time>.{json,md}``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from benchmarks.results_io import save_result
from benchmarks.workloads import git_describe, run_client
from kafkapy.cli.admin import LATEST, Admin
from kafkapy.testing.mirrormaker import MirrorMaker2
from kafkapy.testing.node import KafkaNode

REPO = Path(__file__).resolve().parents[1]
REPLICATORS = ("link", "mm2")
LINK = "bench"
SAMPLE_S = 0.25
COPY_TIMEOUT_S = 300.0


def kafkapy(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "kafkapy", *args], capture_output=True, text=True,
                          timeout=180, env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO)
    if done.returncode != 0:
        raise RuntimeError(f"kafkapy {' '.join(args)}: {done.stdout}{done.stderr}")


def totals(admin: Admin, topic: str, partitions: int) -> int:
    """Records in ``topic`` up to its high watermark, over all partitions (0 while it is absent)."""
    try:
        offsets = admin.list_offsets({(topic, p): LATEST for p in range(partitions)})
    except Exception:  # noqa: BLE001 - the destination topic may not exist yet
        return 0
    return sum(offset for offset, _ in offsets.values())


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@contextlib.contextmanager
def replicating(kind: str, topic: str, source: KafkaNode, dest: KafkaNode, work: Path) -> Iterator[str]:
    """Start ``kind`` copying ``topic``; yields the destination topic's name."""
    if kind == "link":
        kafkapy("mirror", "create", topic, "--link", LINK, "--bootstrap-server", dest.bootstrap)
        yield topic
        return
    with MirrorMaker2({"src": source.bootstrap, "dst": dest.bootstrap}, [("src", "dst")], work / f"mm2-{topic}",
                      topics=topic, groups="__none__") as mm2:
        del mm2
        yield f"src.{topic}"


def wait_until(check: Callable[[], bool], timeout: float, what: str) -> float:
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > timeout:
            raise TimeoutError(f"{what} after {timeout:.0f} s")
        time.sleep(0.05)
    return time.monotonic()


def run_one(kind: str, rep: int, args: argparse.Namespace, source: KafkaNode, dest: KafkaNode,
            src_admin: Admin, dst_admin: Admin, work: Path) -> dict[str, Any]:
    topic = f"bench-{kind}-{rep}"
    p = args.partitions
    run_client({"op": "create", "bootstrap": source.bootstrap, "topics": [{"name": topic, "partitions": p}]},
               timeout=60)
    run_client({"op": "produce", "bootstrap": source.bootstrap, "topic": topic, "partitions": p,
                "count": args.records, "size": args.size, "acks": "1"}, timeout=300)
    t0 = time.monotonic()
    with replicating(kind, topic, source, dest, work) as target:
        t_first = wait_until(lambda: totals(dst_admin, target, p) > 0, COPY_TIMEOUT_S, f"{kind}: no record copied")
        progress = [(t_first, totals(dst_admin, target, p))]
        while progress[-1][1] < args.records:
            if time.monotonic() - t0 > COPY_TIMEOUT_S:
                raise TimeoutError(f"{kind}: not every record copied after {COPY_TIMEOUT_S:.0f} s")
            time.sleep(0.02)
            progress.append((time.monotonic(), totals(dst_admin, target, p)))
        copy_rate = copy_slope(progress, args.records)
        lags: list[int] = []
        done = threading.Event()
        failure: list[BaseException] = []

        def produce() -> None:
            try:
                run_client({"op": "latency", "bootstrap": source.bootstrap, "topic": topic, "partitions": p,
                            "rate": args.rate, "seconds": args.seconds, "size": args.size, "acks": "1",
                            "warmup": 0}, timeout=args.seconds + 120)
            except BaseException as exc:  # noqa: BLE001 - reported by the main thread
                failure.append(exc)
            finally:
                done.set()

        producer = threading.Thread(target=produce, daemon=True)
        producer.start()
        while not done.is_set():
            lags.append(max(0, totals(src_admin, topic, p) - totals(dst_admin, target, p)))
            time.sleep(SAMPLE_S)
        producer.join(30)
        if failure:
            raise failure[0]
        t_stop = time.monotonic()
        expected = args.records + int(args.rate * args.seconds)
        t_caught = wait_until(lambda: totals(dst_admin, target, p) >= expected, COPY_TIMEOUT_S,
                              f"{kind}: did not catch up after the producer stopped")
    if kind == "link":
        kafkapy("mirror", "failover", topic, "--bootstrap-server", dest.bootstrap)  # stop copying it
    return {
        "replicator": kind, "rep": rep, "first_record_s": t_first - t0, "copy_records_s": copy_rate,
        "copy_mb_s": copy_rate * args.size / 1e6, "lag_p50": percentile(lags, 0.5),
        "lag_p99": percentile(lags, 0.99), "lag_max": max(lags) if lags else 0,
        "lag_p50_ms": percentile(lags, 0.5) / args.rate * 1000, "lag_p99_ms": percentile(lags, 0.99) / args.rate * 1000,
        "catch_up_s": t_caught - t_stop, "samples": len(lags),
    }


def copy_slope(progress: list[tuple[float, int]], records: int) -> float:
    """Records per second while the destination went from 10% to 90% of ``records``: the copy
    itself, without either replicator's start-up. ``progress``: (time, records there) samples;
    a copy too fast to sample twice in that range counts from the first sample to the last."""
    low = next(((t, n) for t, n in progress if n >= 0.1 * records), progress[0])
    high = next(((t, n) for t, n in progress if n >= 0.9 * records), progress[-1])
    if high[0] <= low[0] or high[1] <= low[1]:
        low, high = progress[0], progress[-1]
    if high[0] <= low[0]:
        return float("nan")
    return (high[1] - low[1]) / (high[0] - low[0])


def summarize(runs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    keys = ("first_record_s", "copy_records_s", "copy_mb_s", "lag_p50", "lag_p99", "lag_max",
            "lag_p50_ms", "lag_p99_ms", "catch_up_s")
    for kind in sorted({r["replicator"] for r in runs}):
        mine = [r for r in runs if r["replicator"] == kind]
        out[kind] = {k: statistics.median(r[k] for r in mine) for k in keys}
    return out


def table(summary: dict[str, dict[str, float]], args: argparse.Namespace, git: dict[str, Any] | None = None) -> str:
    git = git_describe() if git is None else git
    label = str(git.get("commit", ""))[:10] + ("-dirty" if git.get("dirty") else "")
    rows = [f"# Cluster links vs MirrorMaker 2 ({label})", "",
            f"{args.records} records of {args.size} B over {args.partitions} partitions, then "
            f"{args.rate} records/s for {args.seconds} s; medians of {args.reps} interleaved repetitions.", "",
            "| replicator | first record (s) | copy (records/s) | copy (MB/s) | lag p50 | lag p99 | lag max "
            "| lag p50 (ms) | lag p99 (ms) | catch-up (s) |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for kind, s in summary.items():
        rows.append(f"| {kind} | {s['first_record_s']:.1f} | {s['copy_records_s']:.0f} | {s['copy_mb_s']:.1f} "
                    f"| {s['lag_p50']:.0f} | {s['lag_p99']:.0f} | {s['lag_max']:.0f} | {s['lag_p50_ms']:.0f} "
                    f"| {s['lag_p99_ms']:.0f} | {s['catch_up_s']:.2f} |")
    if {"link", "mm2"} <= set(summary):
        a, b = summary["link"], summary["mm2"]
        rows += ["", f"link / MM2: copy rate x{a['copy_records_s'] / b['copy_records_s']:.2f}, "
                     f"lag p99 x{(a['lag_p99'] + 1) / (b['lag_p99'] + 1):.3f} (lower is better; +1 avoids /0), "
                     f"first record x{a['first_record_s'] / b['first_record_s']:.2f}"]
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rate", type=int, default=2000)
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--replicators", default=",".join(REPLICATORS))
    args = parser.parse_args(argv)
    kinds = [k for k in args.replicators.split(",") if k]
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-links-") as tmp:
        work = Path(tmp)
        with KafkaNode(work / "source") as source, KafkaNode(work / "dest") as dest, \
                Admin(source.bootstrap) as src_admin, Admin(dest.bootstrap) as dst_admin:
            if "link" in kinds:
                kafkapy("link", "create", LINK, "--source-bootstrap-server", source.bootstrap,
                        "--bootstrap-server", dest.bootstrap)
            for rep in range(args.reps):
                for kind in (kinds if rep % 2 == 0 else list(reversed(kinds))):
                    run = run_one(kind, rep, args, source, dest, src_admin, dst_admin, work)
                    print({k: round(v, 3) if isinstance(v, float) else v for k, v in run.items()}, flush=True)
                    runs.append(run)
    summary = summarize(runs)
    text = table(summary, args)
    path = save_result("links", {"args": vars(args), "runs": runs, "summary": summary, "git": git_describe()}, text)
    print(text)
    print(f"saved {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
