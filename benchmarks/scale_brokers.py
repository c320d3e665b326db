"""What the one-node scale benchmarks (bulk_create, restart_10k, delete_10k, tiered_read) share:
the broker choice, a fresh node of either broker, the interleaved run order, and the markdown of
per-broker medians with kafkapy/Kafka ratios.

Each of those benchmarks runs one scenario against a fresh node per run, so the brokers here are
always started here (no ``--bootstrap``): kafkapy (``KafkaNode``) and Apache Kafka
(``ApacheKafkaNode``: combined mode, its scripts' 1 GiB heap and GC flags, its distribution's INFO
logging, data in a temp dir on the same disk).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from benchmarks import report
from benchmarks.results_io import save_result
from kafkapy.testing.apache_kafka import BENCH_HEAP, ApacheKafkaNode
from kafkapy.testing.node import KafkaNode, _ProcessNode

BROKERS = ("kafkapy", "apache-kafka")
DEFAULT_BROKERS = ",".join(BROKERS)
#: What each broker logs when it is fenced for a missed heartbeat (kafkapy's broker fences
#: itself; Kafka's controller logs that it fenced the broker because its session timed out).
FENCE_MARKERS: dict[str, tuple[str, ...]] = {
    "kafkapy": ("fencing ourselves", "Fenced broker", "lost contact with the controllers"),
    "apache-kafka": ("because its session has timed out",),
}


def add_broker_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--brokers", default=DEFAULT_BROKERS,
                    help="brokers in order, comma-separated; the first is the numerator of the "
                         f"ratios (default {DEFAULT_BROKERS})")


def parse_brokers(text: str) -> list[str]:
    """The ``--brokers`` list, checked: each known, none twice."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in BROKERS]
    if unknown or not names or len(set(names)) != len(names):
        raise SystemExit(f"--brokers takes a comma-separated list of {', '.join(BROKERS)}, each "
                         f"once (got {text!r})")
    return names


def run_order(brokers: list[str], runs: int) -> list[tuple[int, str]]:
    """(run, broker) in the order to run them: A B, then B A, ... so no broker always goes first."""
    out = []
    for i in range(runs):
        order = brokers if i % 2 == 0 else list(reversed(brokers))
        out += [(i, b) for b in order]
    return out


def make_node(broker: str, workdir: Path, *, overrides: Mapping[str, object] = (),
              startup_timeout: float = 120.0, env: Mapping[str, str] | None = None) -> _ProcessNode:
    """A fresh, not yet started node of ``broker`` in ``workdir``; ``env`` applies to kafkapy."""
    if broker == "kafkapy":
        return KafkaNode(workdir, startup_timeout=startup_timeout, overrides=dict(overrides),
                         env=env)
    if broker == "apache-kafka":
        return ApacheKafkaNode(workdir, overrides=dict(overrides), heap=BENCH_HEAP,
                               startup_timeout=startup_timeout)
    raise ValueError(f"unknown broker {broker!r}")


def fenced(broker: str, node_log: str) -> bool:
    return any(marker in node_log for marker in FENCE_MARKERS[broker])


def cpu_s(pid: int | None) -> float | None:
    """utime+stime of one process (all its threads), in seconds."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def medians(runs: list[dict[str, Any]], brokers: list[str],
            metrics: Iterable[str]) -> dict[str, dict[str, Any]]:
    """metric -> broker -> the median of that broker's runs (None when no run had a number)."""
    out: dict[str, dict[str, Any]] = {}
    for metric in metrics:
        out[metric] = {}
        for b in brokers:
            vals = [r.get(metric) for r in runs if r.get("broker") == b]
            out[metric][b] = report.median([v for v in vals if isinstance(v, (int, float))
                                            and not isinstance(v, bool)])
    return out


def comparison(runs: list[dict[str, Any]], brokers: list[str],
               metrics: list[tuple[str, str]], digits: int = 2) -> list[str]:
    """The markdown table of the medians of ``metrics`` ((key, label) pairs), with ratios."""
    meds = medians(runs, brokers, [k for k, _ in metrics])
    return report.broker_comparison([(label, meds[key]) for key, label in metrics], brokers, digits)


def git_commit(code_dir: str = ".") -> str:
    done = subprocess.run(["git", "-C", code_dir, "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def load_average() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


def _sigterm(_signo: int, _frame: Any) -> None:
    raise KeyboardInterrupt


def stop_on_sigterm() -> None:
    """SIGTERM unwinds like Ctrl-C, so every node's context manager stops its process group."""
    signal.signal(signal.SIGTERM, _sigterm)


def run_and_report(name: str, result: dict[str, Any], runs: int,
                   one_run: Callable[[str], dict[str, Any]],
                   markdown: Callable[[dict[str, Any]], str], *, save: bool = True) -> None:
    """Run ``one_run(broker)`` for every broker of ``result["brokers"]`` in :func:`run_order`,
    adding each row to ``result["runs"]``; Ctrl-C or SIGTERM ends the runs early (every node is
    already stopped by its context manager) and what was measured is still reported. Prints the
    markdown and saves ``results/<name>-<UTC>.{json,md}``."""
    stop_on_sigterm()
    result.setdefault("runs", [])
    try:
        for _, broker in run_order(result["brokers"], runs):
            row = one_run(broker)
            print(json.dumps(row), flush=True)
            result["runs"].append(row)
    except KeyboardInterrupt:
        print("interrupted: the nodes are stopped; writing what was measured", flush=True)
        result["interrupted"] = True
    result["load_after"] = load_average()
    text = markdown(result)
    print(text)
    if save and result["runs"]:
        save_result(name, result, text)
