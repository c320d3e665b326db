"""Metadata, DescribeCluster and DescribeTopicPartitions: what the cluster looks like to clients.

Brokers are listed with the endpoint of the listener the client connected through, as Kafka does.
Topics named in a Metadata request that do not exist are created when the client allows it and
`auto.create.topics.enable` is on; the answer then already carries the new partitions.
"""

from __future__ import annotations

import logging
from typing import Any

from kafkapy.broker.authorized_operations import (
    CLUSTER_OPERATIONS,
    TOPIC_OPERATIONS,
    allowed_operations,
    as_int32,
    authorized,
)
from kafkapy.broker.context import BrokerContext
from kafkapy.broker.handlers.topics import auto_create_topics
from kafkapy.controller import topic_name_error
from kafkapy.metadata.image import MetadataImage, PartitionRegistration
from kafkapy.protocol import messages as m
from kafkapy.protocol.connection import Request
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.security.acl import AclOperation, ResourceType

log = logging.getLogger(__name__)

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
UNKNOWN_AUTHORIZED_OPERATIONS = -2147483648

MResp = m.MetadataResponse
DESCRIBE, CREATE = AclOperation.DESCRIBE, AclOperation.CREATE
TOPIC, CLUSTER = ResourceType.TOPIC, ResourceType.CLUSTER


def _alive_brokers(ctx: BrokerContext, image: MetadataImage) -> list[tuple[int, str, int, str | None]]:
    """(id, host, port, rack) of unfenced brokers, for the listener clients use."""
    listener_name = ctx.listener_name()
    out = []
    for broker in sorted(image.brokers.values(), key=lambda b: b.id):
        if broker.fenced:
            continue
        endpoint = broker.listener(listener_name)
        if endpoint is not None:
            out.append((broker.id, endpoint.host, endpoint.port, broker.rack))
    return out


def _partition_fields(reg: PartitionRegistration, image: MetadataImage) -> dict[str, Any]:
    alive = {b.id for b in image.brokers.values() if not b.fenced}
    return dict(
        leader_id=reg.leader,
        leader_epoch=reg.leader_epoch,
        replica_nodes=list(reg.replicas),
        isr_nodes=list(reg.isr),
        offline_replicas=[r for r in reg.replicas if r not in alive],
        error_code=ErrorCode.NONE if reg.leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
    )


