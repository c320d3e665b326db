"""The classic group state machine, driven deterministically: every step takes now_ms."""

from __future__ import annotations

import itertools

import pytest

from kafkapy.coordinator import schema
from kafkapy.coordinator.group import (
    PARKED_TYPE, GroupConfig, GroupShard, GroupState, JoinRequest, JoinResult, SyncResult,
)
from kafkapy.protocol.errors import ErrorCode as E

G = "grp"


def shard(**kw) -> GroupShard:
    counter = itertools.count(1)
    cfg = GroupConfig(initial_rebalance_delay_ms=kw.pop("delay", 0), **kw)
    return GroupShard(0, cfg, lambda: f"u{next(counter)}")


def jreq(member_id="", *, instance=None, protocols=(("range", b"m"),), session=10_000, rebalance=20_000,
         v4=True, client="c") -> JoinRequest:
    return JoinRequest(G, member_id, instance, "consumer", list(protocols), session, rebalance, client_id=client,
                       require_known_member_id=v4 and instance is None)


def commit(s: GroupShard, *args, **kwargs):
    """Commit and report the records written, as the edge does after a successful append."""
    out = s.commit(*args, **kwargs)
    out.written()
    return out


def sync(s: GroupShard, *args, **kwargs):
    """SyncGroup, its records reported written (the leader's assignment takes effect then)."""
    out = s.sync(*args, **kwargs)
    out.written()
    return out


def completions(outcome) -> dict:
    return {key: res for key, res in outcome.completions}


def join_new(s: GroupShard, now: int = 0, **kw) -> tuple[str, object]:
    """MEMBER_ID_REQUIRED, then the real join; returns (member id, the second outcome)."""
    first = s.join(jreq(**kw), now)
    assert first.response.error == E.MEMBER_ID_REQUIRED
    mid = first.response.member_id
    return mid, s.join(jreq(mid, **kw), now)


def stable_group(s: GroupShard, n: int = 1, now: int = 0) -> list[str]:
    """Members joined one by one into a Stable group; the first is the leader."""
    mids = []
    mid, out = join_new(s, now)
    mids.append(mid)
    res = completions(out)[(G, "join", mid)]
    assert res.error == E.NONE and res.leader == mid
    for _ in range(n - 1):
        new, out = join_new(s, now)
        assert isinstance(out.response, PARKED_TYPE)
        for m in mids:  # the others rejoin
            s.join(jreq(m), now)
        mids.append(new)
    g = s.groups[G]
    assert g.state is GroupState.COMPLETING_REBALANCE
    out = sync(s, G, g.generation, g.leader, None, None, None, [(m, m.encode()) for m in mids], now)
    for m in mids:
        if m != g.leader:
            sync(s, G, g.generation, m, None, None, None, [], now)
    assert s.groups[G].state is GroupState.STABLE
    return mids


def test_member_id_required_then_join_completes_at_once_without_delay():
    s = shard()
    mid, out = join_new(s)
    assert mid.startswith("c-")
    res = completions(out)[(G, "join", mid)]
    assert isinstance(out.response, PARKED_TYPE) and out.response.key == (G, "join", mid)
    assert (res.error, res.generation, res.leader, res.protocol_name) == (E.NONE, 1, mid, "range")
    assert [m.member_id for m in res.members] == [mid]
    assert s.groups[G].state is GroupState.COMPLETING_REBALANCE


def test_old_clients_join_without_member_id_required():
    s = shard()
    out = s.join(jreq(v4=False), 0)
    assert isinstance(out.response, PARKED_TYPE)
    assert completions(out)[out.response.key].error == E.NONE


def test_sync_leader_assignment_makes_group_stable_and_writes_metadata():
    s = shard()
    mid, _ = join_new(s)
    out = sync(s, G, 1, mid, None, None, None, [(mid, b"A")], 5)
    assert completions(out)[(G, "sync", mid)] == SyncResult(E.NONE, "consumer", "range", b"A")
    assert s.groups[G].state is GroupState.STABLE
    [(key, value)] = out.records
    assert schema.decode_key(key) == schema.GroupKey(G)
    v = schema.decode_group_value(value)
    assert v.generation == 1 and v.leader == mid and v.members[0].assignment == b"A"


