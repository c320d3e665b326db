"""FindCoordinator: which broker coordinates a group (key type 0) or a transactional id (type 1).

A group's coordinator leads partition ``abs(hashCode(group)) % offsets.topic.num.partitions`` of
``__consumer_offsets``. As in Kafka, the first FindCoordinator creates that topic through the
controller (``offsets.topic.replication.factor`` replicas, ``cleanup.policy=compact``). While the
topic or its partition is not ready the answer is COORDINATOR_NOT_AVAILABLE, which clients retry.
A transactional id's coordinator leads partition ``abs(hashCode(id)) %
transaction.state.log.num.partitions`` of ``__transaction_state``, created the same way on first
use (``transaction.state.log.*`` settings). A share partition's coordinator (key type 2, FindCoordinator
v6+, ``<group>:<topic id>:<partition>``) leads partition ``abs(hashCode(key)) %
share.coordinator.state.topic.num.partitions`` of ``__share_group_state`` (Kafka's settings for it:
``cleanup.policy=delete``, infinite retention, pruned by the coordinator).

``served_shard`` is the other side, for the group and transaction APIs sent to a coordinator: the
shard serving a key on this broker, or the error a client retries on when it is not served here.
"""

from __future__ import annotations

import logging
from typing import Protocol, TypeVar

from kafkapy.broker.context import BrokerContext
from kafkapy.broker.handlers.topics import create_topics_internal
from kafkapy.controller import NewTopic
from kafkapy.coordinator.schema import OFFSETS_TOPIC
from kafkapy.coordinator.service import setting
from kafkapy.coordinator.share_state_service import SHARE_STATE_TOPIC, parse_coordinator_key, share_coordinator_settings
from kafkapy.coordinator.transaction import TRANSACTION_STATE_TOPIC
from kafkapy.coordinator.transaction_service import transaction_config
from kafkapy.protocol import messages as m
from kafkapy.protocol.connection import Request
from kafkapy.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

Resp = m.FindCoordinatorResponse
GROUP_KEY = 0
TRANSACTION_KEY = 1
SHARE_KEY = 2
#: The first FindCoordinator version that may ask for a share coordinator.
SHARE_KEY_MIN_VERSION = 6

ShardT = TypeVar("ShardT")
ShardT_co = TypeVar("ShardT_co", covariant=True)


class ShardSource(Protocol[ShardT_co]):
    """A coordinator edge (group or transaction) that finds the shard serving a key."""

    def shard_for(self, key: str, /) -> ShardT_co: ...


def served_shard(service: ShardSource[ShardT] | None, key: str | None,
                 empty_key_error: int) -> tuple[ShardT | None, int]:
    """The shard serving ``key`` here, or (None, error) when it is not served here right now.

    The error is ``empty_key_error`` for an empty key, COORDINATOR_NOT_AVAILABLE when this broker
    runs no such coordinator, else what ``shard_for`` raised (NOT_COORDINATOR,
    COORDINATOR_LOAD_IN_PROGRESS or COORDINATOR_NOT_AVAILABLE)."""
    if not key:
        return None, empty_key_error
    if service is None:
        return None, ErrorCode.COORDINATOR_NOT_AVAILABLE
    try:
        return service.shard_for(key), ErrorCode.NONE
    except KafkaError as exc:
        return None, exc.code


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


