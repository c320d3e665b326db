"""The ``simple`` share-group assignor (Kafka's SimpleAssignor), pure.

Share groups may have more members than partitions: then a partition is shared. Kafka's rule:
each partition goes to ``ceil(members / partitions)`` members (its *sharing*), every member gets
its fair part of the ``sharing * partitions`` slots (parts differ by at most one), and members
keep what they had where that stays within both limits. With members subscribed to different
topics the rule is applied topic by topic among the members subscribed to it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from kafkapy.coordinator.consumer import partitions as ps
from kafkapy.coordinator.consumer.partitions import Assignment, TopicId

NAME = "simple"

Slot = tuple[TopicId, int]


def assign(subscriptions: Mapping[str, frozenset[TopicId]], partition_counts: Mapping[TopicId, int],
           current: Mapping[str, Mapping[TopicId, frozenset[int]]]) -> dict[str, Assignment]:
    """Each member's target: ``subscriptions`` (member -> topic ids), the assignable partitions
    per topic, and the members' present targets (for stickiness)."""
    out: dict[str, Assignment] = {m: {} for m in subscriptions}
    groups: dict[frozenset[str], frozenset[TopicId]]
    if len(set(subscriptions.values())) <= 1:
        groups = {frozenset(subscriptions): next(iter(subscriptions.values()), frozenset())}
    else:
        by_topic: dict[TopicId, set[str]] = defaultdict(set)
        for m, topics in subscriptions.items():
            for t in topics:
                by_topic[t].add(m)
        groups = {}
        for t, holders in by_topic.items():
            groups[frozenset(holders)] = groups.get(frozenset(holders), frozenset()) | {t}
    for members, topics in sorted(groups.items(), key=lambda kv: sorted(kv[0])):
        slots = [(t, p) for t in sorted(topics) for p in range(partition_counts.get(t, 0))]
        for m, got in _share(sorted(members), slots, current).items():
            out[m] = ps.union(out[m], got)
    return out


def _share(members: list[str], slots: list[Slot], current: Mapping[str, Mapping[TopicId, frozenset[int]]]
           ) -> dict[str, Assignment]:
    if not members or not slots:
        return {m: {} for m in members}
    sharing = -(-len(members) // len(slots))
    total = sharing * len(slots)
    # Member i's quota: its share of the slots, spread so quotas differ by at most one.
    quota = {m: (total * (i + 1) + len(members) - 1) // len(members) - (total * i + len(members) - 1) // len(members)
             for i, m in enumerate(members)}
    valid = set(slots)
    holders: dict[Slot, set[str]] = {s: set() for s in slots}
    owned: dict[str, set[Slot]] = {m: set() for m in members}
    for m in members:  # keep what each had, within both limits
        for s in ps.pairs(ps.normalize(current.get(m, {}))):
            if s in valid and len(owned[m]) < quota[m] and len(holders[s]) < sharing:
                owned[m].add(s)
                holders[s].add(m)
    for s in slots:  # fill the gaps, least-loaded member first
        while len(holders[s]) < sharing:
            free = [m for m in members if m not in holders[s] and len(owned[m]) < quota[m]]
            if not free:
                break
            m = min(free, key=lambda m: (len(owned[m]), members.index(m)))
            owned[m].add(s)
            holders[s].add(m)
    out: dict[str, Assignment] = {}
    for m in members:
        by_topic: dict[TopicId, set[int]] = defaultdict(set)
        for t, p in owned[m]:
            by_topic[t].add(p)
        out[m] = ps.normalize(by_topic)
    return out
