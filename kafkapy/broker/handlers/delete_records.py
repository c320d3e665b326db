"""DeleteRecords: move a partition's log start offset forward (the low watermark).

Offset -1 means "up to the high watermark", as in Kafka; an offset above the high watermark is
OFFSET_OUT_OF_RANGE, and a topic whose cleanup.policy lacks ``delete`` refuses with
POLICY_VIOLATION. The leader moves its own log start at once (reads below it fail from then on;
the files of segments wholly below it go with the next retention pass); followers follow it with
their next fetch. On a tiered partition an offset below the local log start moves only the whole
log's start (``PartitionLog.whole_log_start_offset``), and the remote segments wholly below it go
with the leader's next remote expiration pass. As Kafka's DelayedDeleteRecords, the answer waits until every live replica's log
starts at the requested offset or later (the *low watermark*), or until the request's timeout,
with REQUEST_TIMED_OUT and the low watermark reached so far.
"""

from __future__ import annotations

import logging

import trio

from kafkapy.broker.context import BrokerContext
from kafkapy.broker.partition import Partition as HostedPartition
from kafkapy.protocol import messages as m
from kafkapy.protocol.connection import Request
from kafkapy.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

Resp = m.DeleteRecordsResponse
TopicResult = Resp.DeleteRecordsTopicResult
PartResult = TopicResult.DeleteRecordsPartitionResult

HIGH_WATERMARK = -1


def _delete_on_leader(ctx: BrokerContext, topic: str, partition: int, offset: int) -> tuple[HostedPartition, int]:
    """Move the leader's log start; returns the partition and the offset to wait for."""
    hosted = ctx.replicas.leader(topic, partition)
    plog = hosted.log
    if not plog.config.delete:
        raise KafkaError(ErrorCode.POLICY_VIOLATION,
                         f"Records of partition {topic}-{partition} can not be deleted due to "
                         "the configured policy")
    target = plog.high_watermark if offset == HIGH_WATERMARK else offset
    if target < 0:
        raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE, f"Invalid offset {offset}")
    if plog.increment_log_start_offset(target):
        log.info("Deleted records of %s-%d before offset %d", topic, partition, target)
    return hosted, target


async def handle_delete_records(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    deadline = trio.current_time() + max(0, body.timeout_ms) / 1000.0
    image = ctx.image()

    def alive(broker_id: int) -> bool:
        reg = image.cluster.brokers.get(broker_id)
        return reg is not None and not reg.fenced

    topics = []
    waits: list[tuple[PartResult, HostedPartition, int]] = []
    for topic in body.topics:
        parts = []
        for p in topic.partitions:
            out = PartResult(partition_index=p.partition_index, low_watermark=-1, error_code=0)
            try:
                hosted, target = _delete_on_leader(ctx, topic.name, p.partition_index, p.offset)
                waits.append((out, hosted, target))
            except KafkaError as exc:
                out.error_code = exc.code
                log.info("DeleteRecords on %s-%d refused: %s", topic.name, p.partition_index, exc)
            parts.append(out)
        topics.append(TopicResult(name=topic.name, partitions=parts))

    async def wait(out: PartResult, hosted: HostedPartition, target: int) -> None:
        error, low = await ctx.replicas.wait_for_low_watermark(hosted, target, deadline, alive)
        out.error_code, out.low_watermark = int(error), low

    async with trio.open_nursery() as nursery:
        for args in waits:
            nursery.start_soon(wait, *args)
    return Resp(throttle_time_ms=0, topics=topics)