def test_group_stays_completing_until_the_assignment_is_stored():
    s = shard()
    mid, _ = join_new(s)
    out = s.sync(G, 1, mid, None, None, None, [(mid, b"A")], 5)
    assert isinstance(out.response, PARKED_TYPE) and out.completions == []
    assert s.groups[G].state is GroupState.COMPLETING_REBALANCE and out.records
    out.write_failed(E.NOT_COORDINATOR)  # the append failed: everyone waiting is told, rebalance
    assert completions(out)[(G, "sync", mid)].error == E.NOT_COORDINATOR
    g = s.groups[G]
    assert g.state is GroupState.PREPARING_REBALANCE and g.members[mid].assignment == b""


def test_second_member_triggers_rebalance_and_both_get_assignments():
    s = shard()
    a, b = stable_group(s, 2)
    g = s.groups[G]
    assert g.generation == 2 and g.leader == a
    assert g.members[a].assignment == a.encode() and g.members[b].assignment == b.encode()


def test_heartbeat_errors():
    s = shard()
    [a] = stable_group(s)
    assert s.heartbeat(G, 1, a, None, 10).response == E.NONE
    assert s.heartbeat(G, 0, a, None, 10).response == E.ILLEGAL_GENERATION
    assert s.heartbeat(G, 1, "nobody", None, 10).response == E.UNKNOWN_MEMBER_ID
    assert s.heartbeat("other", 1, a, None, 10).response == E.UNKNOWN_MEMBER_ID
    join_new(s, 20)  # a new member: the group prepares a rebalance
    assert s.heartbeat(G, 1, a, None, 30).response == E.REBALANCE_IN_PROGRESS


def test_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout():
    s = shard()
    [a] = stable_group(s)
    b, out = join_new(s, 100)
    assert s.groups[G].state is GroupState.PREPARING_REBALANCE
    # a keeps heartbeating (told to rejoin) but never does
    for t in (9_000, 18_000):
        assert s.heartbeat(G, 1, a, None, t).response == E.REBALANCE_IN_PROGRESS
        assert s.tick(t).completions == []
    assert s.next_deadline() == 100 + 20_000
    out = s.tick(100 + 20_000)
    res = completions(out)[(G, "join", b)]
    assert res.error == E.NONE and res.leader == b and [m.member_id for m in res.members] == [b]
    assert a not in s.groups[G].members


def test_session_expiry_removes_member_and_rebalances():
    s = shard()
    a, b = stable_group(s, 2)
    s.heartbeat(G, 2, a, None, 9_000)
    out = s.tick(10_000)  # b's session (10 s from t=0) ran out; a heartbeated at 9 s
    g = s.groups[G]
    assert b not in g.members and g.state is GroupState.PREPARING_REBALANCE
    # a rejoins alone: the rebalance completes at once
    out = s.join(jreq(a), 10_001)
    assert completions(out)[(G, "join", a)].generation == 3


def test_leave_group_batch_and_last_member_leaves_group_empty():
    s = shard()
    a, b = stable_group(s, 2)
    out = s.leave(G, [(b, None), ("ghost", None)], 50)
    assert out.response == [E.NONE, E.UNKNOWN_MEMBER_ID]
    assert s.groups[G].state is GroupState.PREPARING_REBALANCE
    out = s.leave(G, [(a, None)], 60)
    assert out.response == [E.NONE]
    g = s.groups[G]
    assert g.state is GroupState.EMPTY and not g.members
    assert any(schema.decode_key(k) == schema.GroupKey(G) for k, _ in out.records)
    assert s.leave("nope", [("x", None)], 70).response == [E.UNKNOWN_MEMBER_ID]


def test_sync_errors():
    s = shard()
    [a] = stable_group(s)
    assert sync(s, G, 1, "x", None, None, None, [], 1).response.error == E.UNKNOWN_MEMBER_ID
    assert sync(s, G, 7, a, None, None, None, [], 1).response.error == E.ILLEGAL_GENERATION
    assert sync(s, G, 1, a, None, "consumer", "roundrobin", [], 1).response.error == E.INCONSISTENT_GROUP_PROTOCOL
    assert sync(s, G, 1, a, None, None, None, [], 1).response.assignment == a.encode()


