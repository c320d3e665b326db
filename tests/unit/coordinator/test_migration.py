"""Online migration between classic and consumer groups (Kafka's convertToConsumerGroup and
convertToClassicGroup): what is converted, what is refused, the records, and their replay."""

from __future__ import annotations

import pytest

from kafkapy.coordinator import migration, schema
from kafkapy.coordinator.consumer import records as rec
from kafkapy.coordinator.consumer.group import ConsumerGroup
from kafkapy.coordinator.consumer.heartbeat import HeartbeatRequest
from kafkapy.coordinator.consumer.reconcile import MemberState
from kafkapy.coordinator.group import PARKED_TYPE, GroupState, JoinResult, SyncResult
from kafkapy.coordinator.migration import MigrationPolicy as P
from kafkapy.protocol import consumer_protocol as cp
from kafkapy.protocol.errors import ErrorCode as E

from .migration_harness import (
    FOO,
    REBALANCE,
    SESSION,
    TOPICS,
    G,
    classic_join,
    jreq,
    membership,
    shard,
    stable_classic_group,
    sub,
)

BIG = 2**31 - 1


def committed(s) -> dict:
    s.commit(G, [("foo", 0, 42, -1, "m"), ("foo", 3, 7, -1, None)], 5).written()
    return dict(s.groups[G].offsets)


def no_offset_records(classic_records) -> None:
    assert all(isinstance(schema.decode_key(k), schema.GroupKey) for k, _ in classic_records)


def test_policy_names_parse_as_kafka():
    assert P.parse("BiDirectional") is P.BIDIRECTIONAL and P.parse(None) is P.DISABLED
    assert [p.upgrade_enabled for p in P] == [True, True, False, False]
    assert [p.downgrade_enabled for p in P] == [True, False, True, False]
    with pytest.raises(ValueError):
        P.parse("sideways")


@pytest.mark.parametrize("policy", list(P))
def test_an_empty_classic_group_is_deleted_whatever_the_policy_and_its_offsets_stay(policy):
    s = shard()
    mid, _ = classic_join(s)
    s.leave(G, [(mid, None)], 1)
    offsets = committed(s)
    up = migration.upgrade(s.groups[G], policy, BIG, TOPICS, 10)
    assert isinstance(up, migration.Upgrade)
    assert up.classic_records == [(schema.encode_group_key(G), None)] and up.consumer_records == []
    assert up.group is None
    assert s.groups[G].offsets == offsets


def test_a_stable_group_becomes_a_consumer_group_whose_members_keep_their_partitions():
    s = shard()
    a, b = stable_classic_group(s)
    classic = s.groups[G]
    offsets = committed(s)
    up = migration.upgrade(classic, P.BIDIRECTIONAL, BIG, TOPICS, 100)
    assert isinstance(up, migration.Upgrade)
    assert up.classic_records == [(schema.encode_group_key(G), None)]
    no_offset_records(up.classic_records)
    assert classic.offsets == offsets
    # Kafka's order: subscriptions, group epoch, targets, target epoch, current assignments.
    kinds = [type(r).__name__ for r in up.consumer_records]
    assert kinds == ["MemberMetadata"] * 2 + ["GroupMetadata"] + ["TargetAssignmentMember"] * 2 \
        + ["TargetAssignmentMetadata"] + ["CurrentMemberAssignment"] * 2
    g = up.group
    gen = classic.generation
    assert g.group_epoch == g.assignment_epoch == gen
    assert g.state().value == "Stable"
    assert g.members[a].assigned == {FOO: frozenset({0, 1, 2})} == g.target[a]
    assert g.members[b].assigned == {FOO: frozenset({3, 4, 5})} == g.target[b]
    for mid in (a, b):
        m = g.members[mid]
        assert (m.member_epoch, m.previous_member_epoch, m.state) == (gen, gen, MemberState.STABLE)
        assert m.subscribed_topic_names == ("foo",) and m.rebalance_timeout_ms == REBALANCE
        assert m.classic == rec.ClassicMemberMetadata(SESSION, (("range", sub()),))
        assert m.client_id == "cl" and m.client_host == "/h"
    assert up.session_deadlines == {a: 100 + SESSION, b: 100 + SESSION}
    assert up.completions == []


