"""ListOffsets: earliest, latest, max-timestamp, earliest-local and by-timestamp lookups.

`latest` is the high watermark (the offset after the last committed record, not the last batch's
base offset + 1), or for read_committed the last stable offset; `earliest` is the log start
offset. By timestamp answers the first offset whose timestamp is at least the target, or -1/-1
when no record is that late, as Kafka does. As in Kafka (its lastFetchableOffset), what a lookup
finds at or past the last offset the client may read (the LSO for read_committed, else the high
watermark) is answered -1/-1: by timestamp, max-timestamp and latest-tiered alike.

With tiered storage (``ctx.remote``, KIP-405 / KIP-1005): `earliest` is the start of the whole log
(remote included), `earliest-local` (-4) the local log start, `latest-tiered` (-5) the highest
offset copied to remote storage (-1 when none), and a timestamp older than the local log is
looked up in the remote segments.
"""

from __future__ import annotations

from kafkapy.broker.context import BrokerContext
from kafkapy.protocol import messages as m
from kafkapy.protocol.connection import Request
from kafkapy.protocol.errors import ErrorCode, KafkaError

Resp = m.ListOffsetsResponse
TopicResp = Resp.ListOffsetsTopicResponse
PartResp = TopicResp.ListOffsetsPartitionResponse

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
READ_COMMITTED = 1


async def handle_list_offsets(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    version = request.api_version
    read_committed = version >= 2 and body.isolation_level == READ_COMMITTED
    topics = []
    for topic in body.topics:
        parts = []
        for p in topic.partitions:
            out = PartResp(partition_index=p.partition_index, error_code=0, timestamp=-1, offset=-1, leader_epoch=-1)
            try:
                hosted = ctx.replicas.leader(topic.name, p.partition_index, p.current_leader_epoch)
                plog = hosted.log
                ts = p.timestamp
                hw = plog.high_watermark
                fetchable = min(plog.last_stable_offset, hw) if read_committed else hw
                if ts == LATEST:
                    out.offset = fetchable
                elif ts == EARLIEST:
                    out.offset = plog.log_start_offset
                elif ts == EARLIEST_LOCAL:
                    out.offset = plog.local_log_start_offset
                elif ts == LATEST_TIERED:
                    # Kafka answers -1 when no segment was uploaded.
                    tiered = -1 if ctx.remote is None else ctx.remote.highest_remote_offset(hosted)
                    out.offset = tiered if tiered < fetchable else -1
                elif ts == MAX_TIMESTAMP:
                    found_max = plog.max_timestamp_and_offset()
                    if found_max is not None and found_max[1] < fetchable:
                        out.timestamp, out.offset = found_max
                elif ts < 0:
                    raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown special timestamp {ts}")
                else:
                    found: tuple[int, int] | None = None  # (offset, timestamp)
                    if ctx.remote is not None and ctx.remote.serves_remotely(hosted, plog.log_start_offset):
                        found = await ctx.remote.offset_for_timestamp(hosted, ts)
                    if found is None:
                        found = plog.offset_for_timestamp(ts)
                    if found is not None and found[0] < fetchable:
                        out.offset, out.timestamp = found
                if out.offset >= 0:
                    out.leader_epoch = hosted.leader_epoch
                if version == 0:
                    out.old_style_offsets = [out.offset] if out.offset >= 0 else []
            except KafkaError as exc:
                out.error_code = exc.code
            parts.append(out)
        topics.append(TopicResp(name=topic.name, partitions=parts))
    return Resp(throttle_time_ms=0, topics=topics)
