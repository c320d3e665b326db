"""The group coordinators' settings, with Kafka 4.4's names, types, defaults and validators: the
broker's ``group.consumer.*`` (KIP-848), ``group.share.*`` and ``share.coordinator.*`` (KIP-932)
keys and the cross-checks Kafka's GroupCoordinatorConfig and ShareGroupConfig make at startup;
and the per-group configs (the GROUP resource) with the checks Kafka's GroupConfig.validate makes
against the broker's bounds.

Not carried over: ``group.streams.*`` (streams groups are not served) and
``errors.deadletterqueue.*`` (4.4's share-group dead-letter queue). Of the keys below, kafkapy
reads the session, heartbeat, size, assignor, migration-policy, share-record and share-coordinator
topic settings; the coordinator thread counts, append linger, buffer caches and the 4.4
assignment batching ones (``*.assignment.interval.ms``, ``*.assignor.offload.enable``) are
accepted with Kafka's validation but have no effect.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kafkapy.config_defs import ConfigDef, ConfigType, config_defs
from kafkapy.config_validators import (
    case_insensitive_one_of,
    in_range,
    known_names,
    non_empty,
    one_of,
    share_auto_offset_reset,
)
from kafkapy.metadata import group_configs as gc
from kafkapy.protocol.errors import ErrorCode, KafkaError

T = ConfigType


def _int(name: str, default: int, doc: str, low: int | None = 1, high: int | None = None,
         internal: bool = False) -> ConfigDef:
    return ConfigDef(name, T.INT, str(default), doc, None if low is None else in_range(low, high),
                     internal=internal)


def _member_timeouts(kind: str) -> list[ConfigDef]:
    """group.<kind>.session.timeout.ms and heartbeat.interval.ms with their min/max: the same
    defaults for consumer and share groups."""
    return [
        _int(f"group.{kind}.session.timeout.ms", 45000, f"Member session timeout of {kind} groups."),
        _int(f"group.{kind}.min.session.timeout.ms", 45000, f"Smallest {kind}.session.timeout.ms a group may set."),
        _int(f"group.{kind}.max.session.timeout.ms", 60000, f"Largest {kind}.session.timeout.ms a group may set."),
        _int(f"group.{kind}.heartbeat.interval.ms", 5000, f"Heartbeat interval of {kind} groups."),
        _int(f"group.{kind}.min.heartbeat.interval.ms", 5000, f"Smallest {kind}.heartbeat.interval.ms."),
        _int(f"group.{kind}.max.heartbeat.interval.ms", 15000, f"Largest {kind}.heartbeat.interval.ms."),
    ]


def _assignment_batching(kind: str) -> list[ConfigDef]:
    """Kafka 4.4's assignment batching of <kind> groups: accepted, no effect (4.2 assigns in the
    heartbeat)."""
    return [
        _int(f"group.{kind}.assignment.interval.ms", 1000, "Assignment batching (Kafka 4.4; no effect).", 0),
        _int(f"group.{kind}.min.assignment.interval.ms", 0, "Smallest assignment interval (no effect).", 0),
        _int(f"group.{kind}.max.assignment.interval.ms", 15000, "Largest assignment interval (no effect).", 0),
        ConfigDef(f"group.{kind}.assignor.offload.enable", T.BOOLEAN, "true",
                  "Assignment off the coordinator thread (no effect).", internal=True),
    ]


GROUP_COORDINATOR_CONFIGS: dict[str, ConfigDef] = config_defs(
    # -- the group coordinator (GroupCoordinatorConfig) --
    ConfigDef("group.coordinator.rebalance.protocols", T.LIST, "classic,consumer,streams",
              "Group protocols the coordinator serves (deprecated in Kafka 4.4; streams is not served).",
              non_empty(one_of("consumer", "classic", "share", "streams"))),
    _int("group.coordinator.threads", 4, "Coordinator threads (no effect: one event loop)."),
    _int("group.coordinator.background.threads", 2, "Coordinator background threads (no effect)."),
    _int("group.coordinator.append.linger.ms", -1, "Write accumulation before a flush (no effect).", -1),
    _int("group.coordinator.cached.buffer.max.bytes", 1048588, "Largest write buffer kept for reuse (no effect).",
         524288),
    # -- KIP-848 consumer groups --
    *_member_timeouts("consumer"),
    _int("group.consumer.max.size", 2147483647, "Most members of one consumer group."),
    ConfigDef("group.consumer.assignors", T.LIST, "uniform,range",
              "Server-side assignors; the first is the default.",
              non_empty(known_names("uniform", "range"))),
    ConfigDef("group.consumer.migration.policy", T.STRING, "bidirectional",
              "Converting non-empty groups between the classic and consumer protocols.",
              case_insensitive_one_of("DISABLED", "DOWNGRADE", "UPGRADE", "BIDIRECTIONAL")),
    _int("group.consumer.regex.refresh.interval.ms", 600000, "How often subscribed regexes are re-resolved.",
         10000, internal=True),
    *_assignment_batching("consumer"),
    # -- KIP-932 share groups --
    *_member_timeouts("share"),
    _int("group.share.max.size", 200, "Most members of one share group.", 1, 1000),
    ConfigDef("group.share.assignors", T.LIST, "simple", "The share-group assignor.",
              non_empty(known_names("simple"))),
    _int("group.share.initialize.retry.interval.ms", 30000, "Retry of a failed share-state initialization.",
         internal=True),
    *_assignment_batching("share"),
    # (ShareGroupConfig)
    _int("group.share.record.lock.duration.ms", 30000, "How long an acquired record stays locked.",
         1000, 3600000),
    _int("group.share.min.record.lock.duration.ms", 15000, "Smallest share.record.lock.duration.ms.",
         1000, 30000),
    _int("group.share.max.record.lock.duration.ms", 60000, "Largest share.record.lock.duration.ms.",
         30000, 3600000),
    _int("group.share.delivery.count.limit", 5, "Deliveries before a record is archived.", 2, 10),
    _int("group.share.min.delivery.count.limit", 2, "Smallest share.delivery.count.limit.", 2, 5),
    _int("group.share.max.delivery.count.limit", 10, "Largest share.delivery.count.limit.", 5, 25),
    _int("group.share.partition.max.record.locks", 2000, "Most acquired records per share partition.",
         100, 10000),
    _int("group.share.min.partition.max.record.locks", 100, "Smallest share.partition.max.record.locks.",
         100, 2000),
    _int("group.share.max.partition.max.record.locks", 4000, "Largest share.partition.max.record.locks.",
         2000, 10000),
    _int("group.share.max.share.sessions", 2000, "Most share sessions a broker keeps."),
    ConfigDef("share.fetch.purgatory.purge.interval.requests", T.INT, "1000",
              "Completed share fetches between purges of the delayed-fetch purgatory."),
    # -- the share coordinator (ShareCoordinatorConfig) --
    _int("share.coordinator.state.topic.num.partitions", 50, "Partitions of __share_group_state."),
    ConfigDef("share.coordinator.state.topic.replication.factor", T.SHORT, "3",
              "Replication factor of __share_group_state.", in_range(1)),
    ConfigDef("share.coordinator.state.topic.min.isr", T.SHORT, "2", "min.insync.replicas of __share_group_state.",
              in_range(1)),
    _int("share.coordinator.state.topic.segment.bytes", 104857600, "segment.bytes of __share_group_state."),
    _int("share.coordinator.state.topic.compression.codec", 0, "Compression of share-state records.", None),
    _int("share.coordinator.state.topic.prune.interval.ms", 300000, "How often old share-state records are pruned.",
         internal=True),
    _int("share.coordinator.snapshot.update.records.per.snapshot", 500, "Update records between snapshots.", 0, 500),
    _int("share.coordinator.cold.partition.snapshot.interval.ms", 300000,
         "Snapshot interval of share partitions without writes.", internal=True),
    _int("share.coordinator.load.buffer.size", 5242880, "Read size when loading __share_group_state."),
    _int("share.coordinator.write.timeout.ms", 5000, "How long a share-state write waits for its replicas."),
    _int("share.coordinator.threads", 1, "Share coordinator threads (no effect)."),
    _int("share.coordinator.append.linger.ms", -1, "Write accumulation before a flush (no effect).", -1),
    _int("share.coordinator.cached.buffer.max.bytes", 1048588, "Largest write buffer kept for reuse (no effect).",
         524288),
)


# Kafka's GroupCoordinatorConfig / ShareGroupConfig `require`s, in order: (left, relation, right).
_GE, _LE, _LT = "must be greater than or equal to", "must be less than or equal to", "must be less than"
_STARTUP_CHECKS: tuple[tuple[str, str, str], ...] = tuple(
    rule
    for kind in ("consumer", "share")
    for rule in (
        (f"group.{kind}.max.heartbeat.interval.ms", _GE, f"group.{kind}.min.heartbeat.interval.ms"),
        (f"group.{kind}.heartbeat.interval.ms", _GE, f"group.{kind}.min.heartbeat.interval.ms"),
        (f"group.{kind}.heartbeat.interval.ms", _LE, f"group.{kind}.max.heartbeat.interval.ms"),
        (f"group.{kind}.max.session.timeout.ms", _GE, f"group.{kind}.min.session.timeout.ms"),
        (f"group.{kind}.session.timeout.ms", _GE, f"group.{kind}.min.session.timeout.ms"),
        (f"group.{kind}.session.timeout.ms", _LE, f"group.{kind}.max.session.timeout.ms"),
        (f"group.{kind}.heartbeat.interval.ms", _LT, f"group.{kind}.session.timeout.ms"),
        (f"group.{kind}.max.assignment.interval.ms", _GE, f"group.{kind}.min.assignment.interval.ms"),
        (f"group.{kind}.assignment.interval.ms", _GE, f"group.{kind}.min.assignment.interval.ms"),
        (f"group.{kind}.assignment.interval.ms", _LE, f"group.{kind}.max.assignment.interval.ms"),
    )
) + tuple(
    rule
    for setting in ("record.lock.duration.ms", "delivery.count.limit", "partition.max.record.locks")
    for rule in (
        (f"group.share.{setting}", _GE, f"group.share.min.{setting}"),
        (f"group.share.max.{setting}", _GE, f"group.share.{setting}"),
    )
)


def group_coordinator_config_problem(get_int: Callable[[str], int]) -> str | None:
    """The first of Kafka's startup cross-checks the settings fail (min <= default <= max for
    each bounded setting, heartbeat below session), in Kafka's words, or None."""
    for left, relation, right in _STARTUP_CHECKS:
        a, b = get_int(left), get_int(right)
        ok = a >= b if relation == _GE else a <= b if relation == _LE else a < b
        if not ok:
            return f"{left} {relation} {right}"
    return None


