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


def test_seconds_per_file_from_a_junit_report_and_from_durations_output(tmp_path) -> None:
    for path in ("tests/integration/test_a.py", "compat-tests/kafka_tools/test_tools.py"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    junit = ('<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">'
             '<testcase classname="tests.integration.test_a" name="test_x" time="61.5" />'
             '<testcase classname="tests.integration.test_a" name="test_y[1]" time="0.5" />'
             '<testcase classname="compat-tests.kafka_tools.test_tools.TestTools" name="test_z" '
             'time="7.25" /></testsuite></testsuites>')
    durations = ("=== slowest durations ===\n"
                 "61.50s call     tests/integration/test_a.py::test_x\n"
                 "0.50s setup    tests/integration/test_a.py::test_y[a b]\n"
                 "7.25s teardown compat-tests/kafka_tools/test_tools.py::TestTools::test_z\n"
                 "12 passed in 70.00s\n")
    for name, text in (("junit.xml", junit), ("durations.txt", durations)):
        (tmp_path / name).write_text(text)
        assert slow_first.seconds_per_file(str(tmp_path / name), tmp_path) == {
            "tests/integration/test_a.py": 62.0, "compat-tests/kafka_tools/test_tools.py": 7.25}, name


def test_the_refresh_prints_files_longest_first_and_a_list_to_paste(tmp_path, capsys) -> None:
    report = tmp_path / "durations.txt"
    report.write_text("90.00s call     tests/integration/test_new.py::test_x\n"
                      "75.00s call     tests/integration/test_eos_harness.py::test_y\n"
                      "3.00s call     tests/integration/test_quick.py::test_z\n")
    slow_first.main([str(report)])
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == ["     90.0s   tests/integration/test_new.py",
                         "     75.0s * tests/integration/test_eos_harness.py",
                         "      3.0s   tests/integration/test_quick.py"]
    assert lines[4:] == ["SLOWEST = (", '    "tests/integration/test_new.py",',
                         '    "tests/integration/test_eos_harness.py",', ")"]
