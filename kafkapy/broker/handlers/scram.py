"""DescribeUserScramCredentials (from this broker's metadata image) and AlterUserScramCredentials
(through the controller), as Kafka answers them."""

from __future__ import annotations

from kafkapy.broker.context import BrokerContext
from kafkapy.controller.scram_control import ScramDeletion, ScramUpsertion
from kafkapy.protocol import messages as m
from kafkapy.protocol.connection import Request
from kafkapy.protocol.errors import ErrorCode

DescribeResp = m.DescribeUserScramCredentialsResponse
AlterResp = m.AlterUserScramCredentialsResponse
_DUPLICATE = "Cannot describe SCRAM credentials for the same user twice in a single request: "
_UNKNOWN = "Attempt to describe a user credential that does not exist: "


async def handle_describe_user_scram_credentials(ctx: BrokerContext, request: Request) -> object:
    """Each user's mechanisms and iteration counts (never salts or keys); all users when the
    request names none."""
    scram = ctx.image().scram
    named = [u.name for u in request.body.users or ()]
    users: dict[str, bool] = {}
    for name in named or scram.users():
        users[name] = name in users
    Result = DescribeResp.DescribeUserScramCredentialsResult
    results = []
    for user, duplicate in users.items():
        if duplicate:
            results.append(Result(user=user, error_code=ErrorCode.DUPLICATE_RESOURCE,
                                  error_message=_DUPLICATE + user, credential_infos=[]))
            continue
        infos = [Result.CredentialInfo(mechanism=mech, iterations=iterations)
                 for mech, iterations in scram.mechanisms_of(user)]
        if infos:
            results.append(Result(user=user, error_code=ErrorCode.NONE, error_message=None, credential_infos=infos))
        else:
            results.append(Result(user=user, error_code=ErrorCode.RESOURCE_NOT_FOUND,
                                  error_message=_UNKNOWN + user, credential_infos=[]))
    return DescribeResp(version=request.response_version, throttle_time_ms=0, error_code=ErrorCode.NONE,
                        error_message=None, results=results)


async def handle_alter_user_scram_credentials(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    deletions = [ScramDeletion(d.name, d.mechanism) for d in body.deletions or ()]
    upsertions = [ScramUpsertion(u.name, u.mechanism, u.iterations, bytes(u.salt), bytes(u.salted_password))
                  for u in body.upsertions or ()]
    assert ctx.controller is not None  # when unset, the dispatcher forwards this request
    results = await ctx.controller(lambda c: c.alter_user_scram_credentials(deletions, upsertions))
    return AlterResp(version=request.response_version, throttle_time_ms=0, results=[
        AlterResp.AlterUserScramCredentialsResult(user=r.user, error_code=r.error_code,
                                                  error_message=r.error_message)
        for r in results])
