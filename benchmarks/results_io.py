"""Where benchmark runs are kept: ``benchmarks/results/<name>-<UTC time>.json`` and ``.md``."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def save_result(name: str, result: dict[str, Any], table: str | None = None) -> Path:
    """Write one run's numbers (and its markdown table, when given); returns the JSON path."""
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}-{stamp}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    if table is not None:
        path.with_suffix(".md").write_text(table)
    return path
