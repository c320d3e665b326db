"""The shape of a configuration key: Kafka's config types and sources, and ConfigDef (type,
default, validation, sensitivity). ``config`` holds the broker and topic keys; ``config_security``
the TLS, SASL, authorizer and quota ones."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from kafkapy.config_validators import Validator
from kafkapy.protocol.errors import ErrorCode, KafkaError


class ConfigType(IntEnum):
    """DescribeConfigs' config_type values."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(IntEnum):
    """DescribeConfigs' config_source values."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


@dataclass(frozen=True)
class ConfigDef:
    """One configuration key: its type, default (as Kafka prints it), and validation."""

    name: str
    type: ConfigType
    default: str | None
    doc: str = ""
    validator: Validator | None = None
    sensitive: bool = False
    # Kafka's internal configs: settable, but DescribeConfigs lists them only when set.
    internal: bool = False

    def parse(self, raw: str) -> object:
        """Typed value of ``raw``; raises KafkaError(INVALID_CONFIG) with Kafka's wording."""
        text = raw.strip()
        try:
            if self.type == ConfigType.BOOLEAN:
                if text.lower() not in ("true", "false"):
                    raise ValueError
                value: object = text.lower() == "true"
            elif self.type in (ConfigType.INT, ConfigType.SHORT, ConfigType.LONG):
                value = int(text)
                bound = {ConfigType.INT: 1 << 31, ConfigType.SHORT: 1 << 15, ConfigType.LONG: 1 << 63}[self.type]
                if not -bound <= value < bound:
                    raise ValueError
            elif self.type == ConfigType.DOUBLE:
                value = float(text)
            elif self.type == ConfigType.LIST:
                value = [item.strip() for item in text.split(",") if item.strip()]
            else:
                value = raw
        except ValueError:
            kind = self.type.name  # Kafka prints ConfigDef.Type's name: "Not a number of type LONG"
            raise KafkaError(
                ErrorCode.INVALID_CONFIG,
                f"Invalid value {raw} for configuration {self.name}: Not a number of type {kind}"
                if self.type not in (ConfigType.BOOLEAN,)
                else f"Invalid value {raw} for configuration {self.name}: Expected value to be either true or false",
            ) from None
        if self.validator is not None:
            problem = self.validator(value)
            if problem:
                raise KafkaError(ErrorCode.INVALID_CONFIG,
                                 f"Invalid value {raw} for configuration {self.name}: {problem}")
        return value

    @property
    def default_value(self) -> object:
        return None if self.default is None else self.parse(self.default)


def config_defs(*defs: ConfigDef) -> dict[str, ConfigDef]:
    return {d.name: d for d in defs}
