"""ConfigurationControlManager on its own: configs as records, and what they then decide."""

from __future__ import annotations

import uuid

from kafkapy.controller.configuration_control import (
    UNCLEAN_ELECTION,
    ConfigurationControlManager,
)
from kafkapy.controller.types import AlterConfigOp, AlterConfigsResource, OpType
from kafkapy.metadata.image import RESOURCE_BROKER, RESOURCE_TOPIC
from kafkapy.metadata.records import ConfigRecord, TopicRecord
from kafkapy.protocol.errors import ErrorCode

from .managers import Images, metadata_version


def make() -> tuple[Images, ConfigurationControlManager]:
    images = Images()
    images.load(metadata_version(), TopicRecord("t", uuid.UUID(int=5 << 64)))
    return images, ConfigurationControlManager(image=images,
                                               broker_topic_configs={"retention.ms": "1000"})


def alter(resource_type: int, name: str, *ops: AlterConfigOp) -> AlterConfigsResource:
    return AlterConfigsResource(resource_type, name, tuple(ops))


def test_unclean_elections_follow_topic_then_cluster_then_static_configs() -> None:
    images, manager = make()
    assert not manager.unclean_election_enabled("t")
    result = manager.incremental_alter_configs([
        alter(RESOURCE_BROKER, "", AlterConfigOp(UNCLEAN_ELECTION, OpType.SET, "true"))])
    assert result.response[0].error_code == ErrorCode.NONE
    assert result.records == (ConfigRecord(RESOURCE_BROKER, "", UNCLEAN_ELECTION, "true"),)
    assert not manager.unclean_election_enabled("t")  # not replayed yet
    images.commit(manager, result.records)
    assert manager.unclean_election_enabled("t")
    topic_off = manager.incremental_alter_configs([
        alter(RESOURCE_TOPIC, "t", AlterConfigOp(UNCLEAN_ELECTION, OpType.SET, "false"))])
    images.commit(manager, topic_off.records)
    assert not manager.unclean_election_enabled("t")
    assert manager.unclean_election_enabled("other")


def test_validate_only_and_unknown_topics_write_nothing() -> None:
    _, manager = make()
    op = AlterConfigOp("retention.ms", OpType.SET, "5")
    assert manager.incremental_alter_configs([alter(RESOURCE_TOPIC, "t", op)],
                                             validate_only=True).records == ()
    missing = manager.incremental_alter_configs([alter(RESOURCE_TOPIC, "nope", op)])
    assert missing.records == ()
    assert missing.response[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_effective_configs_name_static_and_dynamic_sources() -> None:
    _, manager = make()
    entries = {e.name: e for e in manager.effective_topic_configs({"segment.ms": "7"})}
    assert entries["retention.ms"].value == "1000"
    assert entries["segment.ms"].value == "7"
    assert entries["retention.ms"].source != entries["segment.ms"].source
