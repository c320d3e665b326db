"""CreateAcls, DescribeAcls, DeleteAcls with no authorizer: SECURITY_DISABLED, as Kafka answers.

A Kafka broker without ``authorizer.class.name`` serves these APIs and refuses every operation
with SECURITY_DISABLED ("No Authorizer is configured"), so admin tools print a clear error
instead of failing on a closed connection. kafkapy has no authorizer yet (security comes later),
which makes this the whole behaviour for now.
"""

from __future__ import annotations

from kafkapy.broker.context import BrokerContext
from kafkapy.protocol import messages as m
from kafkapy.protocol.connection import Request
from kafkapy.protocol.errors import ErrorCode

NO_AUTHORIZER = "No Authorizer is configured on the broker"


async def handle_describe_acls(ctx: BrokerContext, request: Request) -> object:
    return m.DescribeAclsResponse(throttle_time_ms=0, error_code=ErrorCode.SECURITY_DISABLED,
                                  error_message=NO_AUTHORIZER, resources=[])


async def handle_create_acls(ctx: BrokerContext, request: Request) -> object:
    Result = m.CreateAclsResponse.AclCreationResult
    return m.CreateAclsResponse(throttle_time_ms=0, results=[
        Result(error_code=ErrorCode.SECURITY_DISABLED, error_message=NO_AUTHORIZER)
        for _ in request.body.creations])


async def handle_delete_acls(ctx: BrokerContext, request: Request) -> object:
    Result = m.DeleteAclsResponse.DeleteAclsFilterResult
    return m.DeleteAclsResponse(throttle_time_ms=0, filter_results=[
        Result(error_code=ErrorCode.SECURITY_DISABLED, error_message=NO_AUTHORIZER, matching_acls=[])
        for _ in request.body.filters])
