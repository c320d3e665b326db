"""Checks on dynamic config changes before any ConfigRecord is written.

Topic configs are checked by ``kafkapy.config.validate_topic_configs`` (Kafka's
ControllerConfigurationValidator: unknown names and bad values are INVALID_CONFIG). Broker configs
follow Kafka's broker-side ConfigAdminManager instead, which answers INVALID_REQUEST for a config
that may not change at runtime or has a bad value (KAFKA-13609 kept that code for compatibility).
"""

from __future__ import annotations

from collections.abc import Mapping

from kafkapy import config as kconfig
from kafkapy.metadata.image import RESOURCE_BROKER
from kafkapy.protocol.errors import ErrorCode, KafkaError


def list_op_error(resource_type: int, op_name: str, key: str) -> str:
    """Kafka's message for APPEND/SUBTRACT on a config that is not a LIST."""
    if resource_type == RESOURCE_BROKER:
        # ConfigAdminManager.prepareIncrementalConfigs, on the broker before forwarding.
        return f"Config value {op_name.lower()} is not allowed for config key: {key}"
    return f"Can't {op_name} to key {key} because its type is not LIST."


def check_broker_configs(configs: Mapping[str, str], *, per_broker: bool) -> None:
    """Raise KafkaError(INVALID_REQUEST) when the resulting dynamic configs of a broker entry
    (``per_broker``) or of the cluster default hold a key that cannot change at runtime, a bad
    value, or a per-broker-only key at the default level — in Kafka's order of checks."""
    fixed = sorted(k for k in configs if not kconfig.is_dynamic_broker_config(k))
    if fixed:
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                         f"Cannot update these configs dynamically: Set({', '.join(fixed)})")
    for key in sorted(configs):
        problem = kconfig.broker_config_problem(key, configs[key], per_broker=True)
        if problem is not None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, problem)
    if not per_broker:
        only_per_broker = sorted(k for k in configs if kconfig.broker_update_mode(k) == kconfig.PER_BROKER)
        if only_per_broker:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             "Cannot update these configs at default cluster level, broker id must be "
                             f"specified: Set({', '.join(only_per_broker)})")


REMOTE_STORAGE_ENABLE = "remote.storage.enable"


def check_tiered_topic_configs(new: Mapping[str, str], old: Mapping[str, str] | None, *,
                               system_enabled: bool, inherited: Mapping[str, str]) -> None:
    """Kafka's tiered-storage rules for a topic's resulting configs (LogConfig.validate, 3.9):
    ``remote.storage.enable=true`` needs ``remote.log.storage.system.enable`` on the broker, is
    refused for compacted topics, and needs local retention within the total retention; turning
    it off (``old`` had it on) needs ``remote.log.delete.on.disable=true`` (KIP-950).

    ``inherited`` holds the broker's static values of topic keys (``retention.ms`` from
    ``log.retention.hours`` and the like); unset keys take Kafka's defaults. Raises
    KafkaError(INVALID_CONFIG) with Kafka's wording.
    """
    def value(configs: Mapping[str, str], name: str) -> str:
        got = configs.get(name)
        if got is None:
            got = inherited.get(name)
        if got is None:
            got = kconfig.TOPIC_CONFIGS[name].default or ""
        return str(got).strip()

    def flag(configs: Mapping[str, str], name: str) -> bool:
        return value(configs, name).lower() == "true"

    def invalid(name: str, message: str) -> KafkaError:
        return KafkaError(ErrorCode.INVALID_CONFIG,
                          f"Invalid value {value(new, name)} for configuration {name}: {message}")

    if flag(new, REMOTE_STORAGE_ENABLE):
        if not system_enabled:
            raise KafkaError(ErrorCode.INVALID_CONFIG,
                             "Tiered Storage functionality is disabled in the broker. Topic cannot "
                             "be configured with remote log storage.")
        if "compact" in [p.strip() for p in value(new, "cleanup.policy").split(",")]:
            raise KafkaError(ErrorCode.INVALID_CONFIG,
                             "Remote log storage is unsupported for the compacted topics")
        for total_key, local_key in (("retention.bytes", "local.retention.bytes"),
                                     ("retention.ms", "local.retention.ms")):
            try:
                total, local = int(value(new, total_key)), int(value(new, local_key))
            except ValueError:
                continue  # a bad number was already refused by validate_topic_configs
            if total == -1 or local == -2:
                continue
            if local == -1:
                raise invalid(local_key, f"Value must not be -1 as {total_key} value is set as {total}.")
            if local > total:
                raise invalid(local_key, f"Value must not be more than {total_key} property value: {total}")
    elif old is not None and flag(old, REMOTE_STORAGE_ENABLE) and not flag(new, "remote.log.delete.on.disable"):
        raise KafkaError(ErrorCode.INVALID_CONFIG,
                         "It is invalid to disable remote storage without deleting remote data. If "
                         "you want to keep the remote data and turn to read only, please set "
                         "`remote.storage.enable=true,remote.log.copy.disable=true`. If you want to "
                         "disable remote storage and delete all remote data, please set "
                         "`remote.storage.enable=false,remote.log.delete.on.disable=true`.")
