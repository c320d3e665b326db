"""DescribeConfigs, IncrementalAlterConfigs and AlterConfigs for topics and this broker.

Changes are ConfigRecords in the metadata log, so they survive restarts and reach every broker.
"""

from __future__ import annotations

from kafkapy.broker.config_view import (
    BrokerLayers,
    ConfigEntry,
    broker_config_entries,
    default_broker_config_entries,
    topic_config_entries,
)
from kafkapy.broker.context import BrokerContext
from kafkapy.controller import AlterConfigOp, AlterConfigsResource, OpType, topic_name_error
from kafkapy.controller.types import AlterConfigsResult
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
            # Kafka treats an empty key list like a null one: every config.
            keys = set(res.configuration_keys) if res.configuration_keys else None
            result.configs = [
                _to_wire(e, version, body.include_synonyms, body.include_documentation if version >= 3 else False)
                for e in entries if keys is None or e.name in keys
            ]
        except KafkaError as exc:
            result.error_code, result.error_message = exc.code, exc.message
        results.append(result)
    return Resp(throttle_time_ms=0, results=results)


def _entries(ctx: BrokerContext, resource_type: int, name: str) -> list[ConfigEntry]:
    image = ctx.image()
    if resource_type == RESOURCE_TOPIC:
        problem = topic_name_error(name)
        if problem is not None:
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
        if name not in image.topics.by_name:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
        return topic_config_entries(BrokerLayers.of(ctx.config, image, ctx.node_id), image.configs.topic(name))
    if resource_type == RESOURCE_BROKER:
        layers = BrokerLayers.of(ctx.config, image, ctx.node_id)
        if not name:
            return default_broker_config_entries(layers)
        if _broker_id(name, "Broker id must be an integer, but it is: ") != ctx.node_id:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"Unexpected broker id, expected {ctx.node_id} or empty string, but received {name}")
        return broker_config_entries(layers)
    if resource_type == RESOURCE_BROKER_LOGGER:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Broker logger configs are not supported yet")
    raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {resource_type}")


def _broker_id(name: str, message: str) -> int:
    try:
        return int(name, 10)
    except ValueError:
        raise KafkaError(ErrorCode.INVALID_REQUEST, message + name) from None


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
    # A broker entry other than the cluster default may only be changed through that broker
    # (Kafka's ConfigAdminManager checks this before forwarding to the controller).
    refused: dict[int, AlterConfigsResult] = {}
    for i, r in enumerate(resources):
        if r.resource_type == RESOURCE_BROKER and r.resource_name:
            try:
                if _broker_id(r.resource_name, "Node id must be an integer, but it is: ") != ctx.node_id:
                    raise KafkaError(ErrorCode.INVALID_REQUEST,
                                     f"Unexpected broker id, expected {ctx.node_id}, but received {r.resource_name}")
            except KafkaError as exc:
                refused[i] = AlterConfigsResult(r.resource_type, r.resource_name, int(exc.code), exc.message)
    forwarded = [r for i, r in enumerate(resources) if i not in refused]
    answers = iter(await ctx.controller(
        lambda c: c.incremental_alter_configs(forwarded, validate_only=validate_only)) if forwarded else [])
    # One result per distinct resource, in request order, as the controller answers.
    results, seen = [], set()
    for i, r in enumerate(resources):
        key = (r.resource_type, r.resource_name)
        if key not in seen:
            seen.add(key)
            results.append(refused[i] if i in refused else next(answers))
    return [
        resp_class.AlterConfigsResourceResponse(
            error_code=r.error_code, error_message=r.error_message,
            resource_type=r.resource_type, resource_name=r.resource_name,
        )
        for r in results
    ]
