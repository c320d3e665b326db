"""Produce: validate and append each partition's batches, then answer per partition.

Errors are per partition (Kafka never fails a whole produce request for one bad partition). With
one replica the high watermark moves on append, so acks=1 and acks=-1 answer at once; acks=0 gets
no response at all.
"""

from __future__ import annotations

import logging

from kafkapy.broker.context import BrokerContext
from kafkapy.protocol import messages as m
from kafkapy.protocol.connection import Request
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.records.format import BATCH_LENGTH, LOG_OVERHEAD

log = logging.getLogger(__name__)

VALID_ACKS = (-1, 0, 1)
Resp = m.ProduceResponse
TopicResp = Resp.TopicProduceResponse
PartResp = TopicResp.PartitionProduceResponse


async def handle_produce(ctx: BrokerContext, request: Request) -> object | None:
    body = request.body
    version = request.api_version
    now_ms = ctx.clock.now_ms()
    topics_out = []
    for topic_data in body.topic_data:
        name = ctx.topic_name(topic_data, version)
        parts_out = []
        for pdata in topic_data.partition_data:
            part = PartResp(version=version, index=pdata.index, error_code=0, base_offset=-1, log_append_time_ms=-1, log_start_offset=-1)
            try:
                if body.acks not in VALID_ACKS:
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
                # records is a writable view into the request frame: validated, rewritten in
                # place (offsets, epoch) and written to the segment without a copy.
                result = ctx.replicas.append(hosted, records, now_ms=now_ms)
                part.base_offset = result.first_offset
                part.log_append_time_ms = result.log_append_time
                part.log_start_offset = result.log_start_offset
            except KafkaError as exc:
                part.error_code = exc.code
                part.error_message = exc.message if exc.message != exc.code.name else None
                if exc.code not in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER):
                    log.info(
                        "Produce to %s-%d from %s rejected: %s %s",
                        name, pdata.index, request.client_id, exc.code.name, exc.message or "",
                    )
            parts_out.append(part)
        tresp = TopicResp(version=version, partition_responses=parts_out)
        if version >= 13:
            tresp.topic_id = topic_data.topic_id
        else:
            tresp.name = topic_data.name
        topics_out.append(tresp)
    if body.acks == 0:
        return None
    # Built with version=: in-version fields are preset, so encoding skips kafka-python's
    # per-field default lookups.
    return Resp(version=version, responses=topics_out, throttle_time_ms=0)
