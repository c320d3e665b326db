"""The report card's verdicts: what breaks CI and what only asks for the allow-list to grow."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import socket
import struct
import sys
import threading
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

    def fake_run(suite, mode, *, oracle=False):
        ran.append(suite)
        return suite

    monkeypatch.setattr(report_card, "run_suite", fake_run)
    monkeypatch.setattr(report_card, "last_run_seconds", lambda: {"a": 1.0, "b": 9.0})
    assert report_card.run_suites(["a", "b"], "quick", jobs=2) == ["a", "b"]
    assert sorted(ran) == ["a", "b"]


# -- the re-run of allowed tests that did not pass ----------------------------------------------


class FakeNode:
    """Stands in for KafkaNode: the report card starts one per run of a suite."""

    started: list["FakeNode"] = []

    def __init__(self, overrides, log=""):
        self.overrides, self.log, self.alive = overrides, log, True
        self.bootstrap = f"127.0.0.1:{9100 + len(FakeNode.started)}"
        self.pid = None  # no process group to track

    def start(self):
        FakeNode.started.append(self)

    def running(self):
        return self.alive

    def log_tail(self, _n):
        return self.log

    def cleanup(self):
        self.alive = False


@pytest.fixture
def suite(tmp_path, monkeypatch):
    """A suite "s" with allowed tests a..g, and the report card's runs of it faked: each run writes
    the statuses of the next entry of ``plan`` (a dict per run) for the tests it was asked for."""
    folder = tmp_path / "suites" / "s"
    folder.mkdir(parents=True)
    (folder / "run.sh").write_text("")
    (folder / "allow-list.txt").write_text("".join(f"{t}\n" for t in "abcdefg"))
    (folder / "FINDINGS.md").write_text("- `x`: not built yet\n")
    (folder / "broker.properties").write_text("num.partitions=4\n")
    monkeypatch.setattr(report_card, "SUITES_DIR", tmp_path / "suites")
    monkeypatch.setattr(report_card, "OUT_DIR", tmp_path / "out")
    FakeNode.started = []
    calls: list[dict] = []
    plan: list[dict[str, str]] = []
    node_logs: list[str] = []

    def new_node(overrides, users):
        return FakeNode(overrides, node_logs.pop(0) if node_logs else ""), {}

    def fake_process(suite, mode, bootstrap, results, log, *, timeout, only=None, node_env=None):
        ids = only.read_text().split() if only else [*"abcdefg", "x"]
        calls.append({"bootstrap": bootstrap, "only": ids if only else None, "timeout": timeout,
                      "results": results.name})
        statuses = plan[len(calls) - 1]
        results.write_text("".join(f"{t}\t{statuses.get(t, 'passed')}\t1.0\t{'boom ' + t}\n"
                                   for t in ids if statuses.get(t) != "absent"))
        return ""

    monkeypatch.setattr(report_card, "_new_node", new_node)
    monkeypatch.setattr(report_card, "_run_suite_process", fake_process)
    return {"plan": plan, "calls": calls, "node_logs": node_logs, "out": tmp_path / "out" / "s"}


def test_the_apache_kafka_baseline_runs_on_its_own_node_into_its_own_folder(suite, monkeypatch):
    oracle_nodes = []

    def new_oracle_node(overrides):
        oracle_nodes.append(FakeNode(overrides, ""))
        return oracle_nodes[-1], {}

    monkeypatch.setattr(report_card, "_new_oracle_node", new_oracle_node)
    suite["plan"] += [{"c": "failed", "x": "failed"}]
    s = report_card.run_suite("s", "quick", oracle=True)
    # Kafka's failures are the baseline, not flakes: no re-run, and kafkapy's results stay.
    assert len(suite["calls"]) == 1 and FakeNode.started == oracle_nodes
    assert oracle_nodes[0].overrides == {"num.partitions": "4"}
    assert (suite["out"].parent / "s@apache-kafka" / "summary.json").exists()
    assert not suite["out"].exists() and s.regressions == ["c"]


def test_an_allowed_test_that_fails_once_and_passes_on_a_fresh_node_is_flaky(suite, capsys):
    suite["plan"] += [{"c": "failed", "x": "failed"}, {}]
    s = report_card.run_suite("s", "quick")
    first, again = suite["calls"]
    # Only the allowed test that failed, on a second node of its own, into a second results file.
    assert first["only"] is None and again["only"] == ["c"]
    assert len(FakeNode.started) == 2 and FakeNode.started[1].overrides == {"num.partitions": "4"}
    assert first["bootstrap"] != again["bootstrap"]
    assert again["results"] == "results-rerun.tsv" and again["timeout"] <= 10 * 60
    assert s.ok and s.flaky == ["c"] and s.regressions == [] and s.undocumented == []
    assert s.counts["failed"] == 2  # the counts stay the first run's
    out = capsys.readouterr().out
    assert "FLAKY c: failed first (failed boom c), passed on re-run" in out
    assert "REGRESSION" not in out and out.rstrip().endswith("ok")
    stored = report_card.load_summaries()
    assert [x.flaky for x in stored] == [["c"]]


def test_an_allowed_test_that_fails_again_on_the_re_run_is_a_regression(suite, capsys):
    suite["plan"] += [{"b": "failed", "c": "failed"}, {"b": "failed"}]
    s = report_card.run_suite("s", "quick")
    assert suite["calls"][1]["only"] == ["b", "c"]
    assert s.regressions == ["b"] and s.flaky == ["c"] and not s.ok
    out = capsys.readouterr().out
    assert "REGRESSION b: failed boom b; on re-run: failed boom b" in out
    assert "FLAKY c" in out and out.rstrip().endswith("FAILED")


def test_an_allowed_test_the_re_run_does_not_report_stays_a_regression(suite):
    suite["plan"] += [{"b": "failed"}, {"b": "absent"}]
    s = report_card.run_suite("s", "quick")
    assert s.regressions == ["b"] and s.flaky == [] and not s.ok


def test_too_many_allowed_failures_are_not_re_run(suite, capsys):
    suite["plan"] += [{t: "failed" for t in "abcdef"}]
    s = report_card.run_suite("s", "quick")
    assert len(suite["calls"]) == 1 and len(FakeNode.started) == 1
    assert s.regressions == list("abcdef") and s.flaky == [] and not s.ok
    assert "not re-run: 6 allowed tests did not pass" in capsys.readouterr().out


def test_a_suite_whose_allowed_tests_pass_is_not_re_run(suite):
    suite["plan"] += [{"x": "failed"}]
    s = report_card.run_suite("s", "quick")
    assert len(suite["calls"]) == 1 and s.ok and s.flaky == [] and s.rerun == ""
    assert not (suite["out"] / "results-rerun.tsv").exists()


def test_a_broker_traceback_during_the_re_run_still_fails_the_suite(suite):
    suite["plan"] += [{"c": "failed"}, {}]
    suite["node_logs"] += ["", "Traceback (most recent call last):\n  boom\n"]
    s = report_card.run_suite("s", "quick")
    assert s.flaky == ["c"] and not s.ok
    assert "re-run" in s.broker_problems[0] and "node-rerun.log" in s.broker_problems[0]


def test_summaries_load_with_and_without_flaky_tests(tmp_path, monkeypatch):
    monkeypatch.setattr(report_card, "SUITES_DIR", tmp_path / "suites")
    monkeypatch.setattr(report_card, "OUT_DIR", tmp_path / "out")
    for name in ("old", "new"):
        (tmp_path / "suites" / name).mkdir(parents=True)
        (tmp_path / "suites" / name / "run.sh").write_text("")
        (tmp_path / "out" / name).mkdir(parents=True)
    new = report_card.classify("new", "quick", results(a="failed"), allowed=["a"], documented=set(),
                               rerun=results(a="passed"), rerun_note="re-ran 1")
    (tmp_path / "out" / "new" / "summary.json").write_text(json.dumps(dataclasses.asdict(new)))
    # A summary written before flaky tests existed has neither "flaky" nor "rerun".
    old = dataclasses.asdict(report_card.classify("old", "quick", results(a="passed"),
                                                  allowed=["a"], documented=set()))
    del old["flaky"], old["rerun"]
    (tmp_path / "out" / "old" / "summary.json").write_text(json.dumps(old))
    loaded = {s.suite: s for s in report_card.load_summaries()}
    assert loaded["new"] == new and loaded["new"].flaky == ["a"]
    assert loaded["old"].flaky == [] and loaded["old"].ok


def test_the_report_names_the_flaky_tests_of_each_suite(tmp_path, monkeypatch):
    monkeypatch.setattr(report_card, "OUT_DIR", tmp_path)
    flaky = report_card.classify("kafka-python", "quick", results(a="failed", b="passed"),
                                 allowed=["a", "b"], documented=set(), rerun=results(a="passed"))
    steady = report_card.classify("franz-go", "quick", results(a="passed"), allowed=["a"],
                                  documented=set())
    doc = report_card.render_doc([flaky, steady])
    assert "Flaky this run (failed, then passed when re-run on a fresh node): `a`." in doc
    assert doc.count("Flaky this run") == 1


def _librdkafka_run_tests():
    spec = importlib.util.spec_from_file_location(
        "librdkafka_run_tests", ROOT / "compat-tests" / "librdkafka" / "run_tests.py")
    run_tests = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run_tests)
    return run_tests


def test_librdkafka_restricts_its_run_to_the_numbers_of_the_listed_tests(tmp_path):
    run_tests = _librdkafka_run_tests()
    table = [{"name": n, "num": n[:4]} for n in ("0001_multiobj", "0045_subscribe_update",
                                                 "0045_subscribe_update_non_exist", "0050_x")]
    only = tmp_path / "only.txt"
    only.write_text("0045_subscribe_update_non_exist\n\n0001_multiobj\n")
    assert run_tests.read_only(str(only), table) == (
        {"0001_multiobj", "0045_subscribe_update_non_exist"}, {"0001", "0045"})
    assert run_tests.read_only(None, table) == (None, None)


# A stand-in for librdkafka's tests/test-runner: it notes its start, waits (bounded) until
# three runners have started, and reports PASSED only if they did, so the test sees concurrency
# without timing anything.
FAKE_RUNNER = """#!/bin/sh
echo "$TESTS" >> started
for _ in $(seq 200); do
  [ "$(wc -l < started)" -ge 3 ] && break
  sleep 0.05
