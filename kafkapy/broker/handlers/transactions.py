"""The transaction coordinator's APIs: InitProducerId with a transactional id, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, DescribeTransactions, ListTransactions.

The decisions are the sans-I/O core's (``kafkapy.coordinator.transaction``); the coordinator edge
(``ctx.transactions``) finds the shard, appends what an operation wrote and sends its markers.
These handlers only translate requests and answers, and give each client version the error codes
it knows (``error_for_version``: PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before KIP-588).

Versions served are those transaction.version 1 honours: EndTxn v5 and InitProducerId v6 belong to
transaction.version 2 and KIP-939, which this broker does not advertise. AddPartitionsToTxn v4
is the partition leaders' batched form (KIP-890 part 1), VerifyOnly included; produce requests
are not verified against it yet.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafkapy.broker.context import BrokerContext
from kafkapy.broker.handlers.coordinator import served_shard
from kafkapy.coordinator.transaction import (
    DescribedTransaction,
    EndTxnAnswer,
    InitProducerIdAnswer,
    ListedTransaction,
    TransactionState,
    error_for_version,
)
from kafkapy.protocol import messages as m
from kafkapy.protocol.connection import Request
from kafkapy.protocol.errors import ErrorCode
from kafkapy.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from kafkapy.coordinator.transaction import TransactionShard

E = ErrorCode
InitResp = m.InitProducerIdResponse
AddPartsResp = m.AddPartitionsToTxnResponse
AddOffsetsResp = m.AddOffsetsToTxnResponse
EndResp = m.EndTxnResponse
DescribeResp = m.DescribeTransactionsResponse
ListResp = m.ListTransactionsResponse


def _shard(ctx: BrokerContext, transactional_id: str | None) -> tuple[TransactionShard | None, int]:
    """The id's shard, or (None, error) when it is not served here right now."""
    return served_shard(ctx.transactions, transactional_id, E.INVALID_REQUEST)


def _version_error(api: str, version: int, error: int, abortable_since: int) -> int:
    error = error_for_version(api, version, error)
    if error == E.TRANSACTION_ABORTABLE and version < abortable_since:
        return E.INVALID_TXN_STATE  # KIP-890's new code, for a client that does not know it
    return error


# ------------------------------------------------------------------------------------ InitProducerId

async def handle_txn_init_producer_id(ctx: BrokerContext, request: Request) -> object:
    """InitProducerId with a transactional id (the idempotent form stays in producer_ids)."""
    body = request.body
    version = request.api_version
    pid, epoch = (body.producer_id, body.producer_epoch) if version >= 3 else (-1, -1)
    shard, error = _shard(ctx, body.transactional_id)
    answer = InitProducerIdAnswer(error)
    if shard is not None:
        assert ctx.transactions is not None
        res = shard.init_producer_id(body.transactional_id, body.transaction_timeout_ms, ctx.clock.now_ms(),
                                     pid, epoch)
        result = await ctx.transactions.execute(shard, res)
        assert isinstance(result, InitProducerIdAnswer)
        answer = result
    return InitResp(version=request.response_version, throttle_time_ms=0,
                    error_code=error_for_version("InitProducerId", version, answer.error),
                    producer_id=answer.producer_id, producer_epoch=answer.producer_epoch)


# ------------------------------------------------------------------------------------ AddPartitionsToTxn

def _topics_result(codes: dict[tuple[str, int], int]) -> list[Any]:
    T = AddPartsResp.AddPartitionsToTxnTopicResult
    P = T.AddPartitionsToTxnPartitionResult
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), code in codes.items():
        by_topic.setdefault(topic, []).append(P(partition_index=partition, partition_error_code=code))
    # (Built without a version: these common structs declare only v0-3, yet encode at v4.)
    return [T(name=t, results_by_partition=ps) for t, ps in by_topic.items()]


def _partitions(topics: Any) -> list[tuple[str, int]]:
    return [(t.name, p) for t in topics for p in t.partitions]


async def _add_partitions(ctx: BrokerContext, version: int, transactional_id: str, producer_id: int,
                          producer_epoch: int, wanted: list[tuple[str, int]],
                          verify_only: bool = False) -> dict[tuple[str, int], int]:
    """One transaction's partitions and their error codes."""
    topics = ctx.image().topics.by_name
    unknown = {tp for tp in wanted
               if tp[0] not in topics or tp[1] not in topics[tp[0]].partitions}
    if unknown and not verify_only:
        # Kafka: nothing is added when a partition is unknown; the rest were not attempted.
        return {tp: E.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else E.OPERATION_NOT_ATTEMPTED for tp in wanted}
    shard, error = _shard(ctx, transactional_id)
    if shard is None:
        return {tp: error for tp in wanted}
    if verify_only:
        codes = shard.verify_partitions(transactional_id, producer_id, producer_epoch, wanted)
    else:
        assert ctx.transactions is not None
        res = shard.add_partitions(transactional_id, producer_id, producer_epoch, wanted, ctx.clock.now_ms())
        code = await ctx.transactions.execute(shard, res)
        assert isinstance(code, int)
        codes = {tp: code for tp in wanted}
    return {tp: _version_error("AddPartitionsToTxn", version, c, 5) for tp, c in codes.items()}


