"""KIP-932 share groups in the group coordinator: ShareGroupHeartbeat, ShareGroupDescribe and
the share-group offsets admin (Describe/Alter/DeleteShareGroupOffsets).

Served while ``share.version`` is at least 1 (see :mod:`kafkapy.broker.gated_apis`). The group
decisions live in :class:`~kafkapy.coordinator.share_group.heartbeat.ShareGroupMembership`
(``shard.share``); heartbeats and the share-coordinator calls go through
:class:`~kafkapy.coordinator.share_group_service.ShareGroupService` (``ctx.share_groups``).
Whole-request ACLs (GROUP READ for the heartbeat and Alter, GROUP DELETE for Delete) are rules
in :mod:`kafkapy.broker.request_authorization`; per-group and per-topic ones are checked here, as
Kafka's KafkaApis does.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from kafkapy.broker.authorized_operations import GROUP_OPERATIONS, allowed_operations, as_int32
from kafkapy.broker.context import BrokerContext
from kafkapy.broker.gated_apis import SHARE_VERSION_FEATURE, GatedApi
from kafkapy.broker.handlers.coordinator import served_shard
from kafkapy.broker.handlers.groups import client_host
from kafkapy.coordinator.consumer.heartbeat import HeartbeatResponse
from kafkapy.coordinator.group import SHARE, GroupShard
from kafkapy.coordinator.share_group.heartbeat import ShareGroupDescription, ShareHeartbeatRequest
from kafkapy.protocol import messages as m
from kafkapy.protocol.apis import ApiKey
from kafkapy.protocol.connection import Request
from kafkapy.protocol.errors import ErrorCode
from kafkapy.security.acl import AclOperation, ResourceType

E = ErrorCode
HeartbeatResp = m.ShareGroupHeartbeatResponse
DescribeResp = m.ShareGroupDescribeResponse
NO_OPERATIONS = -(2**31)
ZERO_UUID = uuid.UUID(int=0)
#: A share partition whose state was never initialized has no start offset.
UNINITIALIZED = -1
#: Kafka's KafkaApis.isMemberIdValid: a member id of 1 to 36 characters.
MAX_MEMBER_ID_LENGTH = 36
NON_EMPTY = "The group is not empty."  # Errors.NON_EMPTY_GROUP's message
#: Kafka's Errors messages for the per-topic refusals of the offsets admin APIs.
TOPIC_MESSAGES: dict[int, str] = {E.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
                  E.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed."}
NO_OFFSETS = "There is no offset information to delete."
UNAUTHORIZED_TOPICS = "The group has described topic(s) that the client is not authorized to describe."


def _service(ctx: BrokerContext) -> Any:
    return getattr(ctx, "share_groups", None)


def _shard(ctx: BrokerContext, group_id: str, empty_key_error: int) -> tuple[GroupShard | None, int]:
    if _service(ctx) is None:
        return None, E.COORDINATOR_NOT_AVAILABLE
    return served_shard(ctx.groups, group_id, empty_key_error)


def _share_shard(ctx: BrokerContext, group_id: str, *,
                 missing_ok: bool = False) -> tuple[GroupShard | None, int, str | None]:
    """The shard holding share group ``group_id`` (or that would, with ``missing_ok``), or
    (None, error, message)."""
    shard, code = _shard(ctx, group_id, E.INVALID_GROUP_ID)
    if shard is None:
        return None, code, None
    kind = shard.group_type(group_id)
    if kind is None and not missing_ok:
        return None, E.GROUP_ID_NOT_FOUND, f"Group {group_id} not found."
    if kind not in (None, SHARE):
        return None, E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group."
    return shard, E.NONE, None


# ------------------------------------------------------------------------------ ShareGroupHeartbeat

def _heartbeat_response(r: HeartbeatResponse) -> object:
    A = HeartbeatResp.Assignment
    assignment = None
    if r.error == E.NONE and r.assignment is not None:
        assignment = A(topic_partitions=[
            A.TopicPartitions(topic_id=t, partitions=sorted(ps))
            for t, ps in sorted(r.assignment.items(), key=lambda kv: str(kv[0]))])
    if r.error != E.NONE:
        # Kafka's error answers carry the code and message only (no member id echoed).
        return HeartbeatResp(throttle_time_ms=0, error_code=r.error, error_message=r.error_message, member_id=None,
                             member_epoch=0, heartbeat_interval_ms=0, assignment=None)
    return HeartbeatResp(throttle_time_ms=0, error_code=r.error, error_message=r.error_message,
                         member_id=r.member_id, member_epoch=r.member_epoch,
                         heartbeat_interval_ms=r.heartbeat_interval_ms, assignment=assignment)


async def handle_share_group_heartbeat(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    if not body.member_id or len(body.member_id) > MAX_MEMBER_ID_LENGTH:
        # Kafka 4.4 builds this refusal with "Invalid member id in the request." but its answer
        # carries no message (seen against 4.4).
        return _heartbeat_response(HeartbeatResponse(E.INVALID_REQUEST))
    names = list(body.subscribed_topic_names or [])
    if names and len(ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, names)) < len(set(names)):
        return _heartbeat_response(HeartbeatResponse(E.TOPIC_AUTHORIZATION_FAILED))
    if not body.group_id:
        return _heartbeat_response(HeartbeatResponse(E.INVALID_REQUEST, "GroupId can't be empty."))
    shard, code = _shard(ctx, body.group_id, E.INVALID_REQUEST)
    if shard is None:
        return _heartbeat_response(HeartbeatResponse(code))
    req = ShareHeartbeatRequest(
        group_id=body.group_id, member_id=body.member_id, member_epoch=body.member_epoch, rack_id=body.rack_id,
        subscribed_topic_names=None if body.subscribed_topic_names is None else list(body.subscribed_topic_names),
        client_id=request.client_id or "", client_host=client_host())
    if shard.group_type(body.group_id) not in (None, SHARE):
        return _heartbeat_response(HeartbeatResponse(
            E.GROUP_ID_NOT_FOUND, f"Group {body.group_id} is not a share group.", body.member_id))
    return _heartbeat_response(await _service(ctx).heartbeat(shard, req))


# ------------------------------------------------------------------------------ ShareGroupDescribe

def _assignment(ctx: BrokerContext, parts: Mapping[Any, frozenset[int]]) -> tuple[object, list[str]]:
    A = DescribeResp.DescribedGroup.Member.Assignment
    by_id = ctx.image().topics.by_id
    out, names = [], []
    for topic_id, ps in sorted(parts.items(), key=lambda kv: str(kv[0])):
        topic = by_id.get(topic_id)
        if topic is None:
            continue  # deleted since: nothing to name
        names.append(topic.name)
        out.append(A.TopicPartitions(topic_id=topic_id, topic_name=topic.name,
                                     partitions=sorted(ps)))
    return A(topic_partitions=out), names


def _failed(group_id: str, code: int, message: str | None = None) -> object:
    return DescribeResp.DescribedGroup(
        error_code=code, error_message=message, group_id=group_id, group_state="", group_epoch=0,
        assignment_epoch=0, assignor_name="", members=[], authorized_operations=NO_OPERATIONS)


def _described(ctx: BrokerContext, d: ShareGroupDescription, operations: int) -> object:
    G = DescribeResp.DescribedGroup
    members, topics = [], set()
    for mm in d.members:
        assignment, names = _assignment(ctx, mm.assignment)
        topics.update(names)
        members.append(G.Member(member_id=mm.member_id, rack_id=mm.rack_id, member_epoch=mm.member_epoch,
                                client_id=mm.client_id, client_host=mm.client_host,
                                subscribed_topic_names=list(mm.subscribed_topic_names), assignment=assignment))
    if topics and len(ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, sorted(topics))) < len(topics):
        return _failed(d.group_id, E.TOPIC_AUTHORIZATION_FAILED, UNAUTHORIZED_TOPICS)
    return G(error_code=E.NONE, error_message=None, group_id=d.group_id, group_state=d.state,
             group_epoch=d.group_epoch, assignment_epoch=d.assignment_epoch, assignor_name=d.assignor_name,
             members=members, authorized_operations=operations)


async def handle_share_group_describe(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    out = []
    for group_id in body.group_ids:
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            out.append(_failed(group_id, E.GROUP_AUTHORIZATION_FAILED))
            continue
        shard, code, message = _share_shard(ctx, group_id)
        if shard is None:
            out.append(_failed(group_id, code, message))
            continue
        ops = as_int32(allowed_operations(ctx, GROUP_OPERATIONS, ResourceType.GROUP, group_id)) \
            if body.include_authorized_operations else NO_OPERATIONS
        out.append(_described(ctx, shard.share.describe(group_id), ops))
    return DescribeResp(throttle_time_ms=0, groups=out)


# ------------------------------------------------------------------------------ DescribeShareGroupOffsets

def _lag(ctx: BrokerContext, topic: str, partition: int, start: int, complete: int) -> int:
    """Records not yet delivered for good: from the start offset to the high watermark, less the
    ones past the start already acknowledged or archived (-1 when not known here)."""
    if start < 0:
        return -1
    try:
        hw = ctx.replicas.leader(topic, partition, -1).log.high_watermark
    except Exception:
        return -1
    return max(0, hw - start - max(0, complete))


async def _describe_group_offsets(ctx: BrokerContext, version: int, group: Any) -> object:
    R = m.DescribeShareGroupOffsetsResponse
    G = R.DescribeShareGroupOffsetsResponseGroup
    T = G.DescribeShareGroupOffsetsResponseTopic
    P = T.DescribeShareGroupOffsetsResponsePartition

    def failed(code: int, message: str | None = None) -> object:
        return G(group_id=group.group_id, topics=[], error_code=code, error_message=message)

    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group.group_id):
        return failed(E.GROUP_AUTHORIZATION_FAILED)
    # A missing group has no share-partition state: nothing listed, or no start offsets (Kafka).
    shard, code, message = _share_shard(ctx, group.group_id, missing_ok=True)
    if shard is None:
        return failed(code, message)
    share = shard.share_group(group.group_id)
    ready = share.initialized() if share is not None else {}
    image = ctx.image().topics
    wanted: list[tuple[str, list[int]]]
    if group.topics is None:
        wanted = [(image.by_id[t].name, sorted(ps)) for t, ps in sorted(ready.items(), key=lambda kv: str(kv[0]))
                  if t in image.by_id]
    else:
        wanted = [(t.topic_name, list(t.partitions)) for t in group.topics]
    allowed = ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, sorted({n for n, _ in wanted}))
    topics = []
    for name, partitions in wanted:
        meta = image.by_name.get(name)
        if name not in allowed or meta is None:
            # Kafka answers an unknown topic as one without state, an unauthorized one refused.
            err = E.TOPIC_AUTHORIZATION_FAILED if name not in allowed else E.NONE
            topics.append(T(topic_name=name, topic_id=ZERO_UUID, partitions=[
                P(partition_index=p, start_offset=UNINITIALIZED, leader_epoch=0, lag=-1, error_code=err,
                  error_message=TOPIC_MESSAGES.get(err)) for p in partitions]))
            continue
        parts = []
        for p in partitions:
            row = P(partition_index=p, start_offset=UNINITIALIZED, leader_epoch=0, lag=-1, error_code=E.NONE,
                    error_message=None)
            if p in ready.get(meta.id, frozenset()):
                result = await _service(ctx).read_summary(group.group_id, meta.id, p)
                if result.error != E.NONE:
                    row.error_code, row.error_message = result.error, result.message
                elif result.state is not None:
                    row.start_offset, row.leader_epoch = result.state.start_offset, result.state.leader_epoch
                    if version >= 1:
                        row.lag = _lag(ctx, name, p, result.state.start_offset, result.state.delivery_complete_count)
            parts.append(row)
        topics.append(T(topic_name=name, topic_id=meta.id, partitions=parts))
    return G(group_id=group.group_id, topics=topics, error_code=E.NONE, error_message=None)


async def handle_describe_share_group_offsets(ctx: BrokerContext, request: Request) -> object:
    version = request.api_version
    groups = [await _describe_group_offsets(ctx, version, g) for g in request.body.groups]
    return m.DescribeShareGroupOffsetsResponse(throttle_time_ms=0, groups=groups)


# ------------------------------------------------------------------------------ AlterShareGroupOffsets

async def handle_alter_share_group_offsets(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    R = m.AlterShareGroupOffsetsResponse
    T = R.AlterShareGroupOffsetsResponseTopic
    P = T.AlterShareGroupOffsetsResponsePartition
    image = ctx.image().topics
    allowed = ctx.authorized_names(AclOperation.READ, ResourceType.TOPIC, sorted({t.topic_name for t in body.topics}))
    refused: dict[str, int] = {}
    starts: dict[uuid.UUID, tuple[str, dict[int, int]]] = {}
    for t in body.topics:
        meta = image.by_name.get(t.topic_name)
        if t.topic_name not in allowed:
            refused[t.topic_name] = E.TOPIC_AUTHORIZATION_FAILED
        elif meta is None:
            refused[t.topic_name] = E.UNKNOWN_TOPIC_OR_PARTITION
        else:
            # Partitions the topic does not have are refused one by one (Kafka 4.4's
            # GroupMetadataManager); the rest of the topic is altered.
            starts.setdefault(meta.id, (t.topic_name, {}))[1].update(
                {p.partition_index: p.start_offset for p in t.partitions if p.partition_index in meta.partitions})

    def answer(code: int, message: str | None, errors: Mapping[tuple[uuid.UUID, int], int]) -> object:
        if code != E.NONE:
            return R(throttle_time_ms=0, error_code=code, error_message=message, responses=[])
        # As Kafka: the refused topics first, then the coordinator's.
        out = [T(topic_name=t.topic_name, topic_id=ZERO_UUID, partitions=[
            P(partition_index=p.partition_index, error_code=refused[t.topic_name],
              error_message=TOPIC_MESSAGES.get(refused[t.topic_name])) for p in t.partitions])
            for t in body.topics if t.topic_name in refused]
        for t in body.topics:
            if t.topic_name in refused:
                continue
            meta = image.by_name[t.topic_name]
            out.append(T(topic_name=t.topic_name, topic_id=meta.id, partitions=[
                P(partition_index=p.partition_index, error_code=E.UNKNOWN_TOPIC_OR_PARTITION,
                  error_message=TOPIC_MESSAGES[E.UNKNOWN_TOPIC_OR_PARTITION])
                if p.partition_index not in meta.partitions else
                P(partition_index=p.partition_index, error_code=errors.get((meta.id, p.partition_index), E.NONE),
                  error_message=None) for p in t.partitions]))
        return R(throttle_time_ms=0, error_code=code, error_message=message, responses=out)

    # A missing group is created (Kafka's getOrMaybeCreateShareGroup), one of another kind refused.
    shard, code, message = _share_shard(ctx, body.group_id, missing_ok=True)
    if shard is None:
        return answer(code, message, {})
    group = shard.share_group(body.group_id)
    if group is not None and group.members:
        return answer(E.NON_EMPTY_GROUP, NON_EMPTY, {})
    starts = {tid: v for tid, v in starts.items() if v[1]}
    errors = await _service(ctx).alter_offsets(shard, body.group_id, starts) if starts else {}
    return answer(E.NONE, None, errors)


# ------------------------------------------------------------------------------ DeleteShareGroupOffsets

async def handle_delete_share_group_offsets(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    R = m.DeleteShareGroupOffsetsResponse
    T = R.DeleteShareGroupOffsetsResponseTopic
    image = ctx.image().topics
    allowed = ctx.authorized_names(AclOperation.READ, ResourceType.TOPIC, sorted({t.topic_name for t in body.topics}))

    def failed(code: int, message: str | None = None) -> object:
        return R(throttle_time_ms=0, error_code=code, error_message=message, responses=[])

    shard, code, message = _share_shard(ctx, body.group_id)
    if shard is None:
        return failed(code, message)
    ids = [image.by_name[t.topic_name].id for t in body.topics
           if t.topic_name in allowed and t.topic_name in image.by_name]
    code, results = await _service(ctx).delete_offsets(shard, body.group_id, ids)
    if code != E.NONE:
        return failed(code, NON_EMPTY if code == E.NON_EMPTY_GROUP else None)
    # As Kafka: the coordinator's answers (a topic without state: UNKNOWN_TOPIC_OR_PARTITION, no
    # id), then the topics refused before it (unauthorized, unknown).
    out, refused = [], []
    for t in body.topics:
        meta = image.by_name.get(t.topic_name)
        code = E.TOPIC_AUTHORIZATION_FAILED if t.topic_name not in allowed else \
            E.UNKNOWN_TOPIC_OR_PARTITION if meta is None else E.NONE
        if code != E.NONE or meta is None:
            refused.append(T(topic_name=t.topic_name, topic_id=ZERO_UUID, error_code=code,
                             error_message=TOPIC_MESSAGES[code]))
        elif meta.id not in results:
            out.append(T(topic_name=t.topic_name, topic_id=ZERO_UUID, error_code=E.UNKNOWN_TOPIC_OR_PARTITION,
                         error_message=NO_OFFSETS))
        else:
            out.append(T(topic_name=t.topic_name, topic_id=meta.id, error_code=results[meta.id], error_message=None))
    return R(throttle_time_ms=0, error_code=E.NONE, error_message=None, responses=out + refused)


SHARE_GROUP_APIS: list[GatedApi] = [
    GatedApi(ApiKey.SHARE_GROUP_HEARTBEAT, 1, 1, handle_share_group_heartbeat, SHARE_VERSION_FEATURE, 1),
    GatedApi(ApiKey.SHARE_GROUP_DESCRIBE, 1, 1, handle_share_group_describe, SHARE_VERSION_FEATURE, 1),
    GatedApi(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, 1, handle_describe_share_group_offsets, SHARE_VERSION_FEATURE, 1),
    GatedApi(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, 0, handle_alter_share_group_offsets, SHARE_VERSION_FEATURE, 1),
    GatedApi(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, 0, handle_delete_share_group_offsets, SHARE_VERSION_FEATURE, 1),
]

__all__ = ["SHARE_GROUP_APIS", "handle_alter_share_group_offsets", "handle_delete_share_group_offsets",
           "handle_describe_share_group_offsets", "handle_share_group_describe", "handle_share_group_heartbeat"]
