"""The pieces under the Raft core: epoch cache, snapshot-capable stores, control records,
messages."""

from __future__ import annotations

import pytest

from kafkapy.raft.control import (
    LeaderChange,
    build_leader_change_batch,
    decode_leader_change,
    encode_leader_change,
    read_leader_change,
)
from kafkapy.raft.epoch_cache import EpochCache
from kafkapy.raft.messages import (
    RESPONSE_FOR,
    EpochEndOffset,
    FetchRequest,
    Outbound,
    SnapshotId,
    VoteRequest,
    is_request,
)
from kafkapy.raft.raft_log import RaftLog, ValidKind
from kafkapy.raft.snapshot_store import MemorySnapshotStore
from kafkapy.raft.store import MemoryLogStore, RaftLogStore
from kafkapy.records import format as fmt
from kafkapy.records.builder import Record, build_batch


def _batch(base: int, epoch: int, n: int = 1) -> bytes:
    return build_batch([Record(None, b"v%d" % i, (), 0) for i in range(n)],
                       base_offset=base, partition_leader_epoch=epoch, now_ms=0)


def test_epoch_cache_end_offsets_follow_kafka() -> None:
    cache = EpochCache()
    for epoch, start in [(1, 0), (3, 5), (4, 9)]:
        cache.assign(epoch, start)
    cache.assign(4, 12)  # same epoch: no new entry
    assert cache.entries == [(1, 0), (3, 5), (4, 9)]
    assert cache.end_offset_for(4, 20) == (4, 20)
    assert cache.end_offset_for(3, 20) == (3, 9)
    assert cache.end_offset_for(2, 20) == (1, 5)  # floor epoch, next epoch's start
    assert cache.end_offset_for(0, 20) == (0, 0)  # below the first epoch
    assert cache.end_offset_for(7, 20) == (-1, -1)  # above the latest
    cache.truncate_from_end(9)
    assert cache.entries == [(1, 0), (3, 5)]
    cache.truncate_from_start(7)
    assert cache.entries == [(3, 7)]
    with pytest.raises(ValueError):
        cache.assign(2, 8)


def test_memory_snapshot_log_store_prefix_reset_and_crash() -> None:
    store = MemoryLogStore()
    assert isinstance(store, RaftLogStore)
    store.append(_batch(0, 1, 2))
    store.append(_batch(2, 1, 3))
    store.flush()
    store.append(_batch(5, 2))
    assert store.end_offset == 6
    store.crash()
    assert store.end_offset == 5
    store.delete_before(2)
    assert store.log_start_offset == 2 and [b for b, _ in store.read(0)] == [2]
    with pytest.raises(ValueError):
        store.delete_before(3)  # not a batch boundary
    store.append(_batch(5, 2))
    store.truncate_to(5)
    assert store.end_offset == 5
    store.reset_to(40)
    assert (store.log_start_offset, store.end_offset, list(store.read(0))) == (40, 40, [])
    store.append(_batch(40, 3))
    store.crash()
    assert store.end_offset == 40  # the reset itself is durable, the append was not


def test_raft_log_validation_and_truncation() -> None:
    store = MemoryLogStore()
    for off, epoch in enumerate([1, 1, 2, 4, 4]):
        store.append(_batch(off, epoch))
    log = RaftLog(store, MemorySnapshotStore())
    log.start()
    assert log.last_fetched_epoch == 4 and log.end_offset == 5
    assert log.validate_offset_and_epoch(0, 0).kind is ValidKind.VALID
    assert log.validate_offset_and_epoch(2, 1).kind is ValidKind.VALID
    assert log.validate_offset_and_epoch(3, 1) == (ValidKind.DIVERGING, 1, 2)
    assert log.validate_offset_and_epoch(4, 3) == (ValidKind.DIVERGING, 2, 3)
    assert log.validate_offset_and_epoch(6, 4) == (ValidKind.DIVERGING, 4, 5)
    # A follower told "epoch 2 ends at 3" truncates to where its own epoch 2 ends, if sooner.
    assert log.truncate_to_end_offset(EpochEndOffset(2, 3)) == 3
    assert log.end_offset == 3 and log.last_fetched_epoch == 2
    # Snapshot at (2, 1): the prefix goes, fetches below it are sent to the snapshot.
    sid = SnapshotId(2, 1)
    log.snapshots.write(sid, b"snap")
    log.delete_before_snapshot(sid)
    assert log.start_offset == 2
    assert log.validate_offset_and_epoch(1, 1) == (ValidKind.SNAPSHOT, 1, 2)
    assert log.validate_offset_and_epoch(2, 0) == (ValidKind.SNAPSHOT, 1, 2)
    assert log.validate_offset_and_epoch(2, 1).kind is ValidKind.VALID
    assert log.validate_offset_and_epoch(3, 2).kind is ValidKind.VALID
    # Restart rebuilds the cache from what is left.
    again = RaftLog(store, log.snapshots)
    again.start()
    assert again.cache.entries == [(2, 2)] and again.latest_snapshot == sid


def test_leader_change_control_record_round_trip() -> None:
    msg = LeaderChange(2, (1, 2, 3), (2, 3))
    data = encode_leader_change(msg)
    # Version 0, leader 2, compact array of 3 voters (length+1 = 4), each id + empty tags.
    assert data[:6] == b"\x00\x00\x00\x00\x00\x02" and data[6] == 4
    assert decode_leader_change(data) == msg
    batch = build_leader_change_batch(base_offset=7, epoch=5, leader_id=2, voters={3, 1, 2},
                                      granting_voters={2, 3}, now_ms=1000)
    header = fmt.parse_header(batch)
    assert header.is_control and header.partition_leader_epoch == 5 and header.base_offset == 7
    assert read_leader_change(batch) == msg


def test_messages_pair_requests_with_responses() -> None:
    vote = VoteRequest("c", 2, 3, 1, 2, 10, pre_vote=True)
    assert is_request(vote) and RESPONSE_FOR[VoteRequest].__name__ == "VoteResponse"
    fetch = FetchRequest("c", 4, 500, 1024, 3, 10, 2, 0, 1024)
    out = Outbound(1, fetch, 42)
    assert out.message.fetch_offset == 10 and out.correlation_id == 42
    with pytest.raises(AttributeError):
        vote.pre_vote = False  # type: ignore[misc]  # frozen
