"""MirrorMaker 2 (Apache Kafka's `connect-mirror`, fetched by `make tools` into
``.tools/mirrormaker``) between two clusters, the compatibility baseline of cluster links, for
tests and benchmarks.

    clusters = {"kafkapy": ours.bootstrap, "kafka": theirs.bootstrap}
    with MirrorMaker2(clusters, [("kafkapy", "kafka"), ("kafka", "kafkapy")], tmp_path) as mm2:
        mm2.wait_records("kafka", "kafkapy.orders", {0: 500, 1: 500})   # remote topic caught up
        translated = read_checkpoints(theirs.bootstrap, "kafkapy")     # RemoteClusterUtils' view
        committed = mm2.wait_committed("kafka", "billing", "kafkapy.orders", {0, 1})  # synced

MM2 runs in dedicated mode (`org.apache.kafka.connect.mirror.MirrorMaker mm2.properties`, what
`connect-mirror-maker.sh` runs) in its own process group, with an mm2.properties this class writes:
the asked flows enabled and every other pair disabled, replication factors that fit small test
clusters, and intervals of a second (topic and group refresh, checkpoints, heartbeats,
group-offset sync, Connect's offset flush) so that a test sees the effect of a change in seconds
rather than minutes. Its log goes to ``mirrormaker2.log`` in the work directory; every wait has a
deadline and `cleanup()` (the ``with`` exit) kills the whole process group.

Names follow MM2's DefaultReplicationPolicy: a topic ``T`` of cluster ``A`` is ``A.T`` on the
target, checkpoints of flow A->B live in ``A.checkpoints.internal`` on B, and the source keeps
``mm2-offset-syncs.B.internal``.
"""

from __future__ import annotations

import os
import struct
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, TypeVar

from kafkapy.testing.apache_kafka import java_binary, write_properties
from kafkapy.testing.node import REPO_ROOT, NodeError, _ProcessNode

T = TypeVar("T")

#: A JVM, two Connect herders (one per target) and their internal topics: ~15 s on a quiet
#: 2-core machine.
MM2_STARTUP_TIMEOUT = 120.0
MAIN_CLASS = "org.apache.kafka.connect.mirror.MirrorMaker"
#: DefaultReplicationPolicy's separator (``replication.policy.separator``).
SEPARATOR = "."
HEARTBEATS_TOPIC = "heartbeats"
#: How often (seconds) MM2 looks for new topics and groups, emits checkpoints and heartbeats and
#: syncs group offsets in tests; MM2's defaults are 10 minutes for the refreshes and 60 s for the rest.
FAST_INTERVAL_S = 1
#: log4j2 in its properties format: Connect's jars carry no YAML parser (Kafka's broker jars do).
LOG4J2_PROPERTIES = """\
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.stdout.ref = STDOUT
"""


MIRRORMAKER_HOME = REPO_ROOT / ".tools" / "mirrormaker"


def mirrormaker_home() -> Path:
    """Where the fetched MirrorMaker 2 lives (``KAFKAPY_MIRRORMAKER_HOME`` overrides it): its own
    release's Connect runtime and clients, apart from the Apache Kafka broker's jars (see
    scripts/apache-kafka/mirrormaker/pom.xml)."""
    return Path(os.environ.get("KAFKAPY_MIRRORMAKER_HOME") or MIRRORMAKER_HOME)


def mirrormaker_installed() -> bool:
    """Whether `make tools` fetched MirrorMaker 2 (connect-mirror and its dependencies)."""
    libs = mirrormaker_home() / "libs"
    return libs.is_dir() and any(libs.glob("connect-mirror-[0-9]*.jar"))


def mirrormaker_version() -> str:
    """The fetched MirrorMaker's version, from its stamp file."""
    stamp = mirrormaker_home() / "VERSION"
    if not stamp.exists():
        raise NodeError(f"MirrorMaker 2 is not installed in {mirrormaker_home()}: run `make tools`")
    return stamp.read_text().strip()


def remote_topic(source_alias: str, topic: str) -> str:
    """The name MM2 gives ``topic`` of cluster ``source_alias`` on a target cluster."""
    return f"{source_alias}{SEPARATOR}{topic}"


def checkpoints_topic(source_alias: str) -> str:
    """The topic, on the target, holding the checkpoints of flow ``source_alias``->target."""
    return f"{source_alias}{SEPARATOR}checkpoints{SEPARATOR}internal"


