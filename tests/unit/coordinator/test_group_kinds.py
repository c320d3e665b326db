"""GroupShard with groups of three kinds: consumer groups (KIP-848) served next to classic ones in
one namespace, share groups loaded, offsets with member epochs, DeleteGroups, ListGroups, and a
log with every kind replaying to the same state."""

from __future__ import annotations

import itertools
import uuid

from kafkapy.coordinator import group_records as gr
from kafkapy.coordinator import schema
from kafkapy.coordinator.group import (
    CONSUMER,
    PARKED_TYPE,
    GroupConfig,
    GroupShard,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinRequest,
    JoinResult,
    Outcome,
    SyncResult,
    TopicInfo,
)
from kafkapy.coordinator.share_group.heartbeat import ShareHeartbeatRequest
from kafkapy.coordinator.migration import MigrationPolicy
from kafkapy.protocol.errors import ErrorCode as E

FOO = uuid.UUID(int=0xF00)
TOPICS = {"foo": TopicInfo(FOO, "foo", 4), "bar": TopicInfo(uuid.UUID(int=0xBA2), "bar", 2)}


def shard(policy: MigrationPolicy = MigrationPolicy.BIDIRECTIONAL) -> GroupShard:
    ids = (f"u{i}" for i in itertools.count())
    s = GroupShard(0, GroupConfig(initial_rebalance_delay_ms=0), lambda: next(ids), migration_policy=policy)
    s.set_topics(TOPICS, 1)
    return s


class Log:
    """The records an edge appended, in order."""

    def __init__(self) -> None:
        self.records: list[tuple[bytes, bytes | None]] = []

    def write(self, out: Outcome) -> Outcome:
        self.records += out.records
        out.written()
        return out


def cgh(s: GroupShard, log: Log, group: str, member: str, epoch: int, now: int = 0, **kw) -> HeartbeatResponse:
    if epoch == 0:
        kw.setdefault("rebalance_timeout_ms", 30_000)
        kw.setdefault("subscribed_topic_names", ["foo"])
        kw.setdefault("owned", {})
    out = log.write(s.consumer_heartbeat(HeartbeatRequest(group, member, epoch, **kw), now))
    assert isinstance(out.response, HeartbeatResponse)
    return out.response


def classic_join(s: GroupShard, group: str, member: str = "") -> JoinResult:
    out = s.join(JoinRequest(group, member, None, "consumer", [("range", b"")], 10_000, 10_000,
                             require_known_member_id=False), 0)
    out.written()
    result = out.response
    if isinstance(result, PARKED_TYPE):
        result = dict(out.completions)[result.key]
    assert isinstance(result, JoinResult)
    return result


def test_consumer_heartbeat_creates_a_consumer_group_and_writes_its_records() -> None:
    s, log = shard(), Log()
    r = cgh(s, log, "g", "m1", 0)
    assert r.error == 0 and r.member_epoch == 2 and r.assignment == {FOO: frozenset(range(4))}
    assert s.group_type("g") == CONSUMER
    types = [gr.record_type(k) for k, _ in log.records]
    assert types == [5, 3, 7, 6, 8]


def test_kinds_share_one_namespace() -> None:
    s, log = shard(MigrationPolicy.DISABLED), Log()
    cgh(s, log, "cg", "m1", 0)
    # Kafka 4.4's answers with group.consumer.migration.policy=disabled
    joined = classic_join(s, "cg", "m1")
    assert (joined.error, joined.member_id) == (E.INCONSISTENT_GROUP_PROTOCOL, "")
    assert s.heartbeat("cg", 1, "m1", None, 0).response == E.UNKNOWN_MEMBER_ID
    synced = s.sync("cg", 1, "m1", None, None, None, [], 0).response
    assert isinstance(synced, SyncResult) and synced.error == E.UNKNOWN_MEMBER_ID
    # LeaveGroup removes a consumer group's member (and knows no other)
    left = log.write(s.leave("cg", [("other", None), ("m1", None)], 0))
    assert left.response == [E.UNKNOWN_MEMBER_ID, E.NONE]
    assert not s.consumer.groups["cg"].members and left.records
    cgh(s, log, "cg", "m1", 0)
    # a classic group with members cannot take a consumer-protocol member (migration disabled)
    classic_join(s, "classic")
    r = cgh(s, log, "classic", "m1", 0)
    assert (r.error, r.error_message) == (
        E.GROUP_ID_NOT_FOUND,
        "Cannot upgrade classic group classic to consumer group because online upgrade is disabled.")
    # a share group is not a consumer group
    s.share.heartbeat(ShareHeartbeatRequest("sg", "s1", 0, subscribed_topic_names=["foo"]), 0)
    r = cgh(s, log, "sg", "m1", 0)
    assert r.error == E.GROUP_ID_NOT_FOUND and r.error_message == "Group sg is not a consumer group."