done
case "$TESTS" in 0001) name=0001_multiobj ;; 0002) name=0002_unkpart ;; 0003) name=0003_msgmaxsize ;; esac
if [ "$(wc -l < started)" -ge 3 ]; then state=PASSED; else state=FAILED; fi
echo "| $name | $state | 0.100s | |"
"""


def _run_fake_librdkafka(tmp_path, monkeypatch, tests: list[str], runner_script: str,
                         *extra_args: str, run_tests=None) -> tuple[list[list[str]], Path]:
    """run_tests.main() over a test.c of ``tests`` (_TEST argument lists) and a stand-in
    test-runner; the results' (name, status) rows and the tests folder."""
    run_tests = run_tests or _librdkafka_run_tests()
    tests_dir = tmp_path / "src" / "tests"
    tests_dir.mkdir(parents=True)
    entries = "".join(f"    _TEST({t}),\n" for t in tests)
    (tests_dir / "test.c").write_text(f"struct test tests[] = {{\n{entries}    {{NULL}}\n}};\n")
    runner = tests_dir / "test-runner"
    runner.write_text(runner_script)
    runner.chmod(0o755)
    results = tmp_path / "results.tsv"
    monkeypatch.setattr(run_tests.signal, "signal", lambda *_: None)  # leave pytest's handlers be
    monkeypatch.setattr(sys, "argv", ["run_tests.py", "quick", "127.0.0.1:9", str(results),
                                      str(tmp_path / "src"), str(tmp_path / "work"), *extra_args])
    assert run_tests.main() == 0
    return [line.split("\t")[:2] for line in results.read_text().splitlines()], tests_dir


