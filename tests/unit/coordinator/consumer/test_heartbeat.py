"""ConsumerGroupHeartbeat: joining, reconciling, leaving, static members, timeouts, the error
paths, replay and rollback."""

from __future__ import annotations

import uuid

import pytest

from kafkapy.coordinator.consumer import records as rec
from kafkapy.coordinator.consumer.group import ConsumerGroupState, TopicInfo
from kafkapy.coordinator.consumer.heartbeat import ConsumerGroupConfig, HeartbeatRequest
from kafkapy.coordinator.consumer.reconcile import MemberState
from kafkapy.protocol.errors import ErrorCode as E

from .harness import BAR, FOO, G, ack, hb, join, membership, no_double_ownership, snapshot, topics


def test_first_member_joins_and_gets_everything() -> None:
    m = membership()
    out = join(m, "a")
    r = out.response
    assert r is not None and r.error == 0
    # Kafka 4.4: a new group is at epoch 1, subscribing bumps it to 2
    assert (r.member_id, r.member_epoch, r.heartbeat_interval_ms) == ("a", 2, 5000)
    assert r.assignment == {FOO: frozenset(range(6))}
    assert [type(x).__name__ for x in out.records] == [
        "MemberMetadata", "GroupMetadata", "TargetAssignmentMember", "TargetAssignmentMetadata",
        "CurrentMemberAssignment"]
    assert m.groups[G].state() is ConsumerGroupState.STABLE
    assert m.describe(G).assignor_name == "uniform"


def test_second_member_waits_for_revocation_before_assignment() -> None:
    m = membership()
    join(m, "a")
    r = join(m, "b").response
    assert r is not None and r.member_epoch == 3 and r.assignment == {}
    g = m.groups[G]
    assert g.members["b"].state is MemberState.UNRELEASED_PARTITIONS
    assert g.state() is ConsumerGroupState.RECONCILING
    # a still owns all six: it must give three up first, keeping its epoch
    r = hb(m, "a", 2, owned={FOO: frozenset(range(6))}).response
    assert r is not None and r.member_epoch == 2 and r.assignment == {FOO: frozenset({0, 1, 2})}
    assert g.members["a"].state is MemberState.UNREVOKED_PARTITIONS
    no_double_ownership(g)
    # b still gets nothing while a holds them
    r = hb(m, "b", 3, owned={}).response
    assert r is not None and r.assignment is None and g.members["b"].assigned == {}
    # a revokes; then b gets them
    r = hb(m, "a", 2, owned={FOO: frozenset({0, 1, 2})}).response
    assert r is not None and r.member_epoch == 3
    r = hb(m, "b", 3, owned={}).response
    assert r is not None and r.assignment == {FOO: frozenset({3, 4, 5})}
    assert g.state() is ConsumerGroupState.STABLE
    no_double_ownership(g)


def test_assignment_only_sent_when_changed_or_full_request() -> None:
    m = membership()
    join(m, "a")
    r = hb(m, "a", 2).response
    assert r is not None and r.assignment is None
    r = hb(m, "a", 2, rebalance_timeout_ms=30_000, subscribed_topic_names=["foo"],
           owned={FOO: frozenset(range(6))}).response
    assert r is not None and r.assignment == {FOO: frozenset(range(6))}


def test_lost_response_previous_epoch_is_accepted_with_a_subset() -> None:
    m = membership()
    join(m, "a")
    join(m, "b")
    hb(m, "a", 2, owned={FOO: frozenset(range(6))})
    hb(m, "a", 2, owned={FOO: frozenset({0, 1, 2})})  # now epoch 3, previous 2
    assert m.groups[G].members["a"].member_epoch == 3
    r = hb(m, "a", 2, owned={FOO: frozenset({0, 1})}).response
    assert r is not None and r.error == 0 and r.member_epoch == 3
    r = hb(m, "a", 2, owned={FOO: frozenset({0, 5})}).response
    assert r is not None and r.error == E.FENCED_MEMBER_EPOCH
    r = hb(m, "a", 2).response
    assert r is not None and r.error == E.FENCED_MEMBER_EPOCH


