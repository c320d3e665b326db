"""Checking what group members consumed and committed against what was produced.

The members (`kafkapy.testing.group_members`) print a ``record`` line for every record they process
and a ``committed`` line once a commit of the offsets after them returned; both carry the wall
clock ``t`` in ms of the one machine they all run on. `problems` lists, in words, every way those
lines break what a consumer group promises:

* every produced record is consumed;
* a partition's committed offset never goes backwards;
* a record is consumed again only if its offset was not yet committed: once a commit of a
  later offset has returned, no member may receive that record again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def commits(events: Iterable[Mapping[str, Any]]) -> list[tuple[int, int, int, str]]:
    """(t, partition, next offset, member) for every commit that returned, in time order."""
    out = [(int(e["t"]), int(p), int(o), str(e.get("member", "")))
           for e in events if e["event"] == "committed" for p, o in e["offsets"].items()]
    return sorted(out)


def problems(events: Iterable[Mapping[str, Any]], produced: Mapping[int, Iterable[int]]) -> list[str]:
    """Everything wrong with the members' ``events`` (merged, any order) given the offsets the
    producer was told, per partition."""
    events = list(events)
    found: list[str] = []
    timeline = commits(events)
    last: dict[int, tuple[int, str]] = {}
    for t, p, o, member in timeline:
        if p in last and o < last[p][0]:
            found.append(f"partition {p}: {member} committed {o} at {t} after {last[p][1]} had committed "
                         f"{last[p][0]}")
        last[p] = max(last.get(p, (o, member)), (o, member))
    records = sorted((int(e["t"]), int(e["p"]), int(e["o"]), str(e.get("member", "")))
                     for e in events if e["event"] == "record")
    seen: dict[tuple[int, int], tuple[int, str]] = {}
    for t, p, o, member in records:
        before = seen.get((p, o))
        if before is not None:
            # The highest commit of this partition that had returned before this delivery.
            committed = max((c_o for c_t, c_p, c_o, _ in timeline if c_p == p and c_t < t), default=-1)
            if committed > o:
                found.append(f"partition {p} offset {o}: consumed by {member} at {t} after offset {committed} "
                             f"was committed (first consumed by {before[1]} at {before[0]})")
        else:
            seen[(p, o)] = (t, member)
    for p, offsets in sorted(produced.items()):
        missing = sorted(set(offsets) - {o for (q, o) in seen if q == p})
        if missing:
            found.append(f"partition {p}: {len(missing)} records never consumed (offsets {missing[:10]}...)")
    return found


def committed_positions(events: Iterable[Mapping[str, Any]]) -> dict[int, int]:
    """partition -> the highest offset committed."""
    out: dict[int, int] = {}
    for _, p, o, _ in commits(events):
        out[p] = max(out.get(p, 0), o)
    return out
