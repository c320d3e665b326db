"""MetadataLoader: committed batches and snapshots → image → publishers, replayers, observers."""

from __future__ import annotations

import uuid

from kafkapy.metadata.loader import MetadataLoader
from kafkapy.metadata.records import PartitionRecord, TopicRecord
from kafkapy.metadata.snapshot import write_snapshot
from kafkapy.raft.control import build_leader_change_batch
from kafkapy.raft.events import CommittedBatch, SnapshotLoad
from kafkapy.metadata.records import MetadataRecordCodec
from kafkapy.raft.messages import SnapshotId
from kafkapy.records.builder import Record, build_batch

CLUSTER = "loader-cluster"
CODEC = MetadataRecordCodec()
TOPIC_ID = uuid.UUID(int=5)
RECORDS = [TopicRecord(name="orders", topic_id=TOPIC_ID),
           PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=(1,), isr=(1,), leader=1,
                           leader_epoch=0, partition_epoch=0)]


def batch(records, base_offset: int, epoch: int = 1) -> bytes:
    return build_batch([Record(None, CODEC.encode(r)) for r in records], base_offset=base_offset,
                       partition_leader_epoch=epoch, now_ms=0)


class Recorder:
    """A replayer (the controller's part) and an observer (the snapshot generator's)."""

    def __init__(self) -> None:
        self.replayed: list[list] = []
        self.snapshots: list = []
        self.observed: list[tuple[int, int]] = []
        self.loaded: list = []

    def replay_batch(self, records) -> None:
        self.replayed.append(records)

    def load_snapshot(self, image) -> None:
        self.snapshots.append(image)

    def observe_batch(self, image, batch, now_ms) -> None:
        self.observed.append((image.offset, now_ms))

    def snapshot_loaded(self, snapshot_id, now_ms) -> None:
        self.loaded.append(snapshot_id)


def test_a_committed_batch_becomes_a_new_image_for_every_publisher():
    loader = MetadataLoader(CLUSTER, CODEC.decode)
    recorder, updates, images, woken = Recorder(), [], [], []
    loader.add_replayer(recorder)
    loader.add_observer(recorder)
    loader.add_update_publisher(updates.append)
    loader.add_publisher(images.append)
    loader.add_listener(lambda: woken.append(True))
    assert updates[0].image is images[0] is loader.image  # installed: the current image at once

    leader_change = build_leader_change_batch(base_offset=0, epoch=1, leader_id=1, voters=[1],
                                              granting_voters=[1], now_ms=0)
    loader.handle(CommittedBatch(0, leader_change), now_ms=5)
    assert recorder.replayed == [] and len(updates) == 1, "a control batch is the quorum's business"
    loader.handle(CommittedBatch(1, batch(RECORDS, 1)), now_ms=7)

    assert "orders" in loader.image.topics.by_name and loader.image.offset == 2
    assert updates[-1].image is loader.image and images[-1] is loader.image
    assert updates[-1].topic_touched("orders")
    assert [offset for _, offset in recorder.replayed[0]] == [1, 2]
    assert recorder.observed == [(-1, 5), (2, 7)]
    assert woken == [True, True]


def test_records_this_node_appended_are_not_decoded_again():
    decoded: list[bytes] = []

    def decode(value: bytes):
        decoded.append(value)
        return CODEC.decode(value)

    loader = MetadataLoader(CLUSTER, decode)
    loader.expect(0, 1, list(RECORDS))
    loader.handle(CommittedBatch(0, batch(RECORDS, 0, epoch=1)), now_ms=0)
    assert decoded == [] and "orders" in loader.image.topics.by_name

    # Another epoch at the same offset is another entry: decoded from the batch.
    other = MetadataLoader(CLUSTER, decode)
    other.expect(0, 1, [RECORDS[0]])
    other.handle(CommittedBatch(0, batch(RECORDS, 0, epoch=2)), now_ms=0)
    assert len(decoded) == 2 and len(other.image.topics.by_name["orders"].partitions) == 1


def test_a_loaded_snapshot_replaces_the_image_as_a_full_update():
    source = MetadataLoader(CLUSTER, CODEC.decode)
    source.handle(CommittedBatch(0, batch(RECORDS, 0)), now_ms=0)
    snapshot_id = SnapshotId(2, 1)
    data = write_snapshot(source.image, snapshot_id, now_ms=0)

    loader = MetadataLoader(CLUSTER, CODEC.decode)
    recorder, updates = Recorder(), []
    loader.add_replayer(recorder)
    loader.add_observer(recorder)
    loader.add_update_publisher(updates.append)
    loader.handle(SnapshotLoad(snapshot_id, data), now_ms=0)
    assert "orders" in loader.image.topics.by_name and loader.image.offset == 1
    assert updates[-1].image is loader.image and updates[-1].topic_touched("orders")
    assert [image.offset for image in recorder.snapshots] == [1]
    assert recorder.loaded == [snapshot_id]


def test_a_controller_only_node_reads_its_controllers_image():
    recorder = Recorder()
    controller_image = MetadataLoader(CLUSTER, CODEC.decode).image
    loader = MetadataLoader(CLUSTER, CODEC.decode, keep_image=False,
                            image_source=lambda: controller_image)
    loader.add_replayer(recorder)
    loader.handle(CommittedBatch(0, batch(RECORDS, 0)), now_ms=0)
    assert len(recorder.replayed) == 1
    assert loader.image is controller_image  # no second image built from the same records
