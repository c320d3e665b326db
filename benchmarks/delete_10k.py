"""Deleting a 10,000-partition topic on one combined node under a steady produce load: does the
node stall or fence itself, and how long until the files are gone? kafkapy and Apache Kafka.

    python -m benchmarks.delete_10k                          # 10,000 partitions, 1 run per broker
    python -m benchmarks.delete_10k --partitions 2000 --delete-delay-ms 5000
    python -m benchmarks.delete_10k --brokers kafkapy --node-pythonpath /work/main   # other code

Each run starts a fresh node (kafkapy: ``kafkapy server`` defaults; Apache Kafka: its scripts'
heap and GC flags; both with ``log.segment.delete.delay.ms``, the broker default of
file.delete.delay.ms: Kafka's 60 s unless ``--delete-delay-ms``), and runs
``kafkapy.testing.bulk_delete.run_bulk_delete``: the big topic is made and a sample of its
partitions written (untimed), then a confluent-kafka producer sends one acks=all record every
20 ms to a one-partition topic while probes send ApiVersions every 100 ms to the broker and
controller listeners, and DeleteTopics removes the big topic. Both brokers rename a deleted
partition's directory to ``<topic>-<p>.<uuid>-delete`` and remove it after the delay, so the
same directory watch times both. With several runs the brokers alternate.

Reported per run: the DeleteTopics answer time, the time until no partition directory has its
live name (renamed for deletion) and until the renamed directories are gone, the **longest pause
between two steady deliveries** from the request until the directories are gone (target: at most
1 s, issue 27), the listener gaps, whether the broker was fenced (its log), and the node's CPU;
then medians per broker with kafkapy/Kafka ratios. ``--node-pythonpath`` runs the kafkapy node
from another tree (a before/after comparison; the scenario itself runs from this one). Results
go to ``benchmarks/results/delete-10k-<UTC time>.{json,md}``.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import scale_brokers as sb
from kafkapy.testing.bulk_delete import run_bulk_delete

GAP_TARGET_S = 1.0
METRICS = [("delete_s", "DeleteTopics answered, s"), ("renamed_s", "all renamed, s"),
           ("gone_s", "all gone (incl. the delay), s"),
           ("longest_ack_gap_s", "longest steady produce gap, s"),
           ("broker_probe_gap_s", "broker listener gap, s"),
           ("controller_probe_gap_s", "controller listener gap, s"), ("node_cpu_s", "node CPU, s"),
           ("setup_s", "set-up (untimed), s")]


def one_run(broker: str, partitions: int, delete_delay_ms: int, deadline_s: float,
            node_pythonpath: str | None) -> dict[str, Any]:
    env = {"PYTHONPATH": node_pythonpath} if node_pythonpath else {}
    overrides = {"log.segment.delete.delay.ms": str(delete_delay_ms)}
    with tempfile.TemporaryDirectory(prefix="bench-delete-") as d:
        with sb.make_node(broker, Path(d) / "node", overrides=overrides, env=env) as node:
            cpu_before = sb.cpu_s(node.pid)
            report = run_bulk_delete(node, partitions=partitions, deadline_s=deadline_s)
            cpu_after = sb.cpu_s(node.pid)
            node.stop()
            node_log = node.log_path.read_text(errors="replace")
    row = {"broker": broker, **report.as_dict()}
    row["fenced"] = sb.fenced(broker, node_log)
    row["node_cpu_s"] = (None if cpu_before is None or cpu_after is None
                         else round(cpu_after - cpu_before, 2))
    # Both brokers log this line for each partition directory they remove.
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
             f"load before {result['load_before']}, after {result.get('load_after', '?')})", "",
             "| run | broker | set-up s | delete answered s | all renamed s | all gone s "
             "| longest produce gap s | broker listener gap s | controller listener gap s "
             "| fenced | node CPU s | gap ≤ 1 s |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---|"]
    for i, r in enumerate(result["runs"], 1):
        lines.append(f"| {i} | {r.get('broker', 'kafkapy')} | {_fmt(r['setup_s'])} | "
                     f"{_fmt(r['delete_s'])} | "
                     f"{_fmt(r['renamed_s'])} | {_fmt(r['gone_s'])} | "
                     f"{_fmt(r['longest_ack_gap_s'])} | {_fmt(r['broker_probe_gap_s'])} | "
                     f"{_fmt(r['controller_probe_gap_s'])} | {'yes' if r['fenced'] else 'no'} | "
                     f"{_fmt(r['node_cpu_s'])} | {'met' if r['gap_target_met'] else 'NOT met'} |")
        if r.get("error"):
            lines.append(f"|   | error: {r['error']} ||||||||||| ")
    brokers = result.get("brokers") or ["kafkapy"]
    lines += ["", "Medians per broker (lower is better everywhere; a ratio below 1 means kafkapy "
              "took less):", "", *sb.comparison(result["runs"], brokers, METRICS), ""]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--delete-delay-ms", type=int, default=60_000,
                    help="the node's log.segment.delete.delay.ms (Kafka's default: 60000)")
    ap.add_argument("--runs", type=int, default=1, help="runs per broker")
    ap.add_argument("--deadline", type=float, default=1200.0, help="bound on one run, seconds")
    ap.add_argument("--node-pythonpath", default=None,
                    help="run the kafkapy node from this tree (e.g. a checkout of main)")
    sb.add_broker_args(ap)
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    result = {"partitions": args.partitions, "delete_delay_ms": args.delete_delay_ms,
              "node_code": sb.git_commit(args.node_pythonpath or "."),
              "load_before": sb.load_average(), "gap_target_s": GAP_TARGET_S,
              "brokers": sb.parse_brokers(args.brokers)}
    sb.run_and_report("delete-10k", result, args.runs,
                      lambda broker: one_run(broker, args.partitions, args.delete_delay_ms,
                                             args.deadline, args.node_pythonpath),
                      markdown, save=not args.no_save)

if __name__ == "__main__":
    main()
