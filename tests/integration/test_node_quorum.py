"""A single combined node on the Raft quorum, in-process: the voter parsing, the controller
listener (DescribeQuorum), and a restart that loads a metadata snapshot and replays the log tail.
"""

from __future__ import annotations

import pytest
import trio

from helpers import combined_node_config as _config, create_topics, metadata, run_trio
from kafkapy.metadata.snapshot import write_snapshot
from kafkapy.net.client import KafkaClient
from kafkapy.node.node import Node, parse_voters
from kafkapy.protocol import ErrorCode, messages
from kafkapy.raft.messages import SnapshotId
from kafkapy.records import format as fmt


def test_parse_voters():
    assert parse_voters(["1@127.0.0.1:9093", " 2@[::1]:9094", ""]) == {
        1: ("127.0.0.1", 9093), 2: ("::1", 9094)}
    with pytest.raises(ValueError):
        parse_voters(["1@nohostport"])


async def _send(port: int, request: object) -> object:
    async with await KafkaClient.connect("127.0.0.1", port, client_id="node-quorum") as client:
        return await client.send(request)


@run_trio(60)
async def test_restart_loads_the_metadata_snapshot_and_replays_the_tail(tmp_path):
    data = str(tmp_path / "data")
    async with trio.open_nursery() as nursery:
        node = Node(_config(data))
        ports = await nursery.start(node.run)
        resp = await _send(ports["PLAINTEXT"], create_topics(("snap-a", 2, 1)))
        assert resp.topics[0].error_code == ErrorCode.NONE

        # DescribeQuorum on the controller listener: this node leads, alone.
        part = (await _send(ports["CONTROLLER"], messages.DescribeQuorumRequest(
            topics=[messages.DescribeQuorumRequest.TopicData(
                topic_name="__cluster_metadata",
                partitions=[messages.DescribeQuorumRequest.TopicData.PartitionData(
                    partition_index=0)])]))).topics[0].partitions[0]
        assert part.error_code == 0 and part.leader_id == 1
        assert [v.replica_id for v in part.current_voters] == [1]

        # Snapshot the image (it ends at the last data batch), then create one more topic,
        # which stays in the log tail after the snapshot.
        image = node.controller.image
        end = image.offset + 1
        found = node.replica.log.batch_at(image.offset)
        assert found is not None and found[1] == end
        epoch = fmt.parse_header(memoryview(found[2])).partition_leader_epoch
        node.driver.snapshot_written(end, epoch, write_snapshot(
            image, SnapshotId(end, epoch), now_ms=node.clock.now_ms()))
        assert node.replica.log.start_offset == end or node.replica.log.latest_snapshot is not None
        resp = await _send(ports["PLAINTEXT"], create_topics(("snap-b", 1, 1)))
        assert resp.topics[0].error_code == ErrorCode.NONE
        nursery.cancel_scope.cancel()

    async with trio.open_nursery() as nursery:
        node = Node(_config(data))
        ports = await nursery.start(node.run)
        assert node.replica.log.latest_snapshot == SnapshotId(end, epoch)
        meta = await _send(ports["PLAINTEXT"], metadata("snap-a", "snap-b", allow_auto_create=False))
        assert [(t.name, t.error_code, len(t.partitions)) for t in meta.topics] == [
            ("snap-a", 0, 2), ("snap-b", 0, 1)]
        assert meta.controller_id == 1
        # The broker came back registered and unfenced, leading its partitions.
        assert [b.node_id for b in meta.brokers] == [1]
        assert all(p.leader_id == 1 for t in meta.topics for p in t.partitions)
        nursery.cancel_scope.cancel()


@run_trio(90)
async def test_node_writes_snapshots_by_policy_and_restarts_from_the_newest(tmp_path):
    """KIP-630 with Kafka's policy: every ``metadata.log.max.record.bytes.between.snapshots``
    bytes the node snapshots its image, the log before the snapshot goes, and a restart loads the
    newest snapshot and replays only the tail."""
    data = str(tmp_path / "data")
    settings = {"metadata.log.max.record.bytes.between.snapshots": "4000"}
    names = [f"policy-{i}" for i in range(12)]
    async with trio.open_nursery() as nursery:
        node = Node(_config(data, **settings))
        ports = await nursery.start(node.run)
        for name in names:
            resp = await _send(ports["PLAINTEXT"], create_topics((name, 3, 1)))
            assert resp.topics[0].error_code == ErrorCode.NONE
        with trio.fail_after(30):
            while node.replica.log.latest_snapshot is None or node.replica.log_start_offset == 0:
                await trio.sleep(0.05)
        newest = node.replica.log.latest_snapshot
        assert node.replica.log_start_offset == newest.end_offset  # the prefix is gone
        nursery.cancel_scope.cancel()

    async with trio.open_nursery() as nursery:
        node = Node(_config(data, **settings))
        ports = await nursery.start(node.run)
        assert node.replica.log.latest_snapshot.end_offset >= newest.end_offset
        assert node.recovered_metadata_start >= newest.end_offset  # loaded, not replayed
        meta = await _send(ports["PLAINTEXT"], metadata(*names, allow_auto_create=False))
        assert [(t.name, t.error_code, len(t.partitions)) for t in meta.topics] == [
            (n, 0, 3) for n in names]
        nursery.cancel_scope.cancel()
