"""FindCoordinator: which broker coordinates a group (transactions are not coordinated yet).

A group's coordinator leads partition ``abs(hashCode(group)) % offsets.topic.num.partitions`` of
``__consumer_offsets``. As in Kafka, the first FindCoordinator creates that topic through the
controller (``offsets.topic.replication.factor`` replicas, ``cleanup.policy=compact``). While the
topic or its partition is not ready the answer is COORDINATOR_NOT_AVAILABLE, which clients retry.
Transaction keys get COORDINATOR_NOT_AVAILABLE until the transaction coordinator exists.
"""

from __future__ import annotations

import logging

from kafkapy.broker.context import BrokerContext
from kafkapy.broker.handlers.topics import create_topics_internal
from kafkapy.controller import NewTopic
from kafkapy.coordinator.schema import OFFSETS_TOPIC
from kafkapy.coordinator.service import setting
from kafkapy.protocol import messages as m
from kafkapy.protocol.connection import Request
from kafkapy.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

Resp = m.FindCoordinatorResponse
GROUP_KEY = 0
TRANSACTION_KEY = 1


async def ensure_offsets_topic(ctx: BrokerContext) -> bool:
    """Create ``__consumer_offsets`` if it does not exist; True when it exists now."""
    if OFFSETS_TOPIC in ctx.image().topics.by_name:
        return True
    partitions = setting(ctx.config, "offsets.topic.num.partitions")
    replication = setting(ctx.config, "offsets.topic.replication.factor")
    configs: dict[str, str | None] = {
        "cleanup.policy": "compact",
        "compression.type": "producer",
        "segment.bytes": str(setting(ctx.config, "offsets.topic.segment.bytes")),
    }
    results = await create_topics_internal(
        ctx, [NewTopic(OFFSETS_TOPIC, partitions, replication, configs=configs)])
    for _, code, message in results:
        if code == ErrorCode.NONE:
            log.info("Created %s with %d partitions, replication factor %d", OFFSETS_TOPIC, partitions, replication)
        elif code != ErrorCode.TOPIC_ALREADY_EXISTS:
            log.warning("Could not create %s: %s %s", OFFSETS_TOPIC, ErrorCode(code).name, message)
    return OFFSETS_TOPIC in ctx.image().topics.by_name


async def _lookup(ctx: BrokerContext, key: str, key_type: int) -> tuple[int, str | None, int, str, int]:
    """(error, message, node_id, host, port) for one coordinator key."""
    if key_type == TRANSACTION_KEY:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available.", -1, "", -1
    if key_type != GROUP_KEY:
        return ErrorCode.INVALID_REQUEST, f"Unknown coordinator key type {key_type}", -1, "", -1
    if ctx.groups is None or not await ensure_offsets_topic(ctx):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available.", -1, "", -1
    partition = ctx.groups.partition_for(key)
    topic = ctx.image().topics.by_name[OFFSETS_TOPIC]
    reg = topic.partitions.get(partition)
    leader = reg.leader if reg is not None else -1
    broker = ctx.image().brokers.get(leader) if leader >= 0 else None
    endpoint = broker.listener(ctx.listener_name()) if broker is not None else None
    if endpoint is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available.", -1, "", -1
    return ErrorCode.NONE, None, leader, endpoint.host, endpoint.port


async def handle_find_coordinator(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    version = request.api_version
    key_type = body.key_type if version >= 1 else GROUP_KEY
    if version >= 4:
        coordinators = []
        for key in body.coordinator_keys:
            code, message, node, host, port = await _lookup(ctx, key, key_type)
            coordinators.append(Resp.Coordinator(key=key, node_id=node, host=host, port=port,
                                                 error_code=code, error_message=message))
        return Resp(throttle_time_ms=0, coordinators=coordinators)
    code, message, node, host, port = await _lookup(ctx, body.key, key_type)
    return Resp(throttle_time_ms=0, error_code=code, error_message=message, node_id=node, host=host, port=port)
