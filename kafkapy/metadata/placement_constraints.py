"""Replica placement constraints and observer promotion: the ``confluent.placement.constraints``
topic config.

The value is JSON in the shape Confluent Server uses, so existing stretch-cluster configs carry
over::

    {"version": 2,
     "replicas":  [{"count": 2, "constraints": {"rack": "west"}},
                   {"count": 2, "constraints": {"rack": "east"}}],
     "observers": [{"count": 1, "constraints": {"rack": "west"}},
                   {"count": 1, "constraints": {"rack": "east"}}],
     "observerPromotionPolicy": "under-min-isr"}

*Replicas* are synchronous: they join the ISR and count for ``min.insync.replicas`` and the high
watermark. *Observers* replicate from the leader like any follower but stay out of the ISR, so a
slow or distant site never holds writes back; the assignment lists them after the replicas, and
the partition's ``Observers`` field names them. Version 1 has no promotion policy (observers are
never promoted); version 2 adds ``observerPromotionPolicy`` (default ``under-min-isr``).

Promotion is a caught-up observer joining the ISR while the policy says the partition needs it;
demotion is the leader taking it out again once the synchronous replicas alone satisfy the
policy. ``observer_may_join`` and ``observers_to_demote`` are the one rule both the leader (which
proposes ISR changes) and the controller (which checks them) apply.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

CONFIG_NAME = "confluent.placement.constraints"

UNDER_MIN_ISR = "under-min-isr"
UNDER_REPLICATED = "under-replicated"
LEADER_IS_OBSERVER = "leader-is-observer"
PROMOTION_POLICIES = (UNDER_MIN_ISR, UNDER_REPLICATED, LEADER_IS_OBSERVER)


class ConstraintError(ValueError):
    """A placement-constraints value that does not parse or does not make sense."""


@dataclass(frozen=True)
class PlacementGroup:
    """``count`` replicas (or observers) on brokers whose rack is ``rack``."""

    count: int
    rack: str


@dataclass(frozen=True)
class PlacementConstraints:
    """A parsed ``confluent.placement.constraints`` value."""

    version: int
    replicas: tuple[PlacementGroup, ...]
    observers: tuple[PlacementGroup, ...] = ()
    promotion_policy: str | None = None

    @property
    def sync_count(self) -> int:
        return sum(g.count for g in self.replicas)

    @property
    def observer_count(self) -> int:
        return sum(g.count for g in self.observers)

    def to_json(self) -> str:
        out: dict[str, Any] = {"version": self.version,
                               "replicas": [_group_json(g) for g in self.replicas]}
        if self.observers:
            out["observers"] = [_group_json(g) for g in self.observers]
        if self.promotion_policy is not None and self.version >= 2:
            out["observerPromotionPolicy"] = self.promotion_policy
        return json.dumps(out, separators=(",", ":"))


def _group_json(g: PlacementGroup) -> dict[str, Any]:
    return {"count": g.count, "constraints": {"rack": g.rack}}


def parse(value: str | None) -> PlacementConstraints | None:
    """The constraints in ``value``; None for an empty value (no constraints).

    Raises ConstraintError with a message fit for INVALID_CONFIG.
    """
    if value is None or not value.strip():
        return None
    try:
        doc = json.loads(value)
    except json.JSONDecodeError as e:
        raise ConstraintError(f"not JSON: {e.msg}") from None
    if not isinstance(doc, dict):
        raise ConstraintError("expected a JSON object")
    unknown = set(doc) - {"version", "replicas", "observers", "observerPromotionPolicy"}
    if unknown:
        raise ConstraintError(f"unknown field(s): {', '.join(sorted(unknown))}")
    version = doc.get("version")
    if version not in (1, 2) or isinstance(version, bool):
        raise ConstraintError("version must be 1 or 2")
    replicas = _groups(doc.get("replicas"), "replicas")
    if not replicas:
        raise ConstraintError("replicas must name at least one replica")
    observers = _groups(doc.get("observers", []), "observers")
    policy = doc.get("observerPromotionPolicy")
    if policy is not None:
        if version < 2:
            raise ConstraintError("observerPromotionPolicy needs version 2")
        if policy not in PROMOTION_POLICIES:
            raise ConstraintError("observerPromotionPolicy must be one of "
                                  + ", ".join(PROMOTION_POLICIES))
    elif version >= 2 and observers:
        policy = UNDER_MIN_ISR
    return PlacementConstraints(version, replicas, observers, policy)


def _groups(raw: object, what: str) -> tuple[PlacementGroup, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ConstraintError(f"{what} must be a list")
    out = []
    for item in raw:
        if not isinstance(item, dict):
            raise ConstraintError(f"each entry of {what} must be an object")
        count = item.get("count")
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise ConstraintError(f"each entry of {what} needs a count of at least 1")
        constraints = item.get("constraints")
        if not isinstance(constraints, dict) or set(constraints) != {"rack"} \
                or not isinstance(constraints["rack"], str) or not constraints["rack"]:
            raise ConstraintError(f"each entry of {what} needs constraints with one rack")
        out.append(PlacementGroup(count, constraints["rack"]))
    return tuple(out)


def validate(value: str) -> None:
    """Raise ConstraintError if ``value`` is not a usable constraints value."""
    parse(value)


def derive_observers(constraints: PlacementConstraints, replicas: Sequence[int],
                     rack_of: Callable[[int], str | None]) -> tuple[int, ...]:
    """Which of ``replicas`` are observers under ``constraints``: in assignment order, a broker
    is a synchronous replica while its rack's replica count is not filled, then an observer while
    its rack's observer count is not; anything beyond both stays synchronous. A reassignment
    names no observers (AlterPartitionReassignments has no field for them), so this reads them
    off the new assignment, which lists observers last as placement writes them."""
    sync_left: dict[str, int] = {}
    observers_left: dict[str, int] = {}
    for g in constraints.replicas:
        sync_left[g.rack] = sync_left.get(g.rack, 0) + g.count
    for g in constraints.observers:
        observers_left[g.rack] = observers_left.get(g.rack, 0) + g.count
    out = []
    for r in replicas:
        rack = rack_of(r)
        if rack is None:
            continue
        if sync_left.get(rack, 0) > 0:
            sync_left[rack] -= 1
        elif observers_left.get(rack, 0) > 0:
            observers_left[rack] -= 1
            out.append(r)
    return tuple(out)


# ------------------------------------------------------------------------------------------------
# Promotion and demotion


def _needs_observers(policy: str | None, *, isr_size: int, sync_in_isr: int, sync_count: int,
                     min_insync: int, leader_is_observer: bool) -> bool:
    """Whether the partition, with this ISR, is short of what the policy guarantees."""
    if policy == UNDER_MIN_ISR:
        return isr_size < min_insync
    if policy == UNDER_REPLICATED:
        return sync_in_isr < sync_count
    if policy == LEADER_IS_OBSERVER:
        return leader_is_observer
    return False


def observer_may_join(policy: str | None, *, isr: Sequence[int], observers: Sequence[int],
                      replicas: Sequence[int], leader: int, min_insync: int) -> bool:
    """Whether one more (caught-up) observer may join ``isr`` now.

    Under ``under-min-isr`` observers join only while the ISR is below ``min.insync.replicas``
    (so exactly enough join to let acks=all writes continue); under ``under-replicated`` while a
    synchronous replica is missing from the ISR; under ``leader-is-observer`` while the leader
    itself is an observer (it was elected after every synchronous replica was lost).
    """
    observer_set = set(observers)
    sync = [r for r in replicas if r not in observer_set]
    return _needs_observers(
        policy, isr_size=len(isr), sync_in_isr=sum(1 for r in isr if r not in observer_set),
        sync_count=len(sync), min_insync=min_insync, leader_is_observer=leader in observer_set)


def observers_to_demote(policy: str | None, *, isr: Sequence[int], observers: Sequence[int],
                        replicas: Sequence[int], leader: int, min_insync: int) -> tuple[int, ...]:
    """Observers in ``isr`` that may leave it: all of them once the synchronous members alone
    meet the policy, none otherwise. The leader never demotes itself."""
    observer_set = set(observers)
    promoted = tuple(r for r in isr if r in observer_set and r != leader)
    if not promoted:
        return ()
    sync_isr = [r for r in isr if r not in observer_set]
    sync = [r for r in replicas if r not in observer_set]
    still_short = _needs_observers(
        policy, isr_size=len(sync_isr) + (1 if leader in observer_set else 0),
        sync_in_isr=len(sync_isr), sync_count=len(sync), min_insync=min_insync,
        leader_is_observer=leader in observer_set)
    return () if still_short else promoted


__all__ = [
    "CONFIG_NAME", "ConstraintError", "LEADER_IS_OBSERVER", "PROMOTION_POLICIES",
    "PlacementConstraints", "PlacementGroup", "UNDER_MIN_ISR", "UNDER_REPLICATED",
    "derive_observers", "observer_may_join", "observers_to_demote", "parse", "validate",
]