async def handle_add_partitions_to_txn(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    version = request.api_version
    if version <= 3:
        codes = await _add_partitions(ctx, version, body.v3_and_below_transactional_id,
                                      body.v3_and_below_producer_id, body.v3_and_below_producer_epoch,
                                      _partitions(body.v3_and_below_topics))
        return AddPartsResp(version=request.response_version, throttle_time_ms=0,
                            results_by_topic_v3_and_below=_topics_result(codes))
    # v4+: the partition leaders' batched form, one entry per transaction.
    R = AddPartsResp.AddPartitionsToTxnResult
    results = []
    for txn in body.transactions:
        codes = await _add_partitions(ctx, version, txn.transactional_id, txn.producer_id, txn.producer_epoch,
                                      _partitions(txn.topics), verify_only=txn.verify_only)
        results.append(R(transactional_id=txn.transactional_id,
                         topic_results=_topics_result(codes)))
    return AddPartsResp(version=request.response_version, throttle_time_ms=0, error_code=E.NONE,
                        results_by_transaction=results)


# ------------------------------------------------------------------------------------ AddOffsetsToTxn

async def handle_add_offsets_to_txn(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    version = request.api_version
    shard, code = _shard(ctx, body.transactional_id)
    if shard is not None and not body.group_id:
        code = E.INVALID_GROUP_ID
    elif shard is not None:
        assert ctx.transactions is not None
        res = shard.add_offsets(body.transactional_id, body.producer_id, body.producer_epoch, body.group_id,
                                ctx.clock.now_ms())
        result = await ctx.transactions.execute(shard, res)
        assert isinstance(result, int)
        code = result
    return AddOffsetsResp(version=request.response_version, throttle_time_ms=0,
                          error_code=_version_error("AddOffsetsToTxn", version, code, 4))


# ------------------------------------------------------------------------------------ EndTxn

async def handle_end_txn(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    version = request.api_version
    shard, error = _shard(ctx, body.transactional_id)
    answer = EndTxnAnswer(error)
    if shard is not None:
        assert ctx.transactions is not None
        res = shard.end_txn(body.transactional_id, body.producer_id, body.producer_epoch, body.committed,
                            ctx.clock.now_ms())
        result = await ctx.transactions.execute(shard, res)
        assert isinstance(result, EndTxnAnswer)
        answer = result
    return EndResp(version=request.response_version, throttle_time_ms=0,
                   error_code=error_for_version("EndTxn", version, answer.error))


# ------------------------------------------------------------------------------------ Describe / List

async def handle_describe_transactions(ctx: BrokerContext, request: Request) -> object:
    S = DescribeResp.TransactionState
    out = []
    for txn_id in request.body.transactional_ids:
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, txn_id):
            d = DescribedTransaction(txn_id, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        else:
            shard, error = _shard(ctx, txn_id)
            d = DescribedTransaction(txn_id, error) if shard is None else shard.describe(txn_id)
        out.append(S(error_code=d.error, transactional_id=d.transactional_id, transaction_state=d.transaction_state,
                     transaction_timeout_ms=d.transaction_timeout_ms,
                     transaction_start_time_ms=d.transaction_start_time_ms, producer_id=d.producer_id,
                     producer_epoch=d.producer_epoch,
                     # As Kafka: only the topics the caller may describe.
                     topics=[S.TopicData(topic=t, partitions=list(ps)) for t, ps in d.topics
                             if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, t, audit=False)]))
    return DescribeResp(throttle_time_ms=0, transaction_states=out)


async def handle_list_transactions(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    version = request.api_version
    duration = body.duration_filter if version >= 1 else -1
    pattern = body.transactional_id_pattern if version >= 2 else None
    S = ListResp.TransactionState
    error: int = E.NONE
    unknown: list[str] = []
    listed: list[ListedTransaction] = []
    coordinator = ctx.transactions
    if coordinator is None:
        error = E.COORDINATOR_NOT_AVAILABLE
    elif not coordinator.all_loaded():
        error = E.COORDINATOR_LOAD_IN_PROGRESS
    else:
        now = ctx.clock.now_ms()
        for shard in coordinator.loaded_shards():
            code, unknown, txns = shard.list_transactions(now, body.state_filters, body.producer_id_filters,
                                                           duration, pattern)
            if code != E.NONE:
                error, listed = code, []
                break
            listed.extend(txns)
        if error == E.NONE and not coordinator.loaded_shards():
            # No shard to ask: the state filters are still checked.
            unknown = _unknown_states(body.state_filters)
    return ListResp(version=request.response_version, throttle_time_ms=0, error_code=error,
                    unknown_state_filters=unknown,
                    transaction_states=[S(transactional_id=t.transactional_id, producer_id=t.producer_id,
                                          transaction_state=t.transaction_state)
                                        for t in sorted(listed, key=lambda t: t.transactional_id)])


def _unknown_states(names: list[str]) -> list[str]:
    return [n for n in names if TransactionState.from_name(n) is None]
