"""The effective value, source and synonyms of each config, as DescribeConfigs reports them.

Kafka's rules (ConfigHelper): a topic config's own value has source DYNAMIC_TOPIC_CONFIG; otherwise
it inherits its broker synonym (``log.retention.ms`` for ``retention.ms``), set for this broker
(DYNAMIC_BROKER_CONFIG), as the cluster default (DYNAMIC_DEFAULT_BROKER_CONFIG), in the static
file (STATIC_BROKER_CONFIG) or not at all (DEFAULT_CONFIG). Synonyms list every level that has a
value, most specific first, level by level; then everything before the first entry that carries
the config's own (primary) name is dropped — so ``retention.ms`` inheriting only
``log.retention.hours`` reports DEFAULT_CONFIG with no synonyms, exactly as Kafka does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kafkapy.config import (
    BROKER_CONFIGS,
    READ_ONLY,
    TOPIC_CONFIGS,
    TOPIC_SYNONYMS,
    BrokerConfig,
    ConfigSource,
    ConfigType,
    broker_config_problem,
    broker_synonyms,
    broker_update_mode,
)
from kafkapy.config_groups import GROUP_CONFIGS
from kafkapy.metadata.group_configs import GROUP_CONFIG_SYNONYMS
from kafkapy.metadata.image import RESOURCE_BROKER, MetadataImage

_STATIC_DEFAULTS: dict[str, str] = {n: d.default for n, d in BROKER_CONFIGS.items() if d.default is not None}


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
    documentation: str | None
    synonyms: list[Synonym] = field(default_factory=list)


@dataclass(frozen=True)
class BrokerLayers:
    """Every level a broker setting can come from on one node: its static config, its own
    dynamic entry and the cluster default (the two dynamic ones are ConfigRecords)."""

    static: BrokerConfig
    per_broker: Mapping[str, str] = field(default_factory=dict)
    cluster_default: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, static: BrokerConfig, image: MetadataImage, node_id: int) -> "BrokerLayers":
        """The layers ``node_id`` sees in ``image``. Stored entries that are not valid dynamic
        configs are left out, as Kafka's broker ignores them when it loads them."""
        return cls(static, _usable(image.configs.get(RESOURCE_BROKER, str(node_id)), True),
                   _usable(image.configs.get(RESOURCE_BROKER, ""), False))

    @property
    def effective(self) -> BrokerConfig:
        """The settings in force: per-broker over cluster default over static."""
        return self.static.with_dynamic(self.per_broker, self.cluster_default)

    def synonyms(self, name: str, *, sensitive: bool) -> list[Synonym]:
        """Kafka's synonym list of broker key ``name``."""
        names = broker_synonyms(name)
        out: list[Synonym] = []
        for props, source in ((self.per_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
                              (self.cluster_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
                              (self.static.props, ConfigSource.STATIC_BROKER_CONFIG),
                              (_STATIC_DEFAULTS, ConfigSource.DEFAULT_CONFIG)):
            out.extend(Synonym(n, None if sensitive else props[n], source) for n in names if n in props)
        # Synonyms ranked above the config's own name describe it only through another key.
        while out and out[0].name != name:
            out.pop(0)
        return out


def _usable(entries: Mapping[str, str], per_broker: bool) -> dict[str, str]:
    return {k: v for k, v in entries.items()
            if v is not None
            and (k not in BROKER_CONFIGS or broker_config_problem(k, v, per_broker=per_broker) is None)}


def topic_config_entries(layers: BrokerLayers, dynamic: Mapping[str, str]) -> list[ConfigEntry]:
    """Every topic config of a topic whose own (dynamic) configs are ``dynamic``."""
    effective = layers.effective
    entries = []
    for name, cdef in sorted(TOPIC_CONFIGS.items()):
        value: str | None = dynamic[name] if name in dynamic else effective.topic_default(name)
        if cdef.sensitive:
            value = None
        broker_keys = TOPIC_SYNONYMS.get(name)
        synonyms = layers.synonyms(broker_keys[0], sensitive=cdef.sensitive) if broker_keys else []
        if name in dynamic:
            synonyms.insert(0, Synonym(name, value, ConfigSource.DYNAMIC_TOPIC_CONFIG))
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        entries.append(ConfigEntry(name, value, source, False, cdef.sensitive, cdef.type, cdef.doc, synonyms))
    return entries


def group_config_entries(layers: BrokerLayers, dynamic: Mapping[str, str]) -> list[ConfigEntry]:
    """Every served config of a group whose own (dynamic) configs are ``dynamic``: its value,
    else the broker's value of the synonym (``group.consumer.session.timeout.ms`` for
    ``consumer.session.timeout.ms``), else the fixed default, which Kafka lists as a synonym of
    the key's own name."""
    entries = []
    for name, cdef in sorted(GROUP_CONFIGS.items()):
        broker_key = GROUP_CONFIG_SYNONYMS[name]
        if broker_key is not None:
            synonyms = layers.synonyms(broker_key, sensitive=False)
        else:
            synonyms = [Synonym(name, cdef.default, ConfigSource.DEFAULT_CONFIG)]
        if name in dynamic:
            synonyms.insert(0, Synonym(name, dynamic[name], ConfigSource.GROUP_CONFIG))
        first = synonyms[0] if synonyms else Synonym(name, cdef.default, ConfigSource.DEFAULT_CONFIG)
        entries.append(ConfigEntry(name, first.value, first.source, False, False, cdef.type, cdef.doc,
                                   synonyms))
    return entries


def broker_config_entries(layers: BrokerLayers) -> list[ConfigEntry]:
    """DescribeConfigs of this broker (resource name = its id): every known key plus any other
    key set statically or dynamically."""
    names = ({n for n, d in BROKER_CONFIGS.items() if not d.internal}
             | set(layers.static.props) | set(layers.cluster_default) | set(layers.per_broker))
    entries = []
    for name in sorted(names):
        value = layers.per_broker.get(name)
        if value is None:
            value = layers.cluster_default.get(name)
        if value is None:
            value = layers.static.props.get(name)
        if value is None and name in BROKER_CONFIGS:
            value = BROKER_CONFIGS[name].default
        entries.append(_broker_entry(layers, name, value, per_broker=True))
    return entries


def default_broker_config_entries(layers: BrokerLayers) -> list[ConfigEntry]:
    """DescribeConfigs of the cluster default (resource name ""): only its dynamic entries."""
    return [_broker_entry(layers, name, value, per_broker=False)
            for name, value in sorted(layers.cluster_default.items())]


def _broker_entry(layers: BrokerLayers, name: str, value: str | None, *, per_broker: bool) -> ConfigEntry:
    cdef = BROKER_CONFIGS.get(name)
    # Kafka cannot tell the type of a key it does not define, so hides its value to be safe.
    sensitive = cdef is None or cdef.sensitive
    synonyms = layers.synonyms(name, sensitive=sensitive)
    if not per_broker:
        # The cluster default's entries carry only their own layer, as Kafka's ConfigHelper
        # answers for resource "" (no static or default synonyms under it).
        synonyms = [s for s in synonyms if s.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
    source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
    return ConfigEntry(
        name, None if sensitive else value, source, broker_update_mode(name) == READ_ONLY, sensitive,
        cdef.type if cdef is not None else ConfigType.UNKNOWN, cdef.doc if cdef is not None else None, synonyms)
