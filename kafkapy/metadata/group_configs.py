"""Per-group configs (the GROUP config resource of KIP-848 and KIP-932) and the values a group runs
with.

A group's dynamic configs are ConfigRecords of resource type 32 in the metadata log, set with
IncrementalAlterConfigs for a group id whether or not that group exists. Every served key falls
back to a broker setting (its synonym, ``group.consumer.*``/``group.share.*``) or to a fixed
default. :func:`group_config` is what the consumer-group and share-group coordinators and the
share-fetch path read: the group's value else the broker's, and, as Kafka 4.4's
``GroupConfig.evaluate`` does, kept within the broker's current min/max (the bounds are static
broker settings, so a restart may have narrowed them since the value was stored).

Kafka 4.4 also has ``consumer.assignment.interval.ms``, ``share.assignment.interval.ms``,
``*.assignor.offload.enable``, ``share.renew.acknowledge.enable``, the ``streams.*`` keys and
``errors.deadletterqueue.*``. kafkapy acts on none of them (4.2's feature set), so they are not
served: setting one is refused as an unknown group config.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from kafkapy.metadata.image import MetadataImage

#: ConfigResource.Type GROUP (DescribeConfigs, IncrementalAlterConfigs, ConfigRecord).
RESOURCE_GROUP = 32

CONSUMER_SESSION_TIMEOUT_MS = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT_INTERVAL_MS = "consumer.heartbeat.interval.ms"
SHARE_SESSION_TIMEOUT_MS = "share.session.timeout.ms"
SHARE_HEARTBEAT_INTERVAL_MS = "share.heartbeat.interval.ms"
SHARE_RECORD_LOCK_DURATION_MS = "share.record.lock.duration.ms"
SHARE_DELIVERY_COUNT_LIMIT = "share.delivery.count.limit"
SHARE_PARTITION_MAX_RECORD_LOCKS = "share.partition.max.record.locks"
SHARE_AUTO_OFFSET_RESET = "share.auto.offset.reset"
SHARE_ISOLATION_LEVEL = "share.isolation.level"

#: Each served group config and the broker setting it defaults to (Kafka's
#: GroupConfig.ALL_GROUP_CONFIG_SYNONYMS); None: a fixed default (``FIXED_DEFAULTS``).
GROUP_CONFIG_SYNONYMS: Mapping[str, str | None] = {
    CONSUMER_SESSION_TIMEOUT_MS: "group.consumer.session.timeout.ms",
    CONSUMER_HEARTBEAT_INTERVAL_MS: "group.consumer.heartbeat.interval.ms",
    SHARE_SESSION_TIMEOUT_MS: "group.share.session.timeout.ms",
    SHARE_HEARTBEAT_INTERVAL_MS: "group.share.heartbeat.interval.ms",
    SHARE_RECORD_LOCK_DURATION_MS: "group.share.record.lock.duration.ms",
    SHARE_DELIVERY_COUNT_LIMIT: "group.share.delivery.count.limit",
    SHARE_PARTITION_MAX_RECORD_LOCKS: "group.share.partition.max.record.locks",
    SHARE_AUTO_OFFSET_RESET: None,
    SHARE_ISOLATION_LEVEL: None,
}
FIXED_DEFAULTS: Mapping[str, str] = {
    SHARE_AUTO_OFFSET_RESET: "latest",
    SHARE_ISOLATION_LEVEL: "read_uncommitted",
}

#: The broker settings bounding each integer group config, in the order Kafka checks them.
GROUP_CONFIG_BOUNDS: Mapping[str, tuple[str, str]] = {
    CONSUMER_HEARTBEAT_INTERVAL_MS: ("group.consumer.min.heartbeat.interval.ms",
                                     "group.consumer.max.heartbeat.interval.ms"),
    CONSUMER_SESSION_TIMEOUT_MS: ("group.consumer.min.session.timeout.ms",
                                  "group.consumer.max.session.timeout.ms"),
    SHARE_HEARTBEAT_INTERVAL_MS: ("group.share.min.heartbeat.interval.ms",
                                  "group.share.max.heartbeat.interval.ms"),
    SHARE_SESSION_TIMEOUT_MS: ("group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
    SHARE_RECORD_LOCK_DURATION_MS: ("group.share.min.record.lock.duration.ms",
                                    "group.share.max.record.lock.duration.ms"),
    SHARE_DELIVERY_COUNT_LIMIT: ("group.share.min.delivery.count.limit", "group.share.max.delivery.count.limit"),
    SHARE_PARTITION_MAX_RECORD_LOCKS: ("group.share.min.partition.max.record.locks",
                                       "group.share.max.partition.max.record.locks"),
}

#: (session key, heartbeat key): a session must outlast the heartbeat interval.
SESSION_HEARTBEAT_PAIRS: tuple[tuple[str, str], ...] = (
    (CONSUMER_SESSION_TIMEOUT_MS, CONSUMER_HEARTBEAT_INTERVAL_MS),
    (SHARE_SESSION_TIMEOUT_MS, SHARE_HEARTBEAT_INTERVAL_MS),
)

READ_UNCOMMITTED, READ_COMMITTED = 0, 1
_ISOLATION_LEVELS = {"read_uncommitted": READ_UNCOMMITTED, "read_committed": READ_COMMITTED}


class BrokerSettings(Protocol):
    """The broker's typed settings (``kafkapy.config.BrokerConfig`` is one)."""

    def get_int(self, name: str) -> int: ...


