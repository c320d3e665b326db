"""Tiered storage (KIP-405) as users see it through stock clients.

A kafkapy node of this module's own runs with ``remote.log.storage.system.enable=true`` and short
remote-log-manager and retention intervals, once per backend: the local-directory store (the
default when no ``remote.log.storage.manager.class.name`` is set: ``kafkapy-remote-storage`` beside
the log dirs) and the S3 store against a moto S3 server this module starts. A topic with Kafka's
topic configs ``remote.storage.enable=true``, 64 KiB segments and ``local.retention.bytes=1`` gets
a few thousand distinct records, so about twenty segments roll, are copied to the remote store and
then deleted from the broker's disk. Then every stock client reads the partition from offset 0
and must get every record byte for byte: the old ones can only come from remote storage.

These tests always start a kafkapy node: the broker settings they need are Kafka's broker configs,
which the Tansu target cannot take, so they run only for the default kafkapy target.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kafkapy.testing.clients import kcat_consume
from kafkapy.testing.cluster import eventually
from kafkapy.testing.moto_server import MotoS3Server, MotoUnavailable
from kafkapy.testing.node import KafkaNode, compat_target
from kafkapy.testing.recordsets import assert_same_records, record, unique_topic
from kafkapy.testing.tiered import (
    TIERED_BROKER_CONFIG,
    default_local_store,
    local_segment_bases,
    s3_broker_config,
)

if compat_target() != "kafkapy":
    pytest.skip(f"tiered storage needs broker configs only a kafkapy node takes here "
                f"(KAFKAPY_COMPAT_TARGET={compat_target()})", allow_module_level=True)

# The module fixture produces and waits for tiering before its first test: allow for it.
pytestmark = pytest.mark.timeout(300)

SEGMENT_BYTES = 64 * 1024
RECORDS = 3000           # ~1.7 MB of keys, values and headers: about 20 segments (lz4 folds the Java part)
CONFLUENT_SHARE = 2000   # the first records come from librdkafka, the rest from the Java producer
DOOMED_RECORDS = 500     # the topic the deletion test removes (a few segments)
TIERING_DEADLINE_S = 90.0
DELETION_DEADLINE_S = 60.0
CONSUME_TIMEOUT_S = 60

TOPIC_CONFIG: dict[str, str] = {
    "remote.storage.enable": "true",
    "segment.bytes": str(SEGMENT_BYTES),
    # Keep as little locally as Kafka allows: every segment but the active one, once it is remote.
    "local.retention.bytes": "1",
}
S3_PREFIX = "tiered/compat"
BACKENDS = ["local-dir", "s3"]


def tiered_records(n: int, *, tag: str, first_ts: int) -> list[dict]:
    """Distinct, checkable records: the index in key and value, null keys, repeated and empty
    headers, values of varying length (hash text, so compression cannot fold segments away), and
    rising timestamps near now (far-past ones would fall to the 7-day time retention). Text-only,
    so kcat's JSON output carries them exactly."""
    out = []
    for i in range(n):
        digest = hashlib.sha256(f"{tag}-{i}".encode()).hexdigest()
        body = (digest * 30)[: 150 + (i * 37) % 700]
        key = None if i % 10 == 3 else f"{tag}-key-{i:06d}".encode()
        value = f"{tag}|{i:06d}|é\"\\\t|{body}".encode()
        headers: list[tuple[str, bytes]] = []
        if i % 4 == 1:
            headers = [("seq", str(i).encode()), ("trace", digest[:16].encode()), ("seq", b"again")]
        elif i % 4 == 2:
            headers = [("empty", b"")]
        out.append(record(key, value, headers=headers, timestamp=first_ts + i))
    return out


# -- what a user can look at: the partition dir on the broker's disk and the remote store ---------


@dataclass
class RemoteStore:
    """The objects of a partition in the remote store, read as an operator would read them."""

    describe: str
    # names of every object of the partition (``<topic>-0-<topic id>/<segment id>.<kind>``)
    list_objects: Callable[[str], list[str]]
    # the first ``n`` bytes of an object, by a name list_objects returned
    read_head: Callable[[str, int], bytes]

    def segment_logs(self, topic: str) -> list[str]:
        return [name for name in self.list_objects(topic) if name.endswith(".log")]

    def segment_bases(self, topic: str) -> list[int]:
        """Base offsets of the remote segments: the first 8 bytes of a segment's ``.log`` object
        are its first batch's base offset (record batch v2 format)."""
        return sorted({int.from_bytes(self.read_head(name, 8), "big", signed=True)
                       for name in self.segment_logs(topic)})


