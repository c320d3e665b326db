"""Transactional offset commits in one shard, sans-I/O: pending until the marker, KIP-447 fencing,
the record-offset order against plain commits, retention and deletion rules, and log replay."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from kafkapy.coordinator import schema
from kafkapy.coordinator.group import GroupShard, GroupState
from kafkapy.coordinator.outcome import Outcome
from kafkapy.protocol.errors import ErrorCode as E

from .test_group import G, shard, stable_group


@dataclass
class FakeLog:
    """The shard's ``__consumer_offsets`` partition as the edge would write it: offsets assigned in
    order, transactional batches tagged with their producer, markers as their own entries."""

    entries: list[tuple] = field(default_factory=list)
    next_offset: int = 0

    def write(self, out: Outcome) -> Outcome:
        out.base_offset = self.next_offset
        for k, v in out.records:
            self.entries.append(("record", self.next_offset, k, v, out.producer_id))
            self.next_offset += 1
        out.written()
        return out

    def marker(self, s: GroupShard, producer_id: int, commit: bool, now: int = 0) -> None:
        self.entries.append(("marker", producer_id, commit))
        self.next_offset += 1
        s.complete_transaction(producer_id, commit, now)

    def replay(self, now: int = 0) -> GroupShard:
        fresh = shard()
        for e in self.entries:
            if e[0] == "record":
                _, offset, k, v, pid = e
                fresh.replay(k, v, now, offset, pid)
            else:
                fresh.replay_marker(e[1], e[2], now)
        fresh.finish_load(now)
        return fresh


def state(s: GroupShard) -> tuple:
    """What a client could observe, plus what is pending (per producer)."""
    offsets = {g: {tp: (c.offset, c.leader_epoch, c.metadata, c.record_offset) for tp, c in grp.offsets.items()}
               for g, grp in s.groups.items()}
    pending = {pid: {k: (c.offset, c.record_offset) for k, c in by.items()} for pid, by in s.pending.by_producer.items()}
    return offsets, pending


def txn(s: GroupShard, log: FakeLog, pid: int, offsets: list[tuple[str, int, int]], *, group: str = G,
        epoch: int = 0, now: int = 0) -> Outcome:
    out = s.txn_commit(group, pid, epoch, [(t, p, o, -1, "") for t, p, o in offsets], now)
    assert (out.producer_id, out.producer_epoch) == (pid, epoch)
    return log.write(out)


def plain(s: GroupShard, log: FakeLog, offsets: list[tuple[str, int, int]], *, group: str = G, now: int = 0) -> Outcome:
    return log.write(s.commit(group, [(t, p, o, -1, "") for t, p, o in offsets], now))


def fetched(s: GroupShard, tp: tuple[str, int], group: str = G) -> int | None:
    [(_, _, c)] = s.fetch_offsets(group, [tp])
    return None if c is None else c.offset


def test_pending_offsets_are_invisible_until_the_transaction_commits():
    s, log = shard(), FakeLog()
    assert s.validate_txn_commit(G, -1, "", None) == E.NONE  # no group yet: a simple group
    out = txn(s, log, 7, [("t", 0, 10), ("t", 1, 20)])
    assert out.response == [E.NONE, E.NONE] and len(out.records) == 2
    assert fetched(s, ("t", 0)) is None and s.fetch_offsets(G, None) == []
    assert s.unstable_partitions(G) == {("t", 0), ("t", 1)}
    log.marker(s, 7, commit=True)
    assert fetched(s, ("t", 0)) == 10 and fetched(s, ("t", 1)) == 20
    assert s.unstable_partitions(G) == set() and s.pending.by_producer == {}


def test_abort_drops_pending_offsets_and_keeps_the_committed_one():
    s, log = shard(), FakeLog()
    plain(s, log, [("t", 0, 5)])
    txn(s, log, 7, [("t", 0, 10)])
    assert fetched(s, ("t", 0)) == 5 and s.unstable_partitions(G) == {("t", 0)}
    log.marker(s, 7, commit=False)
    assert fetched(s, ("t", 0)) == 5 and s.unstable_partitions(G) == set()
    # a marker for a producer with nothing pending changes nothing
    log.marker(s, 99, commit=True)
    assert fetched(s, ("t", 0)) == 5


def test_metadata_too_large_is_per_partition_and_not_written():
    s, log = shard(offset_metadata_max_bytes=4), FakeLog()
    out = log.write(s.txn_commit(G, 7, 0, [("t", 0, 1, -1, "12345"), ("t", 1, 2, -1, "ok")], 0))
    assert out.response == [E.OFFSET_METADATA_TOO_LARGE, E.NONE] and len(out.records) == 1
    assert s.unstable_partitions(G) == {("t", 1)}


def test_transactional_and_plain_commits_are_ordered_by_their_record_offsets():
    s, log = shard(), FakeLog()
    # txn record first, plain commit after it: the plain one is newer and stays
    txn(s, log, 7, [("t", 0, 100)])
    plain(s, log, [("t", 0, 50)])
    log.marker(s, 7, commit=True)
    assert fetched(s, ("t", 0)) == 50
    # plain commit first, txn record after it: the transaction's offset wins on commit
    plain(s, log, [("t", 1, 50)])
    txn(s, log, 8, [("t", 1, 100)])
    log.marker(s, 8, commit=True)
    assert fetched(s, ("t", 1)) == 100
    assert state(log.replay()) == state(s)


def test_producers_are_independent():
    s, log = shard(), FakeLog()
    txn(s, log, 1, [("t", 0, 10)])
    txn(s, log, 2, [("t", 0, 20), ("t", 1, 21)])
    log.marker(s, 2, commit=False)
    assert s.unstable_partitions(G) == {("t", 0)}  # producer 1 still pending there
    log.marker(s, 1, commit=True)
    assert fetched(s, ("t", 0)) == 10 and fetched(s, ("t", 1)) is None


def test_replay_of_interleaved_transactions_matches_live_state():
    s, log = shard(), FakeLog()
    plain(s, log, [("t", 0, 1)])
    txn(s, log, 1, [("t", 0, 10), ("t", 1, 11)])
    txn(s, log, 2, [("t", 2, 20)], group="other")
    txn(s, log, 3, [("t", 0, 30)])
    plain(s, log, [("t", 3, 4)])
    log.marker(s, 1, commit=True)
    txn(s, log, 1, [("t", 3, 40)])  # the same producer's next transaction
    log.marker(s, 3, commit=False)
    log.marker(s, 2, commit=True)
    s_del = s.delete_offsets(G, [("t", 1)])
    log.write(s_del)
    txn(s, log, 4, [("t", 5, 50)])  # still open at the end of the log
    assert fetched(s, ("t", 0)) == 10 and fetched(s, ("t", 1)) is None and fetched(s, ("t", 2), "other") == 20
    assert s.unstable_partitions(G) == {("t", 3), ("t", 5)}
    assert state(log.replay()) == state(s)
    # a marker read after the load completes the replayed pending offsets the same way
    fresh = log.replay()
    log.marker(s, 1, commit=True)
    fresh.replay_marker(1, True, 0)
    assert state(fresh) == state(s) and fetched(fresh, ("t", 3)) == 40


def test_kip_447_group_metadata_is_checked_from_v3():
    s, log = shard(), FakeLog()
    a, b = stable_group(s, 2)
    gen = s.groups[G].generation
    assert s.validate_txn_commit(G, gen, a, None) == E.NONE
    assert s.validate_txn_commit(G, gen - 1, a, None) == E.ILLEGAL_GENERATION
    assert s.validate_txn_commit(G, gen, "nobody", None) == E.UNKNOWN_MEMBER_ID
    assert s.validate_txn_commit(G, -1, "nobody", None) == E.UNKNOWN_MEMBER_ID
    # a request without group metadata (v0-v2) is accepted into a group with members
    assert s.validate_txn_commit(G, -1, "", None) == E.NONE
    # static members: an unknown instance is an unknown member, another member's instance fenced
    s.groups[G].static_members["i-a"] = a
    assert s.validate_txn_commit(G, gen, a, "i-a") == E.NONE
    assert s.validate_txn_commit(G, gen, b, "i-a") == E.FENCED_INSTANCE_ID
    assert s.validate_txn_commit(G, gen, a, "i-x") == E.UNKNOWN_MEMBER_ID
    # a group that does not exist: only a commit without a generation creates it
    assert s.validate_txn_commit("new", 3, "m", None) == E.ILLEGAL_GENERATION
    assert s.validate_txn_commit("new", -1, "", None) == E.NONE
    # unlike OffsetCommit, a rebalance in progress does not stop a transactional commit
    s.groups[G].transition(GroupState.COMPLETING_REBALANCE, 0)
    assert s.validate_txn_commit(G, gen, a, None) == E.NONE
    assert s.validate_commit(G, gen, a, None, 0) == E.REBALANCE_IN_PROGRESS


def test_pending_offsets_hold_back_expiry_and_removal_of_the_group():
    s, log = shard(offsets_retention_ms=1000), FakeLog()
    plain(s, log, [("t", 0, 1)], group="solo", now=0)
    txn(s, log, 7, [("t", 0, 2)], group="solo", now=0)
    txn(s, log, 8, [("t", 1, 3)], group="txn-only", now=0)
    out = s.expire_offsets(5000)
    assert out.records == [] and "solo" in s.groups and "txn-only" in s.groups
    log.marker(s, 7, commit=False)
    log.marker(s, 8, commit=False)
    out = log.write(s.expire_offsets(5000))
    keys = {schema.decode_key(k) for k, _ in out.records}
    assert schema.OffsetKey("solo", "t", 0) in keys and schema.GroupKey("solo") in keys
    assert "solo" not in s.groups and "txn-only" not in s.groups
    assert state(log.replay()) == state(s)


def test_delete_group_and_offset_delete_tombstone_pending_offsets():
    s, log = shard(), FakeLog()
    plain(s, log, [("t", 0, 1)], group="gone")
    txn(s, log, 7, [("t", 0, 2), ("t", 1, 3)], group="gone")
    out = log.write(s.delete_group("gone", 0))
    assert out.response == E.NONE
    keys = [schema.decode_key(k) for k, _ in out.records]
    assert keys == [schema.OffsetKey("gone", "t", 0), schema.OffsetKey("gone", "t", 1), schema.GroupKey("gone")]
    log.marker(s, 7, commit=True)  # nothing left to commit
    assert "gone" not in s.groups and s.pending.by_producer == {}

    txn(s, log, 9, [("t", 4, 40)], group="solo")
    out = log.write(s.delete_offsets("solo", [("t", 4), ("t", 5)]))
    assert out.response == (E.NONE, [E.NONE, E.NONE]) and len(out.records) == 1
    assert s.unstable_partitions("solo") == set()
    log.marker(s, 9, commit=True)
    assert fetched(s, ("t", 4), "solo") is None
    assert state(log.replay()) == state(s)


@pytest.mark.parametrize("commit", [True, False])
def test_replay_stops_at_a_pending_transaction_left_open(commit):
    s, log = shard(), FakeLog()
    txn(s, log, 5, [("t", 0, 9)])
    fresh = log.replay()
    assert fresh.unstable_partitions(G) == {("t", 0)} and fetched(fresh, ("t", 0)) is None
    fresh.complete_transaction(5, commit, 0)
    assert fetched(fresh, ("t", 0)) == (9 if commit else None)
