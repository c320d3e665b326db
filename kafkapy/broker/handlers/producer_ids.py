"""InitProducerId for idempotent producers: a fresh producer id with epoch 0.

Kafka gives an idempotent (non-transactional) producer a new id on every InitProducerId, including
the KIP-360 epoch-bump retries, so sequence state never carries over between incarnations.
With a transactional id the request goes to the transaction coordinator (handlers/transactions.py).
"""

from __future__ import annotations

from kafkapy.broker.context import BrokerContext
from kafkapy.broker.handlers.transactions import handle_txn_init_producer_id
from kafkapy.protocol import messages as m
from kafkapy.protocol.connection import Request

Resp = m.InitProducerIdResponse


async def handle_init_producer_id(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    if body.transactional_id is not None:
        return await handle_txn_init_producer_id(ctx, request)
    assert ctx.producer_ids is not None  # the node sets it on its broker context (node.py)
    pid = await ctx.producer_ids.next_id()
    return Resp(throttle_time_ms=0, error_code=0, producer_id=pid, producer_epoch=0)
