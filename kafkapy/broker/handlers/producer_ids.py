"""InitProducerId for idempotent producers: a fresh producer id with epoch 0.

Kafka gives an idempotent (non-transactional) producer a new id on every InitProducerId, including
the KIP-360 epoch-bump retries, so sequence state never carries over between incarnations.
Transactional ids need the transaction coordinator, which does not exist yet.
"""

from __future__ import annotations

from kafkapy.broker.context import BrokerContext
from kafkapy.protocol import messages as m
from kafkapy.protocol.connection import Request
from kafkapy.protocol.errors import ErrorCode

Resp = m.InitProducerIdResponse


async def handle_init_producer_id(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    if body.transactional_id is not None:
        return Resp(throttle_time_ms=0, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
                    producer_id=-1, producer_epoch=-1)
    assert ctx.producer_ids is not None  # the node sets it on its broker context (node.py)
    pid = await ctx.producer_ids.next_id()
    return Resp(throttle_time_ms=0, error_code=0, producer_id=pid, producer_epoch=0)
