"""Kafka's plain-text checkpoint files.

Layout (``CheckpointFile`` in Kafka)::

    <version>\n
    <entry count>\n
    <entry>\n ...

Used for ``recovery-point-offset-checkpoint`` / ``log-start-offset-checkpoint`` /
``replication-offset-checkpoint`` (entries ``<topic> <partition> <offset>``, version 0) and
``leader-epoch-checkpoint`` (entries ``<epoch> <start offset>``, version 0). Writes go to
``<file>.tmp``, are fsynced and renamed over the old file, so a crash leaves either the old or the
new checkpoint, never a torn one.
"""

from __future__ import annotations

from collections.abc import Iterable

from kafkapy.durable import atomic_write

CURRENT_VERSION = 0


class CorruptCheckpointError(ValueError):
    """A checkpoint file does not parse (bad version, count or entry)."""


def write_checkpoint(path: str, lines: Iterable[str], *, version: int = CURRENT_VERSION,
                     sync: bool = True) -> None:
    entries = list(lines)
    text = f"{version}\n{len(entries)}\n" + "".join(e + "\n" for e in entries)
    atomic_write(path, text.encode("utf-8"), sync=sync)


def read_checkpoint(path: str, *, version: int = CURRENT_VERSION) -> list[list[str]] | None:
    """The entries of a checkpoint, each split on whitespace; None when the file is absent."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    try:
        if int(lines[0]) != version:
            raise CorruptCheckpointError(f"{path}: unrecognised version {lines[0]!r}")
        count = int(lines[1])
    except (IndexError, ValueError):
        raise CorruptCheckpointError(f"{path}: malformed header") from None
    body = lines[2:]
    if len(body) != count:
        raise CorruptCheckpointError(f"{path}: expected {count} entries, found {len(body)}")
    return [line.split() for line in body]


def write_offsets_checkpoint(path: str, offsets: dict[tuple[str, int], int], *,
                             sync: bool = True) -> None:
    """``topic partition offset`` lines (recovery point, log start offset, high watermark)."""
    write_checkpoint(path, (f"{t} {p} {o}" for (t, p), o in offsets.items()), sync=sync)


def read_offsets_checkpoint(path: str) -> dict[tuple[str, int], int]:
    entries = read_checkpoint(path)
    if entries is None:
        return {}
    out: dict[tuple[str, int], int] = {}
    for e in entries:
        if len(e) != 3:
            raise CorruptCheckpointError(f"{path}: bad entry {' '.join(e)!r}")
        try:
            out[(e[0], int(e[1]))] = int(e[2])
        except ValueError:
            raise CorruptCheckpointError(f"{path}: bad entry {' '.join(e)!r}") from None
    return out