@pytest.mark.parametrize("kw,error", [
    (dict(group_id=""), E.INVALID_REQUEST),
    (dict(instance_id=""), E.INVALID_REQUEST),
    (dict(rack_id=""), E.INVALID_REQUEST),
    (dict(member_id=""), E.INVALID_REQUEST),
    (dict(rebalance_timeout_ms=-1), E.INVALID_REQUEST),
    (dict(owned={FOO: frozenset({1})}), E.INVALID_REQUEST),
    (dict(subscribed_topic_names=None), E.INVALID_REQUEST),
    (dict(owned=None), E.INVALID_REQUEST),  # Kafka wants an empty list on a join, not a null
    (dict(group_id=" "), E.INVALID_REQUEST),  # blank as Java's trim() sees it
    (dict(member_epoch=-3), E.INVALID_REQUEST),
    (dict(member_epoch=-2), E.INVALID_REQUEST),  # a static leave needs an instance id
    (dict(server_assignor="sticky"), E.UNSUPPORTED_ASSIGNOR),
    (dict(subscribed_topic_regex="(a)\\1"), E.INVALID_REGULAR_EXPRESSION),
    (dict(member_epoch=3), E.GROUP_ID_NOT_FOUND),
])
def test_invalid_requests(kw: dict[str, object], error: int) -> None:
    m = membership()
    fields: dict[str, object] = dict(group_id=G, member_id="a", member_epoch=0, rebalance_timeout_ms=30_000,
                                     subscribed_topic_names=["foo"], owned={})
    fields.update(kw)
    out = m.heartbeat(HeartbeatRequest(**fields), 0)  # type: ignore[arg-type]
    assert out.response is not None and out.response.error == error
    assert out.records == [] and G not in m.groups


def test_v0_member_id_is_generated_by_the_server() -> None:
    m = membership()
    r = m.heartbeat(HeartbeatRequest(G, "", 0, owned={}, rebalance_timeout_ms=1, subscribed_topic_names=["foo"],
                                    version=0), 0)
    assert r.response is not None and r.response.member_id == "gen-0"


def test_epoch_errors_of_known_and_unknown_members() -> None:
    m = membership()
    join(m, "a")
    assert hb(m, "a", 5).response.error == E.FENCED_MEMBER_EPOCH  # type: ignore[union-attr]
    assert hb(m, "zz", 1).response.error == E.UNKNOWN_MEMBER_ID  # type: ignore[union-attr]
    assert hb(m, "zz", -1).response.error == E.UNKNOWN_MEMBER_ID  # type: ignore[union-attr]


def test_group_max_size() -> None:
    m = membership(ConsumerGroupConfig(max_size=2))
    join(m, "a")
    join(m, "b")
    assert join(m, "c").response.error == E.GROUP_MAX_SIZE_REACHED  # type: ignore[union-attr]
    assert hb(m, "a", 2, owned={FOO: frozenset({0, 1, 2})}).response.error == 0  # type: ignore[union-attr]


def test_rejoin_with_epoch_zero_resets_the_member() -> None:
    m = membership()
    join(m, "a")
    r = join(m, "a").response
    assert r is not None and r.error == 0 and r.member_epoch == 2 and r.assignment == {FOO: frozenset(range(6))}


def test_leave_tombstones_the_member_and_bumps_the_epoch() -> None:
    m = membership()
    join(m, "a")
    join(m, "b")
    out = hb(m, "b", -1)
    assert out.response is not None and (out.response.member_id, out.response.member_epoch) == ("b", -1)
    assert out.records == [
        rec.Tombstone(8, G, "b"), rec.Tombstone(7, G, "b"), rec.Tombstone(5, G, "b"),
        rec.GroupMetadata(G, 4, m.groups[G].metadata_hash)]
    assert ("g", "b") not in m.session_deadlines
    # a had not started revoking: it keeps all six and moves straight to epoch 4
    r = hb(m, "a", 2, owned={FOO: frozenset(range(6))}).response
    assert r is not None and r.member_epoch == 4 and r.assignment is None
    assert m.groups[G].members["a"].assigned == {FOO: frozenset(range(6))}
    hb(m, "a", -1)
    assert m.groups[G].state() is ConsumerGroupState.EMPTY


def test_session_timeout_fences_the_member() -> None:
    m = membership()
    join(m, "a", now=0)
    join(m, "b", now=1000)
    assert m.next_deadline() == 45_000
    assert m.tick(44_999).records == []
    out = m.tick(45_000)
    assert rec.Tombstone(5, G, "a") in out.records and "a" not in m.groups[G].members
    assert m.groups[G].group_epoch == 4
    assert m.next_deadline() == 46_000


