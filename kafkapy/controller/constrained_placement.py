"""Replica placement under ``confluent.placement.constraints``: so many replicas and observers per
rack.

Each partition takes, rack by rack, the brokers its groups ask for, walking each rack's brokers
round-robin from a per-partition offset so partitions spread over a rack's brokers. The order of
the synchronous groups rotates with the partition index: the first synchronous replica is the
preferred leader, so leadership spreads over the racks that hold replicas instead of piling on
the first one. Observers follow every synchronous replica in the assignment (Confluent's order),
which keeps them last in line for leadership.

Unfenced brokers are chosen before fenced ones in each rack, and the leader must be unfenced.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kafkapy.controller.placement import RandomSource, UsableBroker
from kafkapy.metadata.placement_constraints import PlacementConstraints, PlacementGroup
from kafkapy.protocol.errors import ErrorCode, KafkaError


@dataclass(frozen=True)
class ConstrainedAssignment:
    """One partition's replicas (synchronous first, then observers) and its observers."""

    replicas: tuple[int, ...]
    observers: tuple[int, ...]


class _Rack:
    def __init__(self, brokers: list[UsableBroker], offset: int) -> None:
        # Unfenced brokers first, each part in id order, so the walk prefers live brokers.
        self.brokers = ([b.id for b in sorted(brokers, key=lambda b: b.id) if not b.fenced]
                        + [b.id for b in sorted(brokers, key=lambda b: b.id) if b.fenced])
        self.unfenced = sum(1 for b in brokers if not b.fenced)
        self.offset = offset

    def take(self, count: int, partition: int, used: set[int]) -> list[int]:
        """``count`` brokers of this rack not in ``used``, unfenced ones first."""
        n_live = self.unfenced
        live = self.brokers[:n_live]
        fenced = self.brokers[n_live:]
        start = (self.offset + partition) % n_live if n_live else 0
        order = live[start:] + live[:start] + fenced
        chosen = [b for b in order if b not in used][:count]
        used.update(chosen)
        return chosen


def place_constrained(brokers: Iterable[UsableBroker], constraints: PlacementConstraints,
                      num_partitions: int, *, first_partition: int = 0,
                      rng: RandomSource | None = None) -> list[ConstrainedAssignment]:
    """Assignments for partitions ``first_partition .. first_partition + num_partitions - 1``.

    Raises ``KafkaError(INVALID_REPLICATION_FACTOR)`` when a rack has fewer brokers than its
    groups ask for, or no unfenced broker can lead.
    """
    by_rack: dict[str, list[UsableBroker]] = {}
    for b in brokers:
        if b.rack is not None:
            by_rack.setdefault(b.rack, []).append(b)
    needed: dict[str, int] = {}
    for g in constraints.replicas + constraints.observers:
        needed[g.rack] = needed.get(g.rack, 0) + g.count
    for rack, count in sorted(needed.items()):
        have = len(by_rack.get(rack, []))
        if have < count:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             f"The placement constraints need {count} broker(s) in rack '{rack}', "
                             f"but only {have} are available.")
    racks = {name: _Rack(members, rng.randrange(len(members)) if rng is not None else 0)
             for name, members in by_rack.items() if name in needed}
    out = []
    for p in range(first_partition, first_partition + num_partitions):
        used: set[int] = set()
        groups = constraints.replicas
        turn = p % len(groups)
        sync: list[int] = []
        for g in groups[turn:] + groups[:turn]:
            sync += racks[g.rack].take(g.count, p, used)
        observers: list[int] = []
        for og in constraints.observers:
            observers += racks[og.rack].take(og.count, p, used)
        sync = _live_leader_first(sync, racks, groups)
        out.append(ConstrainedAssignment(tuple(sync + observers), tuple(observers)))
    return out


def _live_leader_first(sync: list[int], racks: dict[str, _Rack],
                       groups: tuple[PlacementGroup, ...]) -> list[int]:
    """``sync`` with an unfenced broker first (it is the preferred leader)."""
    live = {b for r in racks.values() for b in r.brokers[:r.unfenced]}
    for i, b in enumerate(sync):
        if b in live:
            return [b] + sync[:i] + sync[i + 1:]
    racks_named = ", ".join(sorted({g.rack for g in groups}))
    raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                     f"Every broker of the replicas' racks ({racks_named}) is fenced.")


__all__ = ["ConstrainedAssignment", "place_constrained"]
