"""Produce: validate and append each partition's batches, then answer per partition.

Errors are per partition (Kafka never fails a whole produce request for one bad partition).
acks=1 answers once the leader has appended; acks=0 gets no response at all. acks=-1 (all) first
checks that the ISR has ``min.insync.replicas`` members (NOT_ENOUGH_REPLICAS, nothing appended),
then waits in the purgatory until the high watermark passes the batch, i.e. every in-sync replica
has it, or the request's timeout (REQUEST_TIMED_OUT); if the ISR shrank below the minimum by then
the answer is NOT_ENOUGH_REPLICAS_AFTER_APPEND, as in Kafka. The response frame is packed directly (``protocol.produce_response``), not
through kafka-python's object tree: it is a fixed cost on every request.
"""

from __future__ import annotations

import logging

import trio

from kafkapy.broker.context import BrokerContext
from kafkapy.broker.leader_hints import LeaderHints
from kafkapy.net.server import Reply
from kafkapy.protocol.connection import Request
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.protocol.produce_response import (
    ProducePartitionResult,
    ProduceTopicResult,
    produce_response_frame,
)
from kafkapy.records.format import BATCH_LENGTH, LOG_OVERHEAD

log = logging.getLogger(__name__)

VALID_ACKS = (-1, 0, 1)
# Failures are counted per topic only for topics that exist: a client naming topics that do
# not must not grow the series.
_UNKNOWN_TOPIC = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID)


async def handle_produce(ctx: BrokerContext, request: Request) -> Reply | None:
    body = request.body
    version = request.api_version
    now_ms = ctx.clock.now_ms()
    acks = body.acks
    topics_out = []
    # acks=all: (result index, hosted partition, offset the high watermark must reach).
    waiting: list[tuple[list[ProducePartitionResult], int, object, int]] = []
    hints = LeaderHints(ctx)
    for topic_data in body.topic_data:
        name = ctx.topic_name(topic_data, version)
        parts_out = []
        for pdata in topic_data.partition_data:
            try:
                if acks not in VALID_ACKS:
                    raise KafkaError(ErrorCode.INVALID_REQUIRED_ACKS)
                if body.transactional_id is not None:
                    raise KafkaError(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "Transactions are not supported yet")
                if name is None:
                    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID if version >= 13 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                hosted = ctx.replicas.get(name, pdata.index)
                if pdata.records is None:
                    raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "Produce request has no records")
                records = pdata.records
                if len(records) >= LOG_OVERHEAD:
                    first_size = int.from_bytes(records[BATCH_LENGTH:LOG_OVERHEAD], "big", signed=True) + LOG_OVERHEAD
                    if LOG_OVERHEAD <= first_size < len(records):
                        raise KafkaError(
                            ErrorCode.INVALID_RECORD,
                            "Produce requests with version 3 are only allowed to contain exactly one record batch",
                        )
                if acks == -1:
                    ctx.replicas.check_min_insync(hosted)
                # records is a writable view into the request frame: validated, rewritten in
                # place (offsets, epoch) and written to the segment without a copy.
                result = ctx.replicas.append(hosted, records, now_ms=now_ms)
                if ctx.stats is not None and not result.duplicate:
                    # (A retried batch the log already has is acknowledged, not appended again.)
                    ctx.stats.produced(name, result.record_count, len(records))
                if acks == -1:
                    waiting.append((parts_out, len(parts_out), hosted, result.last_offset + 1))
                parts_out.append(ProducePartitionResult(
                    pdata.index, 0, result.first_offset, result.log_append_time, result.log_start_offset))
            except KafkaError as exc:
                if (ctx.stats is not None and name is not None and exc.code not in _UNKNOWN_TOPIC
                        and name in ctx.image().topics.by_name):
                    ctx.stats.produce_failed(name)
                message = exc.message if exc.message != exc.code.name else None
                parts_out.append(ProducePartitionResult(
                    pdata.index, exc.code, -1, -1, -1, message,
                    current_leader=hints.hint(name, pdata.index, exc.code) if name else None))
                # A storage fault is logged once per episode where it is detected (the log
                # manager's StorageFaults), not once per request.
                if exc.code not in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                    ErrorCode.KAFKA_STORAGE_ERROR):
                    log.info(
                        "Produce to %s-%d from %s rejected: %s %s",
                        name, pdata.index, request.client_id, exc.code.name, exc.message or "",
                    )
        topics_out.append(ProduceTopicResult(topic_data.name, topic_data.topic_id, parts_out))
    if acks == 0:
        return None
    if waiting:
        await _await_replication(ctx, waiting, body.timeout_ms)
    return Reply(parts=[produce_response_frame(request, topics_out, node_endpoints=hints.endpoints)])


async def _await_replication(ctx: BrokerContext, waiting: list, timeout_ms: int) -> None:
    """The purgatory: every acks=all partition waits for its high watermark, concurrently, all
    bounded by the request's timeout; a partition that fails gets its error in place."""
    deadline = trio.current_time() + max(0, timeout_ms) / 1000.0

    async def one(parts_out: list[ProducePartitionResult], i: int, hosted: object, required: int) -> None:
        code = await ctx.replicas.wait_for_replication(hosted, required, deadline)  # type: ignore[arg-type]
        if code != ErrorCode.NONE:
            # No leader hint here: it would come from the image the request started with,
            # the one that has just changed; the client refreshes its metadata instead.
            parts_out[i] = ProducePartitionResult(parts_out[i].index, code, -1, -1, -1, None)
            log.info("Produce to %s-%d completed with %s", hosted.topic, hosted.index,  # type: ignore[attr-defined]
                     code.name)

    if len(waiting) == 1:
        await one(*waiting[0])
        return
    async with trio.open_nursery() as nursery:
        for entry in waiting:
            nursery.start_soon(one, *entry)
