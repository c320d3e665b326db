"""`make run` installs only what the node needs and takes PORT; `make test` installs everything.

Checked with `make -n` (print the commands, run nothing) against a venv path that does not exist,
so every install step shows.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def _dry_run(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> list[str]:
    # Under `make test` this runs inside a make: drop what the outer make passes down, or this
    # one becomes a sub-make that prints "Entering/Leaving directory" and inherits its flags.
    outer = {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES"}
    base = {k: v for k, v in os.environ.items() if k not in outer}
    out = subprocess.run(["make", "-n", "-B", "--no-print-directory", f"VENV={tmp_path / 'venv'}", *args],
                         cwd=REPO, capture_output=True, text=True, timeout=30, check=True,
                         env={**base, **(env or {})}).stdout
    return out.splitlines()


def _installs(lines: list[str]) -> list[str]:
    return [line for line in lines if "pip install -q -e" in line]


def test_make_run_installs_the_runtime_dependencies_only(tmp_path):
    lines = _dry_run(tmp_path, "run")
    assert [line.split()[-1] for line in _installs(lines)] == ["'.'"]
    assert not any("[test]" in line or "install-test-tools" in line for line in lines)


def test_make_run_serves_the_default_ports_unless_told(tmp_path):
    assert _dry_run(tmp_path, "run")[-1].endswith(
        "kafkapy server --override listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093")
    assert _dry_run(tmp_path, "run", "PORT=19092")[-1].endswith(
        "listeners=PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093")
    assert _dry_run(tmp_path, "run", "PORT=19092", "CONTROLLER_PORT=29093")[-1].endswith(
        "listeners=PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:29093")
    # A PORT exported for something else (a web app's) does not move the broker.
    assert _dry_run(tmp_path, "run", env={"PORT": "3000"})[-1].endswith(
        "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093")


def test_make_test_installs_the_test_extra(tmp_path):
    lines = _dry_run(tmp_path, "test")
    assert [line.split()[-1] for line in _installs(lines)] == ["'.[test]'"]
    assert lines[-1] == "bash scripts/test.sh"


def test_make_lint_runs_the_static_checks_with_the_test_extra(tmp_path):
    # The linters are in the test extra; scripts/test.sh runs the same script first.
    lines = _dry_run(tmp_path, "lint")
    assert [line.split()[-1] for line in _installs(lines)] == ["'.[test]'"]
    assert lines[-1] == "bash scripts/lint.sh"
