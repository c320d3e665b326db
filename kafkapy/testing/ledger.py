"""Checking a replicated log against what producers were told: acked records and replica files.

``read_ledger`` parses what ``kafkapy.testing.acked_producer`` wrote; ``read_replica`` (and
``read_replica_log``, records only) reads one replica's partition straight from a node's data
directory (segment files, read only, so a running node's files can be read too); ``problems``
lists, in words, every way the logs break the promise of ``acks=all``: an acknowledged record
missing, stored twice, out of order, at another offset, or replicas that disagree byte for byte.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kafkapy.log.checkpoint import read_checkpoint
from kafkapy.records.reader import iter_batches, iter_records


@dataclass(frozen=True)
class Ack:
    """One acknowledged record: where the broker said it is (-1: acked implicitly, offset not
    known), and when the producer heard."""

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
    """partition -> acks in the order the producer heard them (lines ``partition offset seq time``)."""
    acks: dict[int, list[Ack]] = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) != 4:
                continue  # a line cut short by a kill
            # "None": an implicit ack (no offset) as older ledgers wrote it; -1 now.
            offset = -1 if parts[1] == "None" else int(parts[1])
            a = Ack(int(parts[0]), offset, int(parts[2]), float(parts[3]))
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


def read_replica_log(data_dir: str | os.PathLike[str], topic: str,
                     partition: int) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record of one replica's partition as (offset, key, value), from its segment files."""
    out: list[tuple[int, bytes | None, bytes | None]] = []
    pattern = os.path.join(str(data_dir), f"{topic}-{partition}", "*.log")
    for path in sorted(glob.glob(pattern)):
        with open(path, "rb") as f:
            data = f.read()
        for _, batch in iter_batches(data):
            out.extend((rec.offset, rec.key, rec.value) for rec in iter_records(batch))
    return out


def read_high_watermarks(data_dir: str | os.PathLike[str]) -> dict[tuple[str, int], int]:
    """(topic, partition) -> high watermark from a node's replication-offset-checkpoint (what
    it last wrote: every few seconds while running, and at a clean shutdown); {} when absent."""
    entries = read_checkpoint(os.path.join(str(data_dir), "replication-offset-checkpoint")) or []
    return {(topic, int(partition)): int(offset) for topic, partition, offset in entries}


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
    # Every pair, not just against one reference: a short first replica would otherwise hide a
    # disagreement between the other two. Only the common prefix is compared; a replica that
    # is short of the committed offset is reported by the caller.
    nodes = sorted(copies)
    for i, a_node in enumerate(nodes):
        for b_node in nodes[i + 1:]:
            a, b = copies[a_node], copies[b_node]
            for n, (x, y) in enumerate(zip(a.batches, b.batches)):
                if x != y:
                    yield (f"partition {partition}: batch {n} (base offset {_base_offset(x)} on "
                           f"node {a_node}, {_base_offset(y)} on node {b_node}) differs between "
                           f"nodes {a_node} and {b_node}")
                    break


def _base_offset(batch: bytes) -> int:
    return int.from_bytes(batch[:8], "big", signed=True)


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

    def value_of(a: Ack) -> bytes:
        return f"{partition}:{a.seq}".encode()

    def position(a: Ack) -> int:
        # An implicit ack (offset -1) is ordered by where its record is stored.
        return a.offset if a.offset >= 0 else by_value.get(value_of(a), [-1])[0]

    last_seq = -1
    for a in sorted(acked, key=position):
        where = by_value.get(value_of(a))
        if not where:
            yield f"partition {partition}: acked record seq {a.seq} (offset {a.offset}) is missing"
        elif where[0] != a.offset and a.offset >= 0:
            yield (f"partition {partition}: acked record seq {a.seq} was acked at offset "
                   f"{a.offset} but is stored at {where[0]}")
        if a.seq <= last_seq:
            yield f"partition {partition}: seq {a.seq} stored after seq {last_seq}"
        last_seq = max(last_seq, a.seq)


def unavailability(acks: Mapping[int, Sequence[Ack]], kill_times: Sequence[float],
                   window_s: float = 60.0) -> dict[int, list[float]]:
    """Per partition, for each kill: the longest gap between consecutive acks from the last ack
    before the kill until the next kill (or ``window_s`` after it, or the last ack), i.e. how long
    producing to that partition stalled because of that failover."""
    out: dict[int, list[float]] = {}
    kills = sorted(kill_times)
    for partition, acked in sorted(acks.items()):
        times = sorted(a.at for a in acked)
        gaps = []
        for i, k in enumerate(kills):
            # Bounded by the next kill, or every failover would also be charged with the stalls
            # of the ones that follow it inside the window.
            end = min(k + window_s, kills[i + 1]) if i + 1 < len(kills) else k + window_s
            before = [t for t in times if t <= k]
            after = [t for t in times if k < t <= end]
            points = ([before[-1]] if before else [k]) + after
            if not after:
                points.append(end)  # no ack at all until the end: stalled throughout
            gaps.append(max(b - a for a, b in zip(points, points[1:])))
        out[partition] = gaps
    return out