@dataclass(frozen=True)
class ShareAutoOffsetReset:
    """Where a share partition's start offset begins: ``earliest``, ``latest`` or
    ``by_duration`` (the first offset at or after now minus ``duration_ms``)."""

    strategy: str
    duration_ms: int = 0


# Java's Duration.parse for the non-negative form Kafka accepts: PnDTnHnMn.nS.
_ISO_DURATION_RE = re.compile(r"P(?:(\d+)D)?(?:T(?!$)(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)(?:[.,](\d{1,9}))?S)?)?",
                              re.IGNORECASE)
_BY_DURATION = "by_duration:"


def parse_share_auto_offset_reset(text: str) -> ShareAutoOffsetReset | None:
    """``share.auto.offset.reset`` parsed, or None when Kafka would refuse it."""
    if text in ("earliest", "latest"):
        return ShareAutoOffsetReset(text)
    if not text.startswith(_BY_DURATION):
        return None
    duration = text[len(_BY_DURATION):]
    match = _ISO_DURATION_RE.fullmatch(duration)
    if match is None or duration.upper() == "P":
        return None
    days, hours, minutes, seconds, fraction = match.groups()
    millis = (int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes or 0) * 60
              + int(seconds or 0)) * 1000 + int((fraction or "0").ljust(3, "0")[:3])
    return ShareAutoOffsetReset("by_duration", millis)


@dataclass(frozen=True)
class GroupConfig:
    """The values one group runs with (its overrides, else the broker's settings)."""

    consumer_session_timeout_ms: int
    consumer_heartbeat_interval_ms: int
    share_session_timeout_ms: int
    share_heartbeat_interval_ms: int
    share_record_lock_duration_ms: int
    share_delivery_count_limit: int
    share_partition_max_record_locks: int
    share_auto_offset_reset: ShareAutoOffsetReset
    #: 0 read_uncommitted, 1 read_committed (Fetch's IsolationLevel numbers).
    share_isolation_level: int


def group_config(image: MetadataImage, broker: BrokerSettings, group_id: str) -> GroupConfig:
    """The effective configs of ``group_id``: its dynamic GROUP configs in ``image``, else the
    broker's values, integers kept within the broker's min/max. The group need not exist."""
    overrides = image.configs.get(RESOURCE_GROUP, group_id)

    def number(key: str) -> int:
        synonym = GROUP_CONFIG_SYNONYMS[key]
        assert synonym is not None
        raw = overrides.get(key)
        try:
            value = int(raw) if raw is not None else broker.get_int(synonym)
        except ValueError:  # (validated when set; a hand-written record is not trusted)
            value = broker.get_int(synonym)
        low, high = (broker.get_int(k) for k in GROUP_CONFIG_BOUNDS[key])
        return min(max(value, low), high)

    reset = parse_share_auto_offset_reset(overrides.get(SHARE_AUTO_OFFSET_RESET) or "") \
        or ShareAutoOffsetReset(FIXED_DEFAULTS[SHARE_AUTO_OFFSET_RESET])
    isolation = _ISOLATION_LEVELS.get(overrides.get(SHARE_ISOLATION_LEVEL) or "", READ_UNCOMMITTED)
    return GroupConfig(
        consumer_session_timeout_ms=number(CONSUMER_SESSION_TIMEOUT_MS),
        consumer_heartbeat_interval_ms=number(CONSUMER_HEARTBEAT_INTERVAL_MS),
        share_session_timeout_ms=number(SHARE_SESSION_TIMEOUT_MS),
        share_heartbeat_interval_ms=number(SHARE_HEARTBEAT_INTERVAL_MS),
        share_record_lock_duration_ms=number(SHARE_RECORD_LOCK_DURATION_MS),
        share_delivery_count_limit=number(SHARE_DELIVERY_COUNT_LIMIT),
        share_partition_max_record_locks=number(SHARE_PARTITION_MAX_RECORD_LOCKS),
        share_auto_offset_reset=reset,
        share_isolation_level=isolation,
    )


__all__ = [
    "CONSUMER_HEARTBEAT_INTERVAL_MS", "CONSUMER_SESSION_TIMEOUT_MS", "FIXED_DEFAULTS", "GROUP_CONFIG_BOUNDS",
    "GROUP_CONFIG_SYNONYMS", "READ_COMMITTED", "READ_UNCOMMITTED", "RESOURCE_GROUP", "SESSION_HEARTBEAT_PAIRS",
    "SHARE_AUTO_OFFSET_RESET", "SHARE_DELIVERY_COUNT_LIMIT", "SHARE_HEARTBEAT_INTERVAL_MS",
    "SHARE_ISOLATION_LEVEL", "SHARE_PARTITION_MAX_RECORD_LOCKS", "SHARE_RECORD_LOCK_DURATION_MS",
    "SHARE_SESSION_TIMEOUT_MS", "BrokerSettings", "GroupConfig", "ShareAutoOffsetReset", "group_config",
    "parse_share_auto_offset_reset",
]
