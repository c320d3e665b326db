"""`kafkapy tiered describe`: local and remote bytes per partition of a running cluster.

Everything comes through the Kafka protocol, as a stock tool would get it: Metadata for the
partitions and leaders, DescribeLogDirs (from each leader) for the local size, ListOffsets for the
whole log's start (-2), the local log start (-4), the highest tiered offset (-5) and the end (-1),
and the remote segments from reading ``__remote_log_metadata`` itself (COPY_SEGMENT_FINISHED
segments count as remote). ``--json`` prints the rows as JSON for scripts and tests.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from typing import Any

import trio

from kafkapy.cli.admin import command_config_security
from kafkapy.cli.output import CliError
from kafkapy.net.client import KafkaClient, KafkaClientError
from kafkapy.net.client_security import ClientSecurity
from kafkapy.protocol import messages as m
from kafkapy.records.reader import iter_batches, iter_records
from kafkapy.tiered.metadata_cache import RemoteLogMetadataCache, RemoteLogMetadataError
from kafkapy.tiered.metadata_consumer import partition_of
from kafkapy.tiered.remote_metadata import RemoteLogSegmentState, TopicIdPartition
from kafkapy.tiered.remote_metadata_serde import REMOTE_LOG_METADATA_TOPIC, RemoteLogMetadataSerdeError, deserialize

TIMEOUT_S = 15.0
FETCH_BYTES = 1 << 20


@dataclass
class PartitionRow:
    """What `describe` says about one partition."""

    topic: str
    partition: int
    leader: int
    local_bytes: int
    remote_bytes: int
    remote_segments: int
    log_start_offset: int
    local_log_start_offset: int
    highest_tiered_offset: int
    log_end_offset: int


def _bootstrap(text: str) -> tuple[str, int]:
    host, _, port = text.split(",")[0].strip().rpartition(":")
    return host or "127.0.0.1", int(port)


class _Clients:
    def __init__(self, brokers: dict[int, tuple[str, int]], security: ClientSecurity | None) -> None:
        self.brokers = brokers
        self.security = security
        self.open: dict[int, KafkaClient] = {}

    async def get(self, broker_id: int) -> KafkaClient:
        client = self.open.get(broker_id)
        if client is None:
            client = await KafkaClient.connect(*self.brokers[broker_id], client_id="kafkapy-tiered",
                                               security=self.security)
            await client.negotiate()
            self.open[broker_id] = client
        return client

    async def aclose(self) -> None:
        for client in self.open.values():
            await client.aclose()


async def _remote_segments(clients: _Clients,
                           leaders: dict[int, int]) -> dict[TopicIdPartition, RemoteLogMetadataCache]:
    """Every partition's remote metadata, rebuilt from the whole metadata topic."""
    caches: dict[TopicIdPartition, RemoteLogMetadataCache] = {}
    req = m.FetchRequest
    for mp, leader in sorted(leaders.items()):
        if leader < 0:
            continue
        client = await clients.get(leader)
        offset = 0
        while True:
            wanted = req.FetchTopic.FetchPartition(
                partition=mp, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                log_start_offset=-1, partition_max_bytes=FETCH_BYTES)
            body = req(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=FETCH_BYTES, isolation_level=0,
                       session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
                       topics=[req.FetchTopic(topic=REMOTE_LOG_METADATA_TOPIC, partitions=[wanted])])
            part = (await client.send(body, version=12, timeout=TIMEOUT_S)).responses[0].partitions[0]
            data = bytes(part.records or b"")
            if part.error_code != 0 or not data:
                break
            before = offset
            for _, view in iter_batches(data):
                for rec in iter_records(view):
                    offset = rec.offset + 1
                    if rec.value is None:
                        continue
                    try:
                        event = deserialize(bytes(rec.value))
                        tip = partition_of(event)
                        caches.setdefault(tip, RemoteLogMetadataCache(tip)).apply(event)
                    except (RemoteLogMetadataSerdeError, RemoteLogMetadataError):
                        continue  # as a broker does: a bad event does not hide the others
            if offset == before:
                break
    return caches


