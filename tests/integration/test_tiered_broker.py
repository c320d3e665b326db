"""Tiered storage (KIP-405) on a running node: segments go to the local-directory remote store,
local retention removes them from the log dirs, and consumers still read the whole log.

Each node runs the remote log manager every 300 ms with a 3-partition ``__remote_log_metadata``;
topics have 4 KiB segments and keep one byte locally, so every closed segment is copied and then
deleted locally within a second or two.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from helpers import batch, create_topics, fetch, list_offsets, produce, run_client, wait_for
from kafkapy.protocol import messages as m
from kafkapy.records.reader import iter_batches, iter_records
from kafkapy.testing.node import KafkaNode, free_port
from kafkapy.tiered.remote_metadata import (
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
)
from kafkapy.tiered.remote_metadata_serde import REMOTE_LOG_METADATA_TOPIC, deserialize
from kafkapy.tiered.storage import ObjectKind, object_name

METADATA_PARTITIONS = 3
TIERED_OVERRIDES = {
    "remote.log.storage.system.enable": "true",
    "remote.log.manager.task.interval.ms": "300",
    "rlmm.config.remote.log.metadata.topic.num.partitions": str(METADATA_PARTITIONS),
    "log.retention.check.interval.ms": "300",
    "log.initial.task.delay.ms": "300",
    "log.segment.delete.delay.ms": "300",
}
TOPIC_CONFIGS = {
    "remote.storage.enable": "true",
    "segment.bytes": "4096",
    "local.retention.bytes": "1",
}
EARLIEST, EARLIEST_LOCAL, LATEST, LATEST_TIERED = -2, -4, -1, -5
#: Record i gets timestamp BASE_TS + i: recent, so the 7-day retention.ms keeps everything.
BASE_TS = int(time.time() * 1000) - 60_000


def value_of(i: int) -> bytes:
    return b"%08d" % i + b"v" * 92


def remote_root(node: KafkaNode) -> Path:
    # The local-directory store's default: beside the first log dir.
    return node.workdir / "kafkapy-remote-storage"


def remote_segment_logs(node: KafkaNode, topic: str) -> list[Path]:
    root = remote_root(node)
    if not root.exists():
        return []
    return [f for d in root.iterdir() if d.name.startswith(f"{topic}-0-") for f in d.glob("*.log")]


def local_segments(node: KafkaNode, topic: str) -> list[Path]:
    return sorted((node.data_dir / f"{topic}-0").glob("*.log"))


def status(node: KafkaNode) -> dict[str, Any]:
    try:
        return json.loads((node.data_dir / "remote-log-manager-status.json").read_text())
    except (OSError, ValueError):
        return {}


def produce_range(node: KafkaNode, topic: str, start: int, count: int) -> None:
    async def go(client) -> None:
        for first in range(start, start + count, 10):
            values = [value_of(i) for i in range(first, min(first + 10, start + count))]
            resp = await client.send(m.ProduceRequest(
                transactional_id=None, acks=-1, timeout_ms=10000,
                topic_data=[m.ProduceRequest.TopicProduceData(name=topic, partition_data=[
                    m.ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=bytes(batch(values, now_ms=BASE_TS + first)))])]))
            part = resp.responses[0].partition_responses[0]
            assert part.error_code == 0, part
    run_client(node, go, timeout=60)


def offsets(node: KafkaNode, topic: str, ts: int) -> int:
    async def go(client) -> int:
        resp = await client.send(list_offsets(topic, 0, ts))
        part = resp.topics[0].partitions[0]
        assert part.error_code == 0, part
        return part.offset
    return run_client(node, go)


def consume_all(node: KafkaNode, topic: str, end: int) -> list[tuple[int, bytes]]:
    """Every record from offset 0 up to ``end`` through plain Fetch requests."""
    async def go(client) -> list[tuple[int, bytes]]:
        out: list[tuple[int, bytes]] = []
        offset = 0
        while offset < end:
            resp = await client.send(fetch(topic, 0, offset, max_bytes=64 * 1024), version=12)
            part = resp.responses[0].partitions[0]
            assert part.error_code == 0, (offset, part.error_code)
            data = bytes(part.records or b"")
            assert data, f"no records at offset {offset}"
            for _, view in iter_batches(data):
                for rec in iter_records(view):
                    if rec.offset >= offset:
                        out.append((rec.offset, bytes(rec.value)))
                        offset = rec.offset + 1
        return out
    return run_client(node, go, timeout=90)


def create(node: KafkaNode, topic: str) -> None:
    async def go(client) -> None:
        resp = await client.send(create_topics((topic, 1, 1), configs=TOPIC_CONFIGS))
        assert resp.topics[0].error_code == 0, resp.topics[0]
    run_client(node, go)


def metadata_events(*nodes: Any) -> list[Any]:
    """Every event in __remote_log_metadata, per partition in order (each partition read from
    whichever of ``nodes`` leads it)."""
    async def go(client) -> tuple[dict[int, list[Any]], set[int]]:
        events: dict[int, list[Any]] = {}
        for mp in range(METADATA_PARTITIONS):
            offset, got = 0, []
            while True:
                resp = await client.send(fetch(REMOTE_LOG_METADATA_TOPIC, mp, offset), version=12)
                part = resp.responses[0].partitions[0]
                if part.error_code != 0:
                    break
                data = bytes(part.records or b"")
                if not data:
                    events[mp] = got
                    break
                for _, view in iter_batches(data):
                    for rec in iter_records(view):
                        got.append(deserialize(bytes(rec.value)))
                        offset = rec.offset + 1
        return events, set(events)
    found: dict[int, list[Any]] = {}
    for node in nodes:
        events, _ = run_client(node, go)
        for mp, got in events.items():
            found.setdefault(mp, got)
    assert sorted(found) == list(range(METADATA_PARTITIONS)), f"no leader answered for some of {sorted(found)}"
    return [e for mp in sorted(found) for e in found[mp]]


def assert_complete(records: list[tuple[int, bytes]], count: int) -> None:
    assert [o for o, _ in records] == list(range(count))
    assert all(v == value_of(o) for o, v in records)


@pytest.fixture(scope="module")
def tiered_node(tmp_path_factory):
    metrics_port = free_port()
    with KafkaNode(tmp_path_factory.mktemp("tiered"), overrides={
            **TIERED_OVERRIDES, "kafkapy.metrics.listener": f"http://127.0.0.1:{metrics_port}"}) as node:
        node.metrics_port = metrics_port
        yield node


def remote_metrics(node: KafkaNode, topic: str) -> dict[str, float]:
    """The node's tiered-storage series of ``topic`` from its /metrics, by name."""
    with urllib.request.urlopen(f"http://127.0.0.1:{node.metrics_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    return {s.name: s.value for family in text_string_to_metric_families(text) for s in family.samples
            if s.name.startswith("kafka_server_brokertopicmetrics_remote") and s.labels.get("topic") == topic}


