"""tests/slow_first.py: the integration stage's longest files are handed out first."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("slow_first", ROOT / "tests" / "slow_first.py")
slow_first = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(slow_first)


def test_listed_files_go_first_longest_first_and_the_rest_keep_their_order() -> None:
    ids = ["compat-tests/test_kcat.py::test_a", "tests/integration/test_replication_chaos.py::test_x",
           "compat-tests/test_kcat.py::test_b", "tests/integration/test_lifecycle.py::test_y",
           "tests/integration/test_eos_harness.py::test_z[1]", "tests/integration/test_eos_harness.py::test_z[2]"]
    items = [SimpleNamespace(nodeid=i) for i in ids]
    slow_first.pytest_collection_modifyitems(items)
    assert [i.nodeid for i in items] == [
        "tests/integration/test_eos_harness.py::test_z[1]", "tests/integration/test_eos_harness.py::test_z[2]",
        "tests/integration/test_replication_chaos.py::test_x",
        "compat-tests/test_kcat.py::test_a", "compat-tests/test_kcat.py::test_b",
        "tests/integration/test_lifecycle.py::test_y"]


def test_every_listed_file_exists() -> None:
    for path in slow_first.SLOWEST:
        assert (ROOT / path).is_file(), path
