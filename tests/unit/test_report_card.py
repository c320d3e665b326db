"""The report card's verdicts: what breaks CI and what only asks for the allow-list to grow."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("report_card", ROOT / "compat-tests" / "report_card.py")
report_card = importlib.util.module_from_spec(_spec)
sys.modules["report_card"] = report_card  # dataclasses look their module up there
_spec.loader.exec_module(report_card)
Outcome = report_card.Outcome


def results(**statuses: str) -> list:
    return [Outcome(test_id, status, 1.0) for test_id, status in statuses.items()]


def test_an_allowed_test_that_fails_is_a_regression():
    s = report_card.classify("x", "quick", results(a="passed", b="failed"),
                             allowed=["a", "b"], documented={"b"})
    assert s.regressions == ["b"] and not s.ok


def test_a_passing_test_off_the_list_is_reported_but_not_a_failure():
    s = report_card.classify("x", "quick", results(a="passed", b="passed"), allowed=["a"],
                             documented=set())
    assert s.newly_passing == ["b"] and s.ok


def test_every_test_that_does_not_pass_needs_a_finding():
    s = report_card.classify("x", "quick", results(a="skipped", b="failed"), allowed=[],
                             documented={"a"})
    assert s.undocumented == ["b"] and not s.ok


def test_quick_mode_need_not_run_every_allowed_test_but_full_mode_must():
    quick = report_card.classify("x", "quick", results(a="passed"), allowed=["a", "b"],
                                 documented=set())
    full = report_card.classify("x", "full", results(a="passed"), allowed=["a", "b"],
                                documented=set())
    assert quick.ok and full.regressions == ["b"]


def test_results_lines_are_checked(tmp_path):
    path = tmp_path / "results.tsv"
    path.write_text("t1\tpassed\t0.5\t\nt2\tfailed\t1\tboom\nt1\tfailed\t2\tretried\n")
    by_id = {r.test_id: r for r in report_card.parse_results(path)}
    assert by_id["t1"].status == "failed" and by_id["t2"].detail == "boom"
    path.write_text("t1\tbroken\n")
    with pytest.raises(ValueError):
        report_card.parse_results(path)


def test_findings_are_counted_per_reason(tmp_path):
    path = tmp_path / "FINDINGS.md"
    path.write_text("# F\n\n## Not built yet\n### Transactions\n- `0103_txn`, `0105_txn`: need `EndTxn`\n"
                    "\n## Needs Kafka's Java CLI tools\n- `0081_admin` uses `kafka-configs.sh`\n")
    ids = {"0103_txn", "0105_txn", "0081_admin"}
    assert report_card.finding_groups(path, ids) == [("Not built yet: Transactions", 2),
                                                     ("Needs Kafka's Java CLI tools", 1)]
    assert ids <= report_card.finding_ids(path)


def test_suites_side_by_side_start_with_the_longest_and_never_run_ones():
    last = {"librdkafka": 404.0, "kafka-go": 100.0, "franz-go": 32.0, "kafka-python": 41.0}
    order = report_card.longest_first(["franz-go", "kafka-go", "kafka-python", "librdkafka", "new-suite"], last)
    assert order == ["new-suite", "librdkafka", "kafka-go", "kafka-python", "franz-go"]


def test_suites_side_by_side_report_in_the_order_asked(monkeypatch):
    ran = []

    def fake_run(suite, mode):
        ran.append(suite)
        return suite

    monkeypatch.setattr(report_card, "run_suite", fake_run)
    monkeypatch.setattr(report_card, "last_run_seconds", lambda: {"a": 1.0, "b": 9.0})
    assert report_card.run_suites(["a", "b"], "quick", jobs=2) == ["a", "b"]
    assert sorted(ran) == ["a", "b"]
