"""MetadataImage / MetadataDelta: replay semantics and sharing of untouched sub-images."""

from __future__ import annotations

import uuid

import pytest

from kafkapy.metadata import MetadataDelta, MetadataImage, MetadataReplayError
from kafkapy.metadata.image import RESOURCE_BROKER, RESOURCE_TOPIC, PartitionRegistration
from kafkapy.metadata.records import (
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)
INC = uuid.UUID(int=99)


def build(records, image: MetadataImage | None = None) -> MetadataImage:
    image = image or MetadataImage.empty("cid")
    delta = MetadataDelta(image)
    for i, rec in enumerate(records):
        delta.replay(rec, image.offset + 1 + i)
    return delta.apply()


def base_records():
    return [
        FeatureLevelRecord("metadata.version", 21),
        RegisterBrokerRecord(1, INC, 1, (BrokerEndpoint("PLAINTEXT", "h", 9092, 0),), rack="a"),
        TopicRecord("foo", T1),
        ConfigRecord(RESOURCE_TOPIC, "foo", "retention.ms", "10"),
        PartitionRecord(0, T1, (1,), (1,), 1),
        PartitionRecord(1, T1, (1,), (1,), 1),
    ]


def test_replay_builds_image() -> None:
    img = build(base_records())
    assert img.cluster_id == "cid"
    assert img.offset == 5
    assert img.metadata_version == 21
    assert img.brokers[1].fenced and img.brokers[1].rack == "a"
    foo = img.topics.by_name["foo"]
    assert foo is img.topics.by_id[T1]
    assert foo.num_partitions == 2 and foo.replication_factor == 1
    assert foo.partitions[0] == PartitionRegistration((1,), (1,), 1, 0, 0)
    assert img.configs.topic("foo") == {"retention.ms": "10"}


def test_untouched_sub_images_are_shared() -> None:
    img = build(base_records())
    img2 = build([TopicRecord("bar", T2), PartitionRecord(0, T2, (1,), (1,), 1)], img)
    assert img2.features is img.features
    assert img2.cluster is img.cluster
    assert img2.configs is img.configs
    assert img2.topics.by_name["foo"] is img.topics.by_name["foo"]
    img3 = build([NoOpRecord()], img2)
    assert img3.topics is img2.topics and img3.offset == img2.offset + 1


def test_partition_change_merges_and_bumps_epochs() -> None:
    img = build(base_records())
    img2 = build([PartitionChangeRecord(0, T1, isr=(1,), leader=-1)], img)
    p = img2.topics.partition("foo", 0)
    assert p.leader == -1 and p.leader_epoch == 1 and p.partition_epoch == 1
    img3 = build([PartitionChangeRecord(0, T1, isr=(1,))], img2)
    p = img3.topics.partition("foo", 0)
    assert p.leader == -1 and p.leader_epoch == 1 and p.partition_epoch == 2
    assert img3.topics.by_name["foo"].partitions[1] is img.topics.by_name["foo"].partitions[1]


def test_remove_topic_removes_partitions_and_configs() -> None:
    img = build(base_records())
    img2 = build([RemoveTopicRecord(T1)], img)
    assert "foo" not in img2.topics.by_name and T1 not in img2.topics.by_id
    assert img2.configs.topic("foo") == {}
    assert (RESOURCE_TOPIC, "foo") not in img2.configs.resources


def test_remove_and_recreate_in_one_delta() -> None:
    img = build(base_records())
    img2 = build([
        RemoveTopicRecord(T1),
        TopicRecord("foo", T2),
        ConfigRecord(RESOURCE_TOPIC, "foo", "cleanup.policy", "compact"),
        PartitionRecord(0, T2, (1,), (1,), 1),
    ], img)
    foo = img2.topics.by_name["foo"]
    assert foo.id == T2 and foo.num_partitions == 1
    assert img2.configs.topic("foo") == {"cleanup.policy": "compact"}
    assert T1 not in img2.topics.by_id


def test_create_and_remove_in_one_delta() -> None:
    img = build([TopicRecord("x", T2), PartitionRecord(0, T2, (1,), (1,), 1), RemoveTopicRecord(T2)])
    assert img.topics.by_name == {}


def test_config_delete_and_broker_configs() -> None:
    img = build(base_records() + [
        ConfigRecord(RESOURCE_TOPIC, "foo", "retention.ms", None),
        ConfigRecord(RESOURCE_BROKER, "", "log.retention.ms", "5"),
    ])
    assert img.configs.topic("foo") == {}
    assert img.configs.get(RESOURCE_BROKER, "") == {"log.retention.ms": "5"}


def test_broker_fencing_records() -> None:
    img = build(base_records())
    img = build([BrokerRegistrationChangeRecord(1, 1, fenced=-1)], img)
    assert not img.brokers[1].fenced
    img = build([FenceBrokerRecord(1, 1)], img)
    assert img.brokers[1].fenced
    img = build([UnfenceBrokerRecord(1, 1)], img)
    assert not img.brokers[1].fenced
    img = build([BrokerRegistrationChangeRecord(1, 1, fenced=1, in_controlled_shutdown=1)], img)
    assert img.brokers[1].fenced and img.brokers[1].in_controlled_shutdown
    with pytest.raises(MetadataReplayError):
        build([UnfenceBrokerRecord(1, 2)], img)  # wrong epoch
    img = build([UnregisterBrokerRecord(1, 1)], img)
    assert img.brokers == {}


def test_producer_ids_and_features() -> None:
    img = build([FeatureLevelRecord("metadata.version", 21), FeatureLevelRecord("x", 1),
                 ProducerIdsRecord(1, 5, 1000)])
    assert img.producer_ids.next_producer_id == 1000
    img = build([FeatureLevelRecord("x", 0)], img)
    assert "x" not in img.features.levels
    with pytest.raises(MetadataReplayError):
        build([ProducerIdsRecord(1, 5, 1000)], img)


def test_inconsistent_records_are_rejected() -> None:
    img = build(base_records())
    with pytest.raises(MetadataReplayError):
        build([TopicRecord("foo", T2)], img)
    with pytest.raises(MetadataReplayError):
        build([PartitionRecord(0, T2, (1,), (1,), 1)], img)
    with pytest.raises(MetadataReplayError):
        build([PartitionChangeRecord(7, T1, leader=1)], img)
    with pytest.raises(MetadataReplayError):
        build([RemoveTopicRecord(T2)], img)
    delta = MetadataDelta(img)
    with pytest.raises(MetadataReplayError):
        delta.replay(NoOpRecord(), img.offset)  # offsets must advance


def test_images_are_immutable() -> None:
    img = build(base_records())
    with pytest.raises(TypeError):
        img.topics.by_name["x"] = None  # type: ignore[index]
    with pytest.raises(AttributeError):
        img.offset = 3  # type: ignore[misc]
