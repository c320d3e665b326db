"""The classic group protocol and group administration: JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, ListGroups, DescribeGroups, DeleteGroups.

The decisions live in the sans-I/O core (``kafkapy.coordinator.group``); these handlers translate
requests into core calls and core results into responses. JoinGroup and SyncGroup may be parked
by the core until the rebalance answers them; ``GroupCoordinator.run_op`` waits with a deadline.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from kafkapy.broker.authorized_operations import GROUP_OPERATIONS, allowed_operations, authorized
from kafkapy.broker.context import BrokerContext, client_address
from kafkapy.broker.handlers.coordinator import served_shard
from kafkapy.coordinator.group import GroupState, JoinRequest, JoinResult, SyncResult
from kafkapy.protocol import messages as m
from kafkapy.protocol.connection import Request
from kafkapy.protocol.errors import ErrorCode
from kafkapy.security.acl import ResourceType

if TYPE_CHECKING:
    from kafkapy.coordinator.group import GroupShard

JoinResp = m.JoinGroupResponse
SyncResp = m.SyncGroupResponse
HeartbeatResp = m.HeartbeatResponse
LeaveResp = m.LeaveGroupResponse
ListResp = m.ListGroupsResponse
DescribeResp = m.DescribeGroupsResponse
DeleteResp = m.DeleteGroupsResponse

# Slack over the rebalance timeout before the edge gives up on a parked request itself.
PARK_SLACK_MS = 5000


def _coordinator_error(ctx: BrokerContext, group_id: str) -> tuple[GroupShard | None, int]:
    """The group's shard, or (None, error) when it is not served here right now.

    A shard comes only from ``ctx.groups``: the handlers' ``assert ctx.groups is not None`` after
    it tells mypy so. ``run_op`` answers with the operation's own response type (``object`` in its
    signature), which the handlers ``cast`` to."""
    return served_shard(ctx.groups, group_id, ErrorCode.INVALID_GROUP_ID)


def client_host() -> str:
    addr = client_address.get()
    return f"/{addr[0]}" if addr else ""


# ------------------------------------------------------------------------------------ JoinGroup

def _join_response(result: JoinResult, version: int) -> object:
    resp = JoinResp(version=version, throttle_time_ms=0, error_code=result.error, generation_id=result.generation,
                    protocol_name=result.protocol_name if (result.protocol_name is not None or version >= 7) else "",
                    leader=result.leader, member_id=result.member_id, members=[
                        JoinResp.JoinGroupResponseMember(version=version, member_id=mm.member_id,
                                                         group_instance_id=mm.group_instance_id,
                                                         metadata=mm.metadata)
                        for mm in result.members])
    if version >= 7:
        resp.protocol_type = result.protocol_type
    if version >= 9:
        resp.skip_assignment = result.skip_assignment
    return resp


async def handle_join_group(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    version = request.api_version
    instance_id = body.group_instance_id if version >= 5 else None
    shard, code = _coordinator_error(ctx, body.group_id)
    if shard is None:
        return _join_response(JoinResult(code, member_id=body.member_id), version)
    rebalance_timeout = body.rebalance_timeout_ms if version >= 1 else body.session_timeout_ms
    req = JoinRequest(
        group_id=body.group_id, member_id=body.member_id, group_instance_id=instance_id,
        protocol_type=body.protocol_type, protocols=[(p.name, bytes(p.metadata)) for p in body.protocols],
        session_timeout_ms=body.session_timeout_ms, rebalance_timeout_ms=rebalance_timeout,
        client_id=request.client_id or "", client_host=client_host(),
        # KIP-394: v4+ clients get MEMBER_ID_REQUIRED first (static members are known by instance id).
        require_known_member_id=version >= 4 and instance_id is None,
        supports_skip_assignment=version >= 9,
        reason=body.reason if version >= 8 else None,
    )
    outcome = shard.join(req, ctx.clock.now_ms())
    assert ctx.groups is not None  # a shard came from it
    result = cast(JoinResult, await ctx.groups.run_op(
        shard, outcome, timeout_ms=max(rebalance_timeout, body.session_timeout_ms) + PARK_SLACK_MS,
        on_timeout=JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member_id=body.member_id)))
    return _join_response(result, version)


# ------------------------------------------------------------------------------------ SyncGroup

def _sync_response(result: SyncResult, version: int) -> object:
    resp = SyncResp(version=version, throttle_time_ms=0, error_code=result.error, assignment=result.assignment)
    if version >= 5:
        resp.protocol_type = result.protocol_type
        resp.protocol_name = result.protocol_name
    return resp


async def handle_sync_group(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    version = request.api_version
    shard, code = _coordinator_error(ctx, body.group_id)
    if shard is None:
        return _sync_response(SyncResult(code), version)
    instance_id = body.group_instance_id if version >= 3 else None
    protocol_type = body.protocol_type if version >= 5 else None
    protocol_name = body.protocol_name if version >= 5 else None
    outcome = shard.sync(body.group_id, body.generation_id, body.member_id, instance_id, protocol_type,
                         protocol_name, [(a.member_id, bytes(a.assignment)) for a in body.assignments],
                         ctx.clock.now_ms())
    group = shard.groups.get(body.group_id)
    member = group.members.get(body.member_id) if group is not None else None
    timeout = (member.rebalance_timeout_ms if member is not None else 30_000) + PARK_SLACK_MS
    assert ctx.groups is not None  # a shard came from it
    result = cast(SyncResult, await ctx.groups.run_op(shard, outcome, timeout_ms=timeout,
                                                      on_timeout=SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)))
    return _sync_response(result, version)


# ------------------------------------------------------------------------------------ Heartbeat

async def handle_heartbeat(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    version = request.api_version
    shard, code = _coordinator_error(ctx, body.group_id)
    if shard is not None:
        instance_id = body.group_instance_id if version >= 3 else None
        outcome = shard.heartbeat(body.group_id, body.generation_id, body.member_id, instance_id,
                                  ctx.clock.now_ms())
        assert ctx.groups is not None  # a shard came from it
        code = cast(int, await ctx.groups.run_op(shard, outcome, timeout_ms=0, on_timeout=None))
    return HeartbeatResp(version=version, throttle_time_ms=0, error_code=code)


# ------------------------------------------------------------------------------------ LeaveGroup

async def handle_leave_group(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    version = request.api_version
    if version >= 3:
        leaving = [(mi.member_id, mi.group_instance_id) for mi in body.members]
    else:
        leaving = [(body.member_id, None)]
    shard, code = _coordinator_error(ctx, body.group_id)
    if shard is None:
        return LeaveResp(version=version, throttle_time_ms=0, error_code=code, members=[])
    outcome = shard.leave(body.group_id, leaving, ctx.clock.now_ms())
    assert ctx.groups is not None  # a shard came from it
    codes = cast(list[int], await ctx.groups.run_op(shard, outcome, timeout_ms=0, on_timeout=None))
    if version < 3:
        return LeaveResp(version=version, throttle_time_ms=0, error_code=codes[0])
    members = [LeaveResp.MemberResponse(version=version, member_id=mid, group_instance_id=iid, error_code=c)
               for (mid, iid), c in zip(leaving, codes)]
    return LeaveResp(version=version, throttle_time_ms=0, error_code=ErrorCode.NONE, members=members)


# ------------------------------------------------------------------------------------ ListGroups

async def handle_list_groups(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    version = request.api_version
    states = {s.lower() for s in body.states_filter} if version >= 4 and body.states_filter else None
    types = {t.lower() for t in body.types_filter} if version >= 5 and body.types_filter else None
    error = ErrorCode.NONE
    out = []
    if ctx.groups is not None:
        if ctx.groups.loading:
            error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        for group_id, protocol_type, state, kind in ctx.groups.listed_groups():
            if states is not None and state.lower() not in states:
                continue
            if types is not None and kind not in types:
                continue
            item = ListResp.ListedGroup(version=version, group_id=group_id, protocol_type=protocol_type)
            if version >= 4:
                item.group_state = state
            if version >= 5:
                item.group_type = kind
            out.append(item)
    return ListResp(version=version, throttle_time_ms=0, error_code=error, groups=out)


# ------------------------------------------------------------------------------------ DescribeGroups

async def handle_describe_groups(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    version = request.api_version
    G = DescribeResp.DescribedGroup
    out = []
    for group_id in body.groups:
        item = G(version=version, error_code=ErrorCode.NONE, group_id=group_id, group_state="Dead",
                 protocol_type="", protocol_data="", members=[],
                 authorized_operations=authorized(
                     allowed_operations(ctx, GROUP_OPERATIONS, ResourceType.GROUP, group_id),
                     version >= 3 and bool(body.include_authorized_operations)))
        shard, code = _coordinator_error(ctx, group_id)
        group = shard.groups.get(group_id) if shard is not None else None
        if shard is None:
            item.error_code = code
        elif shard.group_type(group_id) not in (None, "classic"):
            # Kafka 4.4 answers a consumer or share group as a missing one ("Dead"), from v6
            # with its reason; the admin client then asks ConsumerGroupDescribe instead.
            if version >= 6:
                item.error_code = ErrorCode.GROUP_ID_NOT_FOUND
                item.error_message = f"Group {group_id} is not a classic group."
        elif group is None or group.state is GroupState.DEAD:
            if version >= 6:
                item.error_code = ErrorCode.GROUP_ID_NOT_FOUND
                item.error_message = f"Group {group_id} not found."
        else:
            item.group_state = group.state.value
            item.protocol_type = group.protocol_type or ""
            stable = group.state is GroupState.STABLE
            item.protocol_data = (group.protocol_name or "") if stable else ""
            item.members = [
                G.DescribedGroupMember(
                    version=version, member_id=mm.member_id, group_instance_id=mm.group_instance_id,
                    client_id=mm.client_id, client_host=mm.client_host,
                    member_metadata=mm.metadata(group.protocol_name or "") if stable else b"",
                    member_assignment=mm.assignment if stable else b"")
                for mm in group.members.values()]
        out.append(item)
    return DescribeResp(version=version, throttle_time_ms=0, groups=out)


# ------------------------------------------------------------------------------------ DeleteGroups

async def handle_delete_groups(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    version = request.api_version
    results = []
    for group_id in body.groups_names:
        shard, code = _coordinator_error(ctx, group_id)
        if shard is not None and ctx.share_groups is not None:
            code = await ctx.share_groups.before_delete_group(shard, group_id)
        if shard is not None and code == ErrorCode.NONE:
            outcome = shard.delete_group(group_id, ctx.clock.now_ms())
            assert ctx.groups is not None  # a shard came from it
            code = cast(int, await ctx.groups.run_op(shard, outcome, timeout_ms=0, on_timeout=None))
        results.append(DeleteResp.DeletableGroupResult(version=version, group_id=group_id, error_code=code))
    return DeleteResp(version=version, throttle_time_ms=0, results=results)