def test_replaying_the_upgrade_records_rebuilds_the_same_group():
    s = shard()
    stable_classic_group(s, 3)
    up = migration.upgrade(s.groups[G], P.UPGRADE, BIG, TOPICS, 100)
    again = ConsumerGroup(G)
    for r in up.consumer_records:
        again.replay(r)
    assert again.members == up.group.members and again.target == up.group.target
    assert (again.group_epoch, again.assignment_epoch, again.metadata_hash) == \
        (up.group.group_epoch, up.group.assignment_epoch, up.group.metadata_hash)
    assert again.partition_owners() == up.group.partition_owners()


def test_upgrading_a_rebalancing_group_tells_the_parked_members_to_rejoin():
    s = shard()
    a, b = stable_classic_group(s)
    mid, out = classic_join(s, 50)  # a third member: the group prepares a rebalance
    assert isinstance(out.response, PARKED_TYPE) and s.groups[G].state is GroupState.PREPARING_REBALANCE
    s.join(jreq(a), 50)  # a rejoined and waits; b has not yet
    up = migration.upgrade(s.groups[G], P.BIDIRECTIONAL, BIG, TOPICS, 60)
    assert isinstance(up, migration.Upgrade)
    got = dict(up.completions)
    assert got == {(G, "join", mid): JoinResult(E.REBALANCE_IN_PROGRESS, member_id=mid),
                   (G, "join", a): JoinResult(E.REBALANCE_IN_PROGRESS, member_id=a)}
    # The newcomer had no assignment yet; the others keep theirs.
    assert up.group.members[mid].assigned == {}
    assert up.group.members[b].assigned == {FOO: frozenset({3, 4, 5})}


def test_upgrading_a_group_waiting_for_the_leaders_sync_answers_the_waiting_syncs():
    s = shard()
    a, = stable_classic_group(s, 1)
    b, _ = classic_join(s, 10)
    s.join(jreq(a), 10)
    g = s.groups[G]
    assert g.state is GroupState.COMPLETING_REBALANCE
    follower = b if g.leader == a else a
    parked = s.sync(G, g.generation, follower, None, None, None, [], 11)
    assert isinstance(parked.response, PARKED_TYPE)
    up = migration.upgrade(g, P.BIDIRECTIONAL, BIG, TOPICS, 12)
    assert dict(up.completions) == {(G, "sync", follower): SyncResult(E.REBALANCE_IN_PROGRESS)}


@pytest.mark.parametrize("policy", [P.DOWNGRADE, P.DISABLED])
def test_a_policy_without_upgrade_refuses(policy):
    s = shard()
    stable_classic_group(s)
    got = migration.upgrade(s.groups[G], policy, BIG, TOPICS, 0)
    assert got == migration.Refusal(
        E.GROUP_ID_NOT_FOUND, f"Cannot upgrade classic group {G} to consumer group because online upgrade is disabled.")


def test_an_assignment_with_user_data_is_a_custom_assignor_and_refused():
    s = shard()
    mid, _ = classic_join(s)
    g = s.groups[G]
    s.sync(G, g.generation, mid, None, None, None,
           [(mid, cp.encode_assignment({"foo": [0]}, b"sticky-state", 1))], 0).written()
    got = migration.upgrade(g, P.BIDIRECTIONAL, BIG, TOPICS, 0)
    assert got.error == E.GROUP_ID_NOT_FOUND and "unsupported custom assignor" in got.message


