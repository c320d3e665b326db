"""DeleteRecords: move a partition's log start offset forward (the low watermark).

Offset -1 means "up to the high watermark", as in Kafka; an offset above the high watermark is
OFFSET_OUT_OF_RANGE. Reads below the new start fail at once; the files of segments wholly below
it go with the next retention pass, as in Kafka.
"""

from __future__ import annotations

import logging

from kafkapy.broker.context import BrokerContext
from kafkapy.protocol import messages as m
from kafkapy.protocol.connection import Request
from kafkapy.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

Resp = m.DeleteRecordsResponse
TopicResult = Resp.DeleteRecordsTopicResult
PartResult = TopicResult.DeleteRecordsPartitionResult

HIGH_WATERMARK = -1


async def handle_delete_records(ctx: BrokerContext, request: Request) -> object:
    topics = []
    for topic in request.body.topics:
        parts = []
        for p in topic.partitions:
            out = PartResult(partition_index=p.partition_index, low_watermark=-1, error_code=0)
            try:
                hosted = ctx.replicas.leader(topic.name, p.partition_index)
                plog = hosted.log
                target = plog.high_watermark if p.offset == HIGH_WATERMARK else p.offset
                if target < 0:
                    raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE, f"Invalid offset {p.offset}")
                if plog.increment_log_start_offset(target):
                    log.info("Deleted records of %s-%d before offset %d", topic.name, p.partition_index, target)
                out.low_watermark = plog.log_start_offset
            except KafkaError as exc:
                out.error_code = exc.code
            parts.append(out)
        topics.append(TopicResult(name=topic.name, partitions=parts))
    return Resp(throttle_time_ms=0, topics=topics)
