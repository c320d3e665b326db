"""MetadataDelta.apply_update: the next image plus exactly what changed."""

from __future__ import annotations

import uuid

from kafkapy.metadata import MetadataDelta, MetadataImage, MetadataUpdate
from kafkapy.metadata.image import RESOURCE_BROKER, RESOURCE_TOPIC
from kafkapy.metadata.records import (
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FeatureLevelRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
)

A, B, A2 = uuid.UUID(int=1), uuid.UUID(int=2), uuid.UUID(int=3)


def step(image: MetadataImage, *records) -> MetadataUpdate:
    delta = MetadataDelta(image)
    for i, rec in enumerate(records):
        delta.replay(rec, image.offset + 1 + i)
    return delta.apply_update()


def base() -> MetadataImage:
    return step(
        MetadataImage.empty("c"),
        FeatureLevelRecord("metadata.version", 21),
        RegisterBrokerRecord(1, uuid.UUID(int=9), 5, fenced=False),
        TopicRecord("a", A), PartitionRecord(0, A, (1,), (1,), 1), PartitionRecord(1, A, (1,), (1,), 1),
        TopicRecord("b", B), PartitionRecord(0, B, (1,), (1,), 1),
        ConfigRecord(RESOURCE_TOPIC, "a", "retention.ms", "5"),
    ).image


def test_created_topics_list_every_partition() -> None:
    update = step(MetadataImage.empty("c"), TopicRecord("a", A), PartitionRecord(0, A, (1,), (1,), 1),
                  PartitionRecord(1, A, (1,), (1,), 1))
    assert update.created_topics == {A} and update.changed_partitions == {A: frozenset({0, 1})}
    assert not update.full and update.previous.is_empty() and update.image.offset == 2


def test_one_partition_change_names_that_partition_only() -> None:
    img = base()
    update = step(img, PartitionChangeRecord(1, A, leader=-1, isr=(1,)))
    assert update.changed_partitions == {A: frozenset({1})}
    assert not update.created_topics and not update.deleted_topics and not update.changed_configs
    assert not update.changed_brokers and not update.features_changed
    assert update.topic_touched("a") and not update.topic_touched("b")
    assert update.image.topics.by_name["b"] is img.topics.by_name["b"]
    assert update.image.configs is img.configs and update.image.cluster is img.cluster


def test_broker_change_names_the_broker_only() -> None:
    update = step(base(), BrokerRegistrationChangeRecord(1, 5, fenced=1))
    assert update.changed_brokers == {1} and not update.changed_partitions
    assert update.image.topics is update.previous.topics


def test_recreated_topic_is_deleted_and_created_with_its_configs_cleared() -> None:
    update = step(base(), RemoveTopicRecord(A), TopicRecord("a", A2),
                  PartitionRecord(0, A2, (1,), (1,), 1))
    assert update.deleted_topics == {A: "a"} and update.created_topics == {A2}
    assert update.changed_partitions == {A2: frozenset({0})}
    assert update.changed_configs == {(RESOURCE_TOPIC, "a")}
    assert update.image.topics.by_name["a"].id == A2 and A not in update.image.topics.by_id
    assert update.image.configs.topic("a") == {}


def test_config_changes_that_change_nothing_are_not_reported() -> None:
    img = base()
    update = step(img, ConfigRecord(RESOURCE_TOPIC, "a", "retention.ms", "5"),
                  ConfigRecord(RESOURCE_TOPIC, "b", "x", None))
    assert update.changed_configs == frozenset() and update.image.configs is img.configs
    update = step(img, ConfigRecord(RESOURCE_BROKER, "", "log.retention.ms", "1"))
    assert update.changed_configs == {(RESOURCE_BROKER, "")}
    assert update.topic_touched("a") is False


def test_topic_created_and_removed_in_one_step_leaves_no_trace() -> None:
    img = base()
    update = step(img, TopicRecord("tmp", A2), PartitionRecord(0, A2, (1,), (1,), 1),
                  RemoveTopicRecord(A2), NoOpRecord())
    assert update.is_empty() and update.image.topics is img.topics
    # The name is free again in the same delta.
    update = step(img, TopicRecord("tmp", A2), RemoveTopicRecord(A2), TopicRecord("tmp", uuid.UUID(int=7)))
    assert update.created_topics == {uuid.UUID(int=7)}


def test_features_and_producer_ids_flags() -> None:
    update = step(base(), FeatureLevelRecord("x.version", 1), ProducerIdsRecord(1, 5, 1000))
    assert update.features_changed and update.producer_ids_changed and not update.is_empty()


def test_whole_update_touches_everything() -> None:
    img = base()
    update = MetadataUpdate.whole(img)
    assert update.full and update.topic_touched("anything") and update.previous.is_empty()
    assert MetadataUpdate.whole(img, previous=img).previous is img


def test_many_topics_in_one_delta() -> None:
    """A snapshot's worth of topics in one delta (the name check no longer scans the delta)."""
    records = []
    for i in range(3000):
        tid = uuid.UUID(int=100 + i)
        records += [TopicRecord(f"t{i}", tid), PartitionRecord(0, tid, (1,), (1,), 1)]
    update = step(MetadataImage.empty("c"), *records)
    assert len(update.image.topics.by_name) == 3000 == len(update.created_topics)
    assert update.image.topics.by_name["t2999"].id == uuid.UUID(int=3099)
