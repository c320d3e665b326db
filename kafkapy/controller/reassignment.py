"""Replica-set arithmetic of a partition reassignment (Kafka's KRaft semantics).

A reassignment that moves data runs in stages. The controller first grows the replica set to
the target followed by the current replicas the target drops, and records which replicas are
being added and removed. New replicas then copy the log and the leader brings them into the ISR;
once every target replica is in sync the reassignment completes: the replica set becomes the
target and the removed replicas leave the ISR. A cancel goes back to the replicas as they were
before the reassignment started.

Pure functions of replica lists; the controller turns their answers into records.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple


class ReassignmentReplicas(NamedTuple):
    """A partition's replica list with the replicas being added and removed."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def in_progress(self) -> bool:
        return bool(self.adding or self.removing)


def start(current: Sequence[int], target: Sequence[int]) -> ReassignmentReplicas:
    """The replica set while moving from ``current`` (the partition's whole replica list, which
    includes the replicas of a reassignment in progress: a new target replaces that one) to
    ``target``: the target in its order, then the current replicas it drops."""
    target_set, current_set = set(target), set(current)
    removing = tuple(r for r in current if r not in target_set)
    adding = tuple(r for r in target if r not in current_set)
    return ReassignmentReplicas(tuple(target) + removing, adding, removing)


def completed(r: ReassignmentReplicas, isr: Sequence[int]
              ) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """(replicas, ISR) once the reassignment ``r`` is finished, if ``isr`` lets it finish: every
    replica that stays must be in sync, and some replica must be (Kafka's
    maybeCompleteReassignment). None while it must keep running, or when none is running."""
    if not r.in_progress:
        return None
    removing = set(r.removing)
    new_isr = tuple(b for b in isr if b not in removing)
    new_replicas = tuple(b for b in r.replicas if b not in removing)
    if not new_isr or not new_replicas or not set(new_replicas) <= set(new_isr):
        return None
    return new_replicas, new_isr


class Revert(NamedTuple):
    """Where a cancelled reassignment goes back to."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    # No original replica was in sync: going back needs an unclean election.
    unclean: bool


def revert(replicas: Sequence[int], isr: Sequence[int], adding: Sequence[int]) -> Revert:
    """The original replicas and ISR of a partition whose reassignment is cancelled: the added
    replicas go; the removed ones were never taken out, so they simply stay."""
    added = set(adding)
    original = tuple(r for r in replicas if r not in added)
    kept_isr = tuple(r for r in isr if r not in added)
    if kept_isr:
        return Revert(original, kept_isr, False)
    return Revert(original, original, True)
