"""Issue 20's size line: no module under kafkapy/ over 700 lines, no class over 500.

The controller, node, protocol, log, broker, group coordinator, tiered storage, ``kafkapy
cluster`` and the Raft core were split so each module has one job; this keeps them from growing
back into one file. An exception needs an entry in EXCEPTIONS and in docs/architecture.md
("Files over the size limits"), each with its reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "kafkapy"
#: "path relative to kafkapy/" or "path:Class" -> why it may be bigger (none today).
EXCEPTIONS: dict[str, str] = {}
MAX_FILE_LINES = 700
MAX_CLASS_LINES = 500


def _oversized(path: Path, root: Path = ROOT) -> list[str]:
    text = path.read_text()
    found = []
    lines = text.count("\n")
    if lines > MAX_FILE_LINES:
        found.append(f"{path.relative_to(root)}: {lines} lines")
    for node in ast.walk(ast.parse(text, filename=str(path))):
        if isinstance(node, ast.ClassDef):
            size = (node.end_lineno or node.lineno) - node.lineno + 1
            if size > MAX_CLASS_LINES:
                found.append(f"{path.relative_to(root)}:{node.name}: {size} lines")
    return found


def test_modules_and_classes_stay_within_the_size_limits():
    offenders = [o for path in sorted(ROOT.rglob("*.py")) for o in _oversized(path)
                 if o.split(": ")[0] not in EXCEPTIONS]
    assert offenders == []


def test_the_size_check_sees_an_oversized_class(tmp_path):
    big = tmp_path / "big.py"
    big.write_text("class Big:\n" + "    x = 1\n" * MAX_CLASS_LINES)
    assert _oversized(big, tmp_path) == [f"big.py:Big: {MAX_CLASS_LINES + 1} lines"]