def fast_settings(interval_s: int = FAST_INTERVAL_S) -> dict[str, str]:
    """mm2.properties entries that make MM2 act within ``interval_s`` (tests, benchmarks of the
    steady state); production keeps MM2's defaults."""
    every = str(interval_s)
    return {
        "refresh.topics.interval.seconds": every,
        "refresh.groups.interval.seconds": every,
        "emit.checkpoints.interval.seconds": every,
        "emit.heartbeats.interval.seconds": every,
        "sync.group.offsets.enabled": "true",
        "sync.group.offsets.interval.seconds": every,
        "sync.topic.configs.interval.seconds": every,
    }


def worker_settings(aliases: Iterable[str], interval_s: int = FAST_INTERVAL_S) -> dict[str, str]:
    """Connect worker entries, per target cluster (``<alias>.``: MM2 passes a worker only its
    target's entries and a few prefixes). Connect commits source offsets on this period, and MM2
    sends an offset sync held back since the last one (such as that of a partition's last
    record, which makes a caught-up group translate exactly) only then: 60 s by default."""
    return {f"{alias}.offset.flush.interval.ms": str(interval_s * 1000) for alias in aliases}


def replication_settings(factor: int) -> dict[str, str]:
    """Every replication factor MM2 uses (remote topics, its own topics, Connect's) set to
    ``factor``: MM2's defaults are 3 or the broker's default, too many for a one-node cluster."""
    value = str(factor)
    return {
        "replication.factor": value,
        "checkpoints.topic.replication.factor": value,
        "heartbeats.topic.replication.factor": value,
        "offset-syncs.topic.replication.factor": value,
        "offset.storage.replication.factor": value,
        "status.storage.replication.factor": value,
        "config.storage.replication.factor": value,
    }