async def handle_metadata(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    version = request.api_version
    image = ctx.image()
    # v0 used an empty list for "all topics"; later versions use null.
    all_topics = body.topics is None or (version == 0 and not body.topics)
    names: list[str | None] = []
    # Topics the caller may not describe (TOPIC_AUTHORIZATION_FAILED) and the ones named by id
    # among them (answered without their name, which the caller may not learn).
    refused: set[str] = set()
    by_id: set[str] = set()
    if not all_topics:
        for t in body.topics:
            name = t.name
            if name is None and version >= 10 and t.topic_id is not None:
                topic = image.topics.by_id.get(t.topic_id)
                name = topic.name if topic is not None else None
                if name is not None:
                    by_id.add(name)
            names.append(name)
        refused = {n for n in names if n is not None and not ctx.authorize(DESCRIBE, TOPIC, n)}
        missing = [n for n in names if n is not None and n not in image.topics.by_name and n not in refused]
        allow = body.allow_auto_topic_creation if version >= 4 else True
        if missing and allow and ctx.config.get("auto.create.topics.enable"):
            # Auto-creation needs CREATE on the cluster or on the topic, as a CreateTopics would.
            if not ctx.authorize(CREATE, CLUSTER, audit=False):
                refused.update(n for n in missing if not ctx.authorize(CREATE, TOPIC, n))
                missing = [n for n in missing if n not in refused]
            if missing:
                await auto_create_topics(ctx, missing)
                image = ctx.image()
    else:
        # Topics the caller may not describe are left out, as if they did not exist.
        names.extend(n for n in sorted(image.topics.by_name) if ctx.authorize(DESCRIBE, TOPIC, n, audit=False))
    want_ops = version >= 8 and bool(body.include_topic_authorized_operations)
    topics = []
    for name in names:
        topic = image.topics.by_name.get(name) if name is not None else None
        if name in refused:
            topics.append(MResp.MetadataResponseTopic(
                error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=None if name in by_id else name,
                topic_id=topic.id if topic is not None and name in by_id else None, partitions=[],
                is_internal=False))
            continue
        if topic is None:
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if name is not None and not _valid_name(name):
                code = ErrorCode.INVALID_TOPIC_EXCEPTION
            topics.append(MResp.MetadataResponseTopic(error_code=code, name=name, partitions=[], is_internal=False))
            continue
        parts = [
            MResp.MetadataResponseTopic.MetadataResponsePartition(partition_index=idx, **_partition_fields(reg, image))
            for idx, reg in sorted(topic.partitions.items())
        ]
        topics.append(
            MResp.MetadataResponseTopic(
                error_code=ErrorCode.NONE, name=topic.name, topic_id=topic.id,
                is_internal=topic.name in INTERNAL_TOPICS, partitions=parts,
                authorized_operations=authorized(
                    allowed_operations(ctx, TOPIC_OPERATIONS, TOPIC, topic.name) if want_ops else frozenset(),
                    want_ops),
            )
        )
    brokers = [MResp.MetadataResponseBroker(node_id=i, host=h, port=p, rack=r)
               for i, h, p, r in _alive_brokers(ctx, image)]
    # Only v8-v10 carry the cluster's operations (v11 moved them to DescribeCluster).
    extra = {"authorized_operations": authorized(
        allowed_operations(ctx, CLUSTER_OPERATIONS, CLUSTER), bool(body.include_cluster_authorized_operations)),
    } if 8 <= version <= 10 else {}
    return MResp(
        throttle_time_ms=0, brokers=brokers, cluster_id=ctx.cluster_id,
        controller_id=_controller_id_for_clients(ctx, image), topics=topics,
        error_code=0, **extra,
    )


def _controller_id_for_clients(ctx: BrokerContext, image: MetadataImage) -> int:
    # Clients cannot reach KRaft controllers, so a KRaft broker names a live broker as "the
    # controller" (Kafka picks one at random; we prefer ourselves, which is stable): admin
    # requests sent there are forwarded to the active controller.
    alive = [b.id for b in image.brokers.values() if not b.fenced]
    return ctx.node_id if ctx.node_id in alive or not alive else min(alive)


def _valid_name(name: str) -> bool:
    return topic_name_error(name) is None


#: DescribeCluster's EndpointType values (KIP-919): what kind of node the client asked about.
ENDPOINT_TYPE_BROKER = 1
ENDPOINT_TYPE_CONTROLLER = 2


def describe_cluster_endpoint_error(request: Request, served: int) -> object | None:
    """The error answer Kafka gives a DescribeCluster asking for another kind of endpoint than
    this listener serves (brokers on a broker listener, controllers on a controller listener),
    or None when the request is for ``served``. v0 carries no endpoint type (it means brokers)
    and no newer codes, so there it is INVALID_REQUEST."""
    wanted = getattr(request.body, "endpoint_type", ENDPOINT_TYPE_BROKER) if request.api_version >= 1 \
        else ENDPOINT_TYPE_BROKER
    if wanted == served:
        return None
    v0 = request.api_version == 0
    if wanted not in (ENDPOINT_TYPE_BROKER, ENDPOINT_TYPE_CONTROLLER):
        code = ErrorCode.INVALID_REQUEST if v0 else ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
        message = f"Unsupported endpoint type {wanted}"
    else:
        code = ErrorCode.INVALID_REQUEST if v0 else ErrorCode.MISMATCHED_ENDPOINT_TYPE
        names = {ENDPOINT_TYPE_BROKER: "BROKER", ENDPOINT_TYPE_CONTROLLER: "CONTROLLER"}
        message = (f"The request was sent to an endpoint of type {names[served]}, but we wanted "
                   f"an endpoint of type {names[wanted]}")
    refusal: object = m.DescribeClusterResponse(
        throttle_time_ms=0, error_code=int(code), error_message=message, endpoint_type=served,
        cluster_id="", controller_id=-1, brokers=[])
    return refusal


async def handle_describe_quorum(ctx: BrokerContext, request: Request) -> object:
    """DescribeQuorum on a broker listener: forwarded to the active controller, which answers
    from the quorum leader's view (Kafka's brokers forward it the same way), so
    ``kafka-metadata-quorum --bootstrap-server`` works."""
    if ctx.controller_request is None:
        raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "no controller to forward DescribeQuorum to")
    return await ctx.controller_request(request.body, request.api_version)