def test_empty_groups_change_kind() -> None:
    s, log = shard(), Log()
    # an empty classic group with a record becomes a consumer group: its GroupMetadata is deleted
    c1 = classic_join(s, "g").member_id
    log.write(s.leave("g", [(c1, None)], 0))
    assert s.groups["g"].protocol_type == "consumer"
    assert cgh(s, log, "g", "m1", 0).error == 0
    assert (schema.encode_group_key("g"), None) in log.records
    assert s.group_type("g") == CONSUMER
    # and back: once the consumer group is empty, a classic join converts it
    assert cgh(s, log, "g", "m1", -1).error == 0
    out = s.join(JoinRequest("g", "", None, "consumer", [("range", b"")], 10_000, 10_000,
                             require_known_member_id=False), 0)
    assert isinstance(out.response, PARKED_TYPE)
    assert [(gr.record_type(k), v) for k, v in out.records[:2]] == [(6, None), (3, None)]
    assert s.group_type("g") == "classic"


def test_offset_commit_checks_member_epochs() -> None:
    s, log = shard(), Log()
    cgh(s, log, "g", "m1", 0)
    assert s.validate_commit("g", 2, "m1", None, 0, api_version=9) == E.NONE
    assert s.validate_commit("g", 0, "m1", None, 0, api_version=9) == E.STALE_MEMBER_EPOCH
    assert s.validate_commit("g", 2, "m1", None, 0, api_version=8) == E.UNSUPPORTED_VERSION
    assert s.validate_commit("g", 2, "nobody", None, 0, api_version=9) == E.UNKNOWN_MEMBER_ID
    assert s.validate_commit("g", -1, "", None, 0, api_version=9) == E.UNKNOWN_MEMBER_ID  # not while members
    log.write(s.commit("g", [("foo", 0, 42, -1, "")], 0))
    assert [(t, p, c.offset if c else None) for t, p, c in s.fetch_offsets("g", [("foo", 0)])] == [("foo", 0, 42)]
    assert s.validate_fetch("g", "m1", 2) == E.NONE
    assert s.validate_fetch("g", "m1", 3) == E.STALE_MEMBER_EPOCH
    assert s.validate_fetch("g", "x", 2) == E.UNKNOWN_MEMBER_ID
    assert s.validate_fetch("g", None, -1) == E.NONE
    # OffsetDelete keeps subscribed topics
    out = s.delete_offsets("g", [("foo", 0), ("bar", 0)])
    assert out.response == (E.NONE, [E.GROUP_SUBSCRIBED_TO_TOPIC, E.NONE])
    # the consumer group's offset holder is not listed as a group of its own
    assert [(g, t) for g, _, _, t in s.listed_groups()] == [("g", "consumer")]


def test_delete_groups_of_every_kind() -> None:
    s, log = shard(), Log()
    cgh(s, log, "g", "m1", 0)
    log.write(s.commit("g", [("bar", 1, 7, -1, "")], 0))
    assert s.delete_group("g", 0).response == E.NON_EMPTY_GROUP
    cgh(s, log, "g", "m1", -1)
    out = log.write(s.delete_group("g", 0))
    assert out.response == E.NONE
    assert (schema.encode_offset_key("g", "bar", 1), None) in out.records
    assert s.group_type("g") is None and s.fetch_offsets("g", None) == []
    assert all(v is None for _, v in out.records)
    assert s.delete_group("g", 0).response == E.GROUP_ID_NOT_FOUND


def test_list_groups_states_and_types() -> None:
    s, log = shard(), Log()
    cgh(s, log, "cg", "m1", 0)
    classic_join(s, "cl")
    s.share.heartbeat(ShareHeartbeatRequest("sg", "s1", 0, subscribed_topic_names=["foo"]), 0)
    listed = sorted(s.listed_groups())
    assert [(g, t) for g, _, _, t in listed] == [("cg", "consumer"), ("cl", "classic"), ("sg", "share")]
    assert listed[0][1:3] == ("consumer", "Stable") and listed[2][1:3] == ("share", "Stable")


