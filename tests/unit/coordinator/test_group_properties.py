"""Random sequences of group operations against the core, with invariants checked after each step.

Every parked JoinGroup / SyncGroup must eventually be answered exactly once, and the group's
bookkeeping (leader, static members, states) must stay consistent whatever the clients do.
"""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.coordinator.group import PARKED_TYPE, GroupConfig, GroupShard, GroupState, JoinRequest

G = "g"
CLIENTS = 4

_join = st.tuples(st.just("join"), st.integers(0, CLIENTS - 1), st.booleans(), st.sampled_from([b"x", b"x", b"y"]))
_sync = st.tuples(st.just("sync"), st.integers(0, CLIENTS - 1))
# "act": the client takes the step a well-behaved client would take next; the other operations are
# the same client misbehaving, arriving late or going silent. Most waits are short.
_act = st.tuples(st.just("act"), st.integers(0, CLIENTS - 1), st.booleans())
op = st.one_of(
    _act, _act, _act, _act, _act, _act, _join, _sync,
    st.tuples(st.just("heartbeat"), st.integers(0, CLIENTS - 1)),
    st.tuples(st.just("leave"), st.integers(0, CLIENTS - 1)),
    st.tuples(st.just("commit"), st.integers(0, CLIENTS - 1)),
    st.tuples(st.just("wait"), st.integers(1, 3000)),
    st.tuples(st.just("fail_next_write")),
    st.tuples(st.just("wait"), st.integers(1, 25_000)),
)


class Driver:
    def __init__(self, delay: int) -> None:
        counter = itertools.count()
        self.shard = GroupShard(0, GroupConfig(initial_rebalance_delay_ms=delay), lambda: f"id{next(counter)}")
        self.now = 0
        self.member_ids: dict[int, str] = {}
        self.parked: set[tuple] = set()
        self.answered: list[tuple] = []
        self.last_generation = 0
        self.fail_next_write = False

    def absorb(self, outcome) -> None:
        if self.fail_next_write and outcome.records:
            self.fail_next_write = False
            outcome.write_failed(15)  # COORDINATOR_NOT_AVAILABLE: the append did not happen
        else:
            outcome.written()  # the records are in the log: effects and completions waiting on it
        if isinstance(outcome.response, PARKED_TYPE):
            # A repeated request of a parked member parks under the same key; the edge answers
            # every waiter of a key with the one result.
            self.parked.add(outcome.response.key)
        for key, result in outcome.completions:
            self.parked.discard(key)
            self.answered.append((key, result))
            if key[1] == "join" and result.error == 0:
                cid = next((c for c, m in self.member_ids.items() if m == key[2]), None)
                if cid is not None:
                    self.member_ids[cid] = result.member_id

    def group(self):
        return self.shard.groups.get(G)

    def step(self, action) -> None:
        kind = action[0]
        s = self.shard
        g = self.group()
        gen = g.generation if g else -1
        if kind == "fail_next_write":
            self.fail_next_write = True
            return
        if kind == "act":
            _, c, static = action
            mid = self.member_ids.get(c, "")
            m = g.members.get(mid) if g else None
            if m is None or (g.state is GroupState.PREPARING_REBALANCE and not m.awaiting_join):
                static = m.group_instance_id is not None if m is not None else static
                return self.step(("join", c, static, b"x"))
            if g.state is GroupState.COMPLETING_REBALANCE and not m.awaiting_sync:
                return self.step(("sync", c))
            return self.step(("heartbeat", c))
        if kind == "join":
            _, c, static, meta = action
            mid = self.member_ids.get(c, "")
            req = JoinRequest(G, mid, f"inst{c}" if static else None, "consumer", [("range", meta)],
                              10_000, 20_000, client_id=f"c{c}", require_known_member_id=not static)
            out = s.join(req, self.now)
            resp = out.response
            if not isinstance(resp, PARKED_TYPE) and resp.member_id and resp.error in (0, 79):
                self.member_ids[c] = resp.member_id
            if isinstance(resp, PARKED_TYPE):
                self.member_ids[c] = resp.key[2]
            self.absorb(out)
        elif kind == "sync":
            mid = self.member_ids.get(action[1], "x")
            assignments = [(m, m.encode()) for m in g.members] if g else []
            self.absorb(s.sync(G, gen, mid, None, None, None, assignments, self.now))
        elif kind == "heartbeat":
            self.absorb(s.heartbeat(G, gen, self.member_ids.get(action[1], "x"), None, self.now))
        elif kind == "leave":
            self.absorb(s.leave(G, [(self.member_ids.get(action[1], "x"), None)], self.now))
        elif kind == "commit":
            mid = self.member_ids.get(action[1], "")
            if s.validate_commit(G, gen, mid, None, self.now) == 0:
                self.absorb(s.commit(G, [("t", 0, self.now, -1, "")], self.now))
        else:
            self.now += action[1]
            self.absorb(s.tick(self.now))
        self.check()

    def check(self) -> None:
        g = self.group()
        if g is None:
            return
        assert g.generation >= self.last_generation
        self.last_generation = g.generation
        if g.state is GroupState.EMPTY:
            assert not g.members
        if g.members and g.state is not GroupState.EMPTY:
            assert g.leader in g.members
        for inst, mid in g.static_members.items():
            assert mid in g.members and g.members[mid].group_instance_id == inst
        if g.state is GroupState.STABLE:
            assert not any(m.awaiting_join for m in g.members.values())
            assert not any(m.awaiting_sync for m in g.members.values())
        if g.state is not GroupState.PREPARING_REBALANCE:
            assert not any(m.awaiting_join for m in g.members.values())
        for key in self.parked:
            kind, mid = key[1], key[2]
            m = g.members.get(mid)
            assert m is not None, f"{key} parked for a member that is gone"
            assert m.awaiting_join if kind == "join" else m.awaiting_sync

    def drain(self) -> None:
        """With nobody talking any more, every parked request is answered and members expire."""
        for _ in range(10):
            deadline = self.shard.next_deadline()
            if deadline is None:
                break
            self.now = max(self.now, deadline)
            self.absorb(self.shard.tick(self.now))
            self.check()
        assert not self.parked
        g = self.group()
        assert g is None or not g.members or all(m.group_instance_id for m in g.members.values()) \
            or g.state is GroupState.EMPTY


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, min_size=10, max_size=60), st.sampled_from([0, 3000]))
def test_random_operation_sequences_keep_the_group_consistent(ops, delay):
    d = Driver(delay)
    for action in ops:
        d.step(action)
    d.drain()
