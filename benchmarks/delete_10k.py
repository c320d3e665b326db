"""Deleting a 10,000-partition topic on one combined node under a steady produce load: does the
node stall or fence itself, and how long until the files are gone?

    python -m benchmarks.delete_10k                          # 10,000 partitions, 1 run
    python -m benchmarks.delete_10k --partitions 2000 --delete-delay-ms 5000
    python -m benchmarks.delete_10k --node-pythonpath /work/main   # the node runs other code

Each run starts a fresh kafkapy node (``kafkapy server`` defaults but
``log.segment.delete.delay.ms``, the broker default of file.delete.delay.ms: Kafka's 60 s unless
``--delete-delay-ms``), and runs ``kafkapy.testing.bulk_delete.run_bulk_delete``: the big topic is
made and a sample of its partitions written (untimed), then a confluent-kafka producer sends one
acks=all record every 20 ms to a one-partition topic while probes send ApiVersions every 100 ms to
the broker and controller listeners, and DeleteTopics removes the big topic.

Reported per run: the DeleteTopics answer time, the time until no partition directory has its
live name (renamed for deletion) and until the renamed directories are gone, the **longest pause
between two steady deliveries** from the request until the directories are gone (target: at most
1 s, issue 27), the listener gaps, whether the node fenced itself (its log), and the node's CPU.
``--node-pythonpath`` runs the node from another tree (a before/after comparison; the scenario
itself runs from this one). Results go to ``benchmarks/results/delete-10k-<UTC time>.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.bulk_create import FENCE_MARKERS, _cpu_s
from benchmarks.results_io import save_result
from kafkapy.testing.bulk_delete import run_bulk_delete
from kafkapy.testing.node import KafkaNode

GAP_TARGET_S = 1.0


def one_run(partitions: int, delete_delay_ms: int, deadline_s: float,
            node_pythonpath: str | None) -> dict[str, Any]:
    env = {"PYTHONPATH": node_pythonpath} if node_pythonpath else {}
    overrides = {"log.segment.delete.delay.ms": str(delete_delay_ms)}
    with tempfile.TemporaryDirectory(prefix="bench-delete-") as d:
        with KafkaNode(Path(d) / "node", startup_timeout=60, overrides=overrides, env=env) as node:
            cpu_before = _cpu_s(node.pid)
            report = run_bulk_delete(node, partitions=partitions, deadline_s=deadline_s)
            cpu_after = _cpu_s(node.pid)
            node.stop()
            node_log = node.log_path.read_text(errors="replace")
    row = report.as_dict()
    row["fenced"] = any(marker in node_log for marker in FENCE_MARKERS)
    row["node_cpu_s"] = (None if cpu_before is None or cpu_after is None
                         else round(cpu_after - cpu_before, 2))
    row["removal_lines"] = node_log.count("Deleted log for partition ")
    row["gap_target_met"] = (report.error is None and report.gone_s is not None
                             and report.longest_ack_gap_s <= GAP_TARGET_S
                             and not report.steady_failures and not row["fenced"])
    return row


def _fmt(v: Any) -> str:
    return "-" if v is None else f"{v:.2f}" if isinstance(v, float) else str(v)


def markdown(result: dict[str, Any]) -> str:
    lines = [f"# Deleting a topic under load ({result['partitions']} partitions, "
             f"file.delete.delay.ms {result['delete_delay_ms']}, node code {result['node_code']}, "
             f"load before {result['load_before']})", "",
             "| run | set-up s | delete answered s | all renamed s | all gone s "
             "| longest produce gap s | broker listener gap s | controller listener gap s "
             "| fenced | node CPU s | gap ≤ 1 s |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---|"]
    for i, r in enumerate(result["runs"], 1):
        lines.append(f"| {i} | {_fmt(r['setup_s'])} | {_fmt(r['delete_s'])} | "
                     f"{_fmt(r['renamed_s'])} | {_fmt(r['gone_s'])} | "
                     f"{_fmt(r['longest_ack_gap_s'])} | {_fmt(r['broker_probe_gap_s'])} | "
                     f"{_fmt(r['controller_probe_gap_s'])} | {'yes' if r['fenced'] else 'no'} | "
                     f"{_fmt(r['node_cpu_s'])} | {'met' if r['gap_target_met'] else 'NOT met'} |")
        if r.get("error"):
            lines.append(f"|   | error: {r['error']} |||||||||| ")
    lines.append("")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--delete-delay-ms", type=int, default=60_000,
                    help="the node's log.segment.delete.delay.ms (Kafka's default: 60000)")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--deadline", type=float, default=1200.0, help="bound on one run, seconds")
    ap.add_argument("--node-pythonpath", default=None,
                    help="run the node from this tree (e.g. a checkout of main)")
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    code_dir = args.node_pythonpath or "."
    commit = subprocess.run(["git", "-C", code_dir, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    load = Path("/proc/loadavg").read_text().split()[0]
    runs = []
    for _ in range(args.runs):
        row = one_run(args.partitions, args.delete_delay_ms, args.deadline, args.node_pythonpath)
        print(json.dumps(row), flush=True)
        runs.append(row)
    result = {"partitions": args.partitions, "delete_delay_ms": args.delete_delay_ms,
              "node_code": commit, "load_before": load, "gap_target_s": GAP_TARGET_S,
              "runs": runs}
    text = markdown(result)
    print(text)
    if not args.no_save:
        save_result("delete-10k", result, text)


if __name__ == "__main__":
    main()
