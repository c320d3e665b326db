"""Generated blocks inside hand-kept Markdown files.

Several generators share one page (docs/compatibility.md: the client suites' report card, the
differential scenarios against Apache Kafka, Kafka's CLI tools). Each owns a block between
``<!-- NAME:start -->`` and ``<!-- NAME:end -->`` and rewrites only that, so regenerating one never
drops another's rows or the hand-written text around them.
"""

from __future__ import annotations

from pathlib import Path


def markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:start -->", f"<!-- {name}:end -->"


def replace_block(text: str, name: str, body: str) -> str:
    """``text`` with block ``name`` holding ``body``; a missing block is appended at the end."""
    start, end = markers(name)
    block = f"{start}\n{body.strip()}\n{end}"
    if start in text and end in text:
        head, rest = text.split(start, 1)
        return head + block + rest.split(end, 1)[1]
    return (text.rstrip() + "\n\n" if text.strip() else "") + block + "\n"


def write_block(path: Path, name: str, body: str) -> None:
    """Rewrite block ``name`` of the file at ``path`` (created if missing)."""
    text = path.read_text() if path.exists() else ""
    path.write_text(replace_block(text, name, body))
