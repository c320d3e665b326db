"""kafkapy's own cluster-link APIs: links, mirror topics, and their state changes.

Kafka has no public API for cluster links, so these are ours (api keys 20000-20004, never
advertised in ApiVersions; ``kafkapy link`` and ``kafkapy mirror`` speak them). Each request
arrives at a broker, which does what needs the source cluster, then forwards it to the active
controller with what it learnt filled in; the controller writes the metadata records:

* CreateClusterLinks: the broker reaches the source (a link to nowhere is refused) and fills in
  its cluster id;
* CreateMirrorTopics: the broker reads each source topic (id, partitions, leader epochs, the
  configs a mirror takes);
* AlterMirrors: pause, resume and failover go straight on; promote first waits until every
  mirror partition's high watermark reached the source's as it was when asked, then stops the
  mirror as failover does;
* DeleteClusterLinks goes straight on; DescribeClusterLinks is answered from the broker's image,
  secrets (``SENSITIVE_LINK_CONFIGS``) as null values marked sensitive.

The same handlers run on the controller (``ctx.controller`` set), where they only turn the
filled-in request into controller operations.
"""

from __future__ import annotations

import logging
import uuid
from functools import partial
from typing import Any

from kafkapy.broker.context import BrokerContext
from kafkapy.broker.edges import LinkService
from kafkapy.controller import MirrorTopicSpec, QuorumController
from kafkapy.metadata.image import ClusterLink, MetadataImage, MirrorState
from kafkapy.metadata.link_configs import described_link_configs, validate_link_configs
from kafkapy.protocol import messages as m
from kafkapy.protocol.connection import Request
from kafkapy.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

OP_PAUSE, OP_RESUME, OP_FAILOVER, OP_PROMOTE = 0, 1, 2, 3
_OP_NAMES = {OP_PAUSE: "pause", OP_RESUME: "resume", OP_FAILOVER: "failover", OP_PROMOTE: "promote"}
_ZERO = uuid.UUID(int=0)


def _links(ctx: BrokerContext) -> LinkService:
    if ctx.links is None:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "this node runs no cluster links")
    return ctx.links


def _failure(exc: BaseException) -> tuple[int, str]:
    if isinstance(exc, KafkaError):
        return int(exc.code), exc.message or exc.code.name
    return int(ErrorCode.NETWORK_EXCEPTION), f"the source cluster did not answer: {exc or type(exc).__name__}"


async def _forward(ctx: BrokerContext, body: Any) -> Any:
    assert ctx.controller_request is not None
    return await ctx.forward(body, 0)


# -- links --------------------------------------------------------------------------------------------

