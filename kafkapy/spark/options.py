"""The options of the ``kafkapy`` Spark source and sink, named and checked as Spark's built-in
Kafka connector names and checks them, so switching ``format("kafka")`` to
``format("kafkapy")`` changes nothing else.

Pure parsing: a mapping of strings in, frozen dataclasses out, ``ValueError`` with the
connector's reason for anything it would refuse.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: Offsets in offset JSON that mean "the partition's earliest / latest offset", as in Spark.
EARLIEST = -2
LATEST = -1

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class Subscription:
    """Which partitions to read: exactly one of a topic list, a pattern or explicit partitions."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assign: tuple[TopicPartition, ...] = ()

    def matches(self, topic: str) -> bool:
        if self.pattern is not None:
            # Java's Pattern.matcher(topic).matches(): the whole name.
            return re.fullmatch(self.pattern, topic) is not None
        return topic in self.topics


@dataclass(frozen=True)
class OffsetSpec:
    """Where a range starts or ends: ``earliest``/``latest`` everywhere, per-partition offsets
    (with -2/-1 for earliest/latest), or timestamps (one for all, or per partition)."""

    kind: str  # "earliest" | "latest" | "offsets" | "timestamp" | "timestamps"
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamp: int | None = None

    @classmethod
    def earliest(cls) -> OffsetSpec:
        return cls("earliest")

    @classmethod
    def latest(cls) -> OffsetSpec:
        return cls("latest")


@dataclass(frozen=True)
class SourceOptions:
    """What the source reads and how (Spark's built-in option names in the docstrings)."""

    bootstrap_servers: str
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    fail_on_data_loss: bool = True
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    include_headers: bool = False
    read_committed: bool = False
    #: startingOffsetsByTimestampStrategy: what a timestamp with no later record starts at.
    timestamp_strategy_latest: bool = False
    poll_timeout_ms: int = 120_000
    client_id: str = "kafkapy-spark"


@dataclass(frozen=True)
class SinkOptions:
    """Where the sink writes: the default ``topic`` (a ``topic`` column wins) and the producer."""

    bootstrap_servers: str
    topic: str | None = None
    acks: int = -1
    compression: str = "none"
    batch_bytes: int = 1 << 20
    request_timeout_ms: int = 30_000
    client_id: str = "kafkapy-spark"
    #: how long a write waits for its topic to appear (auto-created or not): max.block.ms
    max_block_ms: int = 60_000


def _get(options: Mapping[str, str], name: str) -> str | None:
    # Spark hands data sources a case-insensitive map; accept any mapping the same way.
    lowered = name.lower()
    for key, value in options.items():
        if key.lower() == lowered:
            return value
    return None


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    value = _get(options, name)
    if value is None:
        return default
    if value.strip().lower() not in ("true", "false"):
        raise ValueError(f"option '{name}' must be true or false, not {value!r}")
    return value.strip().lower() == "true"


def _positive_int(options: Mapping[str, str], name: str) -> int | None:
    value = _get(options, name)
    if value is None:
        return None
    try:
        n = int(value)
    except ValueError:
        raise ValueError(f"option '{name}' must be a positive integer, not {value!r}") from None
    if n <= 0:
        raise ValueError(f"option '{name}' must be positive, not {n}")
    return n


def bootstrap_servers(options: Mapping[str, str]) -> str:
    value = _get(options, "kafka.bootstrap.servers")
    if not value:
        raise ValueError("option 'kafka.bootstrap.servers' must be specified for configuring "
                         "Kafka consumer and producer")
    return value


def parse_bootstrap(servers: str) -> list[tuple[str, int]]:
    """``host:port,host:port`` as (host, port) pairs ("[::1]:9092" for IPv6 hosts)."""
    out = []
    for entry in servers.split(","):
        entry = entry.strip()
        if not entry:
            continue
        host, sep, port = entry.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"bootstrap server {entry!r} is not host:port")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError("no bootstrap servers given")
    return out


def parse_subscription(options: Mapping[str, str]) -> Subscription:
    given = {name: _get(options, name) for name in ("subscribe", "subscribePattern", "assign")}
    present = [name for name, value in given.items() if value is not None]
    if len(present) != 1:
        raise ValueError("exactly one of the options 'subscribe', 'subscribePattern' and "
                         f"'assign' must be specified, not {present or 'none'}")
    name = present[0]
    value = given[name] or ""
    if name == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise ValueError("no topics to subscribe to in option 'subscribe'")
        return Subscription(topics=topics)
    if name == "subscribePattern":
        if not value.strip():
            raise ValueError("pattern to subscribe is empty in option 'subscribePattern'")
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"option 'subscribePattern' is not a valid pattern: {exc}") from None
        return Subscription(pattern=value)
    try:
        parsed = json.loads(value)
        pairs = tuple((str(t), int(p)) for t, parts in parsed.items() for p in parts)
    except (ValueError, AttributeError, TypeError):
        raise ValueError(f"option 'assign' must be JSON like {{\"topicA\":[0,1]}}, not {value!r}") \
            from None
    if not pairs:
        raise ValueError("no topic partitions to assign in option 'assign'")
    return Subscription(assign=pairs)


def _offsets_json(name: str, value: str) -> dict[TopicPartition, int]:
    try:
        parsed = json.loads(value)
        return {(str(topic), int(p)): int(off)
                for topic, parts in parsed.items() for p, off in parts.items()}
    except (ValueError, AttributeError, TypeError):
        raise ValueError(f"option '{name}' must be \"earliest\", \"latest\" or JSON like "
                         f"{{\"topicA\":{{\"0\":23,\"1\":-2}}}}, not {value!r}") from None