def test_librdkafka_runs_several_numbers_at_once_and_writes_them_in_table_order(tmp_path, monkeypatch):
    monkeypatch.setenv("LIBRDKAFKA_CONCURRENCY", "3")
    rows, _ = _run_fake_librdkafka(tmp_path, monkeypatch, ["0001_multiobj, 0", "0002_unkpart, 0",
                                                           "0003_msgmaxsize, 0"], FAKE_RUNNER)
    assert rows == [["0001_multiobj", "passed"], ["0002_unkpart", "passed"], ["0003_msgmaxsize", "passed"]]


# A stand-in runner that notes how it was called and passes the test its flags select.
PLAN_RUNNER = """#!/bin/sh
echo "$TESTS $* $TEST_KAFKA_VERSION" >> calls
case "$TESTS $1" in
  "0001 -L") name=0001_multiobj ;; "0018 -L") name=0018_cgrp_term ;;
  "0173 -L") name=0173_share_async ;; "0173 -l") name=0173_share_async_local ;;
esac
echo "| $name | PASSED | 0.100s | |"
"""


def test_librdkafka_plan_of_another_release_runs_its_own_numbers_and_mock_tests(tmp_path, monkeypatch):
    """A suite on another librdkafka (compat-tests/librdkafka-2.15) brings its tests.txt and broker
    version: `planned-only` reports just its numbers, and `NNNN-local` runs mock tests with -l."""
    plan = tmp_path / "plan"
    plan.mkdir()
    (plan / "tests.txt").write_text(
        "#! planned-only\n0001\tquick\n0018\tquick-noQ\tneeds ConsumerGroupHeartbeat\n"
        "0170\tquick-noQ\tneeds ShareGroupHeartbeat ShareFetch\n0173\tquick-noQ\n0173-local\tquick-noQ\n")
    tests = ["0001_multiobj, 0", "0002_unkpart, 0", "0018_cgrp_term, 0", "0155_share_mock, TEST_F_LOCAL",
             "0170_share_sub, 0", "0173_share_async_local, TEST_F_LOCAL",
             "0173_share_async, 0, TEST_BRKVER(4, 2, 0, 0)"]
    # A broker that serves KIP-848 but not share groups: the share test is reported, not run.
    run_tests = _librdkafka_run_tests()
    monkeypatch.setattr(run_tests, "advertised_api_keys", lambda bootstrap: {18, 68})
    rows, tests_dir = _run_fake_librdkafka(tmp_path, monkeypatch, tests, PLAN_RUNNER, str(plan), "4.4.0",
                                           run_tests=run_tests)
    assert rows == [["0001_multiobj", "passed"], ["0018_cgrp_term", "passed"], ["0170_share_sub", "skipped"],
                    ["0173_share_async_local", "passed"], ["0173_share_async", "passed"]]
    assert "does not advertise ShareGroupHeartbeat, ShareFetch" in (tmp_path / "results.tsv").read_text()
    calls = sorted((tests_dir / "calls").read_text().splitlines())
    assert calls == ["0001 -L -p1 -Q 4.4.0", "0018 -L -p1 4.4.0", "0173 -L -p1 4.4.0", "0173 -l -p1 4.4.0"]


