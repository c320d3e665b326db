"""OffsetForLeaderEpoch: where a leader epoch ended in this partition's log.

Consumers ask it after a leader change to check that their position still exists on the new
leader (KIP-320: a position past the end of its epoch there means the log was truncated); followers
will ask it to find where their log diverges. The answer comes from the partition's
leader-epoch-checkpoint: the end offset of the requested epoch is the start of the next higher one,
or the log end offset for the latest epoch.
"""

from __future__ import annotations

from kafkapy.broker.context import BrokerContext
from kafkapy.protocol import messages as m
from kafkapy.protocol.connection import Request
from kafkapy.protocol.errors import KafkaError

Resp = m.OffsetForLeaderEpochResponse
TopicResult = Resp.OffsetForLeaderTopicResult
PartResult = TopicResult.EpochEndOffset


async def handle_offset_for_leader_epoch(ctx: BrokerContext, request: Request) -> object:
    topics = []
    for topic in request.body.topics:
        parts = []
        for p in topic.partitions:
            out = PartResult(error_code=0, partition=p.partition, leader_epoch=-1, end_offset=-1)
            try:
                hosted = ctx.replicas.leader(topic.topic, p.partition, p.current_leader_epoch)
                plog = hosted.log
                out.leader_epoch, out.end_offset = plog.leader_epoch_cache.end_offset_for(
                    p.leader_epoch, plog.log_end_offset)
            except KafkaError as exc:
                out.error_code = exc.code
            parts.append(out)
        topics.append(TopicResult(topic=topic.topic, partitions=parts))
    return Resp(throttle_time_ms=0, topics=topics)
