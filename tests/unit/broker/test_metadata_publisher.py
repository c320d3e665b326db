"""BrokerMetadata: image publishers get images, update publishers get what each batch changed."""

from __future__ import annotations

import uuid

from kafkapy.broker.metadata_publisher import BrokerMetadata
from kafkapy.metadata.image import MetadataImage
from kafkapy.metadata.records import (
    FeatureLevelRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from kafkapy.metadata.update import MetadataUpdate

T = uuid.UUID(int=5)


def test_publishers_hear_about_every_step_in_subscription_order() -> None:
    meta = BrokerMetadata("cid")
    heard: list[tuple[str, object]] = []
    meta.add_publisher(lambda image: heard.append(("image", image)))
    meta.add_update_publisher(lambda update: heard.append(("update", update)))
    assert [kind for kind, _ in heard] == ["image", "update"]
    first = heard[1][1]
    assert isinstance(first, MetadataUpdate) and first.full and first.image is meta.image
    assert meta.image.cluster_id == "cid" and meta.image.is_empty()

    heard.clear()
    update = meta.on_commit([(FeatureLevelRecord("metadata.version", 21), 0),
                             (RegisterBrokerRecord(1, uuid.UUID(int=1), 1), 1),
                             (TopicRecord("a", T), 2), (PartitionRecord(0, T, (1,), (1,), 1), 3)])
    assert heard == [("image", meta.image), ("update", update)]
    assert not update.full and update.image is meta.image and meta.image.offset == 3
    assert update.created_topics == {T} and update.changed_brokers == {1}

    heard.clear()
    update = meta.on_commit([(PartitionChangeRecord(0, T, leader=-1), 4)])
    assert update.changed_partitions == {T: frozenset({0})} and update.previous.offset == 3
    assert heard[1][1] is update and meta.image.topics.partition("a", 0).leader == -1


def test_a_loaded_snapshot_is_a_full_update() -> None:
    meta = BrokerMetadata("cid")
    updates: list[MetadataUpdate] = []
    meta.add_update_publisher(updates.append)
    before = meta.image
    loaded = MetadataImage(cluster_id="cid", offset=41)
    meta.load_image(loaded)
    assert meta.image is loaded
    assert updates[-1].full and updates[-1].image is loaded and updates[-1].previous is before
