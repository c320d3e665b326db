"""A bulk CreateTopics on one combined node under a steady produce load: does the node stall?

    python -m benchmarks.bulk_create                       # 9,999 partitions, 1 run
    python -m benchmarks.bulk_create --partitions 5000 --runs 3

Each run starts a fresh kafkapy node (``kafkapy server`` defaults, combined mode, data on disk in
a temp dir) and runs ``kafkapy.testing.bulk_create.run_bulk_create``: a confluent-kafka producer
sends one acks=all record every 20 ms to a one-partition topic throughout; probes send
ApiVersions every 100 ms to the broker listener and to the controller listener (the path of the
broker's heartbeats and of the metadata quorum); a CreateTopics of ``--partitions`` partitions
(replication factor 1) goes in; once every partition's log directory exists, one record goes to
each of a sample of 100 partitions.

Reported per run: the CreateTopics answer time, the time until every partition had its log and
until the sample had stored its records, the longest pause between two steady deliveries (target: at most 2 s), the longest wait
for an answer on each listener, whether the node fenced itself (its log), and the node's CPU.
Results go to ``benchmarks/results/bulk-create-<UTC time>.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from kafkapy.testing.bulk_create import run_bulk_create
from benchmarks.results_io import save_result
from kafkapy.testing.node import KafkaNode

GAP_TARGET_S = 2.0
FENCE_MARKERS = ("fencing ourselves", "Fenced broker", "lost contact with the controllers")


def _cpu_s(pid: int | None) -> float | None:
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_run(partitions: int, deadline_s: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-bulk-") as d:
        with KafkaNode(Path(d) / "node", startup_timeout=60) as node:
            cpu_before = _cpu_s(node.pid)
            report = run_bulk_create(node, partitions=partitions, deadline_s=deadline_s)
            cpu_after = _cpu_s(node.pid)
            node.stop()
            node_log = node.log_path.read_text(errors="replace")
    row = report.as_dict()
    row["fenced"] = any(marker in node_log for marker in FENCE_MARKERS)
    row["node_cpu_s"] = (None if cpu_before is None or cpu_after is None
                         else round(cpu_after - cpu_before, 2))
    row["gap_target_met"] = report.longest_ack_gap_s <= GAP_TARGET_S and not report.steady_failures
    return row


def _fmt(v: Any) -> str:
    return "-" if v is None else f"{v:.2f}" if isinstance(v, float) else str(v)


def markdown(result: dict[str, Any]) -> str:
    lines = [f"# Bulk CreateTopics under load ({result['partitions']} partitions, commit "
             f"{result['commit']}, load before {result['load_before']})", "",
             "| run | create answered s | all logs made s | sample written s | longest produce gap s "
             "| broker listener gap s | controller listener gap s | fenced | node CPU s "
             "| gap ≤ 2 s |",
             "|---|---:|---:|---:|---:|---:|---:|---|---:|---|"]
    for i, r in enumerate(result["runs"], 1):
        lines.append(f"| {i} | {_fmt(r['create_s'])} | {_fmt(r['all_logs_s'])} | "
                     f"{_fmt(r['sample_written_s'])} | "
                     f"{_fmt(r['longest_ack_gap_s'])} | {_fmt(r['broker_probe_gap_s'])} | "
                     f"{_fmt(r['controller_probe_gap_s'])} | {'yes' if r['fenced'] else 'no'} | "
                     f"{_fmt(r['node_cpu_s'])} | {'met' if r['gap_target_met'] else 'NOT met'} |")
    lines.append("")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=9999)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--deadline", type=float, default=900.0, help="bound on one run, seconds")
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    load = Path("/proc/loadavg").read_text().split()[0]
    runs = []
    for i in range(args.runs):
        row = one_run(args.partitions, args.deadline)
        print(json.dumps(row), flush=True)
        runs.append(row)
    result = {"partitions": args.partitions, "commit": commit, "load_before": load,
              "gap_target_s": GAP_TARGET_S, "runs": runs}
    text = markdown(result)
    print(text)
    if not args.no_save:
        save_result("bulk-create", result, text)


if __name__ == "__main__":
    main()
