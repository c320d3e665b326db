"""go_suite.sh's second passes: some tests once more in another setting, named <test><suffix>."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Stands in for test2json running the test binary: passes the test named by -test.run and says
# which setting (SETTING) it ran in.
FAKE_TEST2JSON = r'''#!/usr/bin/env bash
while [ $# -gt 0 ]; do
    if [ "$1" = -test.run ]; then name=${2#^}; name=${name%\$}; fi
    shift
done
printf '{"Action":"output","Test":"%s","Output":"in %s\\n"}\n' "$name" "${SETTING:-plain}"
printf '{"Action":"pass","Test":"%s","Elapsed":0.5}\n' "$name"
'''

RUN_SH = r'''set -euo pipefail
SUITE=fake
. "$1/compat-tests/go_suite.sh" quick 127.0.0.1:1 "$2"
GO_PKGDIR=pkg
go_suite_run 60 '^TestSlow$' "$RESULTS"
(export SETTING=tls; go_suite_run 60 '^$' "$RESULTS.tls" '^(TestA|TestSlow)$' @TLS)
cat "$RESULTS.tls" >> "$RESULTS"
'''


def _suite(tmp_path: Path) -> Path:
    """A checkout with go_suite.sh, the argument parsing it sources and the glue, and a built fake
    suite of three broker tests."""
    (tmp_path / "compat-tests").mkdir()
    for name in ("go_suite.sh", "suite_args.sh", "gotest_glue.py"):
        shutil.copy(ROOT / "compat-tests" / name, tmp_path / "compat-tests" / name)
    cache = tmp_path / ".tools" / "suites" / "fake"
    (cache / "src" / "pkg").mkdir(parents=True)
    (cache / "tests.txt").write_text("TestA\nTestB\nTestSlow\n")
    (cache / "suite.test").write_text("")
    (cache / "test2json").write_text(FAKE_TEST2JSON)
    (cache / "test2json").chmod(0o755)
    return tmp_path


def _run(root: Path, results: Path, only: list[str] | None = None) -> list[list[str]]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(root)}
    if only is not None:
        (root / "only.txt").write_text("".join(t + "\n" for t in only))
        env["KAFKAPY_SUITE_ONLY"] = str(root / "only.txt")
    subprocess.run(["bash", "-c", RUN_SH, "run", str(root), str(results)], env=env, check=True,
                   timeout=60, capture_output=True)
    return [line.split("\t") for line in results.read_text().splitlines() if line]


def test_a_second_pass_runs_its_tests_again_under_suffixed_ids(tmp_path):
    root = _suite(tmp_path)
    rows = _run(root, tmp_path / "results.tsv")
    assert [(r[0], r[1]) for r in rows] == [
        ("TestA", "passed"), ("TestB", "passed"),
        # The pass takes its own tests, the first pass's leave-out regexp notwithstanding.
        ("TestA@TLS", "passed"), ("TestSlow@TLS", "passed")]
    raw = root / ".tools" / "suites" / "fake"
    assert "in tls" in (raw / "last-run@TLS" / "TestA.json").read_text()
    assert "in plain" in (raw / "last-run" / "TestA.json").read_text()


def test_a_rerun_takes_each_pass_its_own_ids(tmp_path):
    root = _suite(tmp_path)
    rows = _run(root, tmp_path / "results.tsv", only=["TestB", "TestSlow@TLS"])
    assert [(r[0], r[1]) for r in rows] == [("TestB", "passed"), ("TestSlow@TLS", "passed")]


def test_a_rerun_of_one_pass_only_leaves_the_other_empty(tmp_path):
    root = _suite(tmp_path)
    rows = _run(root, tmp_path / "results.tsv", only=["TestA@TLS"])
    assert [(r[0], r[1]) for r in rows] == [("TestA@TLS", "passed")]
