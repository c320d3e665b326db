"""Normalize two brokers' observations and compare them, honouring the allow-list.

Normalization masks what legitimately differs between any two runs (ids, cluster ids, wall-clock
timestamps, throttle times, ports, hosts). The allow-list (allowlist.toml) names the intended
differences: a whole scenario, or field paths inside it, each with a reason.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ALLOWLIST = HERE / "allowlist.toml"

# Keys whose values differ on every run, whatever the broker.
MASKED_KEYS = {"throttle_time_ms", "cluster_id", "topic_id", "member_id", "client_host", "port", "host",
               "seconds", "traceback",
               # free text for people; the error codes next to them are compared
               "error_message"}
# A timestamp later than 2001-09 is taken as read from a clock; scenarios use small fixed ones.
WALL_CLOCK_MS = 1_000_000_000_000
UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def normalize(value: Any, key: str | None = None) -> Any:
    if key in MASKED_KEYS:
        return "<masked>"
    if isinstance(value, dict):
        return {str(k): normalize(v, str(k)) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [normalize(v) for v in value]
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value >= WALL_CLOCK_MS and key and "timestamp" in key:
        return "<wall-clock>"
    if isinstance(value, str):
        return UUID_RE.sub("<uuid>", value)
    return value


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Field paths (dot-separated) where ``a`` and ``b`` differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            sub = f"{path}.{k}" if path else str(k)
            if k not in a or k not in b:
                out.append(sub)
            else:
                out += differences(a[k], b[k], sub)
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out += differences(x, y, f"{path}[{i}]")
        return out
    return [] if a == b else [path or "<root>"]


def load_allowlist(path: Path = ALLOWLIST) -> dict[str, dict[str, str]]:
    """scenario -> {field path or "*": reason}."""
    data = tomllib.loads(path.read_text()) if path.exists() else {}
    data.pop("flaky", None)
    out: dict[str, dict[str, str]] = {}
    for name, entry in data.items():
        if isinstance(entry, str):
            out[name] = {"*": entry}
        else:
            reason = entry.get("reason", "")
            fields = entry.get("fields", ["*"])
            out[name] = {f: reason for f in fields}
    return out


def load_flaky(path: Path = ALLOWLIST) -> dict[str, str]:
    """scenario -> reason, for differences seen only sometimes and not understood yet (table
    [flaky] of the allow-list): such a scenario is an expected failure when it differs, never a
    pass, and it stays listed in the report until it is understood."""
    data = tomllib.loads(path.read_text()) if path.exists() else {}
    return {name: entry.get("reason", "") for name, entry in data.get("flaky", {}).items()}


def _allowed(path: str, patterns: dict[str, str]) -> str | None:
    for pattern, reason in patterns.items():
        if pattern == "*" or path == pattern or path.startswith(pattern + ".") or path.startswith(pattern + "["):
            return reason
    return None


def verdict(name: str, kafka: dict, kafkapy: dict, allow: dict[str, dict[str, str]]) -> dict:
    """The comparison of one scenario: status same / allowed / differs, the differing paths, and
    the allow-list's reasons (and whether an entry is stale: listed but no longer differing)."""
    diffs = differences(normalize(kafka.get("observed")), normalize(kafkapy.get("observed")))
    patterns = allow.get(name, {})
    unexplained = [d for d in diffs if _allowed(d, patterns) is None]
    reasons = sorted({_allowed(d, patterns) for d in diffs} - {None})
    if not diffs:
        status = "same"
    elif unexplained:
        status = "differs"
    else:
        status = "allowed"
    stale = [p for p in patterns if not any(_allowed(d, {p: ""}) is not None for d in diffs)]
    return {"status": status, "paths": diffs, "unexplained": unexplained, "reasons": reasons,
            "stale": stale}
