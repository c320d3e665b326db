"""The server-side assignors of KIP-848, ``uniform`` and ``range``: pure functions from the
members' subscriptions, the subscribed topics' partition counts and the current target to the
next target.

Both are sticky: a member keeps what it already has as far as balance allows, so a rebalance
moves as few partitions as it can. Rack awareness is not implemented (racks are accepted and
ignored), as Kafka does when no member or partition has a rack.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from kafkapy.coordinator.consumer.partitions import Assignment, TopicId, normalize


@dataclass(frozen=True)
class MemberSpec:
    """An assignor's view of one member: what it subscribes to (topic ids that exist) and the
    partitions its current target gives it."""

    subscribed: frozenset[TopicId]
    target: Mapping[TopicId, frozenset[int]] = field(default_factory=dict)
    rack: str | None = None


#: ``assign(members, partitions_per_topic) -> {member id: target}``; every member has an entry.
Assignor = Callable[[Mapping[str, MemberSpec], Mapping[TopicId, int]], dict[str, Assignment]]


def _quotas(members: list[str], total: int, current: Mapping[str, int]) -> dict[str, int]:
    """Split ``total`` over ``members`` as evenly as possible (counts differ by at most one); the
    extra ones go first to members that already hold more than the minimum (stickiness), then
    in member id order."""
    if not members:
        return {}
    lo, extra = divmod(total, len(members))
    quota = dict.fromkeys(members, lo)
    for m in members:
        if extra and current.get(m, 0) > lo:
            quota[m] += 1
            extra -= 1
    for m in members:
        if not extra:
            break
        if quota[m] == lo:
            quota[m] += 1
            extra -= 1
    return quota


def _fill(members: list[str], quota: Mapping[str, int], kept: dict[str, list[tuple[TopicId, int]]],
          free: Iterable[tuple[TopicId, int]]) -> None:
    """Hand the ``free`` partitions, in order, to members below their quota, in member order:
    each member takes a contiguous run."""
    it = iter(free)
    for m in members:
        while len(kept[m]) < quota[m]:
            nxt = next(it, None)
            if nxt is None:
                return
            kept[m].append(nxt)


def _to_assignment(tps: Iterable[tuple[TopicId, int]]) -> Assignment:
    out: dict[TopicId, set[int]] = {}
    for t, p in tps:
        out.setdefault(t, set()).add(p)
    return normalize(out)


def _balanced(members: list[str], universe: list[tuple[TopicId, int]],
              current: Mapping[str, Mapping[TopicId, frozenset[int]]]) -> dict[str, list[tuple[TopicId, int]]]:
    """Sticky balanced assignment of ``universe`` (ordered) over ``members`` (ordered)."""
    valid = set(universe)
    held: dict[str, list[tuple[TopicId, int]]] = {}
    for m in members:
        held[m] = [(t, p) for t in sorted(current.get(m, {})) for p in sorted(current[m][t])
                   if (t, p) in valid]
    quota = _quotas(members, len(universe), {m: len(v) for m, v in held.items()})
    kept: dict[str, list[tuple[TopicId, int]]] = {}
    taken: set[tuple[TopicId, int]] = set()
    for m in members:
        mine = [tp for tp in held[m] if tp not in taken][: quota[m]]
        taken.update(mine)
        kept[m] = mine
    _fill(members, quota, kept, (tp for tp in universe if tp not in taken))
    return kept


def uniform(members: Mapping[str, MemberSpec], topics: Mapping[TopicId, int]) -> dict[str, Assignment]:
    """Kafka's ``uniform`` assignor. With one subscription shared by every member, all subscribed
    partitions are balanced over all members (counts differ by at most one). With different
    subscriptions, each topic is balanced over its own subscribers, a topic's spare partitions
    going to the subscribers that hold the fewest partitions overall."""
    ids = sorted(members)
    subs = {frozenset(t for t in members[m].subscribed if t in topics) for m in ids}
    if len(subs) <= 1:
        subscribed = sorted(next(iter(subs), frozenset()))
        universe = [(t, p) for t in subscribed for p in range(topics[t])]
        kept = _balanced(ids, universe, {m: members[m].target for m in ids})
        return {m: _to_assignment(kept[m]) for m in ids}
    return _heterogeneous(ids, members, topics)


def _heterogeneous(ids: list[str], members: Mapping[str, MemberSpec],
                   topics: Mapping[TopicId, int]) -> dict[str, Assignment]:
    result: dict[str, list[tuple[TopicId, int]]] = {m: [] for m in ids}
    # Topics with few subscribers first: their partitions have the fewest places to go.
    order = sorted(topics, key=lambda t: (sum(t in members[m].subscribed for m in ids), t))
    for t in order:
        subscribers = [m for m in ids if t in members[m].subscribed]
        if not subscribers:
            continue
        universe = [(t, p) for p in range(topics[t])]
        current = {m: {t: members[m].target.get(t, frozenset())} for m in subscribers}
        # Spare partitions of this topic go to whoever holds the fewest so far (ties: id order).
        by_load = sorted(subscribers, key=lambda m: (len(result[m]), m))
        kept = _balanced(by_load, universe, current)
        for m in subscribers:
            result[m].extend(kept[m])
    return {m: _to_assignment(result[m]) for m in ids}


def range_(members: Mapping[str, MemberSpec], topics: Mapping[TopicId, int]) -> dict[str, Assignment]:
    """Kafka's ``range`` assignor: per topic, the partitions are cut into contiguous ranges over
    the topic's subscribers in member id order, the first ``n % m`` getting one more. Topics with
    the same partition count and subscribers are co-partitioned (partition i of each goes to
    the same member). Current partitions are kept where the quotas allow."""
    ids = sorted(members)
    result: dict[str, list[tuple[TopicId, int]]] = {m: [] for m in ids}
    for t in sorted(topics):
        subscribers = [m for m in ids if t in members[m].subscribed]
        if not subscribers:
            continue
        universe = [(t, p) for p in range(topics[t])]
        current = {m: {t: members[m].target.get(t, frozenset())} for m in subscribers}
        kept = _balanced(subscribers, universe, current)
        for m in subscribers:
            result[m].extend(kept[m])
    return {m: _to_assignment(result[m]) for m in ids}


#: The assignors by the names ``group.consumer.assignors`` and ``ServerAssignor`` use.
ASSIGNORS: dict[str, Assignor] = {"uniform": uniform, "range": range_}
