"""The import contracts of pyproject.toml hold, and catch a forbidden import when one appears.

`make test` checks the contracts first (scripts/lint.sh runs `lint-imports`). Here they run
against a copy of kafkapy/: unchanged, every contract is kept; with one scratch module that
imports across a forbidden edge, the contract that names that edge reports it broken, naming the
import. So a contract that silently stopped matching anything (a renamed package, a typo in a
module name) shows up as a failing test rather than a green check.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 120

# (scratch module under kafkapy/, its source, the contract it must break)
FORBIDDEN = [
    ("raft/_scratch.py", "from kafkapy.metadata.records import decode_record\n",
     "raft/ imports neither metadata/ nor quorum/"),
    ("raft/_scratch.py", "from kafkapy.quorum import driver\n",
     "raft/ imports neither metadata/ nor quorum/"),
    ("broker/_scratch.py", "from kafkapy.net import server\n",
     "broker/ imports neither net/ nor node/"),
    ("broker/_scratch.py", "from kafkapy.node import node\n",
     "broker/ imports neither net/ nor node/"),
    ("log/_scratch.py", "from kafkapy.replication import fetcher\n",
     "log/ imports none of broker/, replication/, tiered/"),
    ("log/_scratch.py", "from kafkapy.tiered import manager\n",
     "log/ imports none of broker/, replication/, tiered/"),
    # An import inside a function is an edge too.
    ("controller/_scratch.py", "def later():\n    from kafkapy.quorum import driver\n    return driver\n",
     "controller/ imports none of broker/, net/, quorum/"),
    ("coordinator/_scratch.py", "from kafkapy.broker import replica_manager\n",
     "coordinator/ and tiered/ reach broker/ only through Protocols"),
    ("tiered/_scratch.py", "from kafkapy.broker.context import BrokerContext\n",
     "coordinator/ and tiered/ reach broker/ only through Protocols"),
    ("metadata/_scratch.py", "import time\n",
     "the sans-I/O cores import no trio, socket, time, asyncio"),
    # No named edge: only the layers (records sits below log).
    ("records/_scratch.py", "from kafkapy.log import segment\n",
     "kafkapy's packages depend downwards"),
]


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """kafkapy/'s Python sources and pyproject.toml, copied: all the contracts read."""
    root = tmp_path_factory.mktemp("contracts")

    def skip(directory: str, names: list[str]) -> list[str]:
        return [n for n in names if n == "__pycache__"
                or (not n.endswith(".py") and not (Path(directory) / n).is_dir())]

    shutil.copytree(REPO / "kafkapy", root / "kafkapy", ignore=skip)
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    return root


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    # PYTHONPATH: the copy, never the checkout; COLUMNS: one contract per line in the report.
    env = {**os.environ, "PYTHONPATH": str(root), "COLUMNS": "250", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-c",
         "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())",
         "--no-cache", "--config", str(root / "pyproject.toml")],
        cwd=root, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)


def test_the_unchanged_tree_keeps_every_contract(tree: Path) -> None:
    result = _lint_imports(tree)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(("module", "source", "contract"), FORBIDDEN,
                         ids=[f"{m.split('/')[0]}:{s.split()[1]}" for m, s, _ in FORBIDDEN])
def test_a_forbidden_import_breaks_its_contract(tree: Path, module: str, source: str, contract: str) -> None:
    scratch = tree / "kafkapy" / module
    scratch.write_text(source)
    try:
        result = _lint_imports(tree)
    finally:
        scratch.unlink()
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    summary = [line for line in out.splitlines() if line.startswith(contract)]
    assert summary and " BROKEN" in summary[0], out  # "<name> BROKEN", maybe "(2 ignored imports)"
    # The report names the offending module.
    assert "kafkapy." + module.removesuffix(".py").replace("/", ".") in out, out