def test_segments_go_remote_and_consumers_read_from_zero(tiered_node):
    node = tiered_node
    topic = f"tiered-{uuid.uuid4().hex[:8]}"
    create(node, topic)
    count = 1500
    produce_range(node, topic, 0, count)
    # Copied, then deleted locally: the local log starts well after 0, the whole log at 0.
    wait_for("local segments deleted after upload", lambda: offsets(node, topic, EARLIEST_LOCAL) >= count - 60)
    assert offsets(node, topic, EARLIEST) == 0
    local_start = offsets(node, topic, EARLIEST_LOCAL)
    tiered = offsets(node, topic, LATEST_TIERED)
    assert tiered >= local_start - 1
    assert offsets(node, topic, LATEST) == count
    assert len(remote_segment_logs(node, topic)) >= 5
    assert len(local_segments(node, topic)) <= 3
    assert_complete(consume_all(node, topic, count), count)
    # read_committed from the remote part: the same batches, with an aborted list (empty, not null).
    async def committed(client) -> Any:
        req = fetch(topic, 0, 0, max_bytes=64 * 1024)
        req.isolation_level = 1
        return (await client.send(req, version=12)).responses[0].partitions[0]
    part = run_client(node, committed)
    assert part.error_code == 0 and part.records and part.aborted_transactions == []
    # A timestamp inside the remote part is answered from the remote time index.
    assert offsets(node, topic, BASE_TS + 5) == 5
    # The status file is rewritten every task interval: wait for one written after the above.
    snap = wait_for("status counters", lambda: (lambda p: p if p and p["local_log_start_offset"] >= count - 60 else None)(
        status(node).get("partitions", {}).get(f"{topic}-0")))
    assert snap["remote_segments"] >= 5 and snap["remote_bytes"] > 0
    assert snap["log_start_offset"] == 0 and snap["copied_segments"] >= 5 and snap["copy_lag_segments"] <= 1
    totals = wait_for("remote fetch counted", lambda: (status(node).get("totals") or {}).get("remote_fetch_requests"))
    assert totals > 0
    # Prometheus sees the same counters.
    seen = remote_metrics(node, topic)
    assert seen["kafka_server_brokertopicmetrics_remotecopybytes_total"] >= snap["copied_bytes"] > 0
    assert seen["kafka_server_brokertopicmetrics_remotefetchrequests_total"] > 0
    assert seen["kafka_server_brokertopicmetrics_remotefetchbytes_total"] > 0
    assert seen["kafka_server_brokertopicmetrics_remotelogsizebytes"] > 0
    # The CLI shows the same through the protocol (DescribeLogDirs, ListOffsets, the metadata topic).
    out = subprocess.run([node.python, "-m", "kafkapy", "tiered", "describe", "--bootstrap-server",
                          node.bootstrap, "--topic", topic, "--json"],
                         capture_output=True, text=True, timeout=60, check=True)
    [row] = json.loads(out.stdout)
    assert row["remote_segments"] >= 5 and row["remote_bytes"] >= row["remote_segments"] * 3000
    assert 0 < row["local_bytes"] < 3 * 4096
    assert (row["log_start_offset"], row["log_end_offset"]) == (0, count)
    assert row["local_log_start_offset"] >= count - 60 and row["highest_tiered_offset"] >= row["local_log_start_offset"] - 1