def local_dir_store(root: Path) -> RemoteStore:
    def list_objects(topic: str) -> list[str]:
        return sorted(str(p.relative_to(root)) for d in root.glob(f"{topic}-0-*") if d.is_dir()
                      for p in d.iterdir() if p.is_file())

    def read_head(name: str, n: int) -> bytes:
        with open(root / name, "rb") as f:
            return f.read(n)

    return RemoteStore(f"directory {root}", list_objects, read_head)


def s3_store(server: MotoS3Server, bucket: str) -> RemoteStore:
    def list_objects(topic: str) -> list[str]:
        return server.list_keys(bucket, f"{S3_PREFIX}/{topic}-0-")

    def read_head(key: str, n: int) -> bytes:
        client = server.client()
        try:
            return client.get_object(Bucket=bucket, Key=key, Range=f"bytes=0-{n - 1}")["Body"].read()
        finally:
            client.close()

    return RemoteStore(f"bucket {bucket} at {server.url}", list_objects, read_head)


@dataclass
class Tiered:
    """One backend's node, its remote store, and the topics produced for the tests."""

    backend: str
    node: KafkaNode
    cluster: Any  # conftest's Cluster helpers around the node
    store: RemoteStore
    topic: str = ""
    produced: list[dict] = field(default_factory=list)
    doomed_topic: str = ""
    # what the disk and the store held once tiering settled (for the tests' messages)
    local_bases: list[int] = field(default_factory=list)
    remote_bases: list[int] = field(default_factory=list)

    # conftest's failure report appends the node's log tail for any fixture value that has these
    @property
    def bootstrap(self) -> str:
        return self.node.bootstrap

    @property
    def name(self) -> str:
        return f"{self.node.name} ({self.backend})"

    @property
    def log_path(self) -> Path:
        return self.node.log_path

    def log_tail(self, max_bytes: int = 20_000) -> str:
        return self.node.log_tail(max_bytes)

    def tiering_state(self, topic: str) -> tuple[list[int], list[int]]:
        return local_segment_bases(self.node, topic), self.store.segment_bases(topic)


def fully_tiered(local: list[int], remote: list[int]) -> bool:
    """Kafka's end state for local.retention.bytes=1: every segment but the active one was copied
    and then deleted locally, so the disk holds only the active segment and the remote segments
    start at offset 0 and end below it."""
    return (len(local) == 1 and local[0] > 0 and bool(remote) and remote[0] == 0
            and remote[-1] < local[0])


@pytest.fixture(scope="module", params=BACKENDS)
def tiered(request, tmp_path_factory, cluster_of) -> Iterator[Tiered]:
    backend: str = request.param
    with contextlib.ExitStack() as stack:  # stops the node, then the S3 server, however we leave
        if backend == "s3":
            moto = MotoS3Server()
            try:
                stack.enter_context(moto)
            except MotoUnavailable as e:  # a missing dependency fails, never skips
                pytest.fail(str(e), pytrace=False)
            bucket = moto.create_bucket(f"kafkapy-compat-{uuid.uuid4().hex[:10]}")
            node = stack.enter_context(KafkaNode(
                tmp_path_factory.mktemp("tiered-s3"),
                overrides={**TIERED_BROKER_CONFIG, **s3_broker_config(moto, bucket, S3_PREFIX)}))
            store = s3_store(moto, bucket)
        else:
            # Nothing but the system switch: the store defaults to a directory beside the log dirs.
            node = stack.enter_context(KafkaNode(tmp_path_factory.mktemp("tiered-local"),
                                                 overrides=TIERED_BROKER_CONFIG))
            store = local_dir_store(default_local_store(node))
        t = Tiered(backend, node, cluster_of(node), store)
        _produce_and_wait(t)
        yield t


def _produce_and_wait(t: Tiered) -> None:
    t.topic = t.cluster.create_topic(f"tiered-{t.backend}", config=TOPIC_CONFIG)
    t.doomed_topic = t.cluster.create_topic(f"tiered-doomed-{t.backend}", config=TOPIC_CONFIG)
    now_ms = int(time.time() * 1000)
    t.produced = tiered_records(RECORDS, tag=t.backend, first_ts=now_ms)
    # Small batches, so segments hold many of them: librdkafka uncompressed, then the Java producer
    # with its defaults (idempotent, acks=all: batches with producer ids) and lz4.
    first = t.cluster.produce("confluent", t.topic, t.produced[:CONFLUENT_SHARE],
                              config={"batch.size": 16384}, linger_ms=5, timeout_s=60)
    rest = t.cluster.produce("java", t.topic, t.produced[CONFLUENT_SHARE:], compression="lz4",
                             config={"batch.size": 16384}, timeout_s=60)
    assert [d["offset"] for d in first + rest] == list(range(RECORDS))
    t.cluster.produce("confluent", t.doomed_topic,
                      tiered_records(DOOMED_RECORDS, tag="doomed", first_ts=now_ms),
                      config={"batch.size": 16384}, linger_ms=5, timeout_s=60)

    def settled() -> bool:
        if not t.node.running():
            pytest.fail(f"the node died while tiering\n{t.node.log_tail(6000)}", pytrace=False)
        t.local_bases, t.remote_bases = t.tiering_state(t.topic)
        doomed = t.tiering_state(t.doomed_topic)
        if fully_tiered(t.local_bases, t.remote_bases) and fully_tiered(*doomed):
            return True
        # eventually() reports the last of these when the deadline passes
        raise AssertionError(f"local .log base offsets {t.local_bases}, remote segment base offsets "
                             f"{t.remote_bases} in {t.store.describe}; doomed topic: {doomed}")

    eventually(settled, timeout=TIERING_DEADLINE_S, interval=0.25,
               what="every segment but the active one in remote storage and deleted locally")


