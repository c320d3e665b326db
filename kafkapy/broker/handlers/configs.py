"""DescribeConfigs, IncrementalAlterConfigs and AlterConfigs for topics, this broker and groups.

Changes are ConfigRecords in the metadata log, so they survive restarts and reach every broker.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from typing import Any

from kafkapy.broker.config_view import (
    BrokerLayers,
    ConfigEntry,
    broker_config_entries,
    default_broker_config_entries,
    group_config_entries,
    topic_config_entries,
)
from kafkapy.broker.context import BrokerContext
from kafkapy.controller import AlterConfigOp, AlterConfigsResource, OpType, topic_name_error
from kafkapy.controller.types import AlterConfigsResult
from kafkapy.metadata.group_configs import RESOURCE_GROUP
from kafkapy.metadata.image import RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_TOPIC
from kafkapy.protocol import messages as m
from kafkapy.protocol.connection import Request
from kafkapy.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

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
    if resource_type == RESOURCE_GROUP:
        # Any group id, existing or not, as Kafka's ConfigHelper.
        if not name:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Group name must not be empty")
        return group_config_entries(BrokerLayers.of(ctx.config, image, ctx.node_id),
                                    image.configs.get(RESOURCE_GROUP, name))
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
    """IncrementalAlterConfigs on a broker listener: SET/DELETE/APPEND/SUBTRACT on topic and
    broker configs. This broker refuses another broker's entry itself and has the controller do
    the rest (see ``_alter_through_controller``)."""
    return _refused(request, IncResp) or await _alter_through_controller(ctx, request, IncResp, _incremental_ops)


async def handle_alter_configs(ctx: BrokerContext, request: Request) -> object:
    """The legacy AlterConfigs on a broker listener: the given set replaces the resource's
    dynamic configs entirely (checked and forwarded as IncrementalAlterConfigs is)."""
    return _refused(request, AlterResp) or await _alter_through_controller(ctx, request, AlterResp, _replacing_ops)


def malformed_alter(body: object) -> str | None:
    """Why an (Incremental)AlterConfigs request has a null where Kafka's schema has none (the
    resources, a resource's name or configs, a config's name), or None when it is well formed.
    Kafka's parser refuses such a request before anything runs; acting on its other entries
    would apply half of a request the client never validly sent."""
    resources = getattr(body, "resources", None)
    if not isinstance(resources, (list, tuple)):
        return "resources is null"
    for i, r in enumerate(resources):
        if r is None or not isinstance(r.resource_name, str):
            return f"resource entry {i} has a null resource_name"
        if not isinstance(r.configs, (list, tuple)):
            return f"resource {r.resource_name!r} has null configs"
        if any(c is None or not isinstance(c.name, str) for c in r.configs):
            return f"resource {r.resource_name!r} has a config with a null name"
    return None


def _refused(request: Request, resp_class: type[Any]) -> object | None:
    """INVALID_REQUEST for every resource of a malformed request (nothing is changed), or
    None to go on."""
    problem = malformed_alter(request.body)
    if problem is None:
        return None
    log.info("%s rejected: %s", resp_class.__name__.replace("Response", "Request"), problem)
    listed = request.body.resources if isinstance(request.body.resources, (list, tuple)) else ()
    results = [AlterConfigsResult(r.resource_type, r.resource_name if isinstance(r.resource_name, str) else "",
                                  int(ErrorCode.INVALID_REQUEST), problem)
               for r in listed if r is not None]
    refusal: object = resp_class(throttle_time_ms=0, responses=_to_wire_results(results, resp_class))
    return refusal


async def handle_forwarded_incremental_alter_configs(ctx: BrokerContext, request: Request) -> object:
    """IncrementalAlterConfigs on the controller listener, as a broker forwards it: a broker
    entry may name any broker (the forwarding broker has checked it names itself), as Kafka's
    ControllerApis accepts."""
    refused = _refused(request, IncResp)
    if refused is not None:
        return refused
    body = request.body
    results = await _controller_alter(ctx, _incremental_ops(ctx, body.resources), bool(body.validate_only))
    return IncResp(throttle_time_ms=0, responses=_to_wire_results(results, IncResp))


async def handle_forwarded_alter_configs(ctx: BrokerContext, request: Request) -> object:
    """The legacy AlterConfigs on the controller listener (see
    ``handle_forwarded_incremental_alter_configs``)."""
    refused = _refused(request, AlterResp)
    if refused is not None:
        return refused
    body = request.body
    results = await _controller_alter(ctx, _replacing_ops(ctx, body.resources), bool(body.validate_only))
    return AlterResp(throttle_time_ms=0, responses=_to_wire_results(results, AlterResp))


def _incremental_ops(ctx: BrokerContext, wire: list[Any]) -> list[AlterConfigsResource]:
    return [
        AlterConfigsResource(
            resource_type=r.resource_type, resource_name=r.resource_name,
            ops=tuple(AlterConfigOp(c.name, _op_type(c.config_operation), c.value) for c in r.configs),
        )
        for r in wire
    ]


def _op_type(op: int) -> OpType | int:
    # An id outside 0..3 goes through as the bare number: the controller answers it with
    # INVALID_REQUEST for its resource alone, as Kafka does.
    try:
        return OpType(op)
    except ValueError:
        return op


def _replacing_ops(ctx: BrokerContext, wire: list[Any]) -> list[AlterConfigsResource]:
    # The legacy request's full set becomes SETs plus DELETEs of what it leaves out, against the
    # image of the node that runs it (the controller's, when forwarded).
    image = ctx.image()
    resources = []
    for r in wire:
        given = {c.name: c.value for c in r.configs}
        current = image.configs.get(r.resource_type, r.resource_name)
        ops = [AlterConfigOp(k, OpType.SET, v) for k, v in given.items()]
        ops += [AlterConfigOp(k, OpType.DELETE) for k in current if k not in given]
        resources.append(AlterConfigsResource(r.resource_type, r.resource_name, tuple(ops)))
    return resources


ResourceKey = tuple[int, str]


def _foreign_broker_entries(node_id: int, wire: list[Any]) -> dict[ResourceKey, AlterConfigsResult]:
    """The refusals of Kafka's ConfigAdminManager.preprocess: a broker entry other than the
    cluster default may only be changed through that broker, as only it can apply it."""
    refused: dict[ResourceKey, AlterConfigsResult] = {}
    for r in wire:
        if r.resource_type == RESOURCE_BROKER and r.resource_name:
            try:
                if _broker_id(r.resource_name, "Node id must be an integer, but it is: ") != node_id:
                    raise KafkaError(ErrorCode.INVALID_REQUEST,
                                     f"Unexpected broker id, expected {node_id}, but received {r.resource_name}")
            except KafkaError as exc:
                refused[(r.resource_type, r.resource_name)] = AlterConfigsResult(
                    r.resource_type, r.resource_name, int(exc.code), exc.message)
    return refused


async def _alter_through_controller(ctx: BrokerContext, request: Request, resp_class: type[Any],
                                    to_ops: Callable[[BrokerContext, list[Any]], list[AlterConfigsResource]]) -> object:
    """Refuse another broker's entries here, then have the controller do the rest and answer
    in request order, one result per distinct resource (Kafka's broker-side forwarding of
    config changes). A broker node forwards the remaining entries as a request of the client's
    version; a combined node calls its controller in-process."""
    body = request.body
    refused = _foreign_broker_entries(ctx.node_id, body.resources)
    rest = [r for r in body.resources if (r.resource_type, r.resource_name) not in refused]
    answers: dict[ResourceKey, AlterConfigsResult] = {}
    if rest and ctx.controller_request is not None:
        forwarded = copy.copy(body)
        forwarded.resources = rest
        response = await ctx.forward(forwarded, request.api_version)
        for r in response.responses:
            answers[(r.resource_type, r.resource_name)] = AlterConfigsResult(
                r.resource_type, r.resource_name, r.error_code, r.error_message)
    elif rest:
        for res in await _controller_alter(ctx, to_ops(ctx, rest), bool(body.validate_only)):
            answers[(res.resource_type, res.resource_name)] = res
    results: list[AlterConfigsResult] = []
    seen: set[ResourceKey] = set()
    for r in body.resources:
        key = (r.resource_type, r.resource_name)
        if key in seen:
            continue
        seen.add(key)
        found = refused.get(key) or answers.get(key)
        if found is None:
            # A request-level failure on the controller can come back without the entries.
            found = AlterConfigsResult(*key, int(ErrorCode.UNKNOWN_SERVER_ERROR),
                                       "The controller's answer did not include this resource")
        results.append(found)
    return resp_class(throttle_time_ms=0, responses=_to_wire_results(results, resp_class))


async def _controller_alter(ctx: BrokerContext, resources: list[AlterConfigsResource],
                            validate_only: bool) -> list[AlterConfigsResult]:
    """Run the change on this node's controller: one result per distinct resource, in order."""
    assert ctx.controller is not None
    return list(await ctx.controller(
        lambda c: c.incremental_alter_configs(resources, validate_only=validate_only)))


def _to_wire_results(results: list[AlterConfigsResult], resp_class: type[Any]) -> list[Any]:
    return [
        resp_class.AlterConfigsResourceResponse(
            error_code=r.error_code, error_message=r.error_message,
            resource_type=r.resource_type, resource_name=r.resource_name,
        )
        for r in results
    ]
