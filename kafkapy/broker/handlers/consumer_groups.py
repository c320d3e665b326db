"""KIP-848 consumer groups: ConsumerGroupHeartbeat and ConsumerGroupDescribe.

Served while ``group.version`` is at least 1 (see :mod:`kafkapy.broker.gated_apis`). The
decisions live in the sans-I/O core (:mod:`kafkapy.coordinator.consumer.heartbeat`, reached
through :meth:`GroupShard.consumer_heartbeat`); a heartbeat is answered once its records are
committed to ``__consumer_offsets`` (``GroupCoordinator.run_modern``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkapy.broker.authorized_operations import GROUP_OPERATIONS, allowed_operations, as_int32
from kafkapy.broker.context import BrokerContext
from kafkapy.broker.gated_apis import GROUP_VERSION_FEATURE, GatedApi
from kafkapy.broker.handlers.coordinator import served_shard
from kafkapy.broker.handlers.groups import client_host
from kafkapy.coordinator.consumer.heartbeat import GroupDescription, request_refusal
from kafkapy.coordinator.group import CONSUMER, HeartbeatRequest, HeartbeatResponse
from kafkapy.coordinator.service import consumer_group_config
from kafkapy.protocol import messages as m
from kafkapy.protocol.apis import ApiKey
from kafkapy.protocol.connection import Request
from kafkapy.protocol.errors import ErrorCode
from kafkapy.security.acl import AclOperation, ResourceType

HeartbeatResp = m.ConsumerGroupHeartbeatResponse
DescribeResp = m.ConsumerGroupDescribeResponse

#: ConsumerGroupDescribe's MemberType (v1): the member speaks the consumer protocol.
#: AuthorizedOperations when the client did not ask for them.
NO_OPERATIONS = -(2**31)
#: Kafka's message when a described group's members hold topics the caller may not describe.
UNAUTHORIZED_TOPICS = "The described group uses topics that the client is not authorized to describe."


# ------------------------------------------------------------------------------ ConsumerGroupHeartbeat

def _heartbeat_response(version: int, r: HeartbeatResponse) -> object:
    A = HeartbeatResp.Assignment
    assignment = None
    if r.error == ErrorCode.NONE and r.assignment is not None:
        assignment = A(version=version, topic_partitions=[
            A.TopicPartitions(version=version, topic_id=t, partitions=sorted(ps))
            for t, ps in sorted(r.assignment.items(), key=lambda kv: str(kv[0]))])
    # Kafka's error answers carry no member id (null), whichever member asked.
    member_id = r.member_id if r.error == ErrorCode.NONE else None
    return HeartbeatResp(version=version, throttle_time_ms=0, error_code=r.error, error_message=r.error_message,
                         member_id=member_id, member_epoch=r.member_epoch,
                         heartbeat_interval_ms=r.heartbeat_interval_ms, assignment=assignment)


def _unauthorized_topics(ctx: BrokerContext, names: list[str] | None) -> list[str]:
    """Topics among ``names`` the caller may not describe (Kafka then refuses the whole heartbeat,
    or the whole described group)."""
    if not names:
        return []
    allowed = ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    return sorted({n for n in names if n not in allowed})


def heartbeat_request(body: Any, version: int, client_id: str, host: str) -> HeartbeatRequest:
    """The core's request from a ConsumerGroupHeartbeat body (null / -1 fields: unchanged)."""
    owned: Mapping[Any, frozenset[int]] | None = None
    if body.topic_partitions is not None:
        owned = {}
        for tp in body.topic_partitions:
            owned[tp.topic_id] = owned.get(tp.topic_id, frozenset()) | frozenset(tp.partitions)
    return HeartbeatRequest(
        group_id=body.group_id, member_id=body.member_id, member_epoch=body.member_epoch,
        instance_id=body.instance_id, rack_id=body.rack_id, rebalance_timeout_ms=body.rebalance_timeout_ms,
        subscribed_topic_names=None if body.subscribed_topic_names is None else list(body.subscribed_topic_names),
        subscribed_topic_regex=body.subscribed_topic_regex if version >= 1 else None,
        server_assignor=body.server_assignor, owned=owned, client_id=client_id, client_host=host,
        version=version)