def test_deleting_the_topic_removes_its_remote_data(tiered_node):
    node = tiered_node
    topic = f"tiered-del-{uuid.uuid4().hex[:8]}"
    create(node, topic)
    produce_range(node, topic, 0, 600)
    wait_for("segments in remote storage", lambda: len(remote_segment_logs(node, topic)) >= 3)

    async def delete(client) -> None:
        resp = await client.send(m.DeleteTopicsRequest(topics=[m.DeleteTopicsRequest.DeleteTopicState(
            name=topic, topic_id=uuid.UUID(int=0))], timeout_ms=10000))
        assert resp.responses[0].error_code == 0
    run_client(node, delete)
    root = remote_root(node)
    wait_for("remote partition directory removed",
             lambda: not [d for d in root.iterdir() if d.name.startswith(f"{topic}-0-")])
    states = [e.state for e in metadata_events(node)
              if getattr(getattr(e, "topic_id_partition", None), "topic", None) == topic
              and not isinstance(e, (RemoteLogSegmentMetadata, RemoteLogSegmentMetadataUpdate))]
    assert [s.name for s in states] == ["DELETE_PARTITION_MARKED", "DELETE_PARTITION_STARTED",
                                        "DELETE_PARTITION_FINISHED"]


def test_delete_records_inside_the_remote_part_moves_the_whole_log_start(tiered_node):
    from confluent_kafka import Consumer, TopicPartition

    node = tiered_node
    topic = f"tiered-dr-{uuid.uuid4().hex[:8]}"
    create(node, topic)
    count, target = 600, 250
    produce_range(node, topic, 0, count)
    wait_for("local segments deleted after upload", lambda: offsets(node, topic, EARLIEST_LOCAL) >= count - 60)
    local_start = offsets(node, topic, EARLIEST_LOCAL)

    async def delete_records(client) -> Any:
        Req = m.DeleteRecordsRequest
        T = Req.DeleteRecordsTopic
        resp = await client.send(Req(timeout_ms=10000, topics=[
            T(name=topic, partitions=[T.DeleteRecordsPartition(partition_index=0, offset=target)])]))
        return resp.topics[0].partitions[0]
    part = run_client(node, delete_records)
    assert (part.error_code, part.low_watermark) == (0, target)
    assert offsets(node, topic, EARLIEST) == target
    assert offsets(node, topic, EARLIEST_LOCAL) == local_start  # the local log is untouched
    # Produce responses carry the whole log's start too (Kafka's logStartOffset), not the local one.
    produced = run_client(node, lambda c: c.send(produce(topic, 0, batch([value_of(count)], now_ms=BASE_TS + count))))
    appended = produced.responses[0].partition_responses[0]
    assert (appended.error_code, appended.base_offset, appended.log_start_offset) == (0, count, target)

    async def fetch_at(client, offset: int) -> Any:
        resp = await client.send(fetch(topic, 0, offset), version=12)
        return resp.responses[0].partitions[0]
    below = run_client(node, lambda c: fetch_at(c, 0))
    assert (below.error_code, below.log_start_offset) == (1, target)  # OFFSET_OUT_OF_RANGE
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        msg = None
        deadline = time.monotonic() + 15
        while msg is None and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error():
                msg = None
        assert msg is not None and (msg.offset(), msg.value()) == (target, value_of(target))
    finally:
        consumer.close()

    # The next expiration pass deletes the remote segments wholly below the new start.
    segments = [e for e in metadata_events(node) if isinstance(e, RemoteLogSegmentMetadata)
                and e.remote_log_segment_id.topic_id_partition.topic == topic]
    doomed = {object_name(s.remote_log_segment_id, ObjectKind.LOG) for s in segments if s.end_offset < target}
    kept = {object_name(s.remote_log_segment_id, ObjectKind.LOG) for s in segments if s.end_offset >= target}
    assert doomed and kept
    wait_for("remote segments below the new start deleted",
             lambda: not doomed & {f.name for f in remote_segment_logs(node, topic)}, timeout=15)
    assert kept <= {f.name for f in remote_segment_logs(node, topic)}

    node.restart()

    def earliest() -> int | None:
        try:
            return offsets(node, topic, EARLIEST)
        except Exception:  # no leader yet right after the restart
            return None
    # The checkpointed start, once the remote metadata is read again (before that: the local start).
    wait_for("the start after a restart", lambda: earliest() == target)
    assert (run_client(node, lambda c: fetch_at(c, target)).error_code,
            run_client(node, lambda c: fetch_at(c, target - 1)).error_code) == (0, 1)


