"""The share coordinator's RPCs (Initialize/Read/Write/Delete/ReadSummary ShareGroupState, keys
83-87), sent by share-partition leaders and group coordinators on other brokers.

Each partition of a request is answered by this broker's share coordinator when it leads the
partition's ``__share_group_state`` partition, else with the error the sender retries on
(NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE). As Kafka's
ShareCoordinatorService, a request with no group id, no topics or a topic with no partitions is
answered with no results; all partitions run concurrently and each answers after its records are
replicated. Served while ``share.version`` >= 1 (CLUSTER_ACTION: request_authorization).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from kafkapy.broker.context import BrokerContext
from kafkapy.broker.gated_apis import SHARE_VERSION_FEATURE, GatedApi
from kafkapy.protocol import messages as m
from kafkapy.protocol.apis import ApiKey
from kafkapy.protocol.connection import Request
from kafkapy.protocol.errors import ErrorCode
from kafkapy.share.partition import PartitionState, StateBatch
from kafkapy.share.persister import StateResult

#: (group, topic id, partition entry) -> that partition's answer.
PartitionCall = Callable[[Any, str, uuid.UUID, Any], Awaitable[StateResult]]
#: (partition entry, its result) -> the response's PartitionResult.
PartitionAnswer = Callable[[Any, StateResult], Any]


def _well_formed(body: Any) -> bool:
    return bool(body.group_id) and bool(body.topics) and all(t.partitions for t in body.topics)


async def _each_partition(ctx: BrokerContext, body: Any, call: PartitionCall,
                          answer: PartitionAnswer) -> list[tuple[uuid.UUID, list[Any]]]:
    """Run ``call`` on every partition of ``body`` at once; (topic id, answers) in request order."""
    service = ctx.share_state
    results: dict[tuple[int, int], StateResult] = {}

    async def one(i: int, j: int, topic_id: uuid.UUID, p: Any) -> None:
        if service is None:
            results[(i, j)] = StateResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, "Share coordinator is not available.")
        else:
            results[(i, j)] = await call(service, body.group_id, topic_id, p)

    async with trio.open_nursery() as nursery:
        for i, topic in enumerate(body.topics):
            for j, p in enumerate(topic.partitions):
                nursery.start_soon(one, i, j, topic.topic_id, p)
    return [(topic.topic_id, [answer(p, results[(i, j)]) for j, p in enumerate(topic.partitions)])
            for i, topic in enumerate(body.topics)]


async def handle_initialize_share_group_state(ctx: BrokerContext, request: Request) -> object:
    R = m.InitializeShareGroupStateResponse
    P = R.InitializeStateResult.PartitionResult
    body = request.body
    if not _well_formed(body):
        return R(results=[])
    out = await _each_partition(
        ctx, body, lambda s, g, t, p: s.initialize(g, t, p.partition, p.state_epoch, p.start_offset),
        lambda p, r: P(partition=p.partition, error_code=r.error, error_message=r.message))
    return R(results=[R.InitializeStateResult(topic_id=t, partitions=ps) for t, ps in out])


async def handle_read_share_group_state(ctx: BrokerContext, request: Request) -> object:
    R = m.ReadShareGroupStateResponse
    P = R.ReadStateResult.PartitionResult
    body = request.body

    def answer(p: Any, r: StateResult) -> Any:
        if r.error or r.state is None:
            return P(partition=p.partition, error_code=r.error, error_message=r.message, state_epoch=0,
                     start_offset=0, state_batches=[])
        return P(partition=p.partition, error_code=0, error_message=None, state_epoch=r.state.state_epoch,
                 start_offset=r.state.start_offset, state_batches=[
                     P.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                  delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                     for b in r.state.state_batches])

    if not _well_formed(body):
        return R(results=[])
    out = await _each_partition(ctx, body, lambda s, g, t, p: s.read(g, t, p.partition, p.leader_epoch), answer)
    return R(results=[R.ReadStateResult(topic_id=t, partitions=ps) for t, ps in out])


async def handle_write_share_group_state(ctx: BrokerContext, request: Request) -> object:
    R = m.WriteShareGroupStateResponse
    P = R.WriteStateResult.PartitionResult
    body = request.body

    def state(p: Any) -> PartitionState:
        complete = getattr(p, "delivery_complete_count", -1) if request.api_version >= 1 else -1
        return PartitionState(p.state_epoch, p.leader_epoch, p.start_offset, tuple(
            StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in p.state_batches or ()), -1 if complete is None else complete)

    if not _well_formed(body):
        return R(results=[])
    out = await _each_partition(
        ctx, body, lambda s, g, t, p: s.write(g, t, p.partition, state(p)),
        lambda p, r: P(partition=p.partition, error_code=r.error, error_message=r.message))
    return R(results=[R.WriteStateResult(topic_id=t, partitions=ps) for t, ps in out])


async def handle_delete_share_group_state(ctx: BrokerContext, request: Request) -> object:
    R = m.DeleteShareGroupStateResponse
    P = R.DeleteStateResult.PartitionResult
    body = request.body
    if not _well_formed(body):
        return R(results=[])
    out = await _each_partition(
        ctx, body, lambda s, g, t, p: s.delete(g, t, p.partition),
        lambda p, r: P(partition=p.partition, error_code=r.error, error_message=r.message))
    return R(results=[R.DeleteStateResult(topic_id=t, partitions=ps) for t, ps in out])


async def handle_read_share_group_state_summary(ctx: BrokerContext, request: Request) -> object:
    R = m.ReadShareGroupStateSummaryResponse
    P = R.ReadStateSummaryResult.PartitionResult
    body = request.body

    def answer(p: Any, r: StateResult) -> Any:
        if r.error or r.state is None:
            return P(partition=p.partition, error_code=r.error, error_message=r.message, state_epoch=0,
                     leader_epoch=0, start_offset=0, delivery_complete_count=-1)
        return P(partition=p.partition, error_code=0, error_message=None, state_epoch=r.state.state_epoch,
                 leader_epoch=r.state.leader_epoch, start_offset=r.state.start_offset,
                 delivery_complete_count=r.state.delivery_complete_count)

    if not _well_formed(body):
        return R(results=[])
    out = await _each_partition(ctx, body, lambda s, g, t, p: s.read_summary(g, t, p.partition, p.leader_epoch),
                                answer)
    return R(results=[R.ReadStateSummaryResult(topic_id=t, partitions=ps) for t, ps in out])


SHARE_STATE_APIS: list[GatedApi] = [
    GatedApi(ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0, 0, handle_initialize_share_group_state, SHARE_VERSION_FEATURE, 1),
    GatedApi(ApiKey.READ_SHARE_GROUP_STATE, 0, 0, handle_read_share_group_state, SHARE_VERSION_FEATURE, 1),
    GatedApi(ApiKey.WRITE_SHARE_GROUP_STATE, 0, 1, handle_write_share_group_state, SHARE_VERSION_FEATURE, 1),
    GatedApi(ApiKey.DELETE_SHARE_GROUP_STATE, 0, 0, handle_delete_share_group_state, SHARE_VERSION_FEATURE, 1),
    GatedApi(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 0, 1, handle_read_share_group_state_summary,
             SHARE_VERSION_FEATURE, 1),
]

__all__ = ["SHARE_STATE_APIS"]
