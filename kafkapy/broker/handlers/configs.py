"""DescribeConfigs, IncrementalAlterConfigs and AlterConfigs for topics and this broker.

Changes are ConfigRecords in the metadata log, so they survive restarts and reach every broker.
"""

from __future__ import annotations

from kafkapy.broker.config_view import ConfigEntry, broker_config_entries, topic_config_entries
from kafkapy.broker.context import BrokerContext
from kafkapy.controller import AlterConfigOp, AlterConfigsResource, OpType
from kafkapy.metadata.image import RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_TOPIC
from kafkapy.protocol import messages as m
from kafkapy.protocol.connection import Request
from kafkapy.protocol.errors import ErrorCode, KafkaError

Resp = m.DescribeConfigsResponse
Result = Resp.DescribeConfigsResult
Entry = Result.DescribeConfigsResourceResult
SynonymOut = Entry.DescribeConfigsSynonym


async def handle_describe_configs(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    version = request.api_version
    results = []
    for res in body.resources:
        result = Result(error_code=0, error_message=None, resource_type=res.resource_type,
                        resource_name=res.resource_name, configs=[])
        try:
            entries = _entries(ctx, res.resource_type, res.resource_name)
            keys = set(res.configuration_keys) if res.configuration_keys is not None else None
            result.configs = [
                _to_wire(e, version, body.include_synonyms, body.include_documentation if version >= 3 else False)
                for e in entries if keys is None or e.name in keys
            ]
        except KafkaError as exc:
            result.error_code, result.error_message = exc.code, exc.message
        results.append(result)
    return Resp(throttle_time_ms=0, results=results)


def _entries(ctx: BrokerContext, resource_type: int, name: str) -> list[ConfigEntry]:
    if resource_type == RESOURCE_TOPIC:
        image = ctx.image()
        if name not in image.topics.by_name:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist")
        return topic_config_entries(ctx.config, image.configs.topic(name))
    if resource_type == RESOURCE_BROKER:
        if name not in ("", str(ctx.node_id)):
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {ctx.node_id} or empty string, but received {name}")
        return broker_config_entries(ctx.config)
    if resource_type == RESOURCE_BROKER_LOGGER:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Broker logger configs are not supported yet")
    raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type}")


def _to_wire(e: ConfigEntry, version: int, synonyms: bool, docs: bool) -> object:
    return Entry(
        name=e.name, value=e.value, read_only=e.read_only, config_source=int(e.source),
        is_sensitive=e.sensitive,
        synonyms=[SynonymOut(name=s.name, value=s.value, source=int(s.source)) for s in e.synonyms] if synonyms else [],
        config_type=int(e.type), documentation=e.documentation if docs else None,
    )


IncResp = m.IncrementalAlterConfigsResponse
AlterResp = m.AlterConfigsResponse


async def handle_incremental_alter_configs(ctx: BrokerContext, request: Request) -> object:
    """IncrementalAlterConfigs: SET/DELETE/APPEND/SUBTRACT on topic and broker configs, through the controller."""
    body = request.body
    resources = [
        AlterConfigsResource(
            resource_type=r.resource_type, resource_name=r.resource_name,
            ops=tuple(AlterConfigOp(c.name, OpType(c.config_operation), c.value) for c in r.configs),
        )
        for r in body.resources
    ]
    return IncResp(throttle_time_ms=0, responses=await _alter(ctx, resources, bool(body.validate_only), IncResp))


async def handle_alter_configs(ctx: BrokerContext, request: Request) -> object:
    """The legacy AlterConfigs: the given set replaces the resource's dynamic configs entirely."""
    body = request.body
    image = ctx.image()
    resources = []
    for r in body.resources:
        given = {c.name: c.value for c in r.configs}
        current = image.configs.get(r.resource_type, r.resource_name)
        ops = [AlterConfigOp(k, OpType.SET, v) for k, v in given.items()]
        ops += [AlterConfigOp(k, OpType.DELETE) for k in current if k not in given]
        resources.append(AlterConfigsResource(r.resource_type, r.resource_name, tuple(ops)))
    return AlterResp(throttle_time_ms=0, responses=await _alter(ctx, resources, bool(body.validate_only), AlterResp))


async def _alter(ctx: BrokerContext, resources: list, validate_only: bool, resp_class: type) -> list:
    results = await ctx.controller(lambda c: c.incremental_alter_configs(resources, validate_only=validate_only))
    return [
        resp_class.AlterConfigsResourceResponse(
            error_code=r.error_code, error_message=r.error_message,
            resource_type=r.resource_type, resource_name=r.resource_name,
        )
        for r in results
    ]