# -- the tests -----------------------------------------------------------------------------------


def test_old_segments_live_only_in_remote_storage(tiered):
    # The fixture waited for it; say what a user sees, and that the topic kept its configs.
    assert len(tiered.remote_bases) >= 10, tiered.remote_bases  # many segments rolled and moved
    assert tiered.local_bases[0] > tiered.remote_bases[-1]
    assert not (tiered.node.data_dir / f"{tiered.topic}-0" / f"{0:020d}.log").exists()
    configs = tiered.cluster.run("confluent", "describe_configs", topics=[tiered.topic])["configs"][tiered.topic]
    for name, value in TOPIC_CONFIG.items():
        assert configs[name]["value"] == value, (name, configs[name])
        assert configs[name]["source"] == "DYNAMIC_TOPIC_CONFIG", (name, configs[name])
    # The remote log metadata topic, with the partition count the rlmm.config.* prefix asked for.
    meta = tiered.cluster.run("confluent", "describe_topics", topics=["__remote_log_metadata"])
    parts = meta["topics"]["__remote_log_metadata"]["partitions"]
    assert len(parts) == int(TIERED_BROKER_CONFIG["rlmm.config.remote.log.metadata.topic.num.partitions"]), meta


@pytest.mark.parametrize("client", ["confluent", "kafka_python", "aiokafka", "java"])
def test_client_reads_everything_from_offset_zero(tiered, client):
    consumed = tiered.cluster.consume(client, tiered.topic, offset=0, end_offset=RECORDS,
                                      timeout_s=CONSUME_TIMEOUT_S, timeout=CONSUME_TIMEOUT_S + 30)
    assert_same_records(tiered.produced, consumed, first_offset=0)


def test_kcat_reads_everything_from_offset_zero(tiered):
    tiered.cluster.assert_alive()
    consumed = kcat_consume(tiered.bootstrap, tiered.topic, offset=0, count=RECORDS,
                            timeout=CONSUME_TIMEOUT_S + 30)
    assert_same_records(tiered.produced, consumed, first_offset=0)


