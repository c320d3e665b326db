"""Classic-protocol members inside a consumer group (mixed mode): JoinGroup answered at once by
the server's assignment, SyncGroup, Heartbeat telling a member to rejoin, LeaveGroup, and the
join/sync/session timeouts."""

from __future__ import annotations

import pytest

from kafkapy.coordinator import migration
from kafkapy.coordinator.consumer import records as rec
from kafkapy.coordinator.consumer.classic_members import ClassicMembers
from kafkapy.coordinator.consumer.group import ConsumerGroup
from kafkapy.coordinator.consumer.heartbeat import HeartbeatRequest
from kafkapy.coordinator.consumer.reconcile import MemberState
from kafkapy.coordinator.group import JoinRequest
from kafkapy.protocol import consumer_protocol as cp
from kafkapy.protocol.errors import ErrorCode as E

from ..migration_harness import FOO, REBALANCE, SESSION, TOPICS, G, membership, shard, stable_classic_group, sub


def mixed():
    """A classic group of a (foo 0-2) and b (foo 3-5) upgraded by the consumer member "new"."""
    s = shard()
    a, b = stable_classic_group(s)
    ms = membership()
    up = migration.upgrade(s.groups[G], migration.MigrationPolicy.BIDIRECTIONAL, 100, TOPICS, 100)
    migration.install(ms, up)
    out = ms.heartbeat(HeartbeatRequest(G, "new", 0, owned={}, rebalance_timeout_ms=REBALANCE,
                                        subscribed_topic_names=["foo"]), 100)
    assert out.response.error == 0
    return ms, ClassicMembers(ms), a, b


def join(cm: ClassicMembers, member_id: str, now: int, owned=None, topics=("foo",), protocols=None,
         instance=None) -> object:
    protocols = protocols or [("range", sub(topics, owned))]
    return cm.join(JoinRequest(G, member_id, instance, "consumer", protocols, SESSION, REBALANCE,
                               client_id="cl", client_host="/h", require_known_member_id=instance is None), now)


def owns(cm: ClassicMembers, mid: str) -> dict:
    return cp.decode_assignment(cm.assignment_bytes(cm.ms.groups[G].members[mid])).partitions


def test_a_classic_member_behind_the_group_epoch_is_told_to_rejoin():
    ms, cm, a, b = mixed()
    group = ms.groups[G]
    m = group.members[a]
    assert m.member_epoch < group.group_epoch
    assert cm.heartbeat(G, m.member_epoch, a, None, 200).answer == E.REBALANCE_IN_PROGRESS
    assert cm.join_deadlines == {(G, a): 200 + REBALANCE}


def test_rejoin_revoke_then_rejoin_reaches_the_new_epoch_with_server_assigned_partitions():
    ms, cm, a, b = mixed()
    group = ms.groups[G]
    out = join(cm, a, 200, owned={"foo": [0, 1, 2]})
    res = out.answer
    m = group.members[a]
    # Answered at once: the generation is the member epoch; nothing for a leader to do.
    assert res.error == E.NONE and res.member_id == a and res.leader == "" and res.members == []
    assert (res.generation, res.protocol_type, res.protocol_name) == (m.member_epoch, "consumer", "range")
    assert m.state is MemberState.UNREVOKED_PARTITIONS  # it must give a partition up to "new"
    synced = cm.sync(G, res.generation, a, None, "consumer", "range", [], 201).answer
    assert synced.error == E.NONE
    kept = cp.decode_assignment(synced.assignment).partitions["foo"]
    assert len(kept) == 2 and set(kept) < {0, 1, 2}
    assert cp.version_of(synced.assignment) == 1  # the version the member subscribed with
    # Still revoking: told to rejoin; it rejoins owning only what it kept and moves on.
    assert cm.heartbeat(G, res.generation, a, None, 202).answer == E.REBALANCE_IN_PROGRESS
    res2 = join(cm, a, 203, owned={"foo": list(kept)}).answer
    m = group.members[a]
    assert res2.generation == m.member_epoch == group.assignment_epoch and m.state is MemberState.STABLE
    assert cm.sync(G, res2.generation, a, None, "consumer", "range", [], 204).answer.error == E.NONE
    assert cm.heartbeat(G, res2.generation, a, None, 205).answer == E.NONE
    assert (G, a) not in cm.sync_deadlines and (G, a) not in cm.join_deadlines


