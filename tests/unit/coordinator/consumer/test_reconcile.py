"""One member's reconciliation step (Kafka's CurrentAssignmentBuilder): revoke before assign,
wait for partitions other members still hold, converge to the target epoch."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

import pytest

from kafkapy.coordinator.consumer.reconcile import MemberState, Reconciliation, next_step

A, B = uuid.UUID(int=1), uuid.UUID(int=2)
S, REV, REL = MemberState.STABLE, MemberState.UNREVOKED_PARTITIONS, MemberState.UNRELEASED_PARTITIONS


def a(**topics: set[int]) -> dict[uuid.UUID, frozenset[int]]:
    ids = {"A": A, "B": B}
    return {ids[t]: frozenset(p) for t, p in topics.items() if p}


def held_by_other(*tps: tuple[uuid.UUID, int]) -> object:
    def owner_epoch(t: uuid.UUID, p: int) -> int:
        return 4 if (t, p) in tps else -1
    return owner_epoch


FREE = held_by_other()

# (name, current, target epoch, target, held by others, owned) -> expected
CASES: list[tuple[str, Reconciliation, int, Mapping[uuid.UUID, frozenset[int]], object,
                  Mapping[uuid.UUID, frozenset[int]] | None, Reconciliation]] = [
    ("new member gets its free target",
     Reconciliation(), 3, a(A={0, 1}), FREE, None,
     Reconciliation(S, 3, 0, a(A={0, 1}))),
    ("already reconciled: unchanged",
     Reconciliation(S, 3, 2, a(A={0})), 3, a(A={0, 1}), FREE, a(A={0}),
     Reconciliation(S, 3, 2, a(A={0}))),
    ("revoke first, keep the epoch, drop the revoked from the assignment",
     Reconciliation(S, 3, 2, a(A={0, 1})), 4, a(A={0}, B={0}), FREE, a(A={0, 1}),
     Reconciliation(REV, 3, 3, a(A={0}), a(A={1}))),
    ("owned not reported: assumed still owned, so revoke",
     Reconciliation(S, 3, 2, a(A={0, 1})), 4, a(A={0}), FREE, None,
     Reconciliation(REV, 3, 3, a(A={0}), a(A={1}))),
    ("already let go of the revoked ones: straight to the target",
     Reconciliation(S, 3, 2, a(A={0, 1})), 4, a(A={0}, B={0}), FREE, a(A={0}),
     Reconciliation(S, 4, 3, a(A={0}, B={0}))),
    ("unrevoked and still owning: wait",
     Reconciliation(REV, 3, 3, a(A={0}), a(A={1})), 4, a(A={0}, B={0}), FREE, a(A={0, 1}),
     Reconciliation(REV, 3, 3, a(A={0}), a(A={1}))),
    ("unrevoked, revocation acknowledged: assign at the target epoch",
     Reconciliation(REV, 3, 3, a(A={0}), a(A={1})), 4, a(A={0}, B={0}), FREE, a(A={0}),
     Reconciliation(S, 4, 3, a(A={0}, B={0}))),
    ("target partition still held by another member: unreleased",
     Reconciliation(S, 3, 2, a(A={0})), 4, a(A={0, 1}, B={0}), held_by_other((A, 1)), a(A={0}),
     Reconciliation(REL, 4, 3, a(A={0}, B={0}))),
    ("all of the new target held elsewhere: unreleased with what it keeps",
     Reconciliation(S, 3, 2, a(A={0})), 4, a(A={0, 1}), held_by_other((A, 1)), a(A={0}),
     Reconciliation(REL, 4, 3, a(A={0}))),
    ("unreleased, then released",
     Reconciliation(REL, 4, 3, a(A={0})), 4, a(A={0, 1}), FREE, a(A={0}),
     Reconciliation(S, 4, 4, a(A={0, 1}))),
    ("unreleased stays while still held",
     Reconciliation(REL, 4, 3, a(A={0})), 4, a(A={0, 1}), held_by_other((A, 1)), a(A={0}),
     Reconciliation(REL, 4, 4, a(A={0}))),
    ("target emptied: revoke everything",
     Reconciliation(S, 3, 2, a(A={0}, B={1})), 4, {}, FREE, a(A={0}, B={1}),
     Reconciliation(REV, 3, 3, {}, a(A={0}, B={1}))),
]


@pytest.mark.parametrize("name,current,epoch,target,owner,owned,expected", CASES, ids=[c[0] for c in CASES])
def test_next_step(name: str, current: Reconciliation, epoch: int, target: Mapping[uuid.UUID, frozenset[int]],
                   owner: object, owned: Mapping[uuid.UUID, frozenset[int]] | None, expected: Reconciliation) -> None:
    assert next_step(current, epoch, target, owner, owned) == expected  # type: ignore[arg-type]


def test_unknown_state_is_refused() -> None:
    with pytest.raises(ValueError):
        next_step(Reconciliation(MemberState.UNKNOWN), 1, {}, FREE, None)  # type: ignore[arg-type]


def test_own_pending_revocation_is_not_unreleased() -> None:
    cur = Reconciliation(REV, 3, 3, a(A={0}), a(A={1}))
    # the coordinator still records A-1 as held by this member, being revoked
    step = next_step(cur, 4, a(A={0, 1}), held_by_other((A, 1)), a(A={0}))  # type: ignore[arg-type]
    assert step == Reconciliation(S, 4, 3, a(A={0, 1}))


def test_unsubscribed_topics_are_revoked_at_once() -> None:
    cur = Reconciliation(S, 3, 2, a(A={0}, B={1}))
    # same epoch, but B is no longer subscribed: revoke it now
    step = next_step(cur, 3, a(A={0}, B={1}), FREE, a(A={0}, B={1}), frozenset({A}))  # type: ignore[arg-type]
    assert step == Reconciliation(REV, 3, 3, a(A={0}), a(B={1}))
    # already let go: just shrink
    step = next_step(cur, 3, a(A={0}, B={1}), FREE, a(A={0}), frozenset({A}))  # type: ignore[arg-type]
    assert step == Reconciliation(S, 3, 3, a(A={0}))
    # a new epoch whose target still names B: B is not taken back
    step = next_step(cur, 4, a(A={0, 1}, B={1}), FREE, a(A={0}), frozenset({A}))  # type: ignore[arg-type]
    assert step == Reconciliation(S, 4, 3, a(A={0, 1}))