def test_log_with_every_kind_replays_to_the_same_state() -> None:
    s, log = shard(), Log()
    cgh(s, log, "cg", "m1", 0)
    cgh(s, log, "cg", "m2", 0, subscribed_topic_regex="ba.*", subscribed_topic_names=[])
    m1 = s.consumer.groups["cg"].members["m1"]
    cgh(s, log, "cg", "m1", m1.member_epoch, owned=dict(m1.assigned))
    log.write(s.commit("cg", [("foo", 0, 5, -1, "x")], 0))
    log.write(s.consumer_heartbeat(HeartbeatRequest("gone", "z", 0, owned={}, rebalance_timeout_ms=1,
                                                    subscribed_topic_names=["foo"]), 0))
    log.write(s.consumer_heartbeat(HeartbeatRequest("gone", "z", -1), 0))
    log.write(s.delete_group("gone", 0))
    share = s.share.heartbeat(ShareHeartbeatRequest("sg", "s1", 0, subscribed_topic_names=["foo"]), 0)
    log.records += [gr.encode(r) for r in share.records]
    log.records.append((b"\x00\x11\x00\x01x", None))  # a streams group record: skipped
    loaded = shard()
    for i, (k, v) in enumerate(log.records):
        loaded.replay(k, v, 0, offset=i)
    loaded.finish_load(0)

    def state(x: GroupShard) -> object:
        cg = x.consumer.groups["cg"]
        return (sorted(x.consumer.groups), cg.group_epoch, cg.assignment_epoch, dict(cg.members), dict(cg.target),
                dict(cg.regexes), sorted(x.share.groups), dict(x.share.groups["sg"].members),
                [(t, p, c.offset if c else None) for t, p, c in x.fetch_offsets("cg", None)])

    assert state(loaded) == state(s)
    assert loaded.group_type("gone") is None
    # the share group hands out its partitions' initialization again (retried every 30 s)
    assert loaded.share.next_deadline() == 30_000 and loaded.share_requests


def test_consumer_timers_tick_through_the_shard() -> None:
    s, log = shard(), Log()
    cgh(s, log, "g", "m1", 0, now=1000)
    assert s.next_deadline() == 1000 + 45_000
    outs = s.ticks(46_000)
    records = [r for o in outs for r in o.records]
    assert records and "m1" not in s.consumer.groups["g"].members


def test_failed_append_rolls_back_the_heartbeat() -> None:
    s = shard()
    req = HeartbeatRequest("g", "m1", 0, owned={}, rebalance_timeout_ms=1, subscribed_topic_names=["foo"])
    out = s.consumer_heartbeat(req, 0)
    out.write_failed(E.NOT_COORDINATOR)
    assert s.group_type("g") is None


def test_retention_keeps_subscribed_offsets_and_deletes_an_empty_group() -> None:
    s, log = shard(), Log()
    cgh(s, log, "g", "m1", 0)
    log.write(s.commit("g", [("foo", 0, 1, -1, ""), ("bar", 0, 2, -1, "")], 0))
    week = s.config.offsets_retention_ms
    out = log.write(s.expire_offsets(week + 1))
    # bar is not subscribed: its offset expires; foo's stays while the group subscribes to it
    assert out.records == [(schema.encode_offset_key("g", "bar", 0), None)]
    assert [t for t, _, _ in s.fetch_offsets("g", None)] == ["foo"]
    cgh(s, log, "g", "m1", -1)
    assert s.group_type("g") == CONSUMER  # empty, but with an offset
    out = log.write(s.expire_offsets(2 * week + 1))
    assert (schema.encode_offset_key("g", "foo", 0), None) in out.records
    assert [gr.record_type(k) for k, v in out.records[1:]] == [6, 3] and s.group_type("g") is None


def test_share_timers_are_left_to_the_share_group_edge() -> None:
    # The shard's own timers are the classic and consumer groups'; ShareGroupService runs the
    # share groups' (and makes the share-state calls they ask for).
    s = shard()
    out = s.share.heartbeat(ShareHeartbeatRequest("sg", "s1", 0, subscribed_topic_names=["foo"]), 1000)
    assert out.response is not None and out.response.error == 0
    assert s.next_deadline() is None and s.share.next_deadline() == 1000 + 30_000
    assert all(not o.records for o in s.ticks(46_000)) and "s1" in s.share.groups["sg"].members
