"""Online migration through :class:`GroupShard`, as the coordinator edge drives it: a consumer
heartbeat upgrades a live classic group, its classic members go on with JoinGroup/SyncGroup/
Heartbeat/OffsetCommit (mixed mode), and the last consumer-protocol member leaving turns it
classic again. The committed offsets are never touched, and replaying what was written
rebuilds the same groups."""

from __future__ import annotations

import itertools

import pytest

from kafkapy.coordinator import schema
from kafkapy.coordinator.consumer.heartbeat import HeartbeatRequest, HeartbeatResponse
from kafkapy.coordinator.group import (
    CLASSIC,
    CONSUMER,
    PARKED_TYPE,
    GroupConfig,
    GroupShard,
    GroupState,
    JoinResult,
    Outcome,
    SyncResult,
)
from kafkapy.coordinator.migration import MigrationPolicy as P
from kafkapy.protocol import consumer_protocol as cp
from kafkapy.protocol.errors import ErrorCode as E

from .migration_harness import REBALANCE, SESSION, TOPICS, G, classic_join, jreq, stable_classic_group

OFFSETS = [("foo", 0, 42, -1, "m"), ("foo", 3, 7, -1, None)]


class Log:
    """What an edge appended, in order; :meth:`replayed` loads it into a fresh shard."""

    def __init__(self, s: GroupShard) -> None:
        self.shard = s
        self.records: list[tuple[bytes, bytes | None]] = []

    def write(self, out: Outcome) -> Outcome:
        self.records += out.records
        out.written()
        return out

    def replayed(self, now: int = 0) -> GroupShard:
        fresh = new_shard(self.shard.migration_policy)
        for i, (k, v) in enumerate(self.records):
            fresh.replay(k, v, now, i)
        fresh.finish_load(now)
        return fresh


def new_shard(policy: P = P.BIDIRECTIONAL) -> GroupShard:
    ids = itertools.count(1)
    s = GroupShard(0, GroupConfig(initial_rebalance_delay_ms=0), lambda: f"u{next(ids)}", migration_policy=policy)
    s.set_topics(TOPICS, 1)
    return s


def live_classic_group(policy: P = P.BIDIRECTIONAL) -> tuple[GroupShard, Log, str, str]:
    """Two classic members splitting foo, with committed offsets, everything in the log."""
    s = new_shard(policy)
    log = Log(s)
    real_join, real_sync = s.join, s.sync
    s.join = lambda *a: log.write(real_join(*a))  # type: ignore[method-assign]
    s.sync = lambda *a: log.write(real_sync(*a))  # type: ignore[method-assign]
    a, b = stable_classic_group(s)
    s.join, s.sync = real_join, real_sync  # type: ignore[method-assign]
    log.write(s.commit(G, OFFSETS, 5))
    return s, log, a, b


def cgh(s: GroupShard, member: str, epoch: int, now: int = 100, **kw) -> Outcome:
    if epoch == 0:
        kw.setdefault("rebalance_timeout_ms", REBALANCE)
        kw.setdefault("subscribed_topic_names", ["foo"])
    if epoch == 0:
        kw.setdefault("owned", {})  # a join reports no partitions (null is refused, as in Kafka)
    return s.consumer_heartbeat(HeartbeatRequest(G, member, epoch, **kw), now)


def upgraded() -> tuple[GroupShard, Log, str, str, HeartbeatResponse]:
    s, log, a, b = live_classic_group()
    out = log.write(cgh(s, "new", 0))
    assert isinstance(out.response, HeartbeatResponse)
    return s, log, a, b, out.response


def offsets_of(s: GroupShard) -> dict:
    return {tp: c.offset for tp, c in s.groups[G].offsets.items()}


def test_a_consumer_heartbeat_upgrades_a_live_classic_group_keeping_partitions_and_offsets():
    s, log, a, b = live_classic_group()
    gen = s.groups[G].generation
    before = len(log.records)
    out = log.write(cgh(s, "new", 0))
    r = out.response
    assert r.error == E.NONE and r.member_epoch == gen + 1
    assert s.group_type(G) == CONSUMER
    # The classic GroupMetadata is deleted first; no offset record is written.
    written = log.records[before:]
    assert written[0] == (schema.encode_group_key(G), None)
    assert not any(k[:2] in (b"\x00\x00", b"\x00\x01") and isinstance(schema.decode_key(k), schema.OffsetKey)
                   for k, _ in written)
    assert offsets_of(s) == {("foo", 0): 42, ("foo", 3): 7}
    g = s.consumer_group(G)
    assert set(g.members) == {a, b, "new"}
    assert g.members[a].uses_classic_protocol and not g.members["new"].uses_classic_protocol
    # The classic members keep their partitions; the newcomer gets none they still hold.
    held = {p for mid in (a, b) for ps in g.members[mid].assigned.values() for p in ps}
    assert held == set(range(6))
    assert not {p for ps in (r.assignment or {}).values() for p in ps}
    assert [row[0] for row in s.listed_groups()] == [G] and s.listed_groups()[0][3] == CONSUMER


