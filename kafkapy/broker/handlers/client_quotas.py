"""DescribeClientQuotas (API 48) and AlterClientQuotas (API 49).

Describe is answered from this broker's metadata image, as a Kafka broker answers it from its
metadata cache; a malformed filter fails the whole request with Kafka's code and message and no
entries. Alter is the controller's (``ClientQuotaControlManager``): a broker node forwards it to
the active controller, a combined node runs it on its own.
"""

from __future__ import annotations

from kafkapy.broker.context import BrokerContext
from kafkapy.controller.client_quota_control import QuotaAlteration
from kafkapy.protocol import messages as m
from kafkapy.protocol.connection import Request
from kafkapy.protocol.errors import ErrorCode, KafkaError


async def handle_describe_client_quotas(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    Resp = m.DescribeClientQuotasResponse
    components = [(c.entity_type, c.match_type, c.match) for c in body.components]
    try:
        found = ctx.image().client_quotas.describe(components, bool(body.strict))
    except KafkaError as e:
        return Resp(throttle_time_ms=0, error_code=int(e.code), error_message=e.message, entries=None)
    Entry = Resp.EntryData
    return Resp(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, entries=[
        Entry(entity=[Entry.EntityData(entity_type=t, entity_name=n) for t, n in entity],
              values=[Entry.ValueData(key=k, value=v) for k, v in values.items()])
        for entity, values in found])


async def handle_alter_client_quotas(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    alterations = [
        QuotaAlteration(entity=tuple((e.entity_type, e.entity_name) for e in entry.entity),
                        ops=tuple((op.key, float(op.value), bool(op.remove)) for op in entry.ops))
        for entry in body.entries]
    assert ctx.controller is not None  # when unset, the dispatcher forwards this request
    results = await ctx.controller(
        lambda c: c.alter_client_quotas(alterations, validate_only=bool(body.validate_only)))
    Resp = m.AlterClientQuotasResponse
    Entry = Resp.EntryData
    return Resp(throttle_time_ms=0, entries=[
        Entry(error_code=int(r.error_code), error_message=r.error_message,
              entity=[Entry.EntityData(entity_type=t, entity_name=n) for t, n in r.entity])
        for r in results])