def test_librdkafka_suite_reads_the_api_keys_a_broker_advertises():
    """ApiVersions v0 over a socket, against a stand-in broker that lists keys 0, 18 and 68."""

    def serve(server: socket.socket) -> None:
        conn, _ = server.accept()
        with conn:
            size = struct.unpack(">i", conn.recv(4))[0]
            request = b""
            while len(request) < size:
                request += conn.recv(size - len(request))
            correlation = struct.unpack(">i", request[4:8])[0]
            keys = b"".join(struct.pack(">hhh", k, 0, 3) for k in (0, 18, 68))
            body = struct.pack(">ihi", correlation, 0, 3) + keys
            conn.sendall(struct.pack(">i", len(body)) + body)

    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(10)
        thread = threading.Thread(target=serve, args=(server,), daemon=True)
        thread.start()
        _librdkafka_run_tests()  # puts compat-tests/librdkafka on sys.path
        import broker_apis

        assert broker_apis.advertised_api_keys(f"127.0.0.1:{server.getsockname()[1]}") == {0, 18, 68}
        thread.join(10)
    assert broker_apis.needed_apis("needs ShareFetch ConsumerGroupHeartbeat") == ["ShareFetch",
                                                                                  "ConsumerGroupHeartbeat"]
    assert broker_apis.needed_apis("a reason") == []
    with pytest.raises(SystemExit):
        broker_apis.needed_apis("needs NoSuchApi")


def test_librdkafka_concurrency_is_a_positive_number(monkeypatch):
    run_tests = _librdkafka_run_tests()
    monkeypatch.setenv("LIBRDKAFKA_CONCURRENCY", "0")
    assert run_tests.concurrency() == 1
    monkeypatch.delenv("LIBRDKAFKA_CONCURRENCY")
    assert run_tests.concurrency() == 3
    monkeypatch.setenv("LIBRDKAFKA_CONCURRENCY", "many")
    with pytest.raises(SystemExit):
        run_tests.concurrency()


def test_a_node_that_dies_during_its_suite_is_a_broker_problem(suite, monkeypatch):
    def dying_process(name, mode, bootstrap, results, log, *, timeout, only=None, node_env=None):
        results.write_text("".join(f"{t}\tpassed\t1.0\t\n" for t in [*"abcdefg", "x"]))
        FakeNode.started[-1].alive = False  # the broker exits under the suite
        return ""

    monkeypatch.setattr(report_card, "_run_suite_process", dying_process)
    s = report_card.run_suite("s", "quick")
    assert not s.ok
    assert s.broker_problems == ["the broker process died during the suite's run"]


def test_a_suite_whose_sources_are_unavailable_is_reported_not_run_and_keeps_its_last_results(suite, monkeypatch, capsys):
    out = suite["out"]
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text('{"kept": true}\n')

    def unavailable(name, mode, bootstrap, results, log, *, timeout, only=None, node_env=None):
        return report_card.UNAVAILABLE + "cannot download tests/test_sasl.py from GitHub"

    monkeypatch.setattr(report_card, "_run_suite_process", unavailable)
    s = report_card.run_suite("s", "quick")
    assert s.ok and s.unavailable == "cannot download tests/test_sasl.py from GitHub"
    assert (out / "summary.json").read_text() == '{"kept": true}\n'
    assert "NOT RUN, its sources are not available here" in capsys.readouterr().out