def test_the_upgrade_answers_the_requests_parked_on_the_classic_group():
    s, log, a, b = live_classic_group()
    mid, joined = classic_join(s, 50)  # a third member: the group rebalances
    assert isinstance(joined.response, PARKED_TYPE)
    out = cgh(s, "new", 0, now=60)
    assert dict(out.completions) == {(G, "join", mid): JoinResult(E.REBALANCE_IN_PROGRESS, member_id=mid)}
    assert s.groups[G].join_deadline is None and s.membership.next_deadline() is None


def test_a_failed_write_undoes_the_upgrade():
    s, _log, a, b = live_classic_group()
    gen = s.groups[G].generation
    out = cgh(s, "new", 0)
    out.write_failed(E.NOT_COORDINATOR)
    assert s.group_type(G) == CLASSIC and G not in s.consumer.groups
    classic = s.groups[G]
    assert set(classic.members) == {a, b} and classic.generation == gen and classic.state is GroupState.STABLE
    assert offsets_of(s) == {("foo", 0): 42, ("foo", 3): 7}
    assert s.consumer.session_deadlines == {}


@pytest.mark.parametrize("policy", [P.DISABLED, P.DOWNGRADE])
def test_without_upgrade_the_heartbeat_is_refused_as_kafka_does(policy):
    s, _log, a, b = live_classic_group(policy)
    out = cgh(s, "new", 0)
    assert (out.response.error, out.response.error_message) == (
        E.GROUP_ID_NOT_FOUND, f"Cannot upgrade classic group {G} to consumer group because online upgrade is disabled.")
    assert out.records == [] and s.group_type(G) == CLASSIC and set(s.groups[G].members) == {a, b}


def test_classic_members_rejoin_sync_heartbeat_and_commit_in_the_consumer_group():
    s, log, a, b, r = upgraded()
    g = s.consumer_group(G)
    epoch_a = g.members[a].member_epoch
    # The group epoch moved on: the classic member is told to rejoin.
    assert s.heartbeat(G, epoch_a, a, None, 200).response == E.REBALANCE_IN_PROGRESS
    joined = log.write(s.join(jreq(a), 201)).response
    assert isinstance(joined, JoinResult)  # answered at once, no leader work
    assert (joined.error, joined.member_id, joined.leader, joined.members) == (E.NONE, a, "", [])
    assert (joined.protocol_type, joined.protocol_name) == ("consumer", "range")
    m = s.consumer_group(G).members[a]
    assert joined.generation == m.member_epoch
    synced = log.write(s.sync(G, joined.generation, a, None, "consumer", "range", [], 202)).response
    assert isinstance(synced, SyncResult) and synced.error == E.NONE
    got = cp.decode_assignment(synced.assignment).partitions
    assert got == {"foo": tuple(sorted(p for ps in m.assigned.values() for p in ps))}
    # A classic member commits at its generation, with any OffsetCommit version.
    assert s.validate_commit(G, joined.generation, a, None, 202, api_version=8) == E.NONE
    assert s.validate_commit(G, joined.generation + 5, a, None, 202, api_version=8) == E.ILLEGAL_GENERATION
    assert s.validate_commit(G, r.member_epoch, "new", None, 202, api_version=8) == E.UNSUPPORTED_VERSION
    assert s.validate_fetch(G, a, joined.generation) == E.NONE
    assert s.validate_fetch(G, a, joined.generation - 1) == E.ILLEGAL_GENERATION
    log.write(s.commit(G, [("foo", 0, 50, -1, None)], 203))
    assert offsets_of(s)[("foo", 0)] == 50
    assert s.heartbeat(G, joined.generation, "nobody", None, 204).response == E.UNKNOWN_MEMBER_ID


