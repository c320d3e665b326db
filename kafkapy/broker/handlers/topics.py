"""CreateTopics, DeleteTopics, CreatePartitions and Metadata's auto-creation.

Every change goes through the controller as metadata records; the handler answers once the
records are committed and applied to this broker, so a client that creates a topic and then asks
for metadata sees it.
"""

from __future__ import annotations

import logging

from kafkapy.broker.context import BrokerContext
from kafkapy.controller import CreatePartitionsTopic, NewTopic, TopicDefaults
from kafkapy.protocol import messages as m
from kafkapy.protocol.connection import Request
from kafkapy.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

CreateResp = m.CreateTopicsResponse
CreateResult = CreateResp.CreatableTopicResult
DeleteResp = m.DeleteTopicsResponse
PartitionsResp = m.CreatePartitionsResponse


def _defaults(ctx: BrokerContext) -> TopicDefaults:
    return TopicDefaults(
        # BrokerConfig.get is typed ``object`` for every key (config.py).
        num_partitions=int(ctx.config.get("num.partitions")),  # type: ignore[call-overload]
        replication_factor=int(ctx.config.get("default.replication.factor")),  # type: ignore[call-overload]
    )


async def handle_create_topics(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    version = request.api_version
    new_topics = [
        NewTopic(
            name=t.name,
            num_partitions=t.num_partitions,
            replication_factor=t.replication_factor,
            assignments={a.partition_index: list(a.broker_ids) for a in t.assignments},
            configs={c.name: c.value for c in t.configs},
        )
        for t in body.topics
    ]
    validate_only = bool(body.validate_only) if version >= 1 else False
    defaults = _defaults(ctx)
    assert ctx.controller is not None  # when unset, the dispatcher forwards this request
    results = await ctx.controller(
        lambda c: c.create_topics(new_topics, validate_only=validate_only, defaults=defaults))
    out = []
    for r in results:
        item = CreateResult(name=r.name, error_code=r.error_code, error_message=r.error_message,
                            num_partitions=r.num_partitions, replication_factor=r.replication_factor)
        if version >= 7:
            item.topic_id = r.topic_id
        if version >= 5:
            if r.error_code == ErrorCode.NONE:
                item.configs = [
                    CreateResult.CreatableTopicConfigs(name=c.name, value=c.value, read_only=c.read_only,
                                                       config_source=c.source, is_sensitive=c.is_sensitive)
                    for c in r.configs
                ]
            else:
                item.configs = None
        out.append(item)
        if r.error_code == ErrorCode.NONE and not validate_only:
            log.info("Created topic %s with %d partitions (client %s)", r.name, r.num_partitions, request.client_id)
    return CreateResp(throttle_time_ms=0, topics=out)


async def create_topics_internal(ctx: BrokerContext, topics: list[NewTopic]) -> list[tuple[str, int, str | None]]:
    """Create topics on the broker's own behalf (auto-creation, internal topics): (name, error
    code, message) per topic.

    A broker node sends the controller a CreateTopics request with explicit partition counts and
    replication factors taken from its own config, as Kafka's AutoTopicCreationManager does.
    """
    defaults = _defaults(ctx)
    if ctx.controller_request is None:
        assert ctx.controller is not None
        results = await ctx.controller(lambda c: c.create_topics(topics, defaults=defaults))
        return [(r.name, r.error_code, r.error_message) for r in results]
    req = m.CreateTopicsRequest
    body = req(timeout_ms=30_000, validate_only=False, topics=[
        req.CreatableTopic(
            name=t.name,
            num_partitions=t.num_partitions if t.num_partitions is not None and t.num_partitions > 0
            else defaults.num_partitions,
            replication_factor=t.replication_factor if t.replication_factor is not None and t.replication_factor > 0
            else defaults.replication_factor,
            assignments=[],
            configs=[req.CreatableTopic.CreatableTopicConfig(name=k, value=v) for k, v in (t.configs or {}).items()],
        )
        for t in topics
    ])
    response = await ctx.controller_request(body)
    return [(r.name, r.error_code, r.error_message) for r in response.topics]


async def auto_create_topics(ctx: BrokerContext, names: list[str]) -> None:
    """Create topics a Metadata request named, with the broker defaults (auto.create.topics.enable)."""
    for name, code, message in await create_topics_internal(ctx, [NewTopic(name=n) for n in names]):
        if code == ErrorCode.NONE:
            log.info("Auto-created topic %s", name)
        elif code != ErrorCode.TOPIC_ALREADY_EXISTS:
            log.info("Auto-creating topic %s failed: %s %s", name, ErrorCode(code).name, message or "")


async def handle_delete_topics(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    version = request.api_version
    if version >= 6:
        targets = [t.name if t.name is not None else t.topic_id for t in body.topics]
    else:
        targets = list(body.topic_names)
    assert ctx.controller is not None  # when unset, the dispatcher forwards this request
    results = await ctx.controller(lambda c: c.delete_topics(targets))
    out = []
    for r in results:
        item = DeleteResp.DeletableTopicResult(name=r.name, error_code=r.error_code, error_message=r.error_message)
        if version >= 6:
            item.topic_id = r.topic_id
        out.append(item)
        if r.error_code == ErrorCode.NONE:
            log.info("Deleted topic %s", r.name)
    return DeleteResp(throttle_time_ms=0, responses=out)


async def handle_create_partitions(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    topics = [
        CreatePartitionsTopic(
            name=t.name, count=t.count,
            assignments=[list(a.broker_ids) for a in t.assignments] if t.assignments is not None else None,
        )
        for t in body.topics
    ]
    assert ctx.controller is not None  # when unset, the dispatcher forwards this request
    results = await ctx.controller(lambda c: c.create_partitions(topics, validate_only=bool(body.validate_only)))
    out = [PartitionsResp.CreatePartitionsTopicResult(
               name=r.name, error_code=r.error_code, error_message=r.error_message)
           for r in results]
    return PartitionsResp(throttle_time_ms=0, results=out)
