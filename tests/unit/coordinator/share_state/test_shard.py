import uuid

from kafkapy.coordinator.share_state.records import ShareSnapshot, ShareUpdate, Tombstone
from kafkapy.coordinator.share_state.shard import ShareStateConfig, ShareStateShard
from kafkapy.protocol.errors import ErrorCode
from kafkapy.share.partition import (
    AcknowledgementBatch,
    FetchedBatch,
    PartitionState,
    SharePartition,
    SharePartitionConfig,
)
from kafkapy.share.partition import StateBatch as B

T = uuid.UUID(int=7)
G = "g"


def _initialized(n: int = 500, start: int = 0) -> tuple[ShareStateShard, list]:
    shard = ShareStateShard(ShareStateConfig(snapshot_update_records_per_snapshot=n))
    out = shard.initialize(G, T, 0, 0, start, now_ms=1)
    assert out.response.error == 0
    return shard, list(out.records)


def test_read_and_write_of_an_uninitialized_partition_are_refused():
    shard = ShareStateShard()
    assert shard.read(G, T, 0, 0).response.error == ErrorCode.INVALID_REQUEST
    assert shard.write(G, T, 0, PartitionState(0, 0, 0), 1).response.error == ErrorCode.INVALID_REQUEST
    assert shard.read_summary(G, T, 0).response.state == PartitionState(0, -1, -1)


def test_a_new_state_has_leader_epoch_0_and_nothing_delivered_once_its_start_is_known():
    shard, _ = _initialized(start=5)
    assert shard.read_summary(G, T, 0).response.state == PartitionState(0, 0, 5, (), 0)
    # A start offset still to be resolved by the leader: the delivered count is unknown too.
    shard.initialize(G, T, 1, 0, -1, now_ms=1)
    assert shard.read_summary(G, T, 1).response.state == PartitionState(0, 0, -1, (), -1)


def test_write_then_read_round_trips_the_state():
    shard, _ = _initialized()
    state = PartitionState(0, 3, 10, (B(10, 12, 2, 1), B(13, 15, 0, 2)), 3)
    out = shard.write(G, T, 0, state, now_ms=5)
    assert out.response.error == 0 and [type(r) for r in out.records] == [ShareUpdate]
    read = shard.read(G, T, 0, leader_epoch=3)
    assert read.records == [] and read.response.state == state


def test_a_share_partition_survives_the_coordinator():
    """What SharePartition writes is what a new leader reads back and rebuilds from."""
    shard, _ = _initialized()
    part = SharePartition(SharePartitionConfig(), 0, state_epoch=0, leader_epoch=1)
    part.acquire("m", [FetchedBatch(0, 9)], now_ms=0, max_records=10)
    part.acknowledge("m", [AcknowledgementBatch(0, 3, (1,)), AcknowledgementBatch(5, 5, (3,))])
    assert shard.write(G, T, 0, part.to_write_state(), 1).response.error == 0
    read = shard.read(G, T, 0, leader_epoch=2).response.state
    assert read is not None
    again = SharePartition.from_read_state(read, SharePartitionConfig(), default_start_offset=0, leader_epoch=2)
    assert again.start_offset == 4 and again.to_write_state().state_batches == read.state_batches


def test_updates_accumulate_over_the_snapshot():
    shard, _ = _initialized()
    shard.write(G, T, 0, PartitionState(0, 1, 0, (B(0, 9, 0, 1),)), 2)
    shard.write(G, T, 0, PartitionState(0, 1, 4, (B(4, 5, 2, 1),)), 3)
    cur = shard.get(G, T, 0)
    assert cur is not None
    assert cur.start_offset == 4 and cur.state_batches == (B(4, 5, 2, 1), B(6, 9, 0, 1))


def test_fencing_by_leader_epoch_and_state_epoch():
    shard, _ = _initialized()
    shard.write(G, T, 0, PartitionState(0, 5, 0), 2)
    assert shard.write(G, T, 0, PartitionState(0, 4, 0), 3).response.error == ErrorCode.FENCED_LEADER_EPOCH
    assert shard.read(G, T, 0, 4).response.error == ErrorCode.FENCED_LEADER_EPOCH
    # An admin re-initializes at a new state epoch: the old leader's writes are fenced.
    assert shard.initialize(G, T, 0, 1, 100, 4).response.error == 0
    assert shard.write(G, T, 0, PartitionState(0, 6, 0), 5).response.error == ErrorCode.FENCED_STATE_EPOCH
    assert shard.initialize(G, T, 0, 0, 0, 6).response.error == ErrorCode.FENCED_STATE_EPOCH
    assert shard.write(G, T, 0, PartitionState(1, 6, 100), 7).response.error == 0