def test_a_new_classic_member_joins_the_consumer_group_at_once():
    s, log, *_ = upgraded()
    first = s.join(jreq(), 300).response
    assert first.error == E.MEMBER_ID_REQUIRED
    joined = log.write(s.join(jreq(first.member_id), 301)).response
    assert joined.error == E.NONE and first.member_id in s.consumer_group(G).members
    refused = s.join(jreq(protocol_type="connect"), 302).response
    assert (refused.error, refused.member_id) == (E.INCONSISTENT_GROUP_PROTOCOL, "")


def test_the_last_consumer_member_leaving_downgrades_the_group_keeping_offsets():
    s, log, a, b, r = upgraded()
    epoch = s.consumer_group(G).group_epoch
    out = log.write(s.consumer_heartbeat(HeartbeatRequest(G, "new", -1), 400))
    assert out.response.error == E.NONE
    assert s.group_type(G) == CLASSIC and G not in s.consumer.groups
    classic = s.groups[G]
    assert set(classic.members) == {a, b} and classic.protocol_type == "consumer"
    assert classic.state is GroupState.PREPARING_REBALANCE and classic.generation >= epoch
    assert offsets_of(s) == {("foo", 0): 42, ("foo", 3): 7}
    # The consumer records are deleted, then the classic group's record is written.
    assert log.records[-1][0] == schema.encode_group_key(G) and log.records[-1][1] is not None
    # The classic members rejoin and the group rebalances the classic way.
    log.write(s.join(jreq(a), 401))
    done = log.write(s.join(jreq(b), 402))
    results = {k[2]: v for k, v in done.completions}
    assert results[a].error == results[b].error == E.NONE and results[a].generation == classic.generation
    assert s.listed_groups()[0][3] == CLASSIC


def test_a_classic_leave_leaving_only_classic_members_keeps_them_in_mixed_mode_until_the_consumer_one_goes():
    s, log, a, b, _ = upgraded()
    left = log.write(s.leave(G, [(a, None)], 500))
    assert left.response == [E.NONE] and s.group_type(G) == CONSUMER
    left = log.write(s.leave(G, [("new", None)], 501))
    assert left.response == [E.NONE] and s.group_type(G) == CLASSIC
    assert set(s.groups[G].members) == {b} and offsets_of(s) == {("foo", 0): 42, ("foo", 3): 7}


@pytest.mark.parametrize("policy", [P.UPGRADE])
def test_without_downgrade_the_group_stays_a_consumer_group(policy):
    s, log, a, b = live_classic_group(policy)
    log.write(cgh(s, "new", 0))
    log.write(s.consumer_heartbeat(HeartbeatRequest(G, "new", -1), 400))
    assert s.group_type(G) == CONSUMER and set(s.consumer_group(G).members) == {a, b}


def test_a_failed_downgrade_write_puts_the_consumer_group_back():
    s, log, a, b, _ = upgraded()
    out = s.consumer_heartbeat(HeartbeatRequest(G, "new", -1), 400)
    out.write_failed(E.NOT_COORDINATOR)
    assert s.group_type(G) == CONSUMER and set(s.consumer_group(G).members) == {a, b, "new"}
    assert not s.groups[G].members and offsets_of(s) == {("foo", 0): 42, ("foo", 3): 7}


def test_replaying_the_log_reproduces_every_stage():
    s, log, a, b = live_classic_group()
    again = log.replayed()
    assert again.group_type(G) == CLASSIC and set(again.groups[G].members) == {a, b}
    log.write(cgh(s, "new", 0))
    again = log.replayed()
    assert again.group_type(G) == CONSUMER
    assert again.consumer_group(G).members == s.consumer_group(G).members
    assert offsets_of(again) == offsets_of(s) == {("foo", 0): 42, ("foo", 3): 7}
    log.write(s.consumer_heartbeat(HeartbeatRequest(G, "new", -1), 400))
    again = log.replayed()
    assert again.group_type(G) == CLASSIC and set(again.groups[G].members) == {a, b}
    assert again.groups[G].generation == s.groups[G].generation
    assert offsets_of(again) == {("foo", 0): 42, ("foo", 3): 7}


def test_a_classic_member_that_does_not_sync_in_time_is_removed_by_the_shard_timers():
    s, log, a, b, _ = upgraded()
    joined = log.write(s.join(jreq(a), 600)).response
    assert joined.error == E.NONE
    deadline = s.next_deadline()
    assert deadline is not None and deadline <= 600 + REBALANCE
    for out in s.ticks(600 + max(REBALANCE, SESSION)):
        log.write(out)
    assert a not in (s.consumer_group(G).members if s.group_type(G) == CONSUMER else s.groups[G].members)
