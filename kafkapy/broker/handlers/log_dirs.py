"""DescribeLogDirs and AlterReplicaLogDirs: where this broker's replicas live on disk.

Admin tools (``kafka-log-dirs.sh``, AdminClient ``describeLogDirs``/``describeReplicaLogDirs``) use
DescribeLogDirs to see where replicas live and how much disk they take. Requested partitions this
broker does not host are left out, as Kafka does; ``topics`` null means every partition.
AlterReplicaLogDirs (``kafka-reassign-partitions.sh`` with log dirs) moves a replica to another
log dir of the broker.
"""

from __future__ import annotations

import os
from typing import Any

from kafkapy.broker.context import BrokerContext
from kafkapy.protocol import messages as m
from kafkapy.protocol.connection import Request
from kafkapy.protocol.errors import ErrorCode, KafkaError

Resp = m.DescribeLogDirsResponse
DirResult = Resp.DescribeLogDirsResult
TopicResult = DirResult.DescribeLogDirsTopic
PartResult = TopicResult.DescribeLogDirsPartition


def _disk_usage(path: str) -> tuple[int, int]:
    """(total bytes, usable bytes) of the file system holding ``path``; -1s if it cannot be read."""
    try:
        st = os.statvfs(path)
    except OSError:
        return -1, -1
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


async def handle_describe_log_dirs(ctx: BrokerContext, request: Request) -> object:
    wanted: dict[str, set[int]] | None = None
    if request.body.topics is not None:
        wanted = {}
        for t in request.body.topics:
            wanted.setdefault(t.topic, set()).update(t.partitions)
    # Of kafka-python's (untyped) partition result objects.
    by_dir: dict[str, dict[str, list[Any]]] = {d: {} for d in ctx.replicas.log_dirs}
    for hosted in ctx.replicas.partitions():
        if wanted is not None and hosted.index not in wanted.get(hosted.topic, ()):
            continue
        log_dir = os.path.dirname(os.path.abspath(hosted.log.dir))
        by_dir.setdefault(log_dir, {}).setdefault(hosted.topic, []).append(PartResult(
            partition_index=hosted.index, partition_size=hosted.log.size_in_bytes,
            # The lag of a current (not future) replica behind its high watermark: none for a leader.
            offset_lag=max(0, hosted.log.high_watermark - hosted.log.log_end_offset),
            is_future_key=False))
    results = []
    offline = ctx.replicas.offline_log_dirs
    for log_dir, topics in by_dir.items():
        if log_dir in offline:
            # As Kafka: an offline dir is listed with KAFKA_STORAGE_ERROR and nothing else.
            results.append(DirResult(error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=log_dir,
                                     total_bytes=-1, usable_bytes=-1, topics=[]))
            continue
        total, usable = _disk_usage(log_dir)
        results.append(DirResult(
            error_code=0, log_dir=log_dir, total_bytes=total, usable_bytes=usable,
            topics=[TopicResult(name=name, partitions=sorted(parts, key=lambda p: p.partition_index))
                    for name, parts in sorted(topics.items())]))
    return Resp(throttle_time_ms=0, error_code=0, results=results)


async def handle_alter_replica_log_dirs(ctx: BrokerContext, request: Request) -> object:
    Resp2 = m.AlterReplicaLogDirsResponse
    TopicOut = Resp2.AlterReplicaLogDirTopicResult
    PartOut = TopicOut.AlterReplicaLogDirPartitionResult
    results: dict[str, list[object]] = {}
    for d in request.body.dirs:
        for t in d.topics:
            for index in t.partitions:
                code = 0
                try:
                    ctx.replicas.move_to_log_dir(t.name, index, d.path)
                except KafkaError as exc:
                    code = exc.code
                results.setdefault(t.name, []).append(PartOut(partition_index=index, error_code=code))
    return Resp2(throttle_time_ms=0, results=[TopicOut(topic_name=name, partitions=parts)
                                             for name, parts in results.items()])