@pytest.mark.parametrize("client", ["confluent", "java"])
def test_read_starts_mid_remote_segment(tiered, client):
    # An offset inside a remote segment, most likely inside a batch: the broker hands back the
    # whole batch and the client drops the records before the offset, as with a local segment.
    start = tiered.remote_bases[len(tiered.remote_bases) // 2] + 5
    consumed = tiered.cluster.consume(client, tiered.topic, offset=start, max_records=50,
                                      timeout_s=CONSUME_TIMEOUT_S, timeout=CONSUME_TIMEOUT_S + 30)
    # (the Java driver returns whole polls, so it may hand back more than asked for)
    assert_same_records(tiered.produced[start:start + 50], consumed[:50], first_offset=start)


@pytest.mark.parametrize("client", ["confluent", "kafka_python", "aiokafka"])
def test_list_offsets_span_remote_and_local(tiered, client):
    # Timestamps of records in the first (remote) segment, in the middle, and the last (local) one.
    probes = [0, 7, RECORDS // 2, RECORDS - 1]
    res = tiered.cluster.run(client, "list_offsets", topic=tiered.topic, partition=0,
                             timestamps=[tiered.produced[i]["timestamp"] for i in probes])
    assert (res["earliest"], res["latest"]) == (0, RECORDS), res
    assert res["by_timestamp"] == probes, res


def test_earliest_local_offset_is_past_the_remote_segments(tiered):
    # KIP-405's ListOffsets -4 (earliest-local) and KIP-1005's -5 (latest-tiered), through the Java
    # AdminClient's OffsetSpec.earliestLocal()/latestTiered().
    res = tiered.cluster.run("java", "list-offsets", topic=tiered.topic, partition=0,
                             specs=["earliest", "earliest-local", "latest-tiered", "latest", "max-timestamp"],
                             timeout=90)["offsets"]
    local_start = tiered.local_bases[0]  # only the active segment is left on disk
    assert res == {"earliest": 0, "earliest-local": local_start, "latest-tiered": local_start - 1,
                   "latest": RECORDS, "max-timestamp": RECORDS - 1}, (res, tiered.local_bases)


def test_deleting_the_topic_deletes_its_remote_segments(tiered):
    topic = tiered.doomed_topic
    assert tiered.store.segment_logs(topic), f"nothing of {topic} in {tiered.store.describe}"
    res = tiered.cluster.run("confluent", "delete_topics", topics=[topic])
    assert res["topics"] == [{"name": topic, "error": None}], res

    def gone() -> bool:
        left = tiered.store.list_objects(topic)
        if left:
            raise AssertionError(f"{len(left)} objects left in {tiered.store.describe}: {left[:10]}")
        return True

    eventually(gone, timeout=DELETION_DEADLINE_S, interval=0.25,
               what=f"the remote objects of deleted topic {topic} to be gone")


def test_remote_reads_survive_a_broker_restart(tiered):
    # The broker rebuilds what is remote from __remote_log_metadata and the store; nothing of the
    # old segments is back on its disk.
    tiered.node.restart()
    assert local_segment_bases(tiered.node, tiered.topic) == tiered.local_bases
    consumed = tiered.cluster.consume("confluent", tiered.topic, offset=0, end_offset=RECORDS,
                                      timeout_s=CONSUME_TIMEOUT_S, timeout=CONSUME_TIMEOUT_S + 30)
    assert_same_records(tiered.produced, consumed, first_offset=0)
    res = tiered.cluster.run("java", "list-offsets", topic=tiered.topic, partition=0,
                             specs=["earliest", "earliest-local"], timeout=90)["offsets"]
    assert res == {"earliest": 0, "earliest-local": tiered.local_bases[0]}, res


# Topic configs Kafka 3.9's LogConfig.validate refuses for a remote-storage topic (INVALID_CONFIG).
REFUSED_REMOTE_TOPIC_CONFIGS = {
    "compacted": {"cleanup.policy": "compact"},  # "Remote log storage is unsupported for the compacted topics"
    "local-bytes-over-retention-bytes": {"retention.bytes": "1000", "local.retention.bytes": "2000"},
    "local-ms-over-retention-ms": {"retention.ms": "60000", "local.retention.ms": "120000"},
}


@pytest.mark.parametrize("tiered", ["local-dir"], indirect=True)  # a broker-side check: one store is enough
@pytest.mark.parametrize("case", sorted(REFUSED_REMOTE_TOPIC_CONFIGS))
def test_contradictory_remote_topic_configs_are_refused(tiered, case):
    res = tiered.cluster.run("confluent", "create_topics", topics=[
        {"name": unique_topic(f"tiered-{case}"), "num_partitions": 1, "replication_factor": 1,
         "config": {"remote.storage.enable": "true", **REFUSED_REMOTE_TOPIC_CONFIGS[case]}}])
    err = res["topics"][0]["error"]
    assert err is not None and err["name"] == "INVALID_CONFIG", res


@pytest.mark.parametrize("tiered", ["local-dir"], indirect=True)
def test_turning_remote_storage_off_needs_delete_on_disable(tiered):
    # KIP-950 (Kafka 3.9): remote.storage.enable=false alone would orphan the remote data, so it is
    # refused; with remote.log.delete.on.disable=true it is accepted.
    topic = tiered.cluster.create_topic("tiered-off", config={"remote.storage.enable": "true"})
    res = tiered.cluster.run("confluent", "alter_configs",
                             topics={topic: {"set": {"remote.storage.enable": "false"}}})
    err = res["topics"][0]["error"]
    assert err is not None and err["name"] == "INVALID_CONFIG", res
    res = tiered.cluster.run("confluent", "alter_configs", topics={
        topic: {"set": {"remote.storage.enable": "false", "remote.log.delete.on.disable": "true"}}})
    assert res["topics"][0]["error"] is None, res


def test_remote_storage_topic_needs_tiering_enabled_on_the_broker(cluster):
    # Kafka refuses remote.storage.enable=true while remote.log.storage.system.enable is false
    # (INVALID_CONFIG: "Tiered Storage functionality is disabled in the broker").
    res = cluster.run("confluent", "create_topics", topics=[
        {"name": unique_topic("tiered-off"), "num_partitions": 1, "replication_factor": 1,
         "config": {"remote.storage.enable": "true"}}])
    err = res["topics"][0]["error"]
    assert err is not None and err["name"] == "INVALID_CONFIG", res