class MirrorMaker2(_ProcessNode):
    """MirrorMaker 2 in dedicated mode between named clusters, running ``flows``
    (``(source, target)`` alias pairs), as a subprocess in its own process group (stop, kill9,
    restart and cleanup as for a node; a restart resumes from Connect's offsets).

    ``clusters`` maps each alias to its bootstrap string. ``topics``/``groups`` are MM2's
    allow-list regexes. ``overrides`` are mm2.properties entries applied last (per-flow keys such
    as ``"A->B.topics"`` included). `start()` returns once every flow's heartbeat connector has
    written to its target's ``heartbeats`` topic: the herders run and create topics there.
    """

    name = "mirrormaker2"

    def __init__(
        self,
        clusters: Mapping[str, str],
        flows: Iterable[tuple[str, str]],
        workdir: str | os.PathLike[str] | None = None,
        *,
        topics: str = ".*",
        groups: str = ".*",
        replication_factor: int = 1,
        fast: bool = True,
        overrides: Mapping[str, object] | None = None,
        heap: str = "-Xmx512m",
        log_level: str = "INFO",
        startup_timeout: float = MM2_STARTUP_TIMEOUT,
        **kwargs: Any,
    ) -> None:
        """``kwargs``: `_ProcessNode`'s (``env``, ``wrap`` to run it in a network site)."""
        self.clusters = dict(clusters)
        self.flows = [(source, target) for source, target in flows]
        if not self.flows:
            raise ValueError("MirrorMaker2 needs at least one flow")
        for source, target in self.flows:
            if source not in self.clusters or target not in self.clusters or source == target:
                raise ValueError(f"flow {source}->{target}: both aliases must be distinct clusters "
                                 f"of {sorted(self.clusters)}")
        super().__init__(workdir, startup_timeout=startup_timeout, **kwargs)
        self.topics = topics
        self.groups = groups
        self.replication_factor = replication_factor
        self.fast = fast
        self.overrides = {k: str(v) for k, v in (overrides or {}).items()}
        self.heap = heap
        self.properties_path = self.workdir / "mm2.properties"
        self.log4j_path = self.workdir / "log4j2.properties"
        self.log4j_path.write_text(LOG4J2_PROPERTIES.format(level=log_level))

    # -- configuration ----------------------------------------------------------------------------
    def settings(self) -> dict[str, str]:
        """The mm2.properties this MirrorMaker runs with."""
        aliases = list(self.clusters)
        props = {"clusters": ", ".join(aliases)}
        for alias, bootstrap in self.clusters.items():
            props[f"{alias}.bootstrap.servers"] = bootstrap
        asked = set(self.flows)
        for source in aliases:
            for target in aliases:
                if source != target:
                    props[f"{source}->{target}.enabled"] = str((source, target) in asked).lower()
        props["topics"] = self.topics
        props["groups"] = self.groups
        props.update(replication_settings(self.replication_factor))
        if self.fast:
            props.update(fast_settings())
            props.update(worker_settings(aliases))
        props.update(self.overrides)
        return props

    def command(self) -> list[str]:
        """`connect-mirror-maker.sh mm2.properties`, without the script."""
        return [java_binary(), *self.heap.split(), f"-Dlog4j2.configurationFile={self.log4j_path}",
                "-cp", f"{mirrormaker_home() / 'libs'}/*", MAIN_CLASS, str(self.properties_path)]

    # -- lifecycle (the rest is _ProcessNode's) ---------------------------------------------------
    @property
    def bootstrap(self) -> str:
        raise TypeError("MirrorMaker 2 serves no clients: use clusters[alias]")

    def _ports(self) -> list[int]:
        return []  # it listens on none (no internal REST server in dedicated mode by default)

    def start(self) -> "MirrorMaker2":
        if not mirrormaker_installed():
            raise NodeError(f"MirrorMaker 2 is not installed in {mirrormaker_home()}: run `make tools`")
        write_properties(self.properties_path, self.settings())
        super().start()
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        for _, target in self.flows:
            self._wait(lambda t=target: end_offsets(self.clusters[t], HEARTBEATS_TOPIC,
                                                    timeout=5.0).get(0, 0) > 0,
                       deadline, f"heartbeats on {target}")

    def __repr__(self) -> str:
        flows = ", ".join(f"{s}->{t}" for s, t in self.flows)
        return f"<MirrorMaker2 {flows} pid={self.pid} dir={self.workdir}>"

    # -- waits ------------------------------------------------------------------------------------
    def _wait(self, ready: Callable[[], bool], deadline: float, what: str) -> None:
        """Poll ``ready`` until it holds; NodeError with MM2's log tail when MM2 exits or the
        deadline passes. Client errors while polling count as not ready yet."""
        while True:
            if not self.running():
                raise NodeError(f"MirrorMaker 2 exited while waiting for {what}\n{self.log_tail()}")
            try:
                if ready():
                    return
            except ClientCallError:
                pass
            if time.monotonic() > deadline:
                raise NodeError(f"MirrorMaker 2: no {what} within the deadline\n{self.log_tail()}")
            time.sleep(0.5)

    def wait_records(self, target: str, topic: str, counts: Mapping[int, int],
                     timeout: float = 60.0) -> dict[int, int]:
        """Wait until ``topic`` on cluster ``target`` ends at least at ``counts`` (partition ->
        end offset): the records MM2 was to copy are there. Returns the end offsets seen."""
        seen: dict[int, int] = {}

        def caught_up() -> bool:
            seen.update(end_offsets(self.clusters[target], topic, timeout=5.0))
            return all(seen.get(p, 0) >= n for p, n in counts.items())

        self._wait(caught_up, time.monotonic() + timeout, f"{topic} on {target} reaching {dict(counts)}")
        return seen

    def wait_committed(self, target: str, group: str, topic: str, partitions: Iterable[int],
                       timeout: float = 60.0, *, at_least: Mapping[int, int] | None = None) -> dict[int, int]:
        """Wait until ``group`` on cluster ``target`` has committed offsets for every partition
        of ``topic`` (MM2's group-offset sync wrote them), each at least ``at_least[p]`` when
        given. Returns them."""
        wanted = set(partitions)
        floor = dict(at_least or {})
        seen: dict[int, int] = {}

        def synced() -> bool:
            seen.clear()
            seen.update(committed_offsets(self.clusters[target], group, topic, wanted, timeout=5.0))
            return all(p in seen and seen[p] >= floor.get(p, 0) for p in wanted)

        self._wait(synced, time.monotonic() + timeout, f"offsets of group {group} on {topic} at {target}")
        return seen


# -- what a test or benchmark reads from a cluster (confluent-kafka, each call bounded) ------------

class ClientCallError(AssertionError):
    """A client call failed or timed out (the cluster may not be ready yet)."""


def _call(what: str, fn: Callable[[], T]) -> T:
    from confluent_kafka import KafkaException

    try:
        return fn()
    except KafkaException as exc:
        raise ClientCallError(f"{what}: {exc}") from None


