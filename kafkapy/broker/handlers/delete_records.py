"""DeleteRecords: move a partition's log start offset forward (the low watermark).

Offset -1 means "up to the high watermark", as in Kafka; an offset above the high watermark is
OFFSET_OUT_OF_RANGE, and a topic whose cleanup.policy lacks ``delete`` refuses with
POLICY_VIOLATION. The leader moves its own log start at once (reads below it fail from then on;
the files of segments wholly below it go with the next retention pass); followers follow it with
their next fetch. On a tiered partition an offset below the local log start moves only the whole
log's start (``PartitionLog.log_start_offset``), and the remote segments wholly below it go
with the leader's next remote expiration pass (``Partition.delete_records_on_leader``). As
Kafka's DelayedDeleteRecords, the answer waits until every live replica's log starts at the
requested offset or later (the *low watermark*), or until the request's timeout, with
REQUEST_TIMED_OUT and the low watermark reached so far.
"""

from __future__ import annotations

import logging
from typing import Any

import trio

from kafkapy.broker.context import BrokerContext
from kafkapy.broker.partition import Partition
from kafkapy.protocol import messages as m
from kafkapy.protocol.connection import Request
from kafkapy.protocol.errors import KafkaError

log = logging.getLogger(__name__)

Resp = m.DeleteRecordsResponse
TopicResult = Resp.DeleteRecordsTopicResult
PartResult = TopicResult.DeleteRecordsPartitionResult

async def handle_delete_records(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    deadline = trio.current_time() + max(0, body.timeout_ms) / 1000.0
    image = ctx.image()

    def alive(broker_id: int) -> bool:
        reg = image.cluster.brokers.get(broker_id)
        return reg is not None and not reg.fenced

    topics = []
    waits: list[tuple[Any, Partition, int]] = []  # (a PartResult: kafka-python's, untyped, ...)
    for topic in body.topics:
        parts = []
        for p in topic.partitions:
            out = PartResult(partition_index=p.partition_index, low_watermark=-1, error_code=0)
            try:
                hosted = ctx.replicas.leader(topic.name, p.partition_index)
                waits.append((out, hosted, hosted.delete_records_on_leader(p.offset)))
            except KafkaError as exc:
                out.error_code = exc.code
                log.info("DeleteRecords on %s-%d refused: %s", topic.name, p.partition_index, exc)
            parts.append(out)
        topics.append(TopicResult(name=topic.name, partitions=parts))

    async def wait(out: Any, hosted: Partition, target: int) -> None:
        error, low = await ctx.replicas.wait_for_low_watermark(hosted, target, deadline, alive)
        out.error_code, out.low_watermark = int(error), low

    async with trio.open_nursery() as nursery:
        for args in waits:
            nursery.start_soon(wait, *args)
    return Resp(throttle_time_ms=0, topics=topics)