def test_rejoin_during_completing_rebalance_tells_waiting_syncs_to_rejoin():
    s = shard()
    a, b = stable_group(s, 2)
    c, _ = join_new(s, 10)
    s.join(jreq(a), 10)
    out = s.join(jreq(b), 10)
    gen = s.groups[G].generation
    assert s.groups[G].state is GroupState.COMPLETING_REBALANCE
    parked = sync(s, G, gen, b, None, None, None, [], 11)
    assert isinstance(parked.response, PARKED_TYPE)
    # c changes its subscription before the leader synced: back to PreparingRebalance
    out = s.join(jreq(c, protocols=(("range", b"other"),)), 12)
    assert completions(out)[(G, "sync", b)].error == E.REBALANCE_IN_PROGRESS


def test_a_sync_answered_after_a_slow_commit_starts_a_fresh_session():
    # The leader's assignment record takes 9 s of a 10 s session to commit. While it waits the
    # member's session is not checked; when it is answered, its session starts afresh (Kafka's
    # propagateAssignment), instead of running out 1 s later, leaving the group Empty (and
    # deletable) under a member that keeps heartbeating on its old schedule.
    s = shard()
    mid, _ = join_new(s, 0)
    out = s.sync(G, 1, mid, None, None, None, [(mid, b"A")], 0)
    assert not s.tick(9_000).completions
    out.written(9_000)  # committed
    assert completions(out)[(G, "sync", mid)].error == E.NONE
    s.tick(12_000)
    g = s.groups[G]
    assert g.state is GroupState.STABLE and set(g.members) == {mid}
    assert s.delete_group(G, 12_000).response == E.NON_EMPTY_GROUP
    assert s.heartbeat(G, 1, mid, None, 12_000).response == E.NONE
    s.tick(18_999)
    assert set(s.groups[G].members) == {mid}
    s.tick(22_000)  # a session without a heartbeat since: gone, as in Kafka
    assert s.groups[G].state is GroupState.EMPTY


def test_a_follower_answered_when_the_assignment_commits_starts_a_fresh_session():
    s = shard()
    a, b = stable_group(s, 2)
    s.join(jreq(a), 0)
    s.join(jreq(b), 0)
    g = s.groups[G]
    assert g.state is GroupState.COMPLETING_REBALANCE
    assert isinstance(s.sync(G, g.generation, b, None, None, None, [], 0).response, PARKED_TYPE)
    out = s.sync(G, g.generation, a, None, None, None, [(a, b"A"), (b, b"B")], 1_000)
    out.written(8_000)
    assert completions(out)[(G, "sync", b)].assignment == b"B"
    s.tick(12_000)  # b's deadline dated from its SyncGroup (10 s) would have passed
    assert set(s.groups[G].members) == {a, b} and s.groups[G].state is GroupState.STABLE


def test_a_sync_answered_because_the_leader_expired_starts_a_fresh_session():
    # librdkafka's 0084_destroy_flags: the leader dies without leaving while another member
    # waits in SyncGroup. That member is told to rejoin and keeps its member id, as in Kafka,
    # instead of being expired in the same tick because its deadline dates from the join.
    s = shard()
    [a] = stable_group(s)
    b, _ = join_new(s, 0)
    s.join(jreq(a), 0)
    g = s.groups[G]
    assert g.state is GroupState.COMPLETING_REBALANCE and g.leader == a
    assert isinstance(s.sync(G, g.generation, b, None, None, None, [], 0).response, PARKED_TYPE)
    out = s.tick(10_000)  # a never synced nor heartbeated: its session is over
    assert completions(out)[(G, "sync", b)].error == E.REBALANCE_IN_PROGRESS
    assert set(s.groups[G].members) == {b}
    res = completions(s.join(jreq(b), 10_001))[(G, "join", b)]
    assert res.error == E.NONE and res.leader == b