def test_kill_during_uploads_leaves_exactly_one_copy_per_segment(tmp_path):
    # A store that lingers 20 ms on each object with a visible .tmp, so each kill lands in the
    # middle of an upload on purpose.
    overrides = {**TIERED_OVERRIDES, "remote.log.manager.task.interval.ms": "100",
                 "remote.log.storage.manager.class.name": "kafkapy.testing.slow_storage.SlowLocalDirRemoteStorage",
                 "rsm.config.dir": str(tmp_path / "kafkapy-remote-storage"), "rsm.config.copy.delay.ms": "20"}
    with KafkaNode(tmp_path, overrides=overrides) as node:
        topic = f"tiered-kill-{uuid.uuid4().hex[:8]}"
        create(node, topic)
        produced = 0
        seen: set[Path] = set()

        def temp_objects() -> set[Path]:
            return set(remote_root(node).glob(f"{topic}-0-*/*.tmp")) if remote_root(node).exists() else set()

        for _round in range(4):
            produce_range(node, topic, produced, 400)
            produced += 400
            # A partial object of an upload this run started (not a leftover of an earlier kill).
            fresh = wait_for("an upload in progress", lambda: temp_objects() - seen, timeout=20, interval=0.002)
            node.kill9()
            seen |= fresh
            node.start()
            # Let the restarted node finish a few segments, so the next kill lands further on.
            target = 90 * (_round + 1)
            wait_for("copying resumed", lambda: offsets(node, topic, LATEST_TIERED) >= target, timeout=30)
        wait_for("every closed segment copied",
                 lambda: offsets(node, topic, LATEST_TIERED) >= produced - 100, timeout=60)
        wait_for("local segments deleted", lambda: offsets(node, topic, EARLIEST_LOCAL) > produced // 2)
        assert offsets(node, topic, EARLIEST) == 0
        assert_complete(consume_all(node, topic, produced), produced)
        announced: dict[Any, RemoteLogSegmentMetadata] = {}
        finished: dict[tuple[int, int], int] = {}
        for event in metadata_events(node):
            if isinstance(event, RemoteLogSegmentMetadata):
                announced[event.remote_log_segment_id] = event
            elif isinstance(event, RemoteLogSegmentMetadataUpdate) and \
                    event.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED:
                seg = announced[event.remote_log_segment_id]
                key = (seg.start_offset, seg.end_offset)
                finished[key] = finished.get(key, 0) + 1
        assert finished and all(n == 1 for n in finished.values()), finished
        # The interrupted uploads are cleaned up by the expiration pass: no partial object stays.
        wait_for("the partial objects of interrupted uploads removed", lambda: not temp_objects(), timeout=30)
        ranges = sorted(finished)
        assert ranges[0][0] == 0
        assert all(a[1] + 1 == b[0] for a, b in zip(ranges, ranges[1:])), ranges


def _leader(cluster: Any, topic: str, via: int) -> int:
    from helpers import metadata, send_to
    resp = send_to(cluster.broker_address(via), metadata(topic, allow_auto_create=False))
    return resp.topics[0].partitions[0].leader_id


def test_a_new_leader_continues_where_the_old_one_stopped(tmp_path):
    """Three combined nodes share one remote directory; the leader tiers, is killed, and the new
    leader serves the remote part, copies only what is new, and every offset is read once."""
    from helpers import FAST_FAILOVER, send_to
    from kafkapy.testing.cluster import LocalCluster

    shared = tmp_path / "remote"
    overrides = {**TIERED_OVERRIDES, **FAST_FAILOVER, "rsm.config.dir": str(shared),
                 "offsets.topic.replication.factor": "3"}
    with LocalCluster(tmp_path / "cluster", combined=3, overrides=overrides) as cluster:
        cluster.up()
        topic = f"tiered-failover-{uuid.uuid4().hex[:8]}"
        created = send_to(cluster.broker_address(1), create_topics((topic, 1, 3), configs={
            **TOPIC_CONFIGS, "min.insync.replicas": "2"}))
        assert created.topics[0].error_code == 0, created.topics[0]
        leader = wait_for("a leader", lambda: _leader(cluster, topic, 1) if _leader(cluster, topic, 1) > 0 else None)
        node = SimpleNode(*cluster.broker_address(leader))
        produce_range(node, topic, 0, 600)
        wait_for("tiered on the first leader", lambda: offsets(node, topic, EARLIEST_LOCAL) >= 540, timeout=30)
        first_tiered = offsets(node, topic, LATEST_TIERED)
        cluster.kill9(leader)
        survivor = next(b for b in cluster.broker_ids() if b != leader)
        new_leader = wait_for("a new leader", lambda: (lambda l: l if l not in (-1, leader) else None)(
            _leader(cluster, topic, survivor)), timeout=30)
        node = SimpleNode(*cluster.broker_address(new_leader))
        # The new leader knows the remote part at once: the log still starts at 0.
        wait_for("the whole log start from remote metadata", lambda: offsets(node, topic, EARLIEST) == 0, timeout=20)
        produce_range(node, topic, 600, 300)
        wait_for("new segments tiered by the new leader",
                 lambda: offsets(node, topic, LATEST_TIERED) >= 840, timeout=30)
        assert offsets(node, topic, LATEST_TIERED) > first_tiered
        assert_complete(consume_all(node, topic, 900), 900)
        live = [SimpleNode(*cluster.broker_address(b)) for b in cluster.broker_ids() if b != leader]
        events = metadata_events(*live)
        announced = [e for e in events if isinstance(e, RemoteLogSegmentMetadata)
                     and e.remote_log_segment_id.topic_id_partition.topic == topic]
        finished_ids = {e.remote_log_segment_id for e in events
                        if isinstance(e, RemoteLogSegmentMetadataUpdate)
                        and e.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED}
        ranges = sorted((e.start_offset, e.end_offset) for e in announced if e.remote_log_segment_id in finished_ids)
        assert len(ranges) == len(set(ranges)), "a segment was copied twice"
        assert {e.broker_id for e in announced} >= {leader, new_leader}


class SimpleNode:
    """The host/port pair the helpers above need of a node."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.bootstrap = f"{host}:{port}"
