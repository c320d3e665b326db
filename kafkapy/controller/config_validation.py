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
