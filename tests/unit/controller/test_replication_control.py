"""ReplicationControlManager on its own: topics as records, placed on the cluster's brokers."""

from __future__ import annotations

import random
import uuid

from kafkapy.controller.cluster_control import ClusterControlManager
from kafkapy.controller.configuration_control import ConfigurationControlManager
from kafkapy.controller.feature_control import FeatureControlManager
from kafkapy.controller.replication_control import ReplicationControlManager
from kafkapy.controller.types import CreatePartitionsTopic, NewTopic
from kafkapy.metadata.records import PartitionRecord, TopicRecord
from kafkapy.protocol.errors import ErrorCode

from .managers import CLUSTER_ID, Images, broker, metadata_version


def make() -> tuple[Images, ReplicationControlManager]:
    images = Images()
    images.load(metadata_version(), broker(1, epoch=1), broker(2, epoch=2),
                broker(3, epoch=3, fenced=True))
    cluster = ClusterControlManager(cluster_id=CLUSTER_ID, image=images,
                                    features=FeatureControlManager(images))
    ids = iter(uuid.UUID(int=(n << 64) | n) for n in range(100, 200))
    manager = ReplicationControlManager(
        image=images, cluster=cluster, configs=ConfigurationControlManager(image=images),
        uuid_source=lambda: next(ids), rng=random.Random(3))
    return images, manager


def test_a_topic_is_placed_on_unfenced_brokers_and_replayed() -> None:
    images, manager = make()
    result = manager.create_topics([NewTopic("t", num_partitions=2, replication_factor=2)])
    (created,) = result.response
    assert created.error_code == ErrorCode.NONE
    assert isinstance(result.records[0], TopicRecord)
    parts = [r for r in result.records if isinstance(r, PartitionRecord)]
    assert [p.partition_id for p in parts] == [0, 1]
    assert all(set(p.replicas) == {1, 2} for p in parts)
    # Each replica goes to its broker's only log dir.
    assert all(p.directories == tuple(images.image.brokers[r].log_dirs[0] for r in p.replicas)
               for p in parts)
    assert "t" not in manager.topics.by_name
    images.commit(manager, result.records)
    assert manager.topics.by_name["t"].id == created.topic_id
    assert [(t.name, i) for t, i, _ in manager.partitions()] == [("t", 0), ("t", 1)]


def test_grow_then_delete() -> None:
    images, manager = make()
    images.commit(manager, manager.create_topics([NewTopic("t", 1, 1)]).records)
    grown = manager.create_partitions([CreatePartitionsTopic("t", 3)])
    images.commit(manager, grown.records)
    assert manager.topics.by_name["t"].num_partitions == 3
    too_many = manager.create_topics([NewTopic("u", 1, 3)])
    assert too_many.records == ()
    assert too_many.response[0].error_code == ErrorCode.INVALID_REPLICATION_FACTOR
    deleted = manager.delete_topics(["t"])
    images.commit(manager, deleted.records)
    assert "t" not in manager.topics.by_name