def test_a_new_classic_member_gets_a_member_id_first_then_joins_with_its_subscription():
    ms, cm, a, b = mixed()
    first = join(cm, "", 300).answer
    assert first.error == E.MEMBER_ID_REQUIRED and first.member_id
    epoch = ms.groups[G].group_epoch
    out = join(cm, first.member_id, 301)
    assert out.answer.error == E.NONE
    m = ms.groups[G].members[first.member_id]
    assert ms.groups[G].group_epoch == epoch + 1
    assert m.classic == rec.ClassicMemberMetadata(SESSION, (("range", sub()),))
    assert m.client_id == "cl" and m.subscribed_topic_names == ("foo",)
    assert any(isinstance(r, rec.MemberMetadata) and r.classic is not None for r in out.records)
    assert ms.session_deadlines[(G, first.member_id)] == 301 + SESSION
    assert cm.sync_deadlines[(G, first.member_id)] == 301 + REBALANCE


def test_a_join_whose_protocols_the_classic_members_do_not_share_is_refused():
    ms, cm, a, b = mixed()
    res = join(cm, "x", 300, protocols=[("roundrobin", sub())]).answer
    assert res.error == E.INCONSISTENT_GROUP_PROTOCOL
    assert "x" not in ms.groups[G].members


@pytest.mark.parametrize(("generation", "ptype", "pname", "error"), [
    (-5, "consumer", "range", E.ILLEGAL_GENERATION),
    (None, "connect", "range", E.INCONSISTENT_GROUP_PROTOCOL),
    (None, "consumer", "roundrobin", E.INCONSISTENT_GROUP_PROTOCOL),
])
def test_sync_refusals(generation, ptype, pname, error):
    ms, cm, a, b = mixed()
    res = join(cm, a, 200, owned={"foo": [0, 1, 2]}).answer
    gen = res.generation if generation is None else generation
    assert cm.sync(G, gen, a, None, ptype, pname, [], 201).answer.error == error


def test_a_consumer_protocol_member_or_a_stranger_is_unknown_to_classic_heartbeat_and_sync():
    ms, cm, a, b = mixed()
    epoch = ms.groups[G].members["new"].member_epoch
    assert cm.heartbeat(G, epoch, "new", None, 200).answer == E.UNKNOWN_MEMBER_ID
    assert cm.sync(G, epoch, "new", None, None, None, [], 200).answer.error == E.UNKNOWN_MEMBER_ID
    assert cm.sync(G, epoch, "nobody", None, None, None, [], 200).answer.error == E.UNKNOWN_MEMBER_ID


def test_leave_removes_any_member_named_and_bumps_the_group_epoch_once():
    ms, cm, a, b = mixed()
    epoch = ms.groups[G].group_epoch
    out = cm.leave(G, [("new", None), ("nobody", None), (a, None)], 200)
    assert out.answer == [E.NONE, E.UNKNOWN_MEMBER_ID, E.NONE]
    assert set(ms.groups[G].members) == {b} and ms.groups[G].group_epoch == epoch + 1


def test_a_classic_join_is_refused_when_migration_is_disabled():
    ms, cm, a, b = mixed()
    cm.policy = migration.MigrationPolicy.DISABLED
    res = join(cm, a, 200, owned={"foo": [0, 1, 2]}).answer
    assert res.error == E.INCONSISTENT_GROUP_PROTOCOL


def test_a_sync_behind_the_group_epoch_is_told_to_rejoin():
    ms, cm, a, b = mixed()
    m = ms.groups[G].members[b]
    assert cm.sync(G, m.member_epoch, b, None, None, None, [], 200).answer.error == E.REBALANCE_IN_PROGRESS


def test_leave_removes_the_member_and_bumps_the_group_epoch():
    ms, cm, a, b = mixed()
    epoch = ms.groups[G].group_epoch
    out = cm.leave(G, [(a, None)], 200)
    assert out.answer == [E.NONE]
    assert a not in ms.groups[G].members and ms.groups[G].group_epoch == epoch + 1
    assert rec.Tombstone(rec.MemberMetadata.RECORD_TYPE, G, a) in out.records
    assert (G, a) not in ms.session_deadlines


def test_a_member_that_never_syncs_is_fenced_at_its_rebalance_timeout():
    ms, cm, a, b = mixed()
    join(cm, a, 200, owned={"foo": [0, 1, 2]})
    assert cm.next_deadline() == 200 + REBALANCE
    assert cm.tick(200 + REBALANCE - 1).records == []
    out = cm.tick(200 + REBALANCE)
    assert a not in ms.groups[G].members and out.records


def test_a_member_told_to_rejoin_that_does_not_is_fenced():
    ms, cm, a, b = mixed()
    cm.heartbeat(G, ms.groups[G].members[b].member_epoch, b, None, 200)
    cm.tick(200 + REBALANCE)
    assert b not in ms.groups[G].members


def test_the_session_of_a_classic_member_is_its_join_session_timeout():
    ms, cm, a, b = mixed()
    res = join(cm, a, 200, owned={"foo": [0, 1, 2]}).answer
    cm.sync(G, res.generation, a, None, None, None, [], 210)
    assert ms.session_deadlines[(G, a)] == 210 + SESSION
    ms.tick(210 + SESSION)
    assert a not in ms.groups[G].members


