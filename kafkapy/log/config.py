"""Topic-level log configuration: Kafka's names and defaults.

``LogConfig`` carries every topic config that Kafka defines (names as in Kafka's
``TopicConfig``), typed, with Kafka's defaults. ``from_props`` takes the string map that
CreateTopics / AlterConfigs / the metadata log carry and applies it over a base config (the broker
defaults), rejecting unknown names and bad values with ``KafkaError(INVALID_CONFIG)``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable

from kafkapy.protocol.errors import ErrorCode, KafkaError

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1


def _bool(v: str) -> bool:
    s = v.strip().lower()
    if s == "true":
        return True
    if s == "false":
        return False
    raise ValueError(f"expected true or false, got {v!r}")


def _list(v: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in v.split(",") if p.strip())


def _cfg(name: str, default: Any, parse: Callable[[str], Any], *, minimum: int | None = None,
         choices: tuple[str, ...] | None = None) -> Any:
    return field(default=default, metadata={
        "name": name, "parse": parse, "min": minimum, "choices": choices})


@dataclass(frozen=True)
class LogConfig:
    """One topic's log settings; attribute = Kafka config name with '.' → '_'."""

    cleanup_policy: tuple[str, ...] = _cfg("cleanup.policy", ("delete",), _list)
    compression_type: str = _cfg("compression.type", "producer", str, choices=(
        "uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"))
    compression_gzip_level: int = _cfg("compression.gzip.level", -1, int)
    compression_lz4_level: int = _cfg("compression.lz4.level", 9, int)
    compression_zstd_level: int = _cfg("compression.zstd.level", 3, int)
    # Read by the controller (placement) and the leader (observer promotion), not by the log.
    confluent_placement_constraints: str = _cfg("confluent.placement.constraints", "", str)
    delete_retention_ms: int = _cfg("delete.retention.ms", 86_400_000, int, minimum=0)
    file_delete_delay_ms: int = _cfg("file.delete.delay.ms", 60_000, int, minimum=0)
    flush_messages: int = _cfg("flush.messages", LONG_MAX, int, minimum=1)
    flush_ms: int = _cfg("flush.ms", LONG_MAX, int, minimum=0)
    follower_replication_throttled_replicas: tuple[str, ...] = _cfg(
        "follower.replication.throttled.replicas", (), _list)
    index_interval_bytes: int = _cfg("index.interval.bytes", 4096, int, minimum=0)
    leader_replication_throttled_replicas: tuple[str, ...] = _cfg(
        "leader.replication.throttled.replicas", (), _list)
    local_retention_bytes: int = _cfg("local.retention.bytes", -2, int, minimum=-2)
    local_retention_ms: int = _cfg("local.retention.ms", -2, int, minimum=-2)
    max_compaction_lag_ms: int = _cfg("max.compaction.lag.ms", LONG_MAX, int, minimum=1)
    max_message_bytes: int = _cfg("max.message.bytes", 1_048_588, int, minimum=0)
    message_timestamp_after_max_ms: int = _cfg(
        "message.timestamp.after.max.ms", 3_600_000, int, minimum=0)
    message_timestamp_before_max_ms: int = _cfg(
        "message.timestamp.before.max.ms", LONG_MAX, int, minimum=0)
    message_timestamp_type: str = _cfg(
        "message.timestamp.type", "CreateTime", str, choices=("CreateTime", "LogAppendTime"))
    min_cleanable_dirty_ratio: float = _cfg("min.cleanable.dirty.ratio", 0.5, float)
    min_compaction_lag_ms: int = _cfg("min.compaction.lag.ms", 0, int, minimum=0)
    min_insync_replicas: int = _cfg("min.insync.replicas", 1, int, minimum=1)
    preallocate: bool = _cfg("preallocate", False, _bool)
    remote_storage_enable: bool = _cfg("remote.storage.enable", False, _bool)
    remote_log_copy_disable: bool = _cfg("remote.log.copy.disable", False, _bool)
    remote_log_delete_on_disable: bool = _cfg("remote.log.delete.on.disable", False, _bool)
    retention_bytes: int = _cfg("retention.bytes", -1, int)
    retention_ms: int = _cfg("retention.ms", 604_800_000, int, minimum=-1)
    # Kafka's minimum is 14 bytes (LegacyRecord.RECORD_OVERHEAD_V0); it needs room for one batch.
    segment_bytes: int = _cfg("segment.bytes", 1_073_741_824, int, minimum=14)
    segment_index_bytes: int = _cfg("segment.index.bytes", 10_485_760, int, minimum=4)
    segment_jitter_ms: int = _cfg("segment.jitter.ms", 0, int, minimum=0)
    segment_ms: int = _cfg("segment.ms", 604_800_000, int, minimum=1)
    unclean_leader_election_enable: bool = _cfg("unclean.leader.election.enable", False, _bool)
    # Kept for configs written by older Kafka versions; they have no effect on magic-2 logs.
    message_downconversion_enable: bool = _cfg("message.downconversion.enable", True, _bool)

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @classmethod
    def names(cls) -> list[str]:
        """Every Kafka config name this class carries."""
        return [f.metadata["name"] for f in dataclasses.fields(cls)]

    def to_props(self) -> dict[str, str]:
        """Kafka-style string values (as DescribeConfigs shows them)."""
        out: dict[str, str] = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, bool):
                s = "true" if v else "false"
            elif isinstance(v, tuple):
                s = ",".join(v)
            else:
                s = str(v)
            out[f.metadata["name"]] = s
        return out

    @classmethod
    def from_props(cls, props: dict[str, str], base: LogConfig | None = None, *,
                   ignore_unknown: bool = False) -> LogConfig:
        """Apply Kafka-named string ``props`` over ``base`` (Kafka's defaults when None)."""
        by_name = {f.metadata["name"]: f for f in dataclasses.fields(cls)}
        changes: dict[str, Any] = {}
        for name, raw in props.items():
            f = by_name.get(name)
            if f is None:
                if ignore_unknown:
                    continue
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
            try:
                value = f.metadata["parse"](raw.strip() if isinstance(raw, str) else str(raw))
            except ValueError as e:
                raise KafkaError(ErrorCode.INVALID_CONFIG,
                                 f"Invalid value {raw} for configuration {name}: {e}") from None
            lo = f.metadata["min"]
            if lo is not None and value < lo:
                raise KafkaError(ErrorCode.INVALID_CONFIG,
                                 f"Invalid value {raw} for configuration {name}: "
                                 f"Value must be at least {lo}")
            choices = f.metadata["choices"]
            if choices is not None and value not in choices:
                raise KafkaError(ErrorCode.INVALID_CONFIG,
                                 f"Invalid value {raw} for configuration {name}: "
                                 f"String must be one of: {', '.join(choices)}")
            if name == "cleanup.policy":
                for p in value:
                    if p not in ("delete", "compact"):
                        raise KafkaError(ErrorCode.INVALID_CONFIG,
                                         f"Invalid value {raw} for configuration {name}")
            changes[f.name] = value
        return dataclasses.replace(base or cls(), **changes)