def test_rebalance_timeout_fences_a_member_that_does_not_revoke() -> None:
    m = membership()
    join(m, "a", rebalance_timeout_ms=10_000)
    join(m, "b", now=100)
    hb(m, "a", 2, now=200, owned={FOO: frozenset(range(6))})  # now UNREVOKED at epoch 2
    assert m.rebalance_deadlines[(G, "a")] == (10_200, 2)
    hb(m, "a", 2, now=5_000, owned={FOO: frozenset(range(6))})  # still holding: the deadline stays
    assert m.next_deadline() == 10_200
    out = m.tick(10_200)
    assert "a" not in m.groups[G].members and out.records
    r = hb(m, "b", 3, now=10_300, owned={}).response
    assert r is not None and r.assignment == {FOO: frozenset(range(6))} and r.member_epoch == 4


def test_revoking_in_time_cancels_the_rebalance_timeout() -> None:
    m = membership()
    join(m, "a")
    join(m, "b")
    hb(m, "a", 2, owned={FOO: frozenset(range(6))})
    hb(m, "a", 2, owned={FOO: frozenset({0, 1, 2})})
    assert (G, "a") not in m.rebalance_deadlines


def test_static_member_leaves_temporarily_and_comes_back_without_a_rebalance() -> None:
    m = membership()
    join(m, "a", instance_id="i-a")
    join(m, "b", instance_id="i-b")
    hb(m, "a", 2, owned={FOO: frozenset(range(6))})
    hb(m, "a", 2, owned={FOO: frozenset({0, 1, 2})})
    hb(m, "b", 3, owned={})
    g = m.groups[G]
    epoch = g.group_epoch
    out = hb(m, "b", -2, instance_id="i-b")
    assert out.response is not None and out.response.member_epoch == -2
    assert [type(x).__name__ for x in out.records] == ["CurrentMemberAssignment"]
    assert g.members["b"].assigned == {FOO: frozenset({3, 4, 5})}
    # nobody else may take b's partitions meanwhile
    assert g.owner(FOO, 3) == "b"
    # another process with the same instance id while a still runs: refused
    assert join(m, "x", instance_id="i-a").response.error == E.UNRELEASED_INSTANCE_ID  # type: ignore[union-attr]
    # b comes back as b2
    r = join(m, "b2", instance_id="i-b").response
    assert r is not None and r.error == 0 and r.assignment == {FOO: frozenset({3, 4, 5})}
    assert r.member_epoch == epoch and g.group_epoch == epoch
    assert "b" not in g.members and g.static_members["i-b"] == "b2"
    no_double_ownership(g)
    # the old id is fenced now
    assert hb(m, "b", 3, instance_id="i-b").response.error == E.FENCED_INSTANCE_ID  # type: ignore[union-attr]
    assert hb(m, "q", 2, instance_id="i-q").response.error == E.UNKNOWN_MEMBER_ID  # type: ignore[union-attr]


def test_static_member_that_does_not_return_expires() -> None:
    m = membership()
    join(m, "a", instance_id="i-a")
    hb(m, "a", -2, now=10, instance_id="i-a")
    assert m.tick(45_000).records
    assert "a" not in m.groups[G].members and "i-a" not in m.groups[G].static_members


def test_topic_changes_bump_the_epoch_and_reassign() -> None:
    m = membership(foo=2)
    join(m, "a", subscribed_topic_names=["foo", "bar"])
    assert m.groups[G].members["a"].assigned == {FOO: frozenset({0, 1})}
    m.set_topics(topics(foo=2, bar=2), version=2)
    r = hb(m, "a", 2).response
    assert r is not None and r.member_epoch == 3 and r.assignment == {FOO: frozenset({0, 1}), BAR: frozenset({0, 1})}


def test_regex_subscription_is_resolved_and_refreshed() -> None:
    m = membership(foo=2, bar=1)
    internal = TopicInfo(uuid.UUID(int=99), "__consumer_offsets", 50, internal=True)
    m.set_topics({**topics(foo=2, bar=1), internal.name: internal}, version=1)
    out = join(m, "a", subscribed_topic_names=None, subscribed_topic_regex=".*o.*")
    assert rec.RegularExpression(G, ".*o.*", ("foo",), 1, 0) in out.records
    assert out.response is not None and out.response.assignment == {FOO: frozenset({0, 1})}
    m.set_topics({**m.topics, **topics(foo=2, bar=1, zoo=1)}, version=2)
    zoo = m.topics["zoo"].topic_id
    r = hb(m, "a", 2, now=10).response
    assert r is not None and r.assignment == {FOO: frozenset({0, 1}), zoo: frozenset({0})}
    out = hb(m, "a", -1, now=20)
    assert rec.Tombstone(16, G, ".*o.*") in out.records and not m.groups[G].regexes