def test_a_failed_assignment_write_restarts_the_sessions_of_those_it_answers():
    s = shard()
    mid, _ = join_new(s, 0)
    out = s.sync(G, 1, mid, None, None, None, [(mid, b"A")], 0)
    out.write_failed(E.NOT_COORDINATOR, 9_000)
    assert completions(out)[(G, "sync", mid)].error == E.NOT_COORDINATOR
    s.tick(12_000)
    assert set(s.groups[G].members) == {mid}  # it rejoins the rebalance the failure started


def test_rebalances_and_removed_members_are_logged_as_kafka_does():
    s = shard()
    a, b = stable_group(s, 2)
    out = s.tick(10_000)  # neither heartbeated: both sessions are over
    lines = "\n".join(out.log)
    assert f"Group {G}: removing member {a} on heartbeat expiration (session timeout 10000 ms)" in lines
    assert f"Preparing to rebalance group {G} in state Stable with old generation 2" in lines
    assert f"Group {G} with generation 3 is now empty" in lines
    c, joined = join_new(s, 10_001)
    assert f"Stabilized group {G} generation 4 with 1 members (leader {c})" in "\n".join(joined.log)


def test_protocol_selection_and_inconsistent_protocols():
    s = shard(delay=1000)
    a = s.join(jreq(v4=False, protocols=(("range", b""), ("roundrobin", b""))), 0).response.key[2]
    b = s.join(jreq(v4=False, protocols=(("roundrobin", b""), ("range", b""))), 0).response.key[2]
    c = s.join(jreq(v4=False, protocols=(("roundrobin", b""),)), 0).response.key[2]
    out = s.join(jreq(v4=False, protocols=(("sticky", b""),)), 0)
    assert out.response.error == E.INCONSISTENT_GROUP_PROTOCOL
    out = s.tick(1000)
    assert {completions(out)[(G, "join", m)].protocol_name for m in (a, b, c)} == {"roundrobin"}


def test_initial_rebalance_delay_waits_for_more_members():
    s = shard(delay=3000)
    a = s.join(jreq(v4=False), 0).response.key[2]
    assert s.tick(2000).completions == []
    b = s.join(jreq(v4=False), 2000).response.key[2]  # extends the delay to t=5000
    assert s.tick(3000).completions == []
    out = s.tick(5000)
    res = completions(out)
    assert res[(G, "join", a)].generation == 1 and res[(G, "join", b)].generation == 1


def test_session_timeout_bounds():
    s = shard()
    assert s.join(jreq(session=10), 0).response.error == E.INVALID_SESSION_TIMEOUT
    assert s.join(jreq(session=10**9), 0).response.error == E.INVALID_SESSION_TIMEOUT


def test_unknown_member_id_on_unknown_group_and_pending_member_expiry():
    s = shard()
    assert s.join(jreq("who"), 0).response.error == E.UNKNOWN_MEMBER_ID
    first = s.join(jreq(), 0)
    mid = first.response.member_id
    s.tick(10_000)  # never came back within its session timeout
    assert s.join(jreq(mid), 10_001).response.error == E.UNKNOWN_MEMBER_ID


def test_static_member_restart_keeps_assignment_without_rebalance():
    s = shard()
    a = completions(s.join(jreq(instance="i-a", v4=False), 0))
    [(_, ra)] = a.items()
    a_id = ra.member_id
    b_out = s.join(jreq(instance="i-b", v4=False), 0)
    b_id = b_out.response.key[2]
    s.join(jreq(a_id, instance="i-a"), 0)
    gen = s.groups[G].generation
    sync(s, G, gen, a_id, "i-a", None, None, [(a_id, b"A"), (b_id, b"B")], 1)
    sync(s, G, gen, b_id, "i-b", None, None, [], 1)
    assert s.groups[G].state is GroupState.STABLE
    # b restarts: unknown member id, same instance id and subscription
    out = s.join(jreq(instance="i-b", v4=True), 100)
    res = out.response
    assert isinstance(res, JoinResult) and res.error == E.NONE and res.generation == gen
    new_b = res.member_id
    assert new_b != b_id and s.groups[G].state is GroupState.STABLE
    assert sync(s, G, gen, new_b, "i-b", None, None, [], 101).response.assignment == b"B"
    # the old incarnation is fenced
    assert s.heartbeat(G, gen, b_id, "i-b", 102).response == E.FENCED_INSTANCE_ID
    assert s.join(jreq(b_id, instance="i-b"), 102).response.error == E.FENCED_INSTANCE_ID
    assert s.leave(G, [(b_id, "i-b")], 103).response == [E.FENCED_INSTANCE_ID]
    # a static member that is gone keeps its place through a rebalance
    assert s.leave(G, [("", "i-b")], 104).response == [E.NONE]
    assert set(s.groups[G].static_members) == {"i-a"}


