"""`make test` fails on a broken import contract, a ruff finding or a mypy error, before any test.

scripts/lint.sh runs on a copy of the checkout (kafkapy/'s sources, pyproject.toml, the script,
the venv linked in): it passes as is, and a scratch module with one fault of each kind makes it
exit non-zero at that tool. scripts/test.sh runs it before its first pytest.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 240
STAGES = ["== import contracts", "== ruff", "== mypy"]

pytestmark = pytest.mark.skipif(not (REPO / ".venv" / "bin" / "python").exists(),
                                reason="needs the repository's .venv (make install)")


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("lint")

    def skip(directory: str, names: list[str]) -> list[str]:
        return [n for n in names if n == "__pycache__"
                or (not n.endswith((".py", ".pyi")) and not (Path(directory) / n).is_dir())]

    shutil.copytree(REPO / "kafkapy", root / "kafkapy", ignore=skip)
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    (root / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "lint.sh", root / "scripts" / "lint.sh")
    (root / ".venv").symlink_to((REPO / ".venv").resolve())
    return root


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    # Its own mypy cache: the shared one under .venv belongs to the real checkout's paths.
    env = {**os.environ, "MYPY_CACHE_DIR": str(root / "mypy-cache"), "COLUMNS": "250", "NO_COLOR": "1"}
    env.pop("PYTHONPATH", None)
    return subprocess.run(["bash", "scripts/lint.sh"], cwd=root, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT_S)


def test_the_checkout_passes(checkout: Path) -> None:
    result = _lint(checkout)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "== mypy" in result.stdout and "Success" in result.stdout


@pytest.mark.parametrize(("module", "source", "stage", "finding"), [
    ("raft/_scratch.py", "from kafkapy.quorum import driver\n\n__all__ = ['driver']\n",
     "== import contracts", "BROKEN"),
    ("records/_scratch.py", "import os\n", "== ruff", "F401"),
    ("metadata/_scratch.py", "def untyped(x):\n    return x\n", "== mypy", "no-untyped-def"),
], ids=["contract", "ruff", "mypy"])
def test_a_finding_fails_the_stage(checkout: Path, module: str, source: str, stage: str, finding: str) -> None:
    scratch = checkout / "kafkapy" / module
    scratch.write_text(source)
    try:
        result = _lint(checkout)
    finally:
        scratch.unlink()
    out = result.stdout + result.stderr
    assert result.returncode != 0, out
    # It stopped at that tool, reporting the finding, and ran nothing after it.
    assert stage in out and finding in out.split(stage, 1)[1], out
    assert not any(later in out for later in STAGES[STAGES.index(stage) + 1:]), out


def test_make_test_lints_before_the_first_pytest() -> None:
    script = (REPO / "scripts" / "test.sh").read_text()
    assert script.index("bash scripts/lint.sh") < script.index("-m pytest")