def test_a_group_of_another_protocol_type_or_too_big_is_refused():
    s = shard()
    mid, _ = classic_join(s, protocol_type="connect", protocols=[("sessioned", b"x")])
    got = migration.upgrade(s.groups[G], P.BIDIRECTIONAL, BIG, TOPICS, 0)
    assert got.error == E.GROUP_ID_NOT_FOUND and "does not use the consumer embedded protocol" in got.message
    s2 = shard()
    stable_classic_group(s2, 3)
    got = migration.upgrade(s2.groups[G], P.BIDIRECTIONAL, 2, TOPICS, 0)
    assert got.error == E.GROUP_ID_NOT_FOUND and "exceeds the consumer group maximum size" in got.message
    assert isinstance(migration.upgrade(s2.groups[G], P.BIDIRECTIONAL, 3, TOPICS, 0), migration.Upgrade)


def test_a_malformed_embedded_protocol_refuses_with_group_id_not_found():
    s = shard()
    stable_classic_group(s, 1, protocols=[("range", b"\x00\x01garbage")])
    got = migration.upgrade(s.groups[G], P.BIDIRECTIONAL, BIG, TOPICS, 0)
    assert isinstance(got, migration.Refusal) and got.error == E.GROUP_ID_NOT_FOUND
    assert got.message == f"Cannot upgrade classic group {G} to consumer group because the embedded consumer " \
        "protocol is malformed."


# ------------------------------------------------------------------------------- downgrade
def upgraded_with_a_consumer_member():
    """A classic group upgraded by a consumer-protocol member's join; returns what is needed."""
    s = shard()
    a, b = stable_classic_group(s)
    ms = membership()
    up = migration.upgrade(s.groups[G], P.BIDIRECTIONAL, BIG, TOPICS, 100)
    migration.install(ms, up)
    out = ms.heartbeat(HeartbeatRequest(G, "new", 0, owned={}, rebalance_timeout_ms=30_000,
                                        subscribed_topic_names=["foo"]), 100)
    assert out.response.error == 0
    return s, ms, a, b


def test_install_then_a_consumer_heartbeat_bumps_the_epoch_and_rolls_back_cleanly():
    s = shard()
    stable_classic_group(s)
    ms = membership()
    up = migration.upgrade(s.groups[G], P.BIDIRECTIONAL, BIG, TOPICS, 100)
    epoch = s.groups[G].generation
    inst = migration.install(ms, up)
    assert inst.records == up.consumer_records
    out = ms.heartbeat(HeartbeatRequest(G, "new", 0, owned={}, rebalance_timeout_ms=30_000,
                                        subscribed_topic_names=["foo"]), 100)
    assert ms.groups[G].group_epoch == epoch + 1
    out.rollback()
    inst.rollback()
    assert G not in ms.groups and ms.session_deadlines == {}


def test_the_last_consumer_member_leaving_turns_the_group_classic_again():
    s, ms, a, b = upgraded_with_a_consumer_member()
    group = ms.groups[G]
    assert not migration.may_downgrade(group, {a}, P.BIDIRECTIONAL, BIG)  # "new" stays
    assert migration.may_downgrade(group, {"new"}, P.BIDIRECTIONAL, BIG)
    assert migration.may_downgrade(group, {"new", a}, P.BIDIRECTIONAL, 1)
    assert not migration.may_downgrade(group, {"new", a, b}, P.BIDIRECTIONAL, BIG)  # nobody stays
    assert not migration.may_downgrade(group, {"new"}, P.UPGRADE, BIG)
    assert not migration.may_downgrade(group, {"new"}, P.BIDIRECTIONAL, 1)
    offsets = dict(s.groups[G].offsets)
    down = migration.downgrade(group, {"new"}, TOPICS, 500)
    # The consumer group's records are all deleted, then the classic group is written.
    assert all(isinstance(r, rec.Tombstone) for r in down.consumer_records)
    assert rec.Tombstone(rec.GroupMetadata.RECORD_TYPE, G) in down.consumer_records
    assert {r.sub_key for r in down.consumer_records if r.record_type == rec.MemberMetadata.RECORD_TYPE} \
        == {a, b, "new"}
    [(key, value)] = down.classic_records
    no_offset_records(down.classic_records)
    assert s.groups[G].offsets == offsets
    v = schema.decode_group_value(value)
    assert (v.protocol_type, v.generation, v.protocol) == ("consumer", group.group_epoch, "range")
    assert v.leader in (a, b) and {m.member_id for m in v.members} == {a, b}
    for mv in v.members:
        target = group.target[mv.member_id]
        assert cp.decode_assignment(mv.assignment).partitions == {"foo": tuple(sorted(target[FOO]))}
        assert cp.version_of(mv.assignment) == 1  # the version of the member's subscription
        assert mv.session_timeout_ms == SESSION and mv.subscription == sub()
    c = down.group
    assert c.state is GroupState.PREPARING_REBALANCE and c.join_deadline == 500 + REBALANCE
    assert c.generation == group.group_epoch