def group_settings(props: Mapping[str, str]) -> Callable[[str], int]:
    """``get_int`` over the group coordinator keys of a node's static ``props`` (Kafka's
    defaults for the rest): what a controller checks group configs against."""
    def get_int(name: str) -> int:
        cdef = GROUP_COORDINATOR_CONFIGS[name]
        value = cdef.parse(props[name]) if name in props else cdef.default_value
        assert isinstance(value, int)
        return value

    return get_int


# -- the GROUP config resource ------------------------------------------------------------------

_GROUP_DOCS = {
    gc.CONSUMER_SESSION_TIMEOUT_MS: "How long a consumer-protocol member may go without a heartbeat before it "
                                    "is removed.",
    gc.CONSUMER_HEARTBEAT_INTERVAL_MS: "How often members of this consumer group are told to heartbeat.",
    gc.SHARE_SESSION_TIMEOUT_MS: "How long a share-group member may go without a heartbeat before it is removed.",
    gc.SHARE_HEARTBEAT_INTERVAL_MS: "How often members of this share group are told to heartbeat.",
    gc.SHARE_RECORD_LOCK_DURATION_MS: "How long a record delivered to a member stays locked to it before it "
                                      "is redelivered.",
    gc.SHARE_DELIVERY_COUNT_LIMIT: "Deliveries of one record to this share group before it is archived.",
    gc.SHARE_PARTITION_MAX_RECORD_LOCKS: "Most records of one partition this share group may hold acquired at once.",
    gc.SHARE_AUTO_OFFSET_RESET: "Where a share partition's first offset is when the group starts on it: earliest, "
                                "latest or by_duration:<ISO-8601 duration> back from now.",
    gc.SHARE_ISOLATION_LEVEL: "Whether the share group delivers only committed transactional records "
                              "(read_committed) or every record (read_uncommitted).",
}
# The static ranges of Kafka's GroupConfig.CONFIG_DEF (the broker's min/max are checked after).
_GROUP_STATIC_MIN = {
    gc.CONSUMER_SESSION_TIMEOUT_MS: 1, gc.CONSUMER_HEARTBEAT_INTERVAL_MS: 1, gc.SHARE_SESSION_TIMEOUT_MS: 1,
    gc.SHARE_HEARTBEAT_INTERVAL_MS: 1, gc.SHARE_RECORD_LOCK_DURATION_MS: 1000, gc.SHARE_DELIVERY_COUNT_LIMIT: 2,
    gc.SHARE_PARTITION_MAX_RECORD_LOCKS: 100,
}

