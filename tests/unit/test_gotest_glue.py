"""The Go suites' glue: which tests count as broker tests, and how go test's JSON becomes results."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("gotest_glue", ROOT / "compat-tests" / "gotest_glue.py")
glue = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(glue)

GO_TESTS = '''package kgo

func init() {
\tseeds = os.Getenv("KGO_SEEDS")
}

func newTestClient() *Client { return NewClient(getSeedBrokers()) }

func helper(t *testing.T) { cl := newTestClient(); _ = cl }

func TestTalks(t *testing.T) { helper(t) }

func TestTable(t *testing.T) {
\tfor _, f := range []func(*testing.T){helper} { f(t) }
}

func TestDials(t *testing.T) { Dial("tcp", "localhost:9092") }

func TestUnit(t *testing.T) { m.init(); x := ring{}; x.helper() }
'''


def test_broker_tests_follow_calls_references_and_address_literals(tmp_path):
    (tmp_path / "a_test.go").write_text(GO_TESTS)
    found = glue.broker_tests(tmp_path, ["getSeedBrokers"], ['"localhost:9092"'])
    # init() reads the broker settings but runs for every test; a method that shares a helper's
    # name is not that helper.
    assert found == ["TestDials", "TestTable", "TestTalks"]


def events(*evs: dict) -> str:
    return "\n".join(json.dumps({"Package": "p", **e}) for e in evs) + "\n"


def test_results_fold_subtests_and_report_what_never_finished(tmp_path):
    stream = tmp_path / "run.json"
    stream.write_text(events(
        {"Action": "output", "Test": "TestA", "Output": "=== RUN   TestA\n"},
        {"Action": "fail", "Test": "TestA/sub", "Elapsed": 1},
        {"Action": "output", "Test": "TestA/sub", "Output": "    a_test.go:9: offsets differ\n"},
        {"Action": "fail", "Test": "TestA", "Elapsed": 2.5},
        {"Action": "output", "Test": "TestB", "Output": "    b_test.go:3: needs SASL\n"},
        {"Action": "skip", "Test": "TestB", "Elapsed": 0},
        {"Action": "pass", "Test": "TestC", "Elapsed": 0.1},
        {"Action": "output", "Test": "TestD", "Output": "still waiting\n"},
    ) + "not json\n")
    rows = [line.split("\t") for line in glue.to_tsv([stream], ["TestA", "TestB", "TestC", "TestD"])]
    by_id = {r[0]: r for r in rows}
    assert by_id["TestA"][1:3] == ["failed", "2.50"] and "offsets differ" in by_id["TestA"][3]
    assert by_id["TestB"][1] == "skipped" and "needs SASL" in by_id["TestB"][3]
    assert by_id["TestC"][1:] == ["passed", "0.10", ""]
    assert by_id["TestD"][1] == "failed" and "still waiting" in by_id["TestD"][3]


def test_a_second_packages_tests_are_named_with_their_package(tmp_path):
    main, sub = tmp_path / "TestA.json", tmp_path / "sasl.TestA.json"
    main.write_text(events({"Action": "pass", "Test": "TestA", "Elapsed": 1}))
    sub.write_text("\n".join(json.dumps({"Package": "sasl", **e}) for e in (
        {"Action": "fail", "Test": "TestA/PLAIN", "Elapsed": 1},
        {"Action": "output", "Test": "TestA/PLAIN", "Output": "    sasl_test.go:9: bad password\n"},
        {"Action": "fail", "Test": "TestA", "Elapsed": 2},
    )) + "\n")
    rows = [line.split("\t") for line in glue.to_tsv([main, sub], ["TestA", "sasl.TestA"])]
    by_id = {r[0]: r for r in rows}
    assert by_id["TestA"][1] == "passed"
    assert by_id["sasl.TestA"][1] == "failed" and "bad password" in by_id["sasl.TestA"][3]
