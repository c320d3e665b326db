"""One member's step towards its target assignment (Kafka's CurrentAssignmentBuilder).

A member never gains a partition that another member may still be consuming, and it gives up
partitions before it gets new ones:

* partitions it holds that left its target are *revoked* first: while it still reports owning
  them it stays in UNREVOKED_PARTITIONS at its old epoch, with only the partitions it keeps;
* partitions of its target that another member still holds are *unreleased*: the member moves to
  the target epoch without them (UNRELEASED_PARTITIONS) and gets them once they are free;
* otherwise it is STABLE at the target epoch with its whole target.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from kafkapy.coordinator.consumer import partitions as ps
from kafkapy.coordinator.consumer.partitions import Assignment, TopicId


class MemberState(enum.IntEnum):
    """The reconciliation state of a member (the int8 of CurrentMemberAssignment records)."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


@dataclass(frozen=True)
class Reconciliation:
    """Where a member's assignment stands: the fields of its CurrentMemberAssignment record."""

    state: MemberState = MemberState.STABLE
    member_epoch: int = 0
    previous_member_epoch: int = 0
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)

    def reconciled_to(self, epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == epoch


#: ``owner_epoch(topic id, partition)``: the epoch of the member holding it, -1 when free.
OwnerEpoch = Callable[[TopicId, int], int]


def next_step(current: Reconciliation, target_epoch: int, target: Mapping[TopicId, frozenset[int]],
              owner_epoch: OwnerEpoch, owned: Mapping[TopicId, frozenset[int]] | None,
              subscribed: frozenset[TopicId] | None = None) -> Reconciliation:
    """The member's next reconciliation state. ``owned`` is what the member reported owning in
    this heartbeat, None when it did not say (then it is assumed to still own everything).
    ``subscribed`` (topic ids), when given, is the member's current subscription: partitions of
    topics it dropped are revoked at once, without waiting for the next target."""
    if subscribed is not None:
        target = {t: p for t, p in target.items() if t in subscribed}
    if current.state is MemberState.STABLE:
        if current.member_epoch == target_epoch:
            return _drop_unsubscribed(current, subscribed, owned)
        return _compute(current, current.member_epoch, target_epoch, target, owner_epoch, owned)
    if current.state is MemberState.UNREVOKED_PARTITIONS:
        if _still_owns(current.pending_revocation, owned):
            return _drop_unsubscribed(current, subscribed, owned)
        return _compute(current, current.member_epoch, target_epoch, target, owner_epoch, owned)
    if current.state is MemberState.UNRELEASED_PARTITIONS:
        return _compute(current, current.member_epoch, target_epoch, target, owner_epoch, owned)
    raise ValueError(f"cannot reconcile a member in state {current.state!r}")


def _still_owns(revoking: Mapping[TopicId, frozenset[int]], owned: Mapping[TopicId, frozenset[int]] | None) -> bool:
    if owned is None:
        return True
    return ps.overlaps(revoking, owned)


def _drop_unsubscribed(current: Reconciliation, subscribed: frozenset[TopicId] | None,
                       owned: Mapping[TopicId, frozenset[int]] | None) -> Reconciliation:
    """At the same epoch: the partitions of topics the member no longer subscribes to move to
    revocation (or simply go, when the member already let go of them)."""
    if subscribed is None:
        return current
    gone = {t: p for t, p in current.assigned.items() if t not in subscribed}
    if not gone:
        return current
    keep = ps.minus(current.assigned, gone)
    revoking = ps.union(current.pending_revocation, gone)
    if _still_owns(revoking, owned):
        return Reconciliation(MemberState.UNREVOKED_PARTITIONS, current.member_epoch, current.member_epoch,
                              keep, revoking)
    return replace(current, previous_member_epoch=current.member_epoch, assigned=keep)


def _compute(current: Reconciliation, member_epoch: int, target_epoch: int,
             target: Mapping[TopicId, frozenset[int]], owner_epoch: OwnerEpoch,
             owned: Mapping[TopicId, frozenset[int]] | None) -> Reconciliation:
    keep = ps.intersect(current.assigned, target)
    revoke = ps.minus(current.assigned, keep)
    wanted = ps.minus(target, keep)
    free: dict[TopicId, set[int]] = {}
    unreleased = False
    for t, p in ps.pairs(wanted):
        # A partition this member was revoking is not held by anyone else: it may come back.
        if owner_epoch(t, p) == -1 or p in current.pending_revocation.get(t, frozenset()):
            free.setdefault(t, set()).add(p)
        else:
            unreleased = True
    if revoke and _still_owns(revoke, owned):
        # Revocation comes first: the epoch stays until the member says it let go.
        return Reconciliation(MemberState.UNREVOKED_PARTITIONS, member_epoch, member_epoch, keep, revoke)
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return Reconciliation(state, target_epoch, current.member_epoch, ps.union(keep, ps.normalize(free)), {})
