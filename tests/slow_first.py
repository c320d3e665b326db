"""A pytest plugin for `make test`'s integration stage: the longest test files start first.

pytest-xdist's ``--dist loadfile`` hands each worker a whole file at a time, in the order the
files were collected (``--no-loadscope-reorder``; by default it would order them by their number
of tests, which puts a file holding one three-minute chaos test last). With two workers, a long
file that starts last runs alone while the other worker has nothing left to do; started first,
the short files fill in around it (longest processing time first).

``SLOWEST`` lists the files that take a minute or more on the 2-core CI machine, longest first
(from ``--durations=0``, summed per file); every other file keeps its place after them.
"""

from __future__ import annotations

import pytest

SLOWEST = (
    "tests/integration/test_eos_harness.py",
    "tests/integration/test_replication_chaos.py",
    "compat-tests/test_groups.py",
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
    "compat-tests/test_roundtrip.py",
    "tests/integration/test_tiered_broker.py",
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