async def handle_consumer_group_heartbeat(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    version = request.api_version
    if _unauthorized_topics(ctx, body.subscribed_topic_names):
        return _heartbeat_response(version, HeartbeatResponse(ErrorCode.TOPIC_AUTHORIZATION_FAILED))
    req = heartbeat_request(body, version, request.client_id or "", client_host())
    # Kafka checks the request before routing it to a coordinator (so before NOT_COORDINATOR).
    refused = request_refusal(req, consumer_group_config(ctx.config).assignors)
    if refused is not None:
        return _heartbeat_response(version, HeartbeatResponse(refused.error, refused.message))
    shard, code = served_shard(ctx.groups, body.group_id, ErrorCode.INVALID_REQUEST)
    if shard is None:
        return _heartbeat_response(version, HeartbeatResponse(code))
    assert ctx.groups is not None  # a shard came from it
    req.may_describe = lambda names: ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, list(names))
    outcome = shard.consumer_heartbeat(req, ctx.clock.now_ms())
    result = await ctx.groups.run_modern(shard, outcome, lambda error: HeartbeatResponse(error))
    assert isinstance(result, HeartbeatResponse)
    return _heartbeat_response(version, result)


# ------------------------------------------------------------------------------ ConsumerGroupDescribe

def _assignment(ctx: BrokerContext, version: int, parts: Mapping[Any, frozenset[int]]) -> object:
    A = DescribeResp.DescribedGroup.Member.Assignment
    by_id = ctx.image().topics.by_id
    out = []
    for topic_id, ps in sorted(parts.items(), key=lambda kv: str(kv[0])):
        topic = by_id.get(topic_id)
        if topic is None:
            continue  # deleted since: nothing to name
        out.append(A.TopicPartitions(version=version, topic_id=topic_id, topic_name=topic.name,
                                     partitions=sorted(ps)))
    return A(version=version, topic_partitions=out)


def _described(ctx: BrokerContext, version: int, d: GroupDescription, operations: int) -> object:
    G = DescribeResp.DescribedGroup
    members = []
    for mm in d.members:
        member = G.Member(
            version=version, member_id=mm.member_id, instance_id=mm.instance_id, rack_id=mm.rack_id,
            member_epoch=mm.member_epoch, client_id=mm.client_id, client_host=mm.client_host,
            subscribed_topic_names=list(mm.subscribed_topic_names),
            # Kafka 4.4 describes a member without a regex with an empty one, not a null
            subscribed_topic_regex=mm.subscribed_topic_regex or "",
            assignment=_assignment(ctx, version, mm.assignment),
            target_assignment=_assignment(ctx, version, mm.target_assignment))
        if version >= 1:
            member.member_type = mm.member_type  # 0: a classic-protocol member (mixed mode)
        members.append(member)
    return G(version=version, error_code=d.error, error_message=None, group_id=d.group_id, group_state=d.state,
             group_epoch=d.group_epoch, assignment_epoch=d.assignment_epoch, assignor_name=d.assignor_name,
             members=members, authorized_operations=operations)


def _failed(version: int, group_id: str, code: int, message: str | None = None) -> object:
    return DescribeResp.DescribedGroup(
        version=version, error_code=code, error_message=message, group_id=group_id, group_state="",
        group_epoch=0, assignment_epoch=0, assignor_name="", members=[], authorized_operations=NO_OPERATIONS)


async def handle_consumer_group_describe(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    version = request.api_version
    out = []
    for group_id in body.group_ids:
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            out.append(_failed(version, group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED))
            continue
        shard, code = served_shard(ctx.groups, group_id, ErrorCode.INVALID_GROUP_ID)
        if shard is None:
            out.append(_failed(version, group_id, code))
            continue
        kind = shard.group_type(group_id)
        if kind is None:
            out.append(_failed(version, group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found."))
            continue
        if kind != CONSUMER:
            out.append(_failed(version, group_id, ErrorCode.GROUP_ID_NOT_FOUND,
                               f"Group {group_id} is not a consumer group."))
            continue
        described = shard.consumer.describe(group_id)
        topics = {ctx.image().topics.by_id[t].name for mm in described.members
                  for t in (*mm.assignment, *mm.target_assignment) if t in ctx.image().topics.by_id}
        if _unauthorized_topics(ctx, sorted(topics)):
            out.append(_failed(version, group_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED, UNAUTHORIZED_TOPICS))
            continue
        ops = as_int32(allowed_operations(ctx, GROUP_OPERATIONS, ResourceType.GROUP, group_id)) \
            if body.include_authorized_operations else NO_OPERATIONS
        out.append(_described(ctx, version, described, ops))
    return DescribeResp(version=version, throttle_time_ms=0, groups=out)


CONSUMER_GROUP_APIS: list[GatedApi] = [
    GatedApi(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, 1, handle_consumer_group_heartbeat, GROUP_VERSION_FEATURE, 1),
    GatedApi(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 1, handle_consumer_group_describe, GROUP_VERSION_FEATURE, 1),
]

__all__ = ["CONSUMER_GROUP_APIS", "handle_consumer_group_describe", "handle_consumer_group_heartbeat",
           "heartbeat_request"]
