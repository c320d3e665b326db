"""Checking a replicated log against what producers were told: acked records and replica files.

``read_ledger`` parses what ``kafkapy.testing.acked_producer`` wrote; ``read_replica`` reads one
replica's partition straight from a node's data directory (segment files, read only); ``problems``
lists, in words, every way the logs break the promise of ``acks=all``: an acknowledged record
missing, stored twice, out of order, at another offset, or replicas that disagree byte for byte.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kafkapy.records.reader import iter_batches, iter_records


@dataclass(frozen=True)
class Ack:
    """One acknowledged record: where the broker said it is, and when the producer heard."""

    partition: int
    offset: int
    seq: int
    at: float


@dataclass(frozen=True)
class Replica:
    """One replica's partition as stored: its raw batches and its records (offset, value)."""

    batches: tuple[bytes, ...]
    records: tuple[tuple[int, bytes | None], ...]

    @property
    def log_end_offset(self) -> int:
        return self.records[-1][0] + 1 if self.records else 0


def read_ledger(path: str | os.PathLike[str]) -> dict[int, list[Ack]]:
    acks: dict[int, list[Ack]] = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) != 4:
                continue  # a line cut short by a kill
            a = Ack(int(parts[0]), int(parts[1]), int(parts[2]), float(parts[3]))
            acks.setdefault(a.partition, []).append(a)
    return acks


def read_replica(data_dir: str | os.PathLike[str], topic: str, partition: int) -> Replica:
    """The partition's batches and records from ``data_dir``/``topic``-``partition``/*.log."""
    batches: list[bytes] = []
    records: list[tuple[int, bytes | None]] = []
    pattern = os.path.join(str(data_dir), f"{topic}-{partition}", "*.log")
    for path in sorted(glob.glob(pattern)):
        with open(path, "rb") as f:
            data = f.read()
        for header, batch in iter_batches(data):
            batches.append(bytes(batch))
            for rec in iter_records(batch):
                records.append((rec.offset, rec.value))
    return Replica(tuple(batches), tuple(records))


def problems(acks: Mapping[int, Sequence[Ack]], replicas: Mapping[int, Mapping[int, Replica]],
             *, committed: Mapping[int, int] | None = None) -> list[str]:
    """Everything wrong, per partition. ``replicas``: partition -> node id -> replica;
    ``committed``: partition -> high watermark every replica must reach (default: the last ack)."""
    found: list[str] = []
    for partition in sorted(set(acks) | set(replicas)):
        acked = acks.get(partition, [])
        copies = replicas.get(partition, {})
        if not copies:
            found.append(f"partition {partition}: no replica read")
            continue
        need = (committed or {}).get(partition, max((a.offset + 1 for a in acked), default=0))
        for node, rep in sorted(copies.items()):
            if rep.log_end_offset < need:
                found.append(f"partition {partition}: replica on node {node} ends at "
                             f"{rep.log_end_offset}, below the committed {need}")
        found.extend(_disagreements(partition, copies))
        reference = max(copies.values(), key=lambda r: r.log_end_offset)
        found.extend(_ack_problems(partition, acked, reference))
    return found


def _disagreements(partition: int, copies: Mapping[int, Replica]) -> Iterable[str]:
    nodes = sorted(copies)
    base = copies[nodes[0]]
    for node in nodes[1:]:
        other = copies[node]
        for i, (a, b) in enumerate(zip(base.batches, other.batches)):
            if a != b:
                yield (f"partition {partition}: batch {i} differs between nodes {nodes[0]} and "
                       f"{node}")
                break


def _ack_problems(partition: int, acked: Sequence[Ack], log: Replica) -> Iterable[str]:
    by_value: dict[bytes, list[int]] = {}
    offsets = [o for o, _ in log.records]
    for offset, value in log.records:
        by_value.setdefault(value or b"", []).append(offset)
    if offsets and offsets != list(range(offsets[0], offsets[0] + len(offsets))):
        yield f"partition {partition}: the log has gaps in its offsets"
    for value, where in by_value.items():
        if len(where) > 1:
            yield f"partition {partition}: {value!r} is stored {len(where)} times (offsets {where[:5]})"
    last_seq = -1
    for a in sorted(acked, key=lambda a: a.offset):
        value = f"{partition}:{a.seq}".encode()
        where = by_value.get(value)
        if not where:
            yield f"partition {partition}: acked record seq {a.seq} (offset {a.offset}) is missing"
        elif where[0] != a.offset:
            yield (f"partition {partition}: acked record seq {a.seq} was acked at offset "
                   f"{a.offset} but is stored at {where[0]}")
        if a.seq <= last_seq:
            yield f"partition {partition}: seq {a.seq} stored after seq {last_seq}"
        last_seq = max(last_seq, a.seq)


def unavailability(acks: Mapping[int, Sequence[Ack]], kill_times: Sequence[float],
                   window_s: float = 60.0) -> dict[int, list[float]]:
    """Per partition, for each kill: the longest gap between consecutive acks from the last ack
    before the kill to ``window_s`` after it (how long producing to it stalled)."""
    out: dict[int, list[float]] = {}
    for partition, acked in sorted(acks.items()):
        times = sorted(a.at for a in acked)
        gaps = []
        for k in kill_times:
            before = [t for t in times if t <= k]
            after = [t for t in times if k < t <= k + window_s]
            points = ([before[-1]] if before else [k]) + after
            gaps.append(max((b - a for a, b in zip(points, points[1:])), default=window_s))
        out[partition] = gaps
    return out
