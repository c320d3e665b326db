"""The effective value and source of each config, as DescribeConfigs and CreateTopics report them.

Kafka's rules: a topic's own (dynamic) value has source DYNAMIC_TOPIC_CONFIG; otherwise a broker
setting of a synonym (e.g. `log.retention.hours` for `retention.ms`) is STATIC_BROKER_CONFIG;
otherwise the default is DEFAULT_CONFIG. Synonyms list every level that has a value, most
specific first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kafkapy.config import BROKER_CONFIGS, TOPIC_CONFIGS, TOPIC_SYNONYMS, BrokerConfig, ConfigSource, ConfigType


@dataclass(frozen=True)
class Synonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True)
class ConfigEntry:
    """One config as a client sees it."""

    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    sensitive: bool
    type: ConfigType
    documentation: str
    synonyms: list[Synonym] = field(default_factory=list)


def topic_config_entries(config: BrokerConfig, dynamic: Mapping[str, str]) -> list[ConfigEntry]:
    entries = []
    for name, cdef in sorted(TOPIC_CONFIGS.items()):
        synonyms: list[Synonym] = []
        if name in dynamic:
            synonyms.append(Synonym(name, dynamic[name], ConfigSource.DYNAMIC_TOPIC_CONFIG))
        broker_keys = TOPIC_SYNONYMS.get(name, ())
        for key in broker_keys:
            if config.is_set(key):
                synonyms.append(Synonym(key, config.props[key], ConfigSource.STATIC_BROKER_CONFIG))
        default_key = next((k for k in broker_keys if BROKER_CONFIGS.get(k) and BROKER_CONFIGS[k].default is not None), None)
        if default_key is not None:
            synonyms.append(Synonym(default_key, BROKER_CONFIGS[default_key].default, ConfigSource.DEFAULT_CONFIG))
        else:
            synonyms.append(Synonym(name, cdef.default, ConfigSource.DEFAULT_CONFIG))
        if name in dynamic:
            value, source = dynamic[name], ConfigSource.DYNAMIC_TOPIC_CONFIG
        else:
            inherited = config.broker_synonym_value(name)
            if inherited is not None:
                value, source = inherited[1], ConfigSource.STATIC_BROKER_CONFIG
            else:
                value, source = cdef.default, ConfigSource.DEFAULT_CONFIG
        entries.append(ConfigEntry(name, value, source, False, cdef.sensitive, cdef.type, cdef.doc, synonyms))
    return entries


def broker_config_entries(config: BrokerConfig) -> list[ConfigEntry]:
    entries = []
    for name, cdef in sorted(BROKER_CONFIGS.items()):
        if config.is_set(name):
            value, source = config.props[name], ConfigSource.STATIC_BROKER_CONFIG
        else:
            value, source = cdef.default, ConfigSource.DEFAULT_CONFIG
        if cdef.sensitive:
            value = None
        synonyms = [Synonym(name, value, source)]
        entries.append(ConfigEntry(name, value, source, cdef.read_only, cdef.sensitive, cdef.type, cdef.doc, synonyms))
    return entries