async def handle_describe_cluster(ctx: BrokerContext, request: Request) -> object:
    mismatch = describe_cluster_endpoint_error(request, ENDPOINT_TYPE_BROKER)
    if mismatch is not None:
        return mismatch
    image = ctx.image()
    Resp = m.DescribeClusterResponse
    include_fenced = request.api_version >= 2 and request.body.include_fenced_brokers
    brokers = []
    listener_name = ctx.listener_name()
    for broker in sorted(image.brokers.values(), key=lambda b: b.id):
        if broker.fenced and not include_fenced:
            continue
        endpoint = broker.listener(listener_name)
        if endpoint is None:
            continue
        brokers.append(Resp.DescribeClusterBroker(broker_id=broker.id, host=endpoint.host, port=endpoint.port,
                                                  rack=broker.rack, is_fenced=broker.fenced))
    return Resp(
        throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=1, cluster_id=ctx.cluster_id,
        controller_id=_controller_id_for_clients(ctx, image), brokers=brokers,
        authorized_operations=authorized(allowed_operations(ctx, CLUSTER_OPERATIONS, CLUSTER),
                                         bool(request.body.include_cluster_authorized_operations)),
    )


async def handle_describe_topic_partitions(ctx: BrokerContext, request: Request) -> object:
    """The Java AdminClient's describeTopics: partitions in pages of ResponsePartitionLimit."""
    body = request.body
    image = ctx.image()
    Resp = m.DescribeTopicPartitionsResponse
    TopicOut = Resp.DescribeTopicPartitionsResponseTopic
    PartOut = TopicOut.DescribeTopicPartitionsResponsePartition
    named = bool(body.topics)
    names = [t.name for t in body.topics] if named else sorted(image.topics.by_name)
    # Topics the caller may not describe: refused when named, left out of "all topics".
    refused = {n for n in names if not ctx.authorize(DESCRIBE, TOPIC, n, audit=named)}
    names = sorted(set(names) if named else set(names) - refused)
    budget = max(1, body.response_partition_limit)
    start_topic, start_part = None, 0
    if body.cursor is not None:
        start_topic, start_part = body.cursor.topic_name, body.cursor.partition_index
    out, next_cursor = [], None
    for name in names:
        if start_topic is not None and name < start_topic:
            continue
        topic = image.topics.by_name.get(name)
        if name in refused:
            out.append(TopicOut(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name, topic_id=None,
                                is_internal=False, partitions=[], topic_authorized_operations=0))
            continue
        if topic is None:
            # Kafka answers the operations for a topic that does not exist too (DescribeTopicPartitions
            # has no flag to ask for them: they always come).
            out.append(TopicOut(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name, topic_id=None,
                                is_internal=False, partitions=[],
                                topic_authorized_operations=as_int32(allowed_operations(
                                    ctx, TOPIC_OPERATIONS, TOPIC, name))))
            continue
        first = start_part if name == start_topic else 0
        parts = []
        for idx in sorted(topic.partitions):
            if idx < first:
                continue
            if budget == 0:
                next_cursor = Resp.Cursor(topic_name=name, partition_index=idx)
                break
            reg = topic.partitions[idx]
            fields = _partition_fields(reg, image)
            parts.append(PartOut(partition_index=idx, eligible_leader_replicas=list(reg.elr),
                                 last_known_elr=list(reg.last_known_elr),
                                 observers=list(reg.observers) if reg.observers else None, **fields))
            budget -= 1
        if parts or next_cursor is None:
            # A page that ends exactly before this topic leaves it wholly to the next page.
            out.append(TopicOut(error_code=0, name=name, topic_id=topic.id, is_internal=name in INTERNAL_TOPICS,
                                partitions=parts, topic_authorized_operations=as_int32(allowed_operations(
                                    ctx, TOPIC_OPERATIONS, TOPIC, name))))
        if next_cursor is not None:
            break
    return Resp(throttle_time_ms=0, topics=out, next_cursor=next_cursor)