@pytest.mark.parametrize("skip", [True, False])
def test_static_leader_restart_keeps_assignment(skip):
    s = shard()
    out = s.join(jreq(instance="i-a", v4=False), 0)
    a_id = out.response.key[2]
    sync(s, G, 1, a_id, "i-a", None, None, [(a_id, b"A")], 1)
    req = jreq(instance="i-a", v4=False)
    req.supports_skip_assignment = skip
    res = s.join(req, 10).response
    assert res.error == E.NONE and res.generation == 1 and s.groups[G].state is GroupState.STABLE
    if skip:
        assert res.skip_assignment and res.leader == res.member_id and len(res.members) == 1
    else:
        assert not res.skip_assignment and res.leader == a_id and res.members == []
    assert sync(s, G, 1, res.member_id, "i-a", None, None, [], 11).response.assignment == b"A"


def test_standalone_commit_fetch_and_member_checks():
    s = shard()
    assert s.validate_commit(G, -1, "", None, 0) == E.NONE
    assert s.validate_commit(G, 3, "m", None, 0) == E.ILLEGAL_GENERATION
    commit(s, G, [("t", 5, 1, -1, "")], 0)
    assert s.validate_commit(G, -1, "some-member", None, 0) == E.NONE  # empty group: accepted
    out = commit(s, G, [("t", 0, 42, 5, "meta"), ("t", 1, 7, -1, "x" * 5000)], 1000)
    assert out.response == [E.NONE, E.OFFSET_METADATA_TOO_LARGE]
    [(key, value)] = out.records
    assert schema.decode_key(key) == schema.OffsetKey(G, "t", 0)
    assert schema.decode_offset_value(value) == schema.OffsetValue(42, 5, "meta", 1000)
    [(t, p, c), _] = s.fetch_offsets(G, None)
    assert (t, p, c.offset, c.leader_epoch, c.metadata) == ("t", 0, 42, 5, "meta")
    assert s.fetch_offsets(G, [("t", 9)]) == [("t", 9, None)]
    assert s.fetch_offsets("none", [("t", 0)]) == [("t", 0, None)]


def test_commit_changes_nothing_until_its_records_are_written():
    s = shard()
    out = s.commit(G, [("t", 0, 42, -1, "")], 0)
    assert out.records and s.fetch_offsets(G, [("t", 0)]) == [("t", 0, None)]
    out.written()
    assert s.fetch_offsets(G, [("t", 0)])[0][2].offset == 42


def test_commit_checks_against_a_live_group():
    s = shard()
    a, b = stable_group(s, 2)
    assert s.validate_commit(G, 2, a, None, 0) == E.NONE
    assert s.validate_commit(G, 1, a, None, 0) == E.ILLEGAL_GENERATION
    assert s.validate_commit(G, 2, "x", None, 0) == E.UNKNOWN_MEMBER_ID
    assert s.validate_commit(G, -1, "", None, 0) == E.UNKNOWN_MEMBER_ID  # not empty
    join_new(s, 5)
    assert s.validate_commit(G, 2, a, None, 6) == E.NONE  # PreparingRebalance: still accepted
    s.join(jreq(a), 6)
    s.join(jreq(b), 6)
    assert s.groups[G].state is GroupState.COMPLETING_REBALANCE
    assert s.validate_commit(G, 3, a, None, 7) == E.REBALANCE_IN_PROGRESS


