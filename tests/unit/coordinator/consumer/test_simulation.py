"""A scripted and a random 10-member group: members join, heartbeat (revoking what they are
told to), leave and crash; after every step no partition is held by two members at once, and
once everyone has heartbeated enough the group is stable with every partition owned."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.coordinator.consumer import partitions as ps
from kafkapy.coordinator.consumer.group import ConsumerGroupState
from kafkapy.coordinator.consumer.heartbeat import ConsumerGroupConfig, ConsumerGroupMembership
from kafkapy.protocol.errors import ErrorCode as E

from .harness import FOO, G, hb, join, membership, no_double_ownership

PARTITIONS = 24


class Client:
    """What a consumer believes it owns, updated only from the coordinator's answers."""

    def __init__(self, member_id: str) -> None:
        self.member_id = member_id
        self.epoch = 0
        self.owned: ps.Assignment = {}
        self.joined = False


def step(m: ConsumerGroupMembership, c: Client, now: int) -> None:
    out = join(m, c.member_id, now) if not c.joined else hb(m, c.member_id, c.epoch, now, owned=dict(c.owned))
    r = out.response
    assert r is not None
    if c.joined and r.error in (E.FENCED_MEMBER_EPOCH, E.UNKNOWN_MEMBER_ID):
        # Fenced (its session ran out): it drops everything and joins again next time.
        c.joined, c.epoch, c.owned = False, 0, {}
        return
    assert r.error == 0, r
    c.joined, c.epoch = True, r.member_epoch
    if r.assignment is not None:
        # The client revokes at once what it lost and takes what it got.
        c.owned = ps.normalize(r.assignment)


def check(m: ConsumerGroupMembership, clients: dict[str, Client]) -> None:
    group = m.groups.get(G)
    if group is None:
        return
    no_double_ownership(group)
    # What the members themselves believe they own never overlaps either (a fenced client may
    # still believe it owns partitions until its next heartbeat; its commits are refused).
    seen: set[tuple[object, int]] = set()
    for c in clients.values():
        if c.member_id not in group.members:
            continue
        for tp in ps.pairs(c.owned):
            assert tp not in seen
            seen.add(tp)


def settle(m: ConsumerGroupMembership, clients: dict[str, Client], now: int) -> int:
    for _ in range(6):
        for c in sorted(clients):
            now += 1
            step(m, clients[c], now)
            check(m, clients)
    g = m.groups[G]
    assert g.state() is ConsumerGroupState.STABLE
    owned = [c.owned for c in clients.values()]
    assert sum(ps.count(o) for o in owned) == PARTITIONS
    counts = [ps.count(o) for o in owned]
    assert max(counts) - min(counts) <= 1
    return now


def test_scripted_ten_members_join_and_leave() -> None:
    m = membership(foo=PARTITIONS)
    clients: dict[str, Client] = {}
    now = 0
    for i in range(10):
        clients[f"m{i}"] = Client(f"m{i}")
        now = settle(m, clients, now)
    for i in (3, 7, 0):
        now += 1
        assert hb(m, f"m{i}", -1, now).response.member_epoch == -1  # type: ignore[union-attr]
        del clients[f"m{i}"]
        now = settle(m, clients, now)
    # one member crashes: its session runs out and the others take over
    crashed = clients.pop("m5")
    now += 45_001
    for c in clients.values():
        step(m, c, now - 1_000)
    out = m.tick(now)
    assert crashed.member_id not in m.groups[G].members and out.records
    settle(m, clients, now)
    assert {tp for c in clients.values() for tp in ps.pairs(c.owned)} == {(FOO, p) for p in range(PARTITIONS)}


@pytest.mark.parametrize("seed", range(5))
def test_random_interleavings_pinned(seed: int) -> None:
    run(seed)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32))
def test_random_interleavings(seed: int) -> None:
    run(seed)


def run(seed: int) -> None:
    rng = random.Random(seed)
    m = membership(ConsumerGroupConfig(session_timeout_ms=3_000), foo=PARTITIONS)
    clients: dict[str, Client] = {}
    now, next_id = 0, 0
    for _ in range(200):
        now += rng.randint(1, 50)
        roll = rng.random()
        if roll < 0.15 and len(clients) < 10:
            c = Client(f"m{next_id}")
            next_id += 1
            clients[c.member_id] = c
            step(m, c, now)
        elif roll < 0.22 and clients:
            c = clients.pop(rng.choice(sorted(clients)))
            hb(m, c.member_id, -1, now)
        elif roll < 0.25 and clients:
            clients.pop(rng.choice(sorted(clients)))  # crashes: silent until its session ends
        elif clients:
            step(m, clients[rng.choice(sorted(clients))], now)
        m.tick(now)
        check(m, clients)
    now += 3_000
    m.tick(now)  # the crashed ones are gone (the live ones rejoin if fenced meanwhile)
    if clients:
        settle(m, clients, now)
