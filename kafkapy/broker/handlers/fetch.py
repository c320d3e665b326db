"""Fetch: read from the hosted logs, long-poll until min_bytes or max_wait_ms, honour sessions.

Consumers only read below the high watermark. A fetch at an offset outside [log start, log end]
answers OFFSET_OUT_OF_RANGE so the client applies auto.offset.reset; a fetch in the middle of a
batch returns that whole batch (clients skip the records before their position). The first
partition with data always gets at least one whole batch, even above the byte limits, so a record
larger than max.partition.fetch.bytes never stalls a consumer (KIP-74).
"""

from __future__ import annotations

import trio

from kafkapy.broker.context import BrokerContext
from kafkapy.broker.fetch_session import FetchPartitionRequest, SessionContext
from kafkapy.protocol import messages as m
from kafkapy.net.server import Reply
from kafkapy.protocol.connection import FileRegion, Request
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.protocol.fetch_response import FetchPartitionResult, FetchTopicResult, fetch_response_parts

Resp = m.FetchResponse

READ_COMMITTED = 1


async def handle_fetch(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    version = request.api_version
    wanted: list[FetchPartitionRequest] = []
    unknown_ids: list[tuple[object, int]] = []
    id_of: dict[str, object] = {}
    for topic in body.topics:
        name = ctx.topic_name(topic, version, field="topic")
        if name is None:
            unknown_ids.extend((topic.topic_id, p.partition) for p in topic.partitions)
            continue
        if version >= 13:
            id_of[name] = topic.topic_id
        for p in topic.partitions:
            wanted.append(
                FetchPartitionRequest(name, p.partition, p.fetch_offset, p.partition_max_bytes, p.current_leader_epoch, p.log_start_offset)
            )
    forgotten = []
    for ft in body.forgotten_topics_data or ():
        fname = ctx.topic_name(ft, version, field="topic")
        if fname is not None:
            forgotten.extend((fname, idx) for idx in ft.partitions)
    now_ms = ctx.clock.now_ms()
    session = ctx.fetch_sessions.new_context(
        session_id=body.session_id if version >= 7 else 0,
        epoch=body.session_epoch if version >= 7 else -1,
        partitions=wanted,
        forgotten=forgotten,
        now_ms=now_ms,
    )
    if session.error != ErrorCode.NONE:
        return Resp(version=version, throttle_time_ms=0, error_code=session.error, session_id=0, responses=[])

    deadline = trio.current_time() + max(0, body.max_wait_ms) / 1000.0
    max_bytes = body.max_bytes if version >= 3 else 0x7FFFFFFF
    read_committed = version >= 4 and body.isolation_level == READ_COMMITTED
    while True:
        results, total = _read_all(ctx, session.partitions, max_bytes, read_committed)
        has_error = any(r[1] != ErrorCode.NONE for r in results.values())
        if total >= body.min_bytes or has_error or trio.current_time() >= deadline or not session.partitions:
            break
        await ctx.replicas.wait_for_append(deadline)
    return _build_response(ctx, version, session, results, unknown_ids, id_of, request)


def _read_all(ctx: BrokerContext, partitions: list[FetchPartitionRequest], max_bytes: int,
              read_committed: bool) -> tuple[dict[tuple[str, int], tuple], int]:
    results: dict[tuple[str, int], tuple] = {}
    total = 0
    for p in partitions:
        key = (p.topic, p.partition)
        try:
            hosted = ctx.replicas.leader(p.topic, p.partition, p.current_leader_epoch)
            plog = hosted.log
            hw = plog.high_watermark
            lso = min(plog.last_stable_offset, hw)
            limit = min(p.max_bytes, max(0, max_bytes - total))
            records: FileRegion | bytes = b""
            if limit > 0 or total == 0:
                # read_committed consumers stop at the last stable offset, as in Kafka.
                fslice = plog.read(p.fetch_offset, limit, max_offset=lso if read_committed else hw,
                                   min_one_message=(total == 0))
                if fslice is not None and fslice.size > 0:
                    # Zero-copy: the listener sends the segment bytes with os.sendfile (or reads
                    # them itself on streams that aren't plain sockets). The region owns the slice,
                    # and so the segment's descriptor, until the reply has been written.
                    records = FileRegion.of(fslice)
            total += len(records)
            results[key] = (records, ErrorCode.NONE, hw, plog.log_start_offset, lso)
        except KafkaError as exc:
            hw = lso = start = -1
            try:
                hosted_log = ctx.replicas.get(p.topic, p.partition).log
                hw, start = hosted_log.high_watermark, hosted_log.log_start_offset
                lso = hw
            except KafkaError:
                pass
            results[key] = (b"", exc.code, hw, start, lso)
    return results, total


def _build_response(ctx: BrokerContext, version: int, session: SessionContext, results: dict,
                    unknown_ids: list, id_of: dict, request: Request) -> Reply:
    # The frame is packed directly (protocol.fetch_response) rather than through kafka-python's
    # object tree: the records stay FileRegions, so Python builds only the small framing.
    by_topic: dict[str, list[FetchPartitionResult]] = {}
    for p in session.partitions:
        key = (p.topic, p.partition)
        records, error, hw, start, lso = results[key]
        if not session.should_include(key, has_records=bool(records), error=error, high_watermark=hw,
                                      log_start_offset=start, last_stable_offset=lso):
            continue
        parts = by_topic.get(p.topic)
        if parts is None:
            parts = by_topic[p.topic] = []
        parts.append(FetchPartitionResult(p.partition, error, hw, lso, start, records))
    topics = [FetchTopicResult(name, _topic_id(ctx, name, id_of) if version >= 13 else None, parts)
              for name, parts in by_topic.items()]
    if unknown_ids:
        grouped: dict[object, list[FetchPartitionResult]] = {}
        for tid, idx in unknown_ids:
            grouped.setdefault(tid, []).append(
                FetchPartitionResult(idx, ErrorCode.UNKNOWN_TOPIC_ID, -1, -1, -1, b""))
        topics.extend(FetchTopicResult(None, tid, parts) for tid, parts in grouped.items())
    return Reply(parts=fetch_response_parts(request, throttle_time_ms=0, error_code=0,
                                            session_id=session.session_id, topics=topics))


def _topic_id(ctx: BrokerContext, name: str, id_of: dict) -> object:
    # An incremental session answers for partitions named by earlier requests too: their ids
    # come from the metadata image, not from this request.
    tid = id_of.get(name)
    if tid is None:
        topic = ctx.image().topics.by_name.get(name)
        tid = id_of[name] = topic.id if topic is not None else None
    return tid