def test_the_downgraded_group_rebalances_as_a_classic_group_and_replays_from_its_record():
    s, ms, a, b = upgraded_with_a_consumer_member()
    down = migration.downgrade(ms.groups[G], {"new"}, TOPICS, 500)
    gen = down.group.generation
    s.groups[G] = down.group  # what the shard does when it swaps the group
    s.join(jreq(a), 501)
    out = s.join(jreq(b), 502)
    [(key, res)] = [c for c in out.completions if c[0] == (G, "join", b)]
    assert res.error == E.NONE and res.generation == gen + 1
    fresh = shard()
    k, v = down.classic_records[0]
    fresh.replay(k, v, 0)
    assert set(fresh.groups[G].members) == {a, b} and fresh.groups[G].generation == gen


def test_an_upgrade_then_a_downgrade_leaves_committed_offsets_alone():
    s = shard()
    stable_classic_group(s)
    offsets = committed(s)
    ms = membership()
    up = migration.upgrade(s.groups[G], P.BIDIRECTIONAL, BIG, TOPICS, 100)
    migration.install(ms, up)
    ms.heartbeat(HeartbeatRequest(G, "new", 0, owned={}, rebalance_timeout_ms=30_000, subscribed_topic_names=["foo"]), 100)
    down = migration.downgrade(ms.groups[G], {"new"}, TOPICS, 200)
    no_offset_records(up.classic_records + down.classic_records)
    assert s.groups[G].offsets == offsets and down.group.offsets == {}


# ------------------------------------------------------------------------------- the hook
def hooked(policy=P.BIDIRECTIONAL, classic_max=BIG):
    s, ms, a, b = upgraded_with_a_consumer_member()
    ms.downgrader = migration.downgrader(policy, classic_max, ms)
    return s, ms, a, b


def test_the_consumer_member_leaving_converts_the_group_through_the_membership_hook():
    s, ms, a, b = hooked()
    group = ms.groups[G]
    tombstones = group.tombstones()
    epoch = group.group_epoch
    out = ms.heartbeat(HeartbeatRequest(G, "new", -1), 300)
    assert out.response.error == 0 and out.response.member_epoch == -1
    [down] = out.converted
    assert isinstance(down, migration.Downgrade)
    assert out.records == tombstones == down.consumer_records
    assert G not in ms.groups and not any(g == G for g, _ in ms.session_deadlines)
    assert set(down.group.members) == {a, b} and down.group.generation == epoch
    out.rollback()  # the append failed: the consumer group is back as it was
    assert set(ms.groups[G].members) == {a, b, "new"}


def test_the_consumer_member_fenced_by_its_session_converts_the_group_too():
    s, ms, a, b = hooked()
    ms.session_deadlines[(G, a)] = ms.session_deadlines[(G, b)] = 10**9
    out = ms.tick(ms.session_deadlines[(G, "new")])
    assert len(out.converted) == 1 and G not in ms.groups


