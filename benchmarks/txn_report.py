"""The transactions section of the benchmark report: transactional against idempotent produce on each
broker (txn/idempotent), the cross-broker ratios, and commit latency. A broker that cannot do
transactions shows its "unsupported: <error>" status in its cell instead of a number."""

from __future__ import annotations

from typing import Any

from benchmarks.report import broker_comparison, ratio

CELL_CHARS = 100  # an error text is cut here so the table stays readable


def _kind_names(summary: dict, first: str, kind: str) -> list[str]:
    return [n for n, s in summary.items() if (s.get(first, {}).get("_meta") or {}).get("kind") == kind
            or any((slot.get("_meta") or {}).get("kind") == kind for slot in s.values())]


def _cell(slot: dict[str, Any], metric: str) -> float | str | None:
    """The median of `metric`, or why there is none: the broker's unsupported status or its error."""
    status = slot.get("status") or ""
    if status.startswith("unsupported"):
        return _short(status)
    if slot.get("errors") and not slot.get("n"):
        return _short(f"error: {slot['errors'][0]}")
    value = slot.get(metric)
    return value if isinstance(value, (int, float)) else None


def _short(text: str) -> str:
    text = text.replace("|", "/").replace("\n", " ")
    return text if len(text) <= CELL_CHARS else text[:CELL_CHARS - 1] + "…"


def transactions_markdown(result: dict[str, Any]) -> list[str]:
    """Markdown lines for the transactions workloads of `result` ([] when none ran)."""
    brokers: list[str] = result["brokers_order"]
    summary = result["summary"]
    first = brokers[0]
    idem = _kind_names(summary, first, "idempotent-produce")
    txn = _kind_names(summary, first, "txn-produce")
    lat = _kind_names(summary, first, "txn-latency")
    if not (idem or txn or lat):
        return []
    lines: list[str] = []

    def per_broker(name: str | None, metric: str) -> dict[str, float | str | None]:
        by_broker = summary.get(name, {}) if name else {}
        return {b: _cell(by_broker.get(b, {}), metric) for b in brokers}

    if idem or txn:
        i_name, t_name = (idem or [None])[0], (txn or [None])[0]
        rows: list[tuple[str, dict[str, Any]]] = []
        for metric, label in (("mb_s", "MB/s"), ("msgs_s", "records/s"),
                              ("cpu_s_per_gb", "broker CPU-s/GB")):
            i_vals, t_vals = per_broker(i_name, metric), per_broker(t_name, metric)
            rows.append((f"idempotent, {label}", i_vals))
            rows.append((f"transactional, {label}", t_vals))
            if metric != "cpu_s_per_gb":
                rows.append((f"transactional / idempotent, {label}",
                             {b: _txn_over_idem(t_vals[b], i_vals[b]) for b in brokers}))
        rows.append(("commit_transaction() p50 ms (1,000-record transactions)",
                     per_broker(t_name, "commit_p50_ms")))
        rows.append(("commit_transaction() p99 ms (1,000-record transactions)",
                     per_broker(t_name, "commit_p99_ms")))
        lines += [
            "## Transactions: transactional against idempotent produce",
            "",
            "1 KiB records, acks=all, enable.idempotence=true for both, one partition; the "
            "transactional producer commits every 1,000 records (`init_transactions()` is set-up, "
            "not timed). A broker that cannot do transactions shows why.",
            "",
            *broker_comparison(_once(rows), brokers, 2),
            "",
        ]
    if lat:
        name = lat[0]
        rows = [(label, per_broker(name, metric)) for metric, label in (
            ("commit_p50_ms", "commit_transaction() p50 ms"),
            ("commit_p99_ms", "commit_transaction() p99 ms"),
            ("txn_p50_ms", "whole transaction (begin, 10 records, commit) p50 ms"),
            ("txn_p99_ms", "whole transaction p99 ms"),
            ("txn_s", "transactions/s"),
            ("cpu_s", "broker CPU-s"))]
        lines += ["## Transactions: commit latency (10 × 1 KiB per transaction, linger.ms=0)", "",
                  *broker_comparison(_once(rows), brokers, 2), ""]
    return lines


def _txn_over_idem(t: float | str | None, i: float | str | None) -> float | str | None:
    if isinstance(t, str):
        return t
    if isinstance(t, (int, float)) and isinstance(i, (int, float)):
        return ratio(t, i)
    return None


def _once(rows: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    """A broker's reason (unsupported: ..., error: ...) in full in its first cell of a table, then
    only its first word, so one failure does not fill every row."""
    seen: set[tuple[str, str]] = set()
    out = []
    for label, values in rows:
        shown = dict(values)
        for broker, v in values.items():
            if isinstance(v, str):
                if (broker, v) in seen:
                    shown[broker] = v.split(":", 1)[0]
                seen.add((broker, v))
        out.append((label, shown))
    return out
