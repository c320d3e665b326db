"""Partition sets keyed by topic id: the unit every KIP-848 record, assignor and reconciliation
step works in.

An :data:`Assignment` maps a topic id to the partitions of that topic; topics with no partition
are left out, so two equal assignments compare equal as dicts.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

TopicId = uuid.UUID
#: ``{topic id: partitions}``; never holds an empty set (see :func:`normalize`).
Assignment = dict[TopicId, frozenset[int]]

EMPTY: Mapping[TopicId, frozenset[int]] = {}


def normalize(a: Mapping[TopicId, Iterable[int]]) -> Assignment:
    """A copy with frozensets and without empty topics."""
    out: Assignment = {}
    for t, ps in a.items():
        s = frozenset(ps)
        if s:
            out[t] = s
    return out


def intersect(a: Mapping[TopicId, frozenset[int]], b: Mapping[TopicId, frozenset[int]]) -> Assignment:
    return normalize({t: ps & b.get(t, frozenset()) for t, ps in a.items()})


def minus(a: Mapping[TopicId, frozenset[int]], b: Mapping[TopicId, frozenset[int]]) -> Assignment:
    return normalize({t: ps - b.get(t, frozenset()) for t, ps in a.items()})


def union(a: Mapping[TopicId, frozenset[int]], b: Mapping[TopicId, frozenset[int]]) -> Assignment:
    out = dict(a)
    for t, ps in b.items():
        out[t] = out.get(t, frozenset()) | ps
    return normalize(out)


def is_subset(a: Mapping[TopicId, frozenset[int]], b: Mapping[TopicId, frozenset[int]]) -> bool:
    return all(ps <= b.get(t, frozenset()) for t, ps in a.items())


def overlaps(a: Mapping[TopicId, frozenset[int]], b: Mapping[TopicId, frozenset[int]]) -> bool:
    return any(ps & b.get(t, frozenset()) for t, ps in a.items())


def count(a: Mapping[TopicId, frozenset[int]]) -> int:
    return sum(len(ps) for ps in a.values())


def pairs(a: Mapping[TopicId, frozenset[int]]) -> Iterable[tuple[TopicId, int]]:
    """Every (topic id, partition), in a stable order."""
    for t in sorted(a):
        for p in sorted(a[t]):
            yield t, p