async def describe(bootstrap: str, topics: list[str] | None,
                   security: ClientSecurity | None = None) -> list[PartitionRow]:
    """The rows for ``topics`` (every topic but the internal ones when None)."""
    async with await KafkaClient.connect(*_bootstrap(bootstrap), client_id="kafkapy-tiered",
                                         security=security) as first:
        await first.negotiate()
        meta = await first.send(m.MetadataRequest(
            topics=None if topics is None else [m.MetadataRequest.MetadataRequestTopic(name=t)
                                                for t in [*topics, REMOTE_LOG_METADATA_TOPIC]],
            allow_auto_topic_creation=False, include_topic_authorized_operations=False), timeout=TIMEOUT_S)
    clients = _Clients({b.node_id: (b.host, b.port) for b in meta.brokers}, security)
    try:
        by_topic = {t.name: t for t in meta.topics if t.error_code == 0}
        rlm = by_topic.get(REMOTE_LOG_METADATA_TOPIC)
        caches = await _remote_segments(clients, {p.partition_index: p.leader_id for p in rlm.partitions}) \
            if rlm is not None else {}
        sizes: dict[tuple[str, int], int] = {}
        rows: list[PartitionRow] = []
        for name, topic in sorted(by_topic.items()):
            if name.startswith("__") and (topics is None or name not in topics):
                continue
            for p in sorted(topic.partitions, key=lambda p: p.partition_index):
                leader = p.leader_id
                if leader < 0 or leader not in clients.brokers:
                    continue
                client = await clients.get(leader)
                if (name, p.partition_index) not in sizes:
                    dirs = await client.send(m.DescribeLogDirsRequest(topics=None), timeout=TIMEOUT_S)
                    for d in dirs.results:
                        for t in d.topics:
                            for part in t.partitions:
                                sizes[(t.name, part.partition_index)] = part.partition_size
                offsets = {}
                for ts in (-2, -4, -5, -1):
                    req = m.ListOffsetsRequest
                    resp = await client.send(req(replica_id=-1, isolation_level=0, topics=[req.ListOffsetsTopic(
                        name=name, partitions=[req.ListOffsetsTopic.ListOffsetsPartition(
                            partition_index=p.partition_index, current_leader_epoch=-1, timestamp=ts)])]),
                        timeout=TIMEOUT_S)
                    offsets[ts] = resp.topics[0].partitions[0].offset
                cache = caches.get(TopicIdPartition(topic.topic_id, name, p.partition_index))
                finished = cache.segments_in_state(RemoteLogSegmentState.COPY_SEGMENT_FINISHED) if cache else []
                rows.append(PartitionRow(
                    name, p.partition_index, leader, sizes.get((name, p.partition_index), 0),
                    sum(s.segment_size_in_bytes for s in finished), len(finished),
                    offsets[-2], offsets[-4], offsets[-5], offsets[-1]))
        return rows
    finally:
        await clients.aclose()


def add_parser(sub: Any) -> None:
    tiered = sub.add_parser("tiered", help="tiered storage (KIP-405): local and remote bytes per partition")
    commands = tiered.add_subparsers(dest="tiered_command", required=True)
    d = commands.add_parser("describe", help="local vs remote bytes and offsets per partition")
    d.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    d.add_argument("--topic", action="append", default=None, help="only this topic (repeatable)")
    d.add_argument("--json", action="store_true", help="print the rows as JSON")
    d.add_argument("--command-config", metavar="FILE", help="client properties (security.protocol=SSL, ssl.*)")


def run(args: argparse.Namespace) -> int:
    try:
        security = command_config_security(args.command_config)
        rows = trio.run(describe, args.bootstrap_server, args.topic, security)
    except CliError as exc:
        print(f"kafkapy tiered: {exc}", file=sys.stderr)
        return 1
    except (OSError, trio.TooSlowError, ValueError, KafkaClientError) as exc:
        print(f"kafkapy tiered: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps([asdict(r) for r in rows], indent=1))
        return 0
    header = ("TOPIC", "PARTITION", "LEADER", "LOCAL-BYTES", "REMOTE-BYTES", "REMOTE-SEGMENTS",
              "LOG-START", "LOCAL-LOG-START", "HIGHEST-TIERED", "LOG-END")
    table = [header] + [tuple(str(v) for v in asdict(r).values()) for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    return 0
