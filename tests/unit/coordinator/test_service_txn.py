"""TxnOffsetCommit through the coordinator's edge, on a real ``__consumer_offsets`` partition log:
the batch's producer and attributes, epoch fencing, completion by marker, and reload."""

from __future__ import annotations

import pytest
import trio

from kafkapy.coordinator.service import GroupCoordinator
from kafkapy.protocol.errors import ErrorCode as E
from kafkapy.protocol.errors import KafkaError
from kafkapy.records.control import marker_batch, read_marker
from kafkapy.records.reader import iter_batches

from .test_service import GROUP, Replicas, coordinator, image, run

PID = 4000


@pytest.fixture
def replicas(tmp_path):
    r = Replicas(tmp_path)
    yield r
    r.close()


async def txn_commit(coord: GroupCoordinator, offset: int, *, epoch: int = 0, partition: int = 0) -> object:
    shard = coord.shard_for(GROUP)
    outcome = shard.txn_commit(GROUP, PID, epoch, [("t", partition, offset, 2, "md")], coord.clock.now_ms())
    return await coord.run_op(shard, outcome, timeout_ms=0, on_timeout=None)


def append_marker(replicas: Replicas, partition: int, commit: bool, epoch: int = 0) -> None:
    plog = replicas.logs[partition]
    batch = marker_batch(producer_id=PID, producer_epoch=epoch, commit=commit, coordinator_epoch=0, now_ms=0)
    plog.append_as_leader(bytearray(batch), now_ms=0, leader_epoch=0, from_client=False)


def batches(replicas: Replicas, partition: int) -> list:
    plog = replicas.logs[partition]
    data = plog.read(0, 1 << 20).read_bytes()
    return list(iter_batches(data))


async def started(coord: GroupCoordinator, nursery: trio.Nursery) -> None:
    coord.on_image(image())
    await nursery.start(coord.run)
    await trio.sleep(0.1)


def committed(coord: GroupCoordinator) -> int | None:
    [(_, _, c)] = coord.shard_for(GROUP).fetch_offsets(GROUP, [("t", 0)])
    return None if c is None else c.offset


def test_offsets_go_out_as_one_transactional_batch_and_commit_with_the_marker(replicas):
    async def main():
        coord = coordinator(replicas)
        async with trio.open_nursery() as n:
            await started(coord, n)
            p = coord.partition_for(GROUP)
            assert await txn_commit(coord, 42) == [E.NONE]
            [(h, _)] = batches(replicas, p)
            assert (h.producer_id, h.producer_epoch, h.is_transactional, h.is_control) == (PID, 0, True, False)
            # the open transaction holds the partition's last stable offset
            assert replicas.logs[p].producer_state.last_entry(PID).current_txn_first_offset == 0
            assert committed(coord) is None
            append_marker(replicas, p, commit=True)
            coord.complete_transaction(p, PID, True)
            assert committed(coord) == 42
            n.cancel_scope.cancel()

    run(main)


def test_stale_producer_epoch_is_refused(replicas):
    async def main():
        coord = coordinator(replicas)
        async with trio.open_nursery() as n:
            await started(coord, n)
            p = coord.partition_for(GROUP)
            append_marker(replicas, p, commit=False, epoch=3)  # the coordinator bumped the epoch
            with pytest.raises(KafkaError) as err:
                await txn_commit(coord, 43, epoch=2)
            assert err.value.code == E.INVALID_PRODUCER_EPOCH
            assert len(batches(replicas, p)) == 1  # nothing written
            assert await txn_commit(coord, 44, epoch=3) == [E.NONE]
            n.cancel_scope.cancel()

    run(main)


def test_reload_replays_pending_offsets_and_markers(replicas):
    async def main():
        coord = coordinator(replicas)
        async with trio.open_nursery() as n:
            await started(coord, n)
            p = coord.partition_for(GROUP)
            await txn_commit(coord, 10)
            append_marker(replicas, p, commit=True)
            coord.complete_transaction(p, PID, True)
            await txn_commit(coord, 20)
            append_marker(replicas, p, commit=False)
            coord.complete_transaction(p, PID, False)
            await txn_commit(coord, 30, partition=1)  # left open
            assert read_marker(batches(replicas, p)[1][1]).commit is True
            n.cancel_scope.cancel()

        again = coordinator(replicas)
        async with trio.open_nursery() as n:
            await started(again, n)
            shard = again.shard_for(GROUP)
            assert committed(again) == 10
            assert shard.unstable_partitions(GROUP) == {("t", 1)}
            # completion in another partition, or of a producer with nothing pending: ignored
            again.complete_transaction((p + 1) % 3, PID, True)
            again.complete_transaction(p, PID + 1, True)
            assert shard.unstable_partitions(GROUP) == {("t", 1)}
            append_marker(replicas, p, commit=True)
            again.complete_transaction(p, PID, True)
            [(_, _, c)] = shard.fetch_offsets(GROUP, [("t", 1)])
            assert (c.offset, c.leader_epoch, c.metadata) == (30, 2, "md")
            n.cancel_scope.cancel()

    run(main)