#: The served GROUP configs; an integer's default is the broker synonym's Kafka default.
GROUP_CONFIGS: dict[str, ConfigDef] = config_defs(*(
    ConfigDef(name, T.INT, GROUP_COORDINATOR_CONFIGS[synonym].default, _GROUP_DOCS[name],
              in_range(_GROUP_STATIC_MIN[name]))
    if synonym is not None else
    ConfigDef(name, T.STRING, gc.FIXED_DEFAULTS[name], _GROUP_DOCS[name],
              share_auto_offset_reset if name == gc.SHARE_AUTO_OFFSET_RESET
              else one_of("read_committed", "read_uncommitted"))
    for name, synonym in gc.GROUP_CONFIG_SYNONYMS.items()
))


def validate_group_configs(configs: Mapping[str, str | None], get_int: Callable[[str], int]) -> None:
    """A group's resulting dynamic configs as Kafka's GroupConfig.validate checks them against
    the broker's settings (``get_int``): unknown names, then types and static ranges, then the
    broker's min/max, then session above heartbeat (effective values). Raises
    KafkaError(INVALID_CONFIG) with Kafka's message."""
    for name in configs:
        if name not in GROUP_CONFIGS:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown group config name: {name}")
    nulls = [name for name, value in configs.items() if value is None]
    if nulls:
        raise KafkaError(ErrorCode.INVALID_CONFIG,
                         "Null value not supported for group configs: " + ",".join(nulls))
    parsed = {name: GROUP_CONFIGS[name].parse(str(value)) for name, value in configs.items()}
    for name, (low_key, high_key) in gc.GROUP_CONFIG_BOUNDS.items():
        value = parsed.get(name)
        if isinstance(value, int):
            low, high = get_int(low_key), get_int(high_key)
            if not low <= value <= high:
                raise KafkaError(ErrorCode.INVALID_CONFIG,
                                 f"{name} must be in the range {low} to {high} inclusive.")
    for session_key, heartbeat_key in gc.SESSION_HEARTBEAT_PAIRS:
        session, heartbeat = (parsed.get(k) for k in (session_key, heartbeat_key))
        if session is None and heartbeat is None:
            continue
        effective = [v if isinstance(v, int) else get_int(str(gc.GROUP_CONFIG_SYNONYMS[k]))
                     for k, v in ((session_key, session), (heartbeat_key, heartbeat))]
        if effective[0] <= effective[1]:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"{session_key} must be greater than {heartbeat_key}")


__all__ = ["GROUP_CONFIGS", "GROUP_COORDINATOR_CONFIGS", "group_coordinator_config_problem",
           "group_settings", "validate_group_configs"]