def test_a_read_by_a_new_leader_fences_the_old_one():
    shard, _ = _initialized()
    out = shard.read(G, T, 0, 7)
    assert [type(r) for r in out.records] == [ShareUpdate]
    assert shard.write(G, T, 0, PartitionState(0, 6, 0), 2).response.error == ErrorCode.FENCED_LEADER_EPOCH


def test_a_snapshot_replaces_the_updates_every_n_writes():
    shard, records = _initialized(n=3)
    kinds = []
    for i in range(8):
        out = shard.write(G, T, 0, PartitionState(0, 1, i, (B(i, i, 2, 1),)), 10 + i)
        kinds.append(type(out.records[0]).__name__)
        records += out.records
    assert kinds == ["ShareUpdate"] * 3 + ["ShareSnapshot"] + ["ShareUpdate"] * 3 + ["ShareSnapshot"]
    snap = records[-1]
    assert isinstance(snap, ShareSnapshot) and snap.snapshot_epoch == 2 and snap.start_offset == 7
    assert snap.state_batches == (B(7, 7, 2, 1),)


def test_the_default_snapshots_after_500_updates():
    shard, _ = _initialized()
    for i in range(500):
        assert isinstance(shard.write(G, T, 0, PartitionState(0, 1, i), i).records[0], ShareUpdate)
    assert isinstance(shard.write(G, T, 0, PartitionState(0, 1, 500), 500).records[0], ShareSnapshot)


def test_replay_equals_live():
    shard, records = _initialized(n=4)
    other = uuid.UUID(int=8)
    out = shard.initialize(G, other, 3, 2, 50, 1)
    records += out.records
    for i in range(11):
        records += shard.write(G, T, 0, PartitionState(0, 1 + i // 3, i, (B(i, i + 4, i % 3 * 2, 1),)), i).records
        records += shard.read(G, other, 3, i).records
    records += shard.delete(G, other, 3).records
    loaded = ShareStateShard(ShareStateConfig(snapshot_update_records_per_snapshot=4))
    for offset, r in enumerate(records):
        loaded.replay(r, offset)
    assert loaded.states == shard.states
    assert loaded.get(G, other, 3) is None
    assert loaded.updates_since_snapshot(G, T, 0) == shard.updates_since_snapshot(G, T, 0)


def test_rollback_restores_the_state():
    shard, _ = _initialized()
    before = dict(shard.states)
    out = shard.write(G, T, 0, PartitionState(0, 1, 5, (B(5, 6, 2, 1),)), 2)
    out.rollback()
    assert shard.states == before and shard.updates_since_snapshot(G, T, 0) == 0


def test_delete_removes_the_state_and_summary_reports_the_start():
    shard, _ = _initialized(start=40)
    shard.write(G, T, 0, PartitionState(0, 1, 42, (B(42, 44, 2, 1),), 3), 2)
    summary = shard.read_summary(G, T, 0).response.state
    assert summary == PartitionState(0, 1, 42, (), 3)
    out = shard.delete(G, T, 0)
    assert out.records == [Tombstone(ShareSnapshot.RECORD_TYPE, G, T, 0)]
    assert shard.get(G, T, 0) is None and shard.delete(G, T, 0).records == []


def test_prunable_offset_follows_the_oldest_live_snapshot():
    shard, records = _initialized(n=2)
    shard.appended(records, 0)  # snapshot at 0
    other = shard.initialize(G, T, 1, 0, 0, 1)
    shard.appended(other.records, 1)  # snapshot of partition 1 at 1
    offset = 2
    for i in range(3):  # two updates then a snapshot of partition 0 at offset 4
        out = shard.write(G, T, 0, PartitionState(0, 1, i), i)
        shard.appended(out.records, offset)
        offset += 1
    assert shard.prunable_offset() == 1
    cold = shard.snapshot_cold_partitions(9)
    assert cold.records == []  # no key has updates since its snapshot
    out = shard.write(G, T, 1, PartitionState(0, 1, 0), 9)
    shard.appended(out.records, offset)
    cold = shard.snapshot_cold_partitions(10)
    assert [(type(r), r.partition) for r in cold.records] == [(ShareSnapshot, 1)]
    shard.appended(cold.records, offset + 1)
    assert shard.prunable_offset() == 4
    shard.appended(shard.delete(G, T, 0).records, offset + 2)
    shard.appended(shard.delete(G, T, 1).records, offset + 3)
    assert shard.prunable_offset() == offset + 4