def _topic_partitions(bootstrap: str, topic: str, timeout: float) -> list[int]:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    # All topics' metadata: a request naming the topic may auto-create it (auto.create.topics.enable),
    # and MM2 creates its topics with settings of its own (a compacted heartbeats topic).
    meta = _call(f"metadata of {topic}", lambda: admin.list_topics(timeout=timeout))
    found = meta.topics.get(topic)
    if found is None or found.error is not None:
        return []
    return sorted(found.partitions)


def end_offsets(bootstrap: str, topic: str, timeout: float = 10.0) -> dict[int, int]:
    """Partition -> log end offset of ``topic`` ({} when the topic does not exist)."""
    from confluent_kafka import Consumer, TopicPartition

    partitions = _topic_partitions(bootstrap, topic, timeout)
    if not partitions:
        return {}
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kafkapy-testing-offsets",
                         "enable.auto.commit": False})
    try:
        return {p: _call(f"end offset of {topic}-{p}", lambda p=p: consumer.get_watermark_offsets(
            TopicPartition(topic, p), timeout=timeout))[1] for p in partitions}
    finally:
        consumer.close()


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: Iterable[int],
                      timeout: float = 10.0) -> dict[int, int]:
    """Partition -> offset ``group`` committed on ``topic`` (partitions without one left out)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in partitions])
    futures = admin.list_consumer_group_offsets([request], request_timeout=timeout)
    answer = _call(f"offsets of {group}", lambda: futures[group].result(timeout=timeout))
    return {tp.partition: tp.offset for tp in answer.topic_partitions if tp.offset >= 0 and tp.error is None}


@dataclass(frozen=True)
class Checkpoint:
    """One record of a checkpoints topic: ``group`` consumed the source's ``topic`` partition up
    to ``upstream_offset``, which is ``downstream_offset`` on the target (``topic`` is already the
    target's name for it)."""

    group: str
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str


def _read_string(buf: bytes, pos: int) -> tuple[str, int]:
    (size,) = struct.unpack_from(">h", buf, pos)
    pos += 2
    return buf[pos:pos + size].decode(), pos + size


def decode_checkpoint(key: bytes, value: bytes) -> Checkpoint:
    """A checkpoint record as MM2's `Checkpoint.serialize` writes it: the key is (group string,
    topic string, partition int32), the value a version int16 (0) then (upstream offset int64,
    downstream offset int64, metadata string); strings are int16-length-prefixed UTF-8."""
    group, pos = _read_string(key, 0)
    topic, pos = _read_string(key, pos)
    (partition,) = struct.unpack_from(">i", key, pos)
    (version,) = struct.unpack_from(">h", value, 0)
    if version != 0:
        raise ValueError(f"checkpoint value version {version}: only version 0 is known")
    upstream, downstream = struct.unpack_from(">qq", value, 2)
    metadata, _ = _read_string(value, 18)
    return Checkpoint(group, topic, partition, upstream, downstream, metadata)


def read_checkpoints(bootstrap: str, source_alias: str,
                     timeout: float = 30.0) -> dict[tuple[str, str, int], Checkpoint]:
    """The latest checkpoint per (group, target topic, partition) of flow ``source_alias``->the
    cluster at ``bootstrap``, read from its checkpoints topic: what `RemoteClusterUtils
    .translateOffsets` answers (downstream offsets the group can resume from on the target)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    topic = checkpoints_topic(source_alias)
    ends = end_offsets(bootstrap, topic, timeout=timeout)
    latest: dict[tuple[str, str, int], Checkpoint] = {}
    if not any(ends.values()):
        return latest
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kafkapy-testing-checkpoints",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        positions = dict.fromkeys(ends, 0)
        deadline = time.monotonic() + timeout
        while any(positions[p] < ends[p] for p in ends):
            if time.monotonic() > deadline:
                raise ClientCallError(f"reading {topic}: at {positions}, end {ends}")
            for msg in consumer.consume(500, timeout=1.0):
                if msg.error():
                    raise ClientCallError(f"reading {topic}: {msg.error()}")
                positions[msg.partition()] = msg.offset() + 1
                cp = decode_checkpoint(msg.key(), msg.value())
                latest[(cp.group, cp.topic, cp.partition)] = cp
    finally:
        consumer.close()
    return latest
