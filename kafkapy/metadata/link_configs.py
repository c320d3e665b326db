"""A cluster link's configs: their names, defaults and checks, and the group filter they carry.

A link is stored in the metadata log with the configs it was created with; every broker reads
them from its image through ``LinkSettings``. The names are Confluent Cluster Linking's where it
has one (``consumer.offset.sync.enable``, ``consumer.offset.group.filters``,
``topic.config.sync.ms``, the ``replica.fetch.*`` family) so that a link definition reads the
same to someone who has used it there.

A link reaches its source as a Kafka client would, so it takes a client's security settings by
their Kafka names (``security.protocol``, the client ``ssl.*`` family, ``sasl.mechanism``,
``sasl.jaas.config``). Those that hold secrets (``SENSITIVE_LINK_CONFIGS``) are never shown back.

Also here: which source topic configs a mirror topic takes (``MIRRORED_TOPIC_CONFIGS``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kafkapy.security.listener_protocols import SECURITY_PROTOCOLS
from kafkapy.security.sasl.client_properties import sasl_credentials_from_client_properties
from kafkapy.security.sasl.jaas import JaasConfigError
from kafkapy.security.tls_settings import TLS_DEFAULTS

#: Link config name -> default (None: required, no default).
LINK_CONFIG_DEFAULTS: dict[str, str | None] = {
    "bootstrap.servers": None,
    "security.protocol": "PLAINTEXT",
    "client.id": "",
    "request.timeout.ms": "30000",
    "metadata.max.age.ms": "300000",
    "replica.fetch.max.bytes": "1048576",
    "replica.fetch.response.max.bytes": "10485760",
    "replica.fetch.min.bytes": "1",
    "replica.fetch.wait.max.ms": "500",
    "replica.fetch.backoff.ms": "1000",
    "topic.config.sync.ms": "5000",
    "consumer.offset.sync.enable": "false",
    "consumer.offset.sync.ms": "30000",
    "consumer.offset.group.filters": "",
    "acl.sync.enable": "false",
}

#: A Kafka client's security settings a link takes; unset ones take the client defaults. The
#: server-side ssl.* settings (client auth, principal mapping) mean nothing on a client.
LINK_SECURITY_CONFIGS = frozenset(
    {k for k in TLS_DEFAULTS if k not in ("ssl.client.auth", "ssl.principal.mapping.rules")}
    | {"sasl.mechanism", "sasl.jaas.config"})

#: Link configs that hold secrets: stored as given, never described back (as Kafka's
#: DescribeConfigs treats PASSWORD-typed configs).
SENSITIVE_LINK_CONFIGS = frozenset({
    "sasl.jaas.config", "ssl.key.password", "ssl.keystore.key", "ssl.keystore.password",
    "ssl.truststore.password",
})

_INT_CONFIGS = frozenset({
    "request.timeout.ms", "metadata.max.age.ms", "replica.fetch.max.bytes",
    "replica.fetch.response.max.bytes", "replica.fetch.min.bytes", "replica.fetch.wait.max.ms",
    "replica.fetch.backoff.ms", "topic.config.sync.ms", "consumer.offset.sync.ms",
})
_BOOL_CONFIGS = frozenset({"consumer.offset.sync.enable", "acl.sync.enable"})

#: Source topic configs a mirror topic copies (those the source sets on the topic itself) and
#: keeps in step: the ones that decide which records exist and how they may be read. Configs
#: about this cluster's own placement and replication (min.insync.replicas,
#: confluent.placement.constraints, unclean.leader.election.enable) stay the destination's.
MIRRORED_TOPIC_CONFIGS = frozenset({
    "cleanup.policy", "compression.type", "delete.retention.ms", "max.compaction.lag.ms",
    "max.message.bytes", "message.timestamp.type", "message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms", "min.compaction.lag.ms", "retention.bytes", "retention.ms",
    "segment.bytes", "segment.ms",
})


def validate_link_configs(configs: Mapping[str, str]) -> str | None:
    """None if ``configs`` make a usable link, else the message of an INVALID_CONFIG error."""
    for name, value in configs.items():
        if name not in LINK_CONFIG_DEFAULTS and name not in LINK_SECURITY_CONFIGS:
            return f"Unknown cluster link config {name!r}"
        if name in _INT_CONFIGS:
            try:
                if int(value) < 0:
                    raise ValueError
            except ValueError:
                return f"Invalid value {value!r} for cluster link config {name}: a non-negative integer"
        if name in _BOOL_CONFIGS and value.lower() not in ("true", "false"):
            return f"Invalid value {value!r} for cluster link config {name}: true or false"
    servers = configs.get("bootstrap.servers", "")
    if not servers.strip():
        return "Cluster link config bootstrap.servers is required"
    try:
        parse_bootstrap(servers)
    except ValueError as e:
        return str(e)
    protocol = (configs.get("security.protocol") or "PLAINTEXT").strip().upper()
    if protocol not in SECURITY_PROTOCOLS:
        return f"Invalid value {protocol!r} for cluster link config security.protocol: " \
               f"one of {', '.join(SECURITY_PROTOCOLS)}"
    if "SASL" in protocol:
        try:
            # The time only dates an OAUTHBEARER token, which is thrown away here.
            sasl_credentials_from_client_properties(configs, now_s=0)
        except JaasConfigError as e:
            return f"Invalid value for cluster link config sasl.jaas.config: {e}"
        except ValueError as e:
            return f"Invalid cluster link SASL settings: {e}"
    if configs.get("acl.sync.enable", "false").lower() == "true":
        return "acl.sync.enable=true is not supported: kafkapy links do not copy the source's ACLs yet"
    try:
        GroupFilter.parse(configs.get("consumer.offset.group.filters", ""))
    except ValueError as e:
        return f"Invalid consumer.offset.group.filters: {e}"
    return None


def described_link_configs(configs: Mapping[str, str]) -> list[tuple[str, str | None, bool]]:
    """A link's configs as described to anyone who asks: (name, value, is_sensitive), sorted,
    secrets with no value."""
    return [(k, None, True) if k in SENSITIVE_LINK_CONFIGS else (k, v, False) for k, v in sorted(configs.items())]


def parse_bootstrap(servers: str) -> list[tuple[str, int]]:
    """``host:port,host:port`` -> [(host, port)]; ValueError when malformed."""
    out = []
    for item in servers.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"Invalid bootstrap server {item!r}: host:port expected")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError("bootstrap.servers names no server")
    return out


@dataclass(frozen=True)
class LinkSettings:
    """A link's configs with defaults filled in, typed."""

    bootstrap: tuple[tuple[str, int], ...]
    client_id: str
    request_timeout_ms: int
    metadata_max_age_ms: int
    fetch_max_bytes: int
    fetch_response_max_bytes: int
    fetch_min_bytes: int
    fetch_wait_max_ms: int
    fetch_backoff_ms: int
    topic_config_sync_ms: int
    offset_sync_enable: bool
    offset_sync_ms: int
    group_filter: GroupFilter

    @classmethod
    def of(cls, configs: Mapping[str, str]) -> LinkSettings:
        def get(name: str) -> str:
            value = configs.get(name)
            if value is None:
                value = LINK_CONFIG_DEFAULTS[name]
            return value or ""

        return cls(
            bootstrap=tuple(parse_bootstrap(get("bootstrap.servers"))),
            client_id=get("client.id"),
            request_timeout_ms=int(get("request.timeout.ms")),
            metadata_max_age_ms=int(get("metadata.max.age.ms")),
            fetch_max_bytes=int(get("replica.fetch.max.bytes")),
            fetch_response_max_bytes=int(get("replica.fetch.response.max.bytes")),
            fetch_min_bytes=int(get("replica.fetch.min.bytes")),
            fetch_wait_max_ms=int(get("replica.fetch.wait.max.ms")),
            fetch_backoff_ms=int(get("replica.fetch.backoff.ms")),
            topic_config_sync_ms=int(get("topic.config.sync.ms")),
            offset_sync_enable=get("consumer.offset.sync.enable").lower() == "true",
            offset_sync_ms=int(get("consumer.offset.sync.ms")),
            group_filter=GroupFilter.parse(get("consumer.offset.group.filters")),
        )


