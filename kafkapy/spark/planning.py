"""Offset planning for the Spark source: where reads start and end, split into Spark tasks.

Pure functions over partition lists and an offsets lookup (ListOffsets behind it in
production, a dict in the tests), following the built-in connector's rules: offset JSON must
name every partition of a subscription, -2/-1 mean earliest/latest, a timestamp resolves to the
first offset at or after it, ``maxOffsetsPerTrigger`` is shared out in proportion to each
partition's backlog, and ``minPartitions`` splits large ranges.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from kafkapy.spark.options import EARLIEST, LATEST, OffsetSpec, TopicPartition

#: (partitions, -2 | -1 | timestamp | per-partition timestamps) -> offset per partition, None
#: where no record is at or after the timestamp.
Lookup = Callable[[list[TopicPartition], "int | Mapping[TopicPartition, int]"],
                  "Mapping[TopicPartition, int | None]"]


@dataclass(frozen=True, order=True)
class OffsetRange:
    """[start, until) of one partition; one Spark task reads it."""

    topic: str
    partition: int
    start: int
    until: int

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)

    @property
    def size(self) -> int:
        return max(0, self.until - self.start)


def resolve(spec: OffsetSpec, tps: Iterable[TopicPartition], lookup: Lookup, *,
            ending: bool = False, timestamp_strategy_latest: bool = False,
            check_complete: bool = True) -> dict[TopicPartition, int]:
    """Concrete offsets for ``spec`` on ``tps``.

    A timestamp with no record at or after it means the latest offset for an ending spec and
    for a starting one with ``startingOffsetsByTimestampStrategy=latest``; otherwise it is an
    error, as in Spark.
    """
    tps = sorted(tps)
    if spec.kind in ("earliest", "latest"):
        found = lookup(tps, EARLIEST if spec.kind == "earliest" else LATEST)
        return {tp: int(found[tp] or 0) for tp in tps}
    if spec.kind == "offsets":
        missing = [tp for tp in tps if tp not in spec.offsets]
        if missing and check_complete:
            raise ValueError(
                f"offsets JSON must specify every partition of the subscription; missing "
                f"{', '.join(f'{t}-{p}' for t, p in missing)}. Use -2 for earliest, -1 for latest.")
        out: dict[TopicPartition, int] = {}
        needs = {tp: spec.offsets.get(tp, EARLIEST) for tp in tps}
        specials = {v for v in needs.values() if v in (EARLIEST, LATEST)}
        looked = {v: lookup([tp for tp, w in needs.items() if w == v], v) for v in specials}
        for tp, v in needs.items():
            out[tp] = int(looked[v][tp] or 0) if v in looked else v
        return out
    timestamps: int | dict[TopicPartition, int]
    if spec.kind == "timestamp":
        assert spec.timestamp is not None
        timestamps = spec.timestamp
    else:
        missing = [tp for tp in tps if tp not in spec.offsets]
        if missing:
            raise ValueError(
                f"offsets by timestamp JSON must specify every partition of the subscription; "
                f"missing {', '.join(f'{t}-{p}' for t, p in missing)}")
        timestamps = {tp: spec.offsets[tp] for tp in tps}
    found = lookup(tps, timestamps)
    out = {}
    unmatched = [tp for tp in tps if found.get(tp) is None]
    if unmatched:
        if not (ending or timestamp_strategy_latest):
            tp = unmatched[0]
            ts = timestamps if isinstance(timestamps, int) else timestamps[tp]
            raise ValueError(f"No offset matched the timestamp {ts} in {tp[0]}-{tp[1]}: no record "
                             "is that late. Set startingOffsetsByTimestampStrategy=latest to "
                             "start such partitions at their latest offset.")
        latest = lookup(unmatched, LATEST)
        for tp in unmatched:
            out[tp] = int(latest[tp] or 0)
    for tp in tps:
        if tp not in out:
            out[tp] = int(found[tp])  # type: ignore[arg-type]
    return out


def batch_ranges(start: Mapping[TopicPartition, int], until: Mapping[TopicPartition, int]
                 ) -> list[OffsetRange]:
    """The batch query's ranges; a start past its end is refused as Spark refuses it."""
    ranges = []
    for tp in sorted(start):
        s, u = start[tp], until[tp]
        if s > u:
            raise ValueError(f"the starting offset {s} of {tp[0]}-{tp[1]} is after its ending "
                             f"offset {u}")
        ranges.append(OffsetRange(tp[0], tp[1], s, u))
    return ranges


def rate_limit(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
               limit: int) -> dict[TopicPartition, int]:
    """End offsets that read at most about ``limit`` records, shared out by backlog.

    As the built-in connector: each partition gets ``limit * backlog / total`` (at least one
    record when it has any backlog) and never beyond its latest offset.
    """
    sizes = {tp: max(0, latest[tp] - start.get(tp, latest[tp])) for tp in latest}
    total = sum(sizes.values())
    if total <= limit:
        return dict(latest)
    out = {}
    for tp, end in latest.items():
        begin = start.get(tp, end)
        share = limit * (sizes[tp] / total)
        step = int(share) if share >= 1 else (1 if share > 0 else 0)
        out[tp] = min(end, begin + step)
    return out


def split(ranges: Iterable[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """At least ``min_partitions`` ranges, by cutting the larger ranges in equal parts (Spark's
    KafkaOffsetRangeCalculator); empty ranges are dropped."""
    ranges = [r for r in ranges if r.size > 0]
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    out = []
    for r in ranges:
        parts = max(1, round(r.size / total * min_partitions))
        step, extra = divmod(r.size, parts)
        begin = r.start
        for i in range(parts):
            end = begin + step + (1 if i < extra else 0)
            if end > begin:
                out.append(OffsetRange(r.topic, r.partition, begin, end))
            begin = end
    return out
