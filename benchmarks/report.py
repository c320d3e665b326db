"""Turn the runs of one benchmark into medians, ratios (kafkapy against each other broker), target
checks and a markdown report."""

from __future__ import annotations

import statistics
from typing import Any

# metric -> (label, format, better): "higher" or "lower" is better; it only decides the target checks.
THROUGHPUT_KINDS = ("produce", "consume", "java-produce", "java-consume")
TXN_KINDS = ("idempotent-produce", "txn-produce", "txn-latency")  # reported by benchmarks.txn_report


def median(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarize(runs: list[dict], brokers: list[str]) -> dict[str, dict[str, dict[str, Any]]]:
    """workload -> broker -> {metric: median over the repetitions, "n": ok runs, "errors": [...]}"""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for run in runs:
        slot = out.setdefault(run["workload"], {}).setdefault(run["broker"], {"_values": {}, "errors": []})
        if run.get("error"):
            slot["errors"].append(run["error"].splitlines()[0][:300])
            continue
        for key, value in run["metrics"].items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                slot["_values"].setdefault(key, []).append(value)
            elif key == "status":
                slot.setdefault("statuses", []).append(value)
    for workload in out.values():
        for slot in workload.values():
            values = slot.pop("_values")
            slot["n"] = max((len(v) for v in values.values()), default=0)
            for key, vals in values.items():
                slot[key] = median(vals)
                slot[f"{key}_min"], slot[f"{key}_max"] = min(vals), max(vals)
            statuses = slot.pop("statuses", None)
            if statuses:
                # "n/a (...)" wins: a broker without groups is not "ok" because of one lucky run.
                slot["status"] = next((s for s in statuses if s.startswith(("n/a", "unsupported"))),
                                      statuses[-1])
    return out


def ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return a / b


def _fmt(v: Any, digits: int = 1) -> str:
    if v is None:
        return "–"
    if isinstance(v, str):
        return v
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 100:
        return f"{v:.0f}"
    return f"{v:.{digits}f}"


def _fmt_ratio(v: float | None) -> str:
    return "–" if v is None else f"{v:.2f}×"


def check_targets(summary: dict, a: str, b: str) -> list[dict[str, Any]]:
    """The issue's targets, each checked on every workload it applies to (a = kafkapy, b = Tansu)."""
    checks: list[dict[str, Any]] = []

    def per_workload(kinds: tuple[str, ...], metric: str, limit: float, better: str, label: str,
                     size: int | None = None, absolute: bool = False) -> None:
        for name, by_broker in summary.items():
            meta = by_broker.get(a, {}).get("_meta") or {}
            if meta.get("kind") not in kinds or (size is not None and meta.get("size") != size):
                continue
            va = by_broker.get(a, {}).get(metric)
            value = va if absolute else ratio(va, by_broker.get(b, {}).get(metric))
            ok = None if value is None else (value >= limit if better == "higher" else value <= limit)
            checks.append({"target": label, "workload": name, "value": value, "ok": ok,
                           "absolute": absolute})

    per_workload(("produce", "java-produce"), "cpu_s_per_gb", 1.0, "lower",
                 "broker CPU-s/GB produced ≤ 1.0× Tansu")
    per_workload(("consume", "java-consume"), "cpu_s_per_gb", 0.5, "lower",
                 "broker CPU-s/GB consumed ≤ 0.5× Tansu")
    per_workload(THROUGHPUT_KINDS, "mb_s", 1.0, "higher", "throughput (MB/s) ≥ 1.0× Tansu", size=1024)
    per_workload(("produce", "consume"), "msgs_s", 0.8, "higher", "100 B msgs/s ≥ 0.8× Tansu", size=100)
    per_workload(("latency",), "p99_ms", 5.0, "lower", "p99 ≤ 5 ms at 2,000 msg/s", absolute=True)
    per_workload(("group",), "first_record_s", 1.0, "lower",
                 "subscribe → first record ≤ 1 s (once groups exist)", absolute=True)
    per_workload(("partitions",), "rss_after_mb", 300.0, "lower",
                 "broker RSS with 1,000 partitions ≤ 300 MB", absolute=True)
    return checks


def markdown(result: dict[str, Any]) -> str:
    """The run as markdown: one column per broker, then the first broker's ratio to each other one
    (kafkapy/apache-kafka, kafkapy/tansu), so every table reads against the JVM broker too."""
    brokers: list[str] = result["brokers_order"]
    summary = result["summary"]
    a, others = brokers[0], brokers[1:]
    meta = result["meta"]
    lines = [
        f"# Benchmark {meta['started']}",
        "",
        f"{', '.join(f'`{n}` ({d})' for n, d in result['brokers'].items())}; "
        f"{meta['repetitions']} repetition(s), interleaved, medians; "
        f"{'quick volumes' if meta['quick'] else 'default volumes'}; "
        f"kafkapy commit `{meta['git'].get('commit', '')[:10]}`"
        f"{' (+ uncommitted broker changes)' if meta['git'].get('dirty') else ''}; "
        f"{meta['host']['cpus']} CPUs, took {meta['elapsed_s']:.0f} s; 1-minute load average "
        f"during the runs {meta.get('load_range', '?')} (the box is shared: high load means noisy "
        f"figures).",
        "",
    ]
    if not others:
        lines.append("(one broker only: no ratios)\n")

    def cell(name: str, broker: str, metric: str, digits: int = 1) -> str:
        slot = summary.get(name, {}).get(broker, {})
        if slot.get("errors") and not slot.get("n"):
            return "error"
        return _fmt(slot.get(metric), digits)

    def rcells(name: str, metric: str) -> list[str]:
        s = summary.get(name, {})
        return [_fmt_ratio(ratio(s.get(a, {}).get(metric), s.get(b, {}).get(metric))) for b in others]

    def header(first: str) -> list[str]:
        cols = [first, *brokers, *(f"{a}/{b}" for b in others)]
        return ["| " + " | ".join(cols) + " |", "|---|" + "---:|" * (len(cols) - 1)]

    def row(label: str, values: list[str]) -> str:
        return "| " + " | ".join([label, *values]) + " |"

    tp = [n for n, s in summary.items() if (s.get(a, {}).get("_meta") or {}).get("kind") in THROUGHPUT_KINDS]
    if tp:
        lines += [
            "## Throughput",
            "",
            "MB/s and msgs/s are client-side; CPU-s/GB is broker CPU (utime+stime, all threads) per "
            "GB of record values moved (medians of the repetitions); peak RSS is the broker's VmHWM "
            "during a run, the highest of the repetitions (every run's value is in the JSON).",
            "",
        ]
        for metric, label, digits in (("mb_s", "MB/s", 1), ("msgs_s", "msgs/s", 1),
                                      ("cpu_s_per_gb", "broker CPU-s/GB", 2),
                                      ("peak_rss_mb_max", "broker peak RSS, MB", 1)):
            lines += [f"### {label}", "", *header("workload")]
            for n in tp:
                lines.append(row(n, [cell(n, br, metric, digits) for br in brokers] + rcells(n, metric)))
            lines.append("")

    def metric_table(title: str, n: str, metrics: tuple[tuple[str, str], ...], digits: int) -> None:
        nonlocal lines
        lines += [title, "", *header("metric")]
        for metric, label in metrics:
            lines.append(row(label, [cell(n, br, metric, digits) for br in brokers] + rcells(n, metric)))
        lines.append("")

    for n, s in summary.items():
        kind = (s.get(a, {}).get("_meta") or {}).get("kind")
        if kind == "latency":
            metric_table("## Produce latency (2,000 msg/s, 1 KiB, linger.ms=0, acks=1)", n,
                         (("p50_ms", "p50 ms"), ("p99_ms", "p99 ms"), ("p999_ms", "p99.9 ms"),
                          ("max_ms", "max ms"), ("achieved_rate", "achieved msg/s"),
                          ("cpu_s", "broker CPU-s"), ("peak_rss_mb", "peak RSS MB")), 2)
        elif kind == "partitions":
            metric_table("## 1,000 partitions (10 topics × 100)", n,
                         (("create_s", "CreateTopics answered, s"),
                          ("create_until_leaders_s", "… and all leaders in metadata, s"),
                          ("metadata_first_s", "full metadata (first), s"),
                          ("metadata_best_s", "full metadata (best of 3), s"),
                          ("partitions", "partitions seen"),
                          ("cpu_s", "broker CPU-s"),
                          ("rss_after_mb", "broker RSS after, MB"),
                          ("peak_rss_mb", "broker peak RSS, MB")), 3)
        elif kind == "group":
            def gcell(broker: str) -> str:
                slot = s.get(broker, {})
                status = slot.get("status", "")
                if status.startswith("n/a") or slot.get("first_record_s") is None:
                    return status or ("error" if slot.get("errors") else "–")
                return _fmt(slot.get("first_record_s"), 3)

            lines += ["## Group consumer: subscribe → first record", "", *header("metric"),
                      row("seconds", [gcell(br) for br in brokers] + rcells(n, "first_record_s")), ""]
        elif kind == "rebalance":
            metric_table("## Group rebalance, 10 members (9 settle, a 10th joins)", n,
                         (("settle_s", "9 members: subscribe -> all partitions assigned, s"),
                          ("rebalance_s", "10th member joins -> all 10 reassigned, s")), 3)

    lines += transactions_section(result)
    checks = result.get("targets") or []
    if checks:
        lines += [f"## Targets (from the issue; ratios against {result.get('targets_against', 'tansu')})",
                  "", "| target | workload | value | met |", "|---|---|---:|:---:|"]
        for c in checks:
            v = c["value"]
            shown = "–" if v is None else (_fmt(v, 2) if c["absolute"] else _fmt_ratio(v))
            met = {True: "yes", False: "**no**", None: "n/a"}[c["ok"]]
            lines.append(f"| {c['target']} | {c['workload']} | {shown} | {met} |")
        lines.append("")

    errors = [(n, br, e) for n, s in summary.items() for br, slot in s.items() for e in slot.get("errors", [])]
    if errors:
        lines += ["## Errors", ""]
        lines += [f"- {n} on {br}: `{e}`" for n, br, e in errors]
        lines.append("")
    return "\n".join(lines)


def transactions_section(result: dict[str, Any]) -> list[str]:
    from benchmarks.txn_report import transactions_markdown  # it builds on this module
    return transactions_markdown(result)


def broker_comparison(rows: list[tuple[str, dict[str, Any]]], brokers: list[str],
                      digits: int = 2, *, first: str = "metric") -> list[str]:
    """A markdown table with one row per metric, a column per broker, then the first broker's
    ratio to each other one (kafkapy/apache-kafka). A value that is a string (an "n/a (why)"
    cell) is shown as it is and gives no ratio; ``first`` heads the label column."""
    a, others = brokers[0], brokers[1:]
    cols = [first, *brokers, *(f"{a}/{b}" for b in others)]
    lines = ["| " + " | ".join(cols) + " |", "|---|" + "---:|" * (len(cols) - 1)]
    for label, values in rows:
        def number(broker: str) -> float | None:
            v = values.get(broker)
            return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None
        cells = [_fmt(values.get(b), digits) for b in brokers]
        cells += [_fmt_ratio(ratio(number(a), number(b))) for b in others]
        lines.append("| " + " | ".join([label, *cells]) + " |")
    return lines


def load_range(samples: list[float]) -> str:
    """The 1-minute load averages sampled during a run, as "low–high" ("?" when none were)."""
    return f"{min(samples):.1f}–{max(samples):.1f}" if samples else "?"


Cell = float | str | None