async def handle_create_cluster_links(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    Resp = m.CreateClusterLinksResponse
    results: dict[str, Any] = {}
    if ctx.controller is None:
        ready = []
        for link in body.links:
            configs = {c.name: c.value for c in link.configs}
            problem = validate_link_configs(configs)
            if problem is not None:
                results[link.link_name] = Resp.LinkResult(link_name=link.link_name, error_code=ErrorCode.INVALID_CONFIG,
                                                          error_message=problem, source_cluster_id=None)
                continue
            try:
                link.source_cluster_id = await _links(ctx).source_cluster_id(link.link_name, configs)
                ready.append(link)
            except Exception as exc:  # noqa: BLE001 - reported per link
                code, message = _failure(exc)
                results[link.link_name] = Resp.LinkResult(link_name=link.link_name, error_code=code,
                                                          error_message=message, source_cluster_id=None)
        if ready:
            body.links = ready
            for r in (await _forward(ctx, body)).results:
                results[r.link_name] = r
        return Resp(throttle_time_ms=0, results=[results[link] for link in results])
    out = []
    for link in body.links:
        configs = {c.name: c.value for c in link.configs}
        r = await ctx.controller(partial(_create_link, link.link_name, link.source_cluster_id or "",
                                         configs, body.validate_only))
        out.append(Resp.LinkResult(link_name=r.link_name, link_id=r.link_id, error_code=r.error_code,
                                   error_message=r.error_message, source_cluster_id=link.source_cluster_id))
        if r.error_code == ErrorCode.NONE and not body.validate_only:
            log.info("Created cluster link %s to cluster %s (%s)", link.link_name, link.source_cluster_id,
                     configs.get("bootstrap.servers"))
    return Resp(throttle_time_ms=0, results=out)


def _create_link(name: str, cluster_id: str, configs: dict[str, str], validate_only: bool,
                 c: QuorumController) -> Any:
    return c.create_cluster_link(name, cluster_id, configs, validate_only=validate_only)


def _delete_link(name: str, force: bool, c: QuorumController) -> Any:
    return c.delete_cluster_link(name, force=force)


async def handle_delete_cluster_links(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    if ctx.controller is None:
        return await _forward(ctx, body)
    Resp = m.DeleteClusterLinksResponse
    out = []
    for name in body.link_names:
        r = await ctx.controller(partial(_delete_link, name, body.force))
        out.append(Resp.LinkResult(link_name=name, error_code=r.error_code, error_message=r.error_message))
        if r.error_code == ErrorCode.NONE:
            log.info("Deleted cluster link %s%s", name, " (force)" if body.force else "")
    return Resp(throttle_time_ms=0, results=out)


async def handle_describe_cluster_links(ctx: BrokerContext, request: Request) -> object:
    image = ctx.image()
    Resp = m.DescribeClusterLinksResponse
    L = Resp.Link
    names = request.body.link_names
    links = sorted(image.links.by_id.values(), key=lambda x: x.name) if names is None else \
        [image.links.by_name(n) or n for n in names]
    out = []
    for link in links:
        if isinstance(link, str):
            out.append(L(link_name=link, error_code=ErrorCode.RESOURCE_NOT_FOUND,
                         error_message=f"Cluster link '{link}' does not exist.", link_id=_ZERO,
                         source_cluster_id="", state="", configs=[], mirrors=[]))
            continue
        out.append(L(link_name=link.name, error_code=0, error_message=None, link_id=link.id,
                     source_cluster_id=link.source_cluster_id,
                     state=ctx.links.state(link.id) if ctx.links is not None else "UNAVAILABLE",
                     configs=[L.LinkConfig(name=k, value=v, is_sensitive=secret)
                              for k, v, secret in described_link_configs(link.configs)],
                     mirrors=_mirrors(image, link)))
    return Resp(throttle_time_ms=0, links=out)


def _mirrors(image: MetadataImage, link: ClusterLink) -> list[Any]:
    M = m.DescribeClusterLinksResponse.Link.Mirror
    out = []
    for mirror in image.links.mirrors_of(link.id):
        topic = image.topics.by_id.get(mirror.topic_id)
        out.append(M(topic_name=topic.name if topic is not None else "", topic_id=mirror.topic_id,
                     source_topic_name=mirror.source_topic, state=MirrorState(mirror.state).name))
    return sorted(out, key=lambda x: x.topic_name)


# -- mirror topics -----------------------------------------------------------------------------------

async def handle_create_mirror_topics(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    Resp = m.CreateMirrorTopicsResponse
    if ctx.controller is None:
        results: dict[str, Any] = {}
        ready = []
        image = ctx.image()
        for t in body.topics:
            t.source_topic_name = t.source_topic_name or t.name
            try:
                await _read_source_topic(ctx, image, t)
                ready.append(t)
            except Exception as exc:  # noqa: BLE001 - reported per topic
                code, message = _failure(exc)
                results[t.name] = Resp.TopicResult(name=t.name, error_code=code, error_message=message)
        if ready:
            body.topics = ready
            for r in (await _forward(ctx, body)).results:
                results[r.name] = r
        return Resp(throttle_time_ms=0, results=[results[t] for t in results])
    specs = [MirrorTopicSpec(
        name=t.name, link_name=t.link_name, source_topic=t.source_topic_name or t.name,
        source_topic_id=t.source_topic_id, num_partitions=t.num_partitions,
        replication_factor=t.replication_factor, configs={c.name: c.value for c in t.configs},
        source_max_leader_epoch=max(t.source_max_leader_epoch, 0), restore=t.restore) for t in body.topics]
    rs = await ctx.controller(lambda c: c.create_mirror_topics(specs, validate_only=body.validate_only))
    by_name = {s.name: s for s in specs}
    for r in rs:
        if r.error_code == ErrorCode.NONE and not body.validate_only:
            s = by_name[r.name]
            log.info("%s mirror topic %s of %s over cluster link %s", "Restored" if s.restore else "Created",
                     r.name, s.source_topic, s.link_name)
    return Resp(throttle_time_ms=0, results=[
        Resp.TopicResult(name=r.name, error_code=r.error_code, error_message=r.error_message,
                         num_partitions=by_name[r.name].num_partitions) for r in rs])


async def _read_source_topic(ctx: BrokerContext, image: MetadataImage, t: Any) -> None:
    """Fill ``t``'s source fields from the link's source cluster."""
    if image.links.by_name(t.link_name) is None:
        raise KafkaError(ErrorCode.RESOURCE_NOT_FOUND, f"Cluster link '{t.link_name}' does not exist.")
    facts = await _links(ctx).read_source_topic(t.link_name, t.source_topic_name)
    t.source_topic_id = facts.topic_id
    t.num_partitions = facts.num_partitions
    t.source_max_leader_epoch = facts.max_leader_epoch
    C = m.CreateMirrorTopicsRequest.MirrorTopic.Config
    t.configs = [C(name=k, value=v) for k, v in sorted(facts.configs.items())]


async def handle_alter_mirrors(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    Resp = m.AlterMirrorsResponse
    op = body.op
    if op not in _OP_NAMES:
        return Resp(throttle_time_ms=0, results=[Resp.TopicResult(
            name=t, error_code=ErrorCode.INVALID_REQUEST, error_message=f"Unknown mirror operation {op}")
            for t in body.topics])
    if ctx.controller is None:
        results: dict[str, Any] = {}
        if op == OP_PROMOTE:
            ready = []
            for name in body.topics:
                try:
                    await _links(ctx).wait_caught_up(name, body.timeout_ms / 1000.0)
                    ready.append(name)
                except Exception as exc:  # noqa: BLE001 - reported per topic
                    code, message = _failure(exc)
                    results[name] = Resp.TopicResult(name=name, error_code=code, error_message=message)
            body.topics = ready
        if body.topics:
            for r in (await _forward(ctx, body)).results:
                results[r.name] = r
        return Resp(throttle_time_ms=0, results=[results[t] for t in results])
    names = list(body.topics)
    if op == OP_PAUSE:
        rs = await ctx.controller(lambda c: c.pause_mirrors(names))
    elif op == OP_RESUME:
        rs = await ctx.controller(lambda c: c.resume_mirrors(names))
    else:
        rs = await ctx.controller(lambda c: c.stop_mirrors(names))
    for r in rs:
        if r.error_code == ErrorCode.NONE:
            log.info("Mirror topic %s: %s", r.name, {OP_PAUSE: "paused", OP_RESUME: "resumed"}.get(
                op, f"stopped ({_OP_NAMES[op]}); it is writable now"))
    return Resp(throttle_time_ms=0, results=[
        Resp.TopicResult(name=r.name, error_code=r.error_code, error_message=r.error_message) for r in rs])


__all__ = ["handle_alter_mirrors", "handle_create_cluster_links", "handle_create_mirror_topics",
           "handle_delete_cluster_links", "handle_describe_cluster_links"]