def test_a_failed_append_rolls_the_join_back():
    ms, cm, a, b = mixed()
    before = ms.groups[G]
    snapshot = (dict(before.members), dict(before.target), before.group_epoch)
    out = join(cm, "x", 300)
    assert "x" in ms.groups[G].members
    out.rollback()
    g = ms.groups[G]
    assert (dict(g.members), dict(g.target), g.group_epoch) == snapshot
    assert (G, "x") not in ms.session_deadlines and (G, "x") not in cm.sync_deadlines


def test_replaying_the_records_of_a_mixed_group_rebuilds_it():
    ms, cm, a, b = mixed()
    log: list = []
    s = shard()
    a2, b2 = stable_classic_group(s)
    ms2 = membership()
    up = migration.upgrade(s.groups[G], migration.MigrationPolicy.BIDIRECTIONAL, 100, TOPICS, 100)
    log += migration.install(ms2, up).records
    log += ms2.heartbeat(HeartbeatRequest(G, "new", 0, owned={}, rebalance_timeout_ms=REBALANCE,
                                          subscribed_topic_names=["foo"]), 100).records
    cm2 = ClassicMembers(ms2)
    log += cm2.join(JoinRequest(G, a2, None, "consumer", [("range", sub(("foo",), {"foo": [0, 1, 2]}))],
                                SESSION, REBALANCE, client_id="cl", client_host="/h"), 200).records
    log += cm2.leave(G, [(b2, None)], 201).records
    again = ConsumerGroup(G)
    for r in log:
        again.replay(r)
    live = ms2.groups[G]
    assert again.members == live.members and again.target == live.target
    assert (again.group_epoch, again.assignment_epoch) == (live.group_epoch, live.assignment_epoch)
    assert again.members[a2].classic is not None and again.members["new"].classic is None


def test_a_static_classic_member_coming_back_under_a_new_id_takes_over():
    ms, cm, a, b = mixed()
    join(cm, "", 300, instance="i1")  # static: no MEMBER_ID_REQUIRED round
    sid = ms.groups[G].static_members["i1"]
    res = join(cm, "", 400, instance="i1").answer
    assert res.error == E.NONE and res.member_id != sid
    assert sid not in ms.groups[G].members and ms.groups[G].static_members["i1"] == res.member_id
    assert join(cm, sid, 401, instance="i1").answer.error == E.FENCED_INSTANCE_ID


def test_owned_partitions_are_read_by_topic_name():
    ms, cm, a, b = mixed()
    join(cm, a, 200, owned={"foo": [0, 1, 2]})
    assert set(owns(cm, a)["foo"]) < {0, 1, 2}
    assert FOO in ms.groups[G].members[a].assigned


def test_a_full_group_refuses_a_new_member_but_not_a_static_one_taking_over():
    from kafkapy.coordinator.consumer.heartbeat import ConsumerGroupConfig

    ms, cm, a, b = mixed()
    join(cm, "", 300, instance="i1")
    ms.config = ConsumerGroupConfig(max_size=len(ms.groups[G].members))
    assert join(cm, "x", 301).answer.error == E.GROUP_MAX_SIZE_REACHED
    assert join(cm, "", 302, instance="i1").answer.error == E.NONE


def test_a_member_waiting_for_partitions_is_told_to_rejoin_once_they_are_free():
    ms, cm, a, b = mixed()
    x = join(cm, "", 300).answer.member_id
    res = join(cm, x, 301).answer
    g = ms.groups[G]
    m = g.members[x]
    assert m.state is MemberState.UNRELEASED_PARTITIONS and res.generation == g.group_epoch
    assert cm.sync(G, res.generation, x, None, None, None, [], 302).answer.error == E.NONE
    assert cm.heartbeat(G, res.generation, x, None, 303).answer == E.NONE  # still held by others
    for mid in (a, b, "new"):  # everybody else gives up what x waits for
        member = g.members[mid]
        keep = {"foo": sorted(g.target[mid].get(FOO, ()))}
        if member.classic is not None:
            join(cm, mid, 304, owned=keep)
        else:
            ms.heartbeat(HeartbeatRequest(G, mid, member.member_epoch, owned=dict(g.target[mid])), 304)
    assert cm.heartbeat(G, res.generation, x, None, 305).answer == E.REBALANCE_IN_PROGRESS
    res2 = join(cm, x, 306).answer
    assert g.members[x].state is MemberState.STABLE and g.members[x].assigned == g.target[x]
    assert res2.generation == g.group_epoch


def test_describe_tells_classic_members_from_consumer_ones():
    ms, cm, a, b = mixed()
    types = {m.member_id: m.member_type for m in ms.describe(G).members}
    assert types == {a: 0, b: 0, "new": 1}