@dataclass(frozen=True)
class _GroupRule:
    name: str
    prefixed: bool
    include: bool

    def matches(self, group: str) -> bool:
        if self.name == "*":
            return True
        return group.startswith(self.name) if self.prefixed else group == self.name


@dataclass(frozen=True)
class GroupFilter:
    """Which consumer groups' offsets a link syncs: Confluent's ``groupFilters`` JSON,
    ``{"groupFilters": [{"name": "*", "patternType": "LITERAL", "filterType": "INCLUDE"}]}``.
    A group is synced when an INCLUDE rule matches it and no EXCLUDE rule does; ``name`` "*"
    matches every group. No filter syncs nothing."""

    rules: tuple[_GroupRule, ...] = ()

    @classmethod
    def parse(cls, text: str) -> GroupFilter:
        if not text.strip():
            return cls()
        try:
            doc: Any = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"not JSON ({e.msg})") from None
        items = doc.get("groupFilters") if isinstance(doc, dict) else None
        if not isinstance(items, list):
            raise ValueError('a {"groupFilters": [...]} object expected')
        rules = []
        for item in items:
            if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
                raise ValueError("every group filter needs a non-empty name")
            pattern = str(item.get("patternType", "LITERAL")).upper()
            kind = str(item.get("filterType", "INCLUDE")).upper()
            if pattern not in ("LITERAL", "PREFIXED") or kind not in ("INCLUDE", "EXCLUDE"):
                raise ValueError(f"bad patternType/filterType in {item}")
            rules.append(_GroupRule(item["name"], pattern == "PREFIXED", kind == "INCLUDE"))
        return cls(tuple(rules))

    def __call__(self, group: str) -> bool:
        included = any(r.include and r.matches(group) for r in self.rules)
        return included and not any(not r.include and r.matches(group) for r in self.rules)


GroupPredicate = Callable[[str], bool]

__all__ = ["GroupFilter", "LINK_CONFIG_DEFAULTS", "LinkSettings", "LINK_SECURITY_CONFIGS",
           "MIRRORED_TOPIC_CONFIGS", "SENSITIVE_LINK_CONFIGS", "described_link_configs",
           "parse_bootstrap", "validate_link_configs"]
