"""CreateAcls, DescribeAcls and DeleteAcls.

Without ``authorizer.class.name`` a Kafka broker serves these APIs and refuses every operation
with SECURITY_DISABLED ("No Authorizer is configured"), so admin tools print a clear error
instead of failing on a closed connection. With the authorizer, DescribeAcls is answered from
this broker's image (DESCRIBE on the cluster), CreateAcls and DeleteAcls (ALTER on the cluster)
go to the active controller, which writes the records; a broker checks, then forwards them in an
Envelope naming the caller, and the controller side (``handle_controller_*``) checks again as
that caller.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from kafkapy.broker.context import BrokerContext
from kafkapy.controller.acl_control import AclCreateResult, AclDeleteResult
from kafkapy.protocol import messages as m
from kafkapy.protocol.connection import Request
from kafkapy.protocol.errors import ErrorCode
from kafkapy.security.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

NO_AUTHORIZER = "No Authorizer is configured on the broker"

CreateResult = m.CreateAclsResponse.AclCreationResult
DeleteResult = m.DeleteAclsResponse.DeleteAclsFilterResult
Matching = DeleteResult.DeleteAclsMatchingAcl


def _binding(c: Any) -> AclBinding:
    return AclBinding(ResourceType.from_code(c.resource_type), c.resource_name,
                      PatternType.from_code(c.resource_pattern_type), c.principal, c.host,
                      AclOperation.from_code(c.operation), AclPermissionType.from_code(c.permission_type))


def _filter(f: Any) -> AclBindingFilter:
    return AclBindingFilter(ResourceType.from_code(f.resource_type_filter), f.resource_name_filter,
                            PatternType.from_code(f.pattern_type_filter), f.principal_filter, f.host_filter,
                            AclOperation.from_code(f.operation), AclPermissionType.from_code(f.permission_type))


def _creation_error(c: Any) -> str | None:
    """Kafka's broker-side refusals of a creation (AclApis), before the controller's own."""
    if c.resource_type == ResourceType.CLUSTER and c.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not c.resource_name:
        return "Invalid empty resource name"
    kind, sep, _ = c.principal.partition(":")
    return None if sep and kind else f"Invalid principal {c.principal!r}: expected Type:name"


async def handle_describe_acls(ctx: BrokerContext, request: Request) -> object:
    Resp = m.DescribeAclsResponse

    def refuse(code: int, message: str | None) -> object:
        return Resp(throttle_time_ms=0, error_code=code, error_message=message, resources=[])

    if ctx.authorizer is None:
        return refuse(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER):
        return refuse(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    flt = _filter(request.body)
    problem = flt.validation_error()
    if problem is not None:
        return refuse(ErrorCode.INVALID_REQUEST, problem)
    groups: dict[tuple[int, str, int], list[AclBinding]] = defaultdict(list)
    for acl in ctx.authorizer.current().index.matching(flt):
        groups[(int(acl.resource_type), acl.resource_name, int(acl.pattern_type))].append(acl)
    resources = [
        Resp.DescribeAclsResource(resource_type=rtype, resource_name=name, pattern_type=ptype, acls=[
            Resp.DescribeAclsResource.AclDescription(principal=a.principal, host=a.host, operation=int(a.operation),
                                                     permission_type=int(a.permission))
            for a in acls])
        for (rtype, name, ptype), acls in sorted(groups.items())]
    return Resp(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, resources=resources)


Refuse = Callable[[int, "str | None"], object]
ControllerSide = Callable[[BrokerContext, Request], Awaitable[object]]


async def handle_create_acls(ctx: BrokerContext, request: Request) -> object:
    n = len(request.body.creations)
    return await _on_controller(ctx, request, lambda code, message: _create_response(
        [AclCreateResult(code, message)] * n), handle_controller_create_acls)


async def handle_delete_acls(ctx: BrokerContext, request: Request) -> object:
    n = len(request.body.filters)
    return await _on_controller(ctx, request, lambda code, message: _delete_response(
        [AclDeleteResult(code, message)] * n), handle_controller_delete_acls)


async def _on_controller(ctx: BrokerContext, request: Request, refuse: Refuse, controller_side: ControllerSide
                         ) -> object:
    """A change of ACLs: refused without the authorizer or ALTER on the cluster, else carried
    out by the active controller (forwarded from a broker node)."""
    if ctx.authorizer is None:
        return refuse(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER):
        return refuse(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    if ctx.controller_request is not None:
        forwarded: object = await ctx.forward(request.body, request.api_version)
        return forwarded
    return await controller_side(ctx, request)


async def handle_controller_create_acls(ctx: BrokerContext, request: Request) -> object:
    """The controller's side of CreateAcls: validate, write the records, answer per creation."""
    assert ctx.controller is not None
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER):
        return _create_response([AclCreateResult(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)] * len(request.body.creations))
    results: list[AclCreateResult | None] = []
    valid: list[AclBinding] = []
    for creation in request.body.creations:
        problem = _creation_error(creation)
        if problem is not None:
            results.append(AclCreateResult(ErrorCode.INVALID_REQUEST, problem))
        else:
            results.append(None)
            valid.append(_binding(creation))
    created = iter(await ctx.controller(lambda c: c.create_acls(valid)) if valid else [])
    return _create_response([r if r is not None else next(created) for r in results])


async def handle_controller_delete_acls(ctx: BrokerContext, request: Request) -> object:
    """The controller's side of DeleteAcls: per filter, the ACLs it deleted."""
    assert ctx.controller is not None
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER):
        return _delete_response([AclDeleteResult(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)] * len(request.body.filters))
    filters = [_filter(f) for f in request.body.filters]
    results = await ctx.controller(lambda c: c.delete_acls(filters))
    return _delete_response(results)


def _create_response(results: Iterable[AclCreateResult]) -> object:
    return m.CreateAclsResponse(throttle_time_ms=0, results=[
        CreateResult(error_code=r.error_code, error_message=r.error_message) for r in results])


def _delete_response(results: Iterable[AclDeleteResult]) -> object:
    return m.DeleteAclsResponse(throttle_time_ms=0, filter_results=[
        DeleteResult(error_code=r.error_code, error_message=r.error_message, matching_acls=[
            Matching(error_code=0, error_message=None, resource_type=int(a.resource_type),
                     resource_name=a.resource_name, pattern_type=int(a.pattern_type), principal=a.principal,
                     host=a.host, operation=int(a.operation), permission_type=int(a.permission))
            for a in r.deleted])
        for r in results])
