"""A bulk CreateTopics on one combined node under a steady produce load: does the node stall?
kafkapy and Apache Kafka, the same scenario, interleaved.

    python -m benchmarks.bulk_create                       # 9,999 partitions, 1 run per broker
    python -m benchmarks.bulk_create --partitions 5000 --runs 3
    python -m benchmarks.bulk_create --brokers kafkapy     # kafkapy only

Each run starts a fresh node (kafkapy: ``kafkapy server`` defaults; Apache Kafka: its scripts'
heap and GC flags; both combined mode, data on disk in a temp dir) and runs
``kafkapy.testing.bulk_create.run_bulk_create``: a confluent-kafka producer sends one acks=all
record every 20 ms to a one-partition topic throughout; probes send ApiVersions every 100 ms to
the broker listener and to the controller listener (the path of the broker's heartbeats and of
the metadata quorum; Kafka's controller listener answers ApiVersions too); a CreateTopics of
``--partitions`` partitions (replication factor 1) goes in; once every partition's log directory
exists, one record goes to each of a sample of 100 partitions. With several runs the brokers
alternate (A B, B A, ...).

Reported per run: the CreateTopics answer time, the time until every partition had its log and
until the sample had stored its records, the longest pause between two steady deliveries
(target: at most 2 s), the longest wait for an answer on each listener, whether the broker was
fenced (its log: kafkapy's broker fencing itself, Kafka's controller fencing it for a timed-out
session), and the node's CPU; then the medians per broker with kafkapy/Kafka ratios.
Results go to ``benchmarks/results/bulk-create-<UTC time>.{json,md}``.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import scale_brokers as sb
from kafkapy.testing.bulk_create import run_bulk_create

GAP_TARGET_S = 2.0
METRICS = [("create_s", "CreateTopics answered, s"), ("all_logs_s", "all logs made, s"),
           ("sample_written_s", "sample written, s"),
           ("longest_ack_gap_s", "longest steady produce gap, s"),
           ("broker_probe_gap_s", "broker listener gap, s"),
           ("controller_probe_gap_s", "controller listener gap, s"), ("node_cpu_s", "node CPU, s")]


def one_run(broker: str, partitions: int, deadline_s: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-bulk-") as d:
        with sb.make_node(broker, Path(d) / "node") as node:
            cpu_before = sb.cpu_s(node.pid)
            report = run_bulk_create(node, partitions=partitions, deadline_s=deadline_s)
            cpu_after = sb.cpu_s(node.pid)
            node.stop()
            node_log = node.log_path.read_text(errors="replace")
    row = {"broker": broker, **report.as_dict()}
    row["fenced"] = sb.fenced(broker, node_log)
    row["node_cpu_s"] = (None if cpu_before is None or cpu_after is None
                         else round(cpu_after - cpu_before, 2))
    row["gap_target_met"] = report.longest_ack_gap_s <= GAP_TARGET_S and not report.steady_failures
    return row


def _fmt(v: Any) -> str:
    return "-" if v is None else f"{v:.2f}" if isinstance(v, float) else str(v)


def markdown(result: dict[str, Any]) -> str:
    lines = [f"# Bulk CreateTopics under load ({result['partitions']} partitions, commit "
             f"{result['commit']}, load before {result['load_before']}, after "
             f"{result.get('load_after', '?')})", "",
             "| run | broker | create answered s | all logs made s | sample written s "
             "| longest produce gap s | broker listener gap s | controller listener gap s "
             "| fenced | node CPU s | gap ≤ 2 s |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|---:|---|"]
    for i, r in enumerate(result["runs"], 1):
        lines.append(f"| {i} | {r.get('broker', 'kafkapy')} | {_fmt(r['create_s'])} | "
                     f"{_fmt(r['all_logs_s'])} | {_fmt(r['sample_written_s'])} | "
                     f"{_fmt(r['longest_ack_gap_s'])} | {_fmt(r['broker_probe_gap_s'])} | "
                     f"{_fmt(r['controller_probe_gap_s'])} | {'yes' if r['fenced'] else 'no'} | "
                     f"{_fmt(r['node_cpu_s'])} | {'met' if r['gap_target_met'] else 'NOT met'} |")
        if r.get("create_error"):
            lines.append(f"|   | error: {r['create_error']} ||||||||||")
    brokers = result.get("brokers") or ["kafkapy"]
    lines += ["", "Medians per broker (lower is better everywhere; a ratio below 1 means kafkapy "
              "took less):", "", *sb.comparison(result["runs"], brokers, METRICS), ""]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=9999)
    ap.add_argument("--runs", type=int, default=1, help="runs per broker")
    ap.add_argument("--deadline", type=float, default=900.0, help="bound on one run, seconds")
    sb.add_broker_args(ap)
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    result = {"partitions": args.partitions, "commit": sb.git_commit(),
              "load_before": sb.load_average(), "gap_target_s": GAP_TARGET_S,
              "brokers": sb.parse_brokers(args.brokers)}
    sb.run_and_report("bulk-create", result, args.runs,
                      lambda broker: one_run(broker, args.partitions, args.deadline), markdown,
                      save=not args.no_save)

if __name__ == "__main__":
    main()