def test_assignor_is_the_one_members_ask_for() -> None:
    m = membership(foo=4)
    join(m, "a", server_assignor="range")
    assert m.describe(G).assignor_name == "range"
    d = m.describe(G)
    assert d.state == "Stable" and d.members[0].target_assignment == {FOO: frozenset(range(4))}
    assert m.describe("nope").error == E.GROUP_ID_NOT_FOUND


def test_replay_of_the_records_rebuilds_the_groups() -> None:
    m = membership()
    written: list[rec.GroupRecord] = []
    for step in [lambda: join(m, "a", instance_id="i-a"), lambda: join(m, "b"), lambda: join(m, "c", now=5),
                 lambda: ack(m, "a"), lambda: ack(m, "b"), lambda: ack(m, "a"), lambda: hb(m, "c", -1),
                 lambda: ack(m, "b"), lambda: hb(m, "a", -2, instance_id="i-a")]:
        written += step().records
    fresh = membership()
    for r in written:
        fresh.replay(r)
    assert snapshot(fresh.groups[G]) == snapshot(m.groups[G])
    fresh.on_loaded(1000)
    assert set(fresh.session_deadlines) == {(G, "a"), (G, "b")}


def test_replay_of_a_group_tombstone_deletes_it() -> None:
    m = membership()
    join(m, "a")
    hb(m, "a", -1)
    for r in m.groups[G].tombstones():
        m.replay(r)
    assert G not in m.groups


def test_rollback_restores_the_state_before_a_failed_write() -> None:
    m = membership()
    join(m, "a")
    before = snapshot(m.groups[G])
    deadlines = dict(m.session_deadlines)
    out = join(m, "b", now=7)
    assert out.records
    out.rollback()
    assert snapshot(m.groups[G]) == before and m.session_deadlines == deadlines
    fresh = membership()
    out = join(fresh, "a")
    out.rollback()
    assert fresh.groups == {} and fresh.session_deadlines == {}


def test_offset_commit_and_fetch_validation_with_member_epochs() -> None:
    m = membership()
    join(m, "a")
    g = m.groups[G]
    assert g.validate_offset_commit("a", 2, 9) == 0
    assert g.validate_offset_commit("a", 0, 9) == E.STALE_MEMBER_EPOCH
    assert g.validate_offset_commit("a", 2, 8) == E.UNSUPPORTED_VERSION
    assert g.validate_offset_commit("a", 2, 3, transactional=True) == 0
    assert g.validate_offset_commit("zz", 1, 9) == E.UNKNOWN_MEMBER_ID
    assert g.validate_offset_commit("", -1, 9) == E.UNKNOWN_MEMBER_ID  # admin commits wait for an empty group
    assert g.validate_offset_fetch(None, -1) == 0
    assert g.validate_offset_fetch("a", 3) == E.STALE_MEMBER_EPOCH
    assert g.validate_delete() == E.NON_EMPTY_GROUP and g.subscribes_to("foo") and not g.subscribes_to("bar")
    hb(m, "a", -1)
    assert g.validate_offset_commit("", -1, 2) == 0 and g.validate_delete() == 0


def test_subscription_change_reassigns() -> None:
    m = membership(foo=2, bar=2)
    join(m, "a")
    join(m, "b", subscribed_topic_names=["foo", "bar"])
    for _ in range(3):
        for x in ("a", "b"):
            ack(m, x)
    g = m.groups[G]
    assert set(g.members["a"].assigned) == {FOO}
    assert g.members["b"].assigned.get(BAR) == frozenset({0, 1})
    epoch = g.group_epoch
    hb(m, "a", g.members["a"].member_epoch, subscribed_topic_names=["bar"], owned=dict(g.members["a"].assigned))
    assert g.group_epoch == epoch + 1
    for _ in range(3):
        for x in ("a", "b"):
            ack(m, x)
    no_double_ownership(g)
    assert set(g.members["a"].assigned) == {BAR} and set(g.members["b"].assigned) >= {FOO}
    assert g.state() is ConsumerGroupState.STABLE