@pytest.mark.parametrize(("policy", "classic_max"), [(P.UPGRADE, BIG), (P.DISABLED, BIG), (P.BIDIRECTIONAL, 1)])
def test_without_downgrade_the_consumer_member_simply_leaves(policy, classic_max):
    s, ms, a, b = hooked(policy, classic_max)
    out = ms.heartbeat(HeartbeatRequest(G, "new", -1), 300)
    assert out.converted == [] and set(ms.groups[G].members) == {a, b}


def test_a_classic_leave_or_fencing_leaving_only_classic_members_converts():
    from kafkapy.coordinator.consumer.classic_members import ClassicMembers

    s = shard()
    a, b, c = stable_classic_group(s, 3)
    ms = membership()
    migration.install(ms, migration.upgrade(s.groups[G], P.BIDIRECTIONAL, BIG, TOPICS, 100))
    ms.downgrader = migration.downgrader(P.UPGRADE, BIG, ms)
    out = ClassicMembers(ms).leave(G, [(a, None)], 101)
    assert out.answer == [E.NONE] and out.converted == [] and set(ms.groups[G].members) == {b, c}
    ms.downgrader = migration.downgrader(P.BIDIRECTIONAL, BIG, ms)
    # Every member speaks the classic protocol (Kafka 4.x's consumerGroupFenceMembers).
    ms.session_deadlines[(G, c)] = 10**9
    out = ms.tick(ms.session_deadlines[(G, b)])
    [down] = out.converted
    assert set(down.group.members) == {c} and G not in ms.groups


def test_a_static_classic_member_replacing_the_last_consumer_member_converts_without_rebalance():
    from kafkapy.coordinator.consumer.classic_members import ClassicMembers

    s = shard()
    a, b = stable_classic_group(s)
    ms = membership()
    migration.install(ms, migration.upgrade(s.groups[G], P.BIDIRECTIONAL, BIG, TOPICS, 100))
    ms.downgrader = migration.downgrader(P.BIDIRECTIONAL, BIG, ms)
    # A static member of the consumer protocol joins, settles, and is then replaced by a
    # classic consumer with its instance id (say a rolling downgrade of the application).
    ms.heartbeat(HeartbeatRequest(G, "new", 0, owned={}, instance_id="i1", rebalance_timeout_ms=REBALANCE,
                                  subscribed_topic_names=["foo"]), 100)
    g = ms.groups[G]
    target = dict(g.target["new"])
    cm = ClassicMembers(ms)
    out = cm.join(jreq("", instance="i1", protocols=[("range", sub(("foo",), {}))]), 200)
    res = out.answer
    [down] = out.converted
    assert res.error == E.NONE and res.member_id not in (a, b, "new")
    c = down.group
    assert set(c.members) == {a, b, res.member_id} and c.static_members == {"i1": res.member_id}
    assert c.state is GroupState.STABLE and c.generation == res.generation
    taken = cp.decode_assignment(c.members[res.member_id].assignment).partitions
    assert taken == {"foo": tuple(sorted(target[FOO]))}  # the replaced member's target
    assert G not in ms.groups


def test_a_static_replacement_on_a_stale_target_converts_and_rebalances():
    from kafkapy.coordinator.consumer.classic_members import ClassicMembers

    s = shard()
    stable_classic_group(s)
    ms = membership()
    migration.install(ms, migration.upgrade(s.groups[G], P.BIDIRECTIONAL, BIG, TOPICS, 100))
    ms.downgrader = migration.downgrader(P.BIDIRECTIONAL, BIG, ms)
    ms.heartbeat(HeartbeatRequest(G, "new", 0, owned={}, instance_id="i1", rebalance_timeout_ms=REBALANCE,
                                  subscribed_topic_names=["foo"]), 100)
    # The replacement subscribes differently: the group epoch moves past the target's.
    out = ClassicMembers(ms).join(jreq("", instance="i1", protocols=[("range", sub(("foo", "bar")))]), 200)
    [down] = out.converted
    assert down.group.state is GroupState.PREPARING_REBALANCE
    assert any("with stale assignment" in line for line in down.log)
