"""A pytest plugin for `make test`'s integration stage: the longest test files start first.

pytest-xdist's ``--dist loadfile`` hands each worker a whole file at a time, in the order the
files were collected (``--no-loadscope-reorder``; by default it would order them by their number
of tests, which puts a file holding one three-minute chaos test last). With two workers, a long
file that starts last runs alone while the other worker has nothing left to do; started first,
the short files fill in around it (longest processing time first).

``SLOWEST`` lists the files that take a minute or more on the 2-core CI machine, longest first
(setup, call and teardown summed per file); every other file keeps its place after them.
``tests/unit/test_slow_first.py`` fails when a listed file no longer exists.

Refreshing the list, after a full ``make test`` on the CI machine (the integration stage writes
its per-test times to ``.tools/integration-junit.xml``)::

    .venv/bin/python tests/slow_first.py .tools/integration-junit.xml

prints the seconds per file, longest first (``*``: listed now), then a ``SLOWEST`` of the files
that took a minute or more, to paste here. Several reports are summed (runs differ by tens of
seconds on a loaded machine); the saved output of a ``pytest --durations=0`` run works too.
"""

from __future__ import annotations

import argparse
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SLOWEST = (
    "tests/integration/test_stretch_recipes.py",
    "tests/integration/test_multi_dc_recipes.py",
    "tests/integration/test_eos_harness.py",
    "tests/integration/test_mirrormaker2.py",
    "tests/integration/test_replication_chaos.py",
    "compat-tests/test_groups.py",
    # Issue 25's stock-client tests (estimated: Kafka 4.4 and kafkapy each, 1-2 min per test).
    "compat-tests/test_consumer_protocol.py",
    "compat-tests/test_share_groups.py",
    "tests/integration/test_bulk_create.py",
    "compat-tests/kafka_tools/test_kafka_tools.py",
    "tests/integration/test_admin_cli.py",
    "compat-tests/test_configs_live.py",
    "tests/integration/test_images.py",
    "compat-tests/test_tiered_clients.py",
    "tests/integration/test_eos_streams.py",
    "tests/integration/test_data_dir_safety.py",
    "tests/integration/test_transactions.py",
    "tests/integration/test_cluster_launcher.py",
    "tests/integration/test_replication.py",
    "tests/integration/test_elr.py",
    "compat-tests/test_roundtrip.py",
    "tests/integration/test_tiered_broker.py",
    "tests/integration/test_secure_cluster.py",
)


def file_rank(nodeid: str) -> int:
    """Where a test's file goes: its place in ``SLOWEST``, or after all of them."""
    path = nodeid.split("::", 1)[0]
    for rank, slow in enumerate(SLOWEST):
        if path.endswith(slow):
            return rank
    return len(SLOWEST)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # sorted() is stable: tests within a file, and the files not listed, keep their order.
    items[:] = sorted(items, key=lambda item: file_rank(item.nodeid))


#: A line of pytest's ``--durations`` table: "12.34s call     tests/x/test_y.py::test_z[a b]".
_DURATION_LINE = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s+(?:setup|call|teardown)\s+([^\s:]+)::")


def _file_of_classname(classname: str, root: Path) -> str:
    """The test file a junit ``classname`` ("compat-tests.kafka_tools.test_kafka_tools.TestX")
    stands for: its longest dotted prefix that names a file under ``root``."""
    parts = classname.split(".")
    for n in range(len(parts), 0, -1):
        path = "/".join(parts[:n]) + ".py"
        if (root / path).is_file():
            return path
    return classname


def seconds_per_file(report: str, root: Path = ROOT) -> dict[str, float]:
    """Seconds per test file in one run's report: a ``--junitxml`` file, or the text of a
    ``--durations=0`` run (only the tests it lists count: ``--durations=40`` misses many)."""
    text = Path(report).read_text(encoding="utf-8", errors="replace")
    totals: dict[str, float] = {}
    if text.lstrip().startswith("<"):
        for case in ET.fromstring(text).iter("testcase"):
            path = _file_of_classname(case.get("classname", ""), root)
            totals[path] = totals.get(path, 0.0) + float(case.get("time") or 0)
    else:
        for line in text.splitlines():
            match = _DURATION_LINE.match(line)
            if match:
                totals[match[2]] = totals.get(match[2], 0.0) + float(match[1])
    return totals


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Seconds per test file from pytest reports "
                                     "(--junitxml files or --durations=0 output), longest first.")
    parser.add_argument("reports", nargs="+", help="junit XML files or saved pytest output")
    parser.add_argument("--min-seconds", type=float, default=60.0,
                        help="the files the printed SLOWEST keeps (default: 60)")
    args = parser.parse_args(argv)
    totals: dict[str, float] = {}
    for report in args.reports:
        for path, seconds in seconds_per_file(report).items():
            totals[path] = totals.get(path, 0.0) + seconds
    ranked = sorted(totals.items(), key=lambda item: -item[1])
    for path, seconds in ranked:
        print(f"{seconds:9.1f}s {'*' if path in SLOWEST else ' '} {path}")
    print("\nSLOWEST = (")
    for path, seconds in ranked:
        if seconds >= args.min_seconds * len(args.reports):
            print(f'    "{path}",')
    print(")")


if __name__ == "__main__":
    main()
