"""Kafka's tiered-storage topic config rules (LogConfig.validate, 3.9) at the controller."""

from __future__ import annotations

import pytest

from kafkapy.controller import AlterConfigOp, AlterConfigsResource, NewTopic, OpType, TopicDefaults
from kafkapy.controller.config_validation import check_tiered_topic_configs
from kafkapy.metadata.image import RESOURCE_TOPIC
from kafkapy.protocol.errors import ErrorCode as E, KafkaError

from .conftest import make_harness


def tiered_harness(system_enabled: bool, **kwargs):
    h = make_harness(defaults=TopicDefaults(num_partitions=1, replication_factor=1),
                     remote_storage_system_enable=system_enabled, **kwargs)
    h.add_broker(1)
    return h


def create(h, configs: dict[str, str]):
    (res,) = h.commit(h.controller.create_topics([NewTopic("t", 1, 1, configs=configs)]))
    return res


def alter(h, **values: str):
    ops = tuple(AlterConfigOp(name.replace("_", "."), OpType.SET, v) for name, v in values.items())
    (res,) = h.commit(h.controller.incremental_alter_configs([AlterConfigsResource(RESOURCE_TOPIC, "t", ops)]))
    return res


def test_remote_storage_needs_the_broker_switch() -> None:
    res = create(tiered_harness(False), {"remote.storage.enable": "true"})
    assert res.error_code == E.INVALID_CONFIG
    assert "Tiered Storage functionality is disabled in the broker" in res.error_message
    assert create(tiered_harness(True), {"remote.storage.enable": "true"}).error_code == E.NONE
    # Off stays allowed everywhere.
    assert create(tiered_harness(False), {"remote.storage.enable": "false"}).error_code == E.NONE


@pytest.mark.parametrize("configs, message", [
    ({"cleanup.policy": "compact"}, "Remote log storage is unsupported for the compacted topics"),
    ({"cleanup.policy": "delete,compact"}, "Remote log storage is unsupported for the compacted topics"),
    ({"retention.bytes": "1000", "local.retention.bytes": "2000"},
     "Invalid value 2000 for configuration local.retention.bytes: Value must not be more than "
     "retention.bytes property value: 1000"),
    ({"retention.ms": "60000", "local.retention.ms": "120000"},
     "Invalid value 120000 for configuration local.retention.ms: Value must not be more than "
     "retention.ms property value: 60000"),
    ({"local.retention.ms": "-1"},
     "Invalid value -1 for configuration local.retention.ms: Value must not be -1 as retention.ms "
     "value is set as 604800000."),
])
def test_contradictory_remote_configs_are_refused(configs, message) -> None:
    res = create(tiered_harness(True), {"remote.storage.enable": "true", **configs})
    assert (res.error_code, res.error_message) == (E.INVALID_CONFIG, message)


def test_local_retention_within_total_is_accepted() -> None:
    ok = {"remote.storage.enable": "true", "retention.bytes": "1000", "local.retention.bytes": "1000",
          "local.retention.ms": "-2", "retention.ms": "-1"}
    assert create(tiered_harness(True), ok).error_code == E.NONE


def test_the_broker_default_retention_counts() -> None:
    h = tiered_harness(True, broker_topic_configs={"retention.ms": "60000"})
    res = create(h, {"remote.storage.enable": "true", "local.retention.ms": "120000"})
    assert res.error_code == E.INVALID_CONFIG and "retention.ms property value: 60000" in res.error_message


def test_turning_remote_storage_off_needs_delete_on_disable() -> None:
    h = tiered_harness(True)
    assert create(h, {"remote.storage.enable": "true"}).error_code == E.NONE
    res = alter(h, **{"remote.storage.enable": "false"})
    assert res.error_code == E.INVALID_CONFIG and "without deleting remote data" in res.error_message
    res = alter(h, **{"remote.storage.enable": "false", "remote.log.delete.on.disable": "true"})
    assert res.error_code == E.NONE


def test_the_rule_alone() -> None:
    check_tiered_topic_configs({}, None, system_enabled=False, inherited={})
    with pytest.raises(KafkaError):
        check_tiered_topic_configs({"remote.storage.enable": "TRUE "}, None, system_enabled=False, inherited={})
    # Another topic that never had remote storage may say false freely.
    check_tiered_topic_configs({"remote.storage.enable": "false"}, {}, system_enabled=True, inherited={})