async def ensure_transaction_topic(ctx: BrokerContext) -> bool:
    """Create ``__transaction_state`` if it does not exist (Kafka's settings for it); True when
    it exists now."""
    if TRANSACTION_STATE_TOPIC in ctx.image().topics.by_name:
        return True
    partitions = transaction_config(ctx.config).transaction_state_log_num_partitions
    replication = setting(ctx.config, "transaction.state.log.replication.factor")
    configs: dict[str, str | None] = {
        "cleanup.policy": "compact",
        "compression.type": "uncompressed",
        "unclean.leader.election.enable": "false",
        "min.insync.replicas": str(setting(ctx.config, "transaction.state.log.min.isr")),
        "segment.bytes": str(setting(ctx.config, "transaction.state.log.segment.bytes")),
    }
    results = await create_topics_internal(
        ctx, [NewTopic(TRANSACTION_STATE_TOPIC, partitions, replication, configs=configs)])
    for _, code, message in results:
        if code == ErrorCode.NONE:
            log.info("Created %s with %d partitions, replication factor %d", TRANSACTION_STATE_TOPIC, partitions,
                     replication)
        elif code != ErrorCode.TOPIC_ALREADY_EXISTS:
            log.warning("Could not create %s: %s %s", TRANSACTION_STATE_TOPIC, ErrorCode(code).name, message)
    return TRANSACTION_STATE_TOPIC in ctx.image().topics.by_name


async def ensure_share_state_topic(ctx: BrokerContext) -> bool:
    """Create ``__share_group_state`` if it does not exist (Kafka's settings for it); True when
    it exists now."""
    if SHARE_STATE_TOPIC in ctx.image().topics.by_name:
        return True
    settings = share_coordinator_settings(ctx.config)
    results = await create_topics_internal(ctx, [NewTopic(
        SHARE_STATE_TOPIC, settings.num_partitions, settings.replication_factor, configs=settings.topic_configs())])
    for _, code, message in results:
        if code == ErrorCode.NONE:
            log.info("Created %s with %d partitions, replication factor %d", SHARE_STATE_TOPIC,
                     settings.num_partitions, settings.replication_factor)
        elif code != ErrorCode.TOPIC_ALREADY_EXISTS:
            log.warning("Could not create %s: %s %s", SHARE_STATE_TOPIC, ErrorCode(code).name, message)
    return SHARE_STATE_TOPIC in ctx.image().topics.by_name


async def _lookup(ctx: BrokerContext, key: str, key_type: int,
                  version: int) -> tuple[int, str | None, int, str, int]:
    """(error, message, node_id, host, port) for one coordinator key."""
    if key_type == SHARE_KEY:
        if version < SHARE_KEY_MIN_VERSION:
            return ErrorCode.INVALID_REQUEST, None, -1, "", -1
        try:
            parse_coordinator_key(key)
        except ValueError as exc:
            return ErrorCode.INVALID_REQUEST, str(exc), -1, "", -1
        if ctx.share_state is None or not await ensure_share_state_topic(ctx):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available.", -1, "", -1
        topic_name, partition = SHARE_STATE_TOPIC, ctx.share_state.partition_for_key(key)
    elif key_type == TRANSACTION_KEY:
        if not key:
            return ErrorCode.INVALID_REQUEST, "The transactional id is empty.", -1, "", -1
        if ctx.transactions is None or not await ensure_transaction_topic(ctx):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available.", -1, "", -1
        topic_name, partition = TRANSACTION_STATE_TOPIC, ctx.transactions.partition_for(key)
    elif key_type != GROUP_KEY:
        return ErrorCode.INVALID_REQUEST, f"Unknown coordinator key type {key_type}", -1, "", -1
    elif ctx.groups is None or not await ensure_offsets_topic(ctx):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available.", -1, "", -1
    else:
        topic_name, partition = OFFSETS_TOPIC, ctx.groups.partition_for(key)
    topic = ctx.image().topics.by_name[topic_name]
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
            code, message, node, host, port = await _lookup(ctx, key, key_type, version)
            coordinators.append(Resp.Coordinator(key=key, node_id=node, host=host, port=port,
                                                 error_code=code, error_message=message))
        return Resp(throttle_time_ms=0, coordinators=coordinators)
    code, message, node, host, port = await _lookup(ctx, body.key, key_type, version)
    return Resp(throttle_time_ms=0, error_code=code, error_message=message, node_id=node, host=host, port=port)