def parse_offset_spec(options: Mapping[str, str], side: str, default: OffsetSpec) -> OffsetSpec:
    """``side`` is "starting" or "ending". Timestamps win over offsets, as in Spark: the single
    ``<side>Timestamp`` first, then ``<side>OffsetsByTimestamp``, then ``<side>Offsets``."""
    ts = _get(options, f"{side}Timestamp")
    if ts is not None:
        try:
            return OffsetSpec("timestamp", timestamp=int(ts))
        except ValueError:
            raise ValueError(f"option '{side}Timestamp' must be milliseconds since the epoch, "
                             f"not {ts!r}") from None
    by_ts = _get(options, f"{side}OffsetsByTimestamp")
    if by_ts is not None:
        return OffsetSpec("timestamps", offsets=_offsets_json(f"{side}OffsetsByTimestamp", by_ts))
    value = _get(options, f"{side}Offsets")
    if value is None:
        return default
    text = value.strip()
    if text.lower() in ("earliest", "latest"):
        return OffsetSpec(text.lower())
    return OffsetSpec("offsets", offsets=_offsets_json(f"{side}Offsets", text))


def source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Check and parse a reader's options (``streaming`` for readStream)."""
    servers = bootstrap_servers(options)
    subscription = parse_subscription(options)
    starting = parse_offset_spec(options, "starting",
                                 OffsetSpec.latest() if streaming else OffsetSpec.earliest())
    ending = parse_offset_spec(options, "ending", OffsetSpec.latest())
    if streaming:
        for name in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"):
            if _get(options, name) is not None:
                raise ValueError(f"option '{name}' is not allowed for streaming queries")
    else:
        # Spark's batch checks: a batch must start somewhere fixed and end somewhere reachable.
        if starting.kind == "latest" or (starting.kind == "offsets" and LATEST in starting.offsets.values()):
            raise ValueError("starting offset can't be latest for batch queries")
        if ending.kind == "earliest" or (ending.kind == "offsets" and EARLIEST in ending.offsets.values()):
            raise ValueError("ending offset can't be earliest for batch queries")
    strategy = (_get(options, "startingOffsetsByTimestampStrategy") or "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise ValueError("option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest'")
    isolation = (_get(options, "kafka.isolation.level") or "read_uncommitted").strip().lower()
    if isolation not in ("read_uncommitted", "read_committed"):
        raise ValueError("option 'kafka.isolation.level' must be read_uncommitted or read_committed")
    # As Spark: the source plans offsets itself and returns raw bytes (kafka.group.id is
    # accepted and unused, since the source never joins a group).
    for banned in ("kafka.auto.offset.reset", "kafka.enable.auto.commit",
                   "kafka.key.deserializer", "kafka.value.deserializer"):
        if _get(options, banned) is not None:
            raise ValueError(f"Kafka option '{banned[len('kafka.'):]}' is not supported: the "
                             "source plans its own offsets (use startingOffsets) and returns "
                             "keys and values as binary")
    poll = _get(options, "kafkaConsumer.pollTimeoutMs")
    return SourceOptions(
        bootstrap_servers=servers,
        subscription=subscription,
        starting=starting,
        ending=ending,
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        max_offsets_per_trigger=_positive_int(options, "maxOffsetsPerTrigger") if streaming else None,
        min_partitions=_positive_int(options, "minPartitions"),
        include_headers=_bool(options, "includeHeaders", False),
        read_committed=isolation == "read_committed",
        timestamp_strategy_latest=strategy == "latest",
        poll_timeout_ms=int(poll) if poll is not None else 120_000,
        client_id=_get(options, "kafka.client.id") or "kafkapy-spark",
    )


def sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Check and parse a writer's options."""
    servers = bootstrap_servers(options)
    acks_text = (_get(options, "kafka.acks") or "all").strip().lower()
    acks = {"all": -1, "-1": -1, "1": 1, "0": 0}.get(acks_text)
    if acks is None:
        raise ValueError(f"option 'kafka.acks' must be all, -1, 1 or 0, not {acks_text!r}")
    compression = (_get(options, "kafka.compression.type") or "none").strip().lower()
    if compression not in ("none", "gzip", "snappy", "lz4", "zstd"):
        raise ValueError(f"option 'kafka.compression.type' {compression!r} is not a Kafka codec")
    for banned in ("kafka.key.serializer", "kafka.value.serializer"):
        if _get(options, banned) is not None:
            raise ValueError(f"Kafka option '{banned[len('kafka.'):]}' is not supported as keys "
                             "and values are written as they are (binary or string columns)")
    batch = _get(options, "kafka.batch.size")
    timeout = _get(options, "kafka.request.timeout.ms")
    max_block = _get(options, "kafka.max.block.ms")
    return SinkOptions(
        bootstrap_servers=servers,
        topic=_get(options, "topic"),
        acks=acks,
        compression=compression,
        batch_bytes=max(1024, int(batch)) if batch is not None else 1 << 20,
        request_timeout_ms=int(timeout) if timeout is not None else 30_000,
        client_id=_get(options, "kafka.client.id") or "kafkapy-spark",
        max_block_ms=int(max_block) if max_block is not None else 60_000,
    )


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Per-partition offsets as Spark's offset JSON (the form its checkpoints show)."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def offsets_from_json(data: Mapping[str, Any]) -> dict[TopicPartition, int]:
    return {(topic, int(p)): int(off) for topic, parts in data.items() for p, off in parts.items()}