def test_delete_groups_and_offsets():
    s = shard()
    [a] = stable_group(s)
    commit(s, G, [("t", 0, 1, -1, ""), ("u", 0, 2, -1, "")], 0)
    assert s.delete_group(G, 1).response == E.NON_EMPTY_GROUP
    out = s.delete_offsets(G, [("t", 0), ("u", 0)])
    # the member's subscription metadata (b"m") is unreadable: every topic counts as subscribed
    assert out.response == (E.NONE, [E.GROUP_SUBSCRIBED_TO_TOPIC] * 2)
    s.leave(G, [(a, None)], 2)
    out = s.delete_offsets(G, [("t", 0)])
    assert out.response == (E.NONE, [E.NONE]) and out.records == [(schema.encode_offset_key(G, "t", 0), None)]
    out = s.delete_group(G, 3)
    assert out.response == E.NONE and G not in s.groups
    assert out.records[-1] == (schema.encode_group_key(G), None)
    assert s.delete_group(G, 4).response == E.GROUP_ID_NOT_FOUND
    assert s.delete_offsets(G, []).response[0] == E.GROUP_ID_NOT_FOUND


def test_offset_delete_refuses_subscribed_topics():
    s = shard()
    sub = b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\x00\x00\x00\x00"
    first = s.join(jreq(protocols=(("range", sub),)), 0)
    mid = first.response.member_id
    s.join(jreq(mid, protocols=(("range", sub),)), 0)
    sync(s, G, 1, mid, None, None, None, [], 0)
    commit(s, G, [("t", 0, 1, -1, ""), ("u", 0, 2, -1, "")], 0)
    out = s.delete_offsets(G, [("t", 0), ("u", 0)])
    assert out.response == (E.NONE, [E.GROUP_SUBSCRIBED_TO_TOPIC, E.NONE])


def test_offsets_expire_after_retention():
    s = shard(offsets_retention_ms=1000)
    commit(s, "standalone", [("t", 0, 1, -1, "")], 0)
    [a] = stable_group(s)
    commit(s, G, [("t", 0, 5, -1, "")], 0)
    out = s.expire_offsets(999)
    assert out.records == []
    out = s.expire_offsets(1000)
    assert "standalone" not in s.groups  # standalone: per commit timestamp, group removed too
    assert G in s.groups and s.groups[G].offsets  # live group keeps offsets of subscribed topics...
    s.leave(G, [(a, None)], 5000)
    assert s.expire_offsets(5999).records == []
    out = s.expire_offsets(6000)  # ...and empty ones expire from when they became empty
    assert G not in s.groups
    keys = [schema.decode_key(k) for k, v in out.records]
    assert schema.OffsetKey(G, "t", 0) in keys and schema.GroupKey(G) in keys


def test_replay_rebuilds_groups_and_offsets():
    s = shard()
    a, b = stable_group(s, 2)
    commit(s, G, [("t", 0, 10, 3, "m")], 50)
    commit(s, "solo", [("t", 1, 4, -1, "")], 60)
    records = []
    records.append((schema.encode_group_key(G), schema.encode_group_value(s.groups[G].to_value())))
    records += commit(s, G, [("t", 0, 11, 3, "m")], 70).records
    records += commit(s, "solo", [("t", 1, 5, -1, "")], 80).records
    records += s.delete_offsets("solo", [("t", 1)]).records
    fresh = shard()
    for k, v in records:
        fresh.replay(k, v, 1000)
    fresh.finish_load(1000)
    g = fresh.groups[G]
    assert g.state is GroupState.STABLE and g.generation == 2 and set(g.members) == {a, b}
    assert g.offsets[("t", 0)].offset == 11
    assert not fresh.groups["solo"].offsets
    # a loaded member keeps its assignment and must heartbeat within its session
    assert fresh.heartbeat(G, 2, a, None, 1001).response == E.NONE
    assert fresh.sync(G, 2, b, None, None, None, [], 1001).response.assignment == b.encode()


@pytest.mark.parametrize("group,expected", [("", 0), ("g", 103 % 50), ("my-group", None)])
def test_partition_for_matches_java_hashcode(group, expected):
    h = schema.java_string_hash(group)
    if expected is not None:
        assert schema.partition_for(group, 50) == expected
    assert 0 <= schema.partition_for(group, 50) < 50
    assert -(2**31) <= h < 2**31
