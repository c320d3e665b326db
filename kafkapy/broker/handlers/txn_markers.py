"""WriteTxnMarkers: a transaction coordinator has the partition leaders close a transaction.

For each marker (producer id and epoch, COMMIT or ABORT, coordinator epoch, partitions), every
partition this broker leads gets one control batch (``records.control.marker_batch``) appended
as the broker's own write, and the answer waits, as an acks=all produce does, until every in-sync
replica has it or ``request.timeout.ms`` passes: a marker the coordinator sees acknowledged must
survive a leader change, or a read_committed consumer on the next leader would wait forever.

Errors are per partition and are Kafka's, which the coordinator knows how to retry:
UNKNOWN_TOPIC_OR_PARTITION (no online log here), NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR
(the write failed), NOT_ENOUGH_REPLICAS (the ISR is below min.insync.replicas: nothing
appended), NOT_ENOUGH_REPLICAS_AFTER_APPEND and REQUEST_TIMED_OUT (appended, not yet
replicated), and the two fencing errors of a coordinator-origin append: INVALID_PRODUCER_EPOCH for a marker older than
the producer epoch the partition has seen, TRANSACTION_COORDINATOR_FENCED for a marker from a
coordinator epoch older than the one that wrote the producer's last marker here.

Once a marker is replicated in a ``__consumer_offsets`` partition, the group coordinator makes the
transaction's offset commits visible (commit) or drops them (abort), as Kafka's
``onTransactionCompleted``; a failure there is that partition's UNKNOWN_SERVER_ERROR.

Served at v1 (flexible), the baseline of Kafka 4, which dropped v0 (and so does the schema we
decode with). v2 (KIP-1228) adds the marker's transaction version, which changes the
producer-epoch check of TV2 markers; it is not advertised until that check is honoured.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import trio

from kafkapy.broker.context import BrokerContext
from kafkapy.broker.partition import Partition
from kafkapy.coordinator.schema import OFFSETS_TOPIC
from kafkapy.protocol import messages as m
from kafkapy.protocol.connection import Request
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.records.control import marker_batch
from kafkapy.records.format import NO_PRODUCER_ID

log = logging.getLogger(__name__)

Resp = m.WriteTxnMarkersResponse
MarkerResult = Resp.WritableTxnMarkerResult
TopicResult = MarkerResult.WritableTxnMarkerTopicResult
PartitionResult = TopicResult.WritableTxnMarkerPartitionResult

# Errors the coordinator expects while leadership moves: not worth a log line each.
_QUIET = frozenset({ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                    ErrorCode.KAFKA_STORAGE_ERROR})


@dataclass
class _Outcome:
    """One partition of one marker: where its answer goes and how the append went."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    code: ErrorCode = ErrorCode.NONE
    detail: str | None = None  # why, when the error says more than its name
    hosted: Partition | None = None
    required_offset: int = -1  # the high watermark that means "replicated"


async def handle_write_txn_markers(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    now_ms = ctx.clock.now_ms()
    deadline = trio.current_time() + ctx.config.get_int("request.timeout.ms") / 1000.0
    outcomes = [_Outcome(t.name, index, marker.producer_id, marker.producer_epoch, marker.transaction_result,
                         marker.coordinator_epoch)
                for marker in body.markers for t in marker.topics for index in t.partition_indexes]
    if any(marker.producer_id == NO_PRODUCER_ID for marker in body.markers):
        # Kafka cannot build such a marker and fails the whole request; nothing is written.
        log.warning("WriteTxnMarkers from %s refused: a marker has no producer id (-1)", request.client_id)
        for o in outcomes:
            o.code = ErrorCode.UNKNOWN_SERVER_ERROR
        return Resp(markers=_results(outcomes))
    for o in outcomes:
        _append_marker(ctx, o, now_ms)
    waiting = [o for o in outcomes if o.hosted is not None]
    if waiting:
        async with trio.open_nursery() as nursery:
            for o in waiting:
                nursery.start_soon(_await_replication, ctx, o, deadline)
    for o in outcomes:
        if o.code == ErrorCode.NONE and o.topic == OFFSETS_TOPIC:
            _complete_offsets(ctx, o)
        if o.code not in _QUIET:
            log.info("Transaction marker (%s) for producer %d on %s-%d failed: %s%s",
                     "COMMIT" if o.commit else "ABORT", o.producer_id, o.topic, o.partition, o.code.name,
                     f" ({o.detail})" if o.detail else "")
    return Resp(markers=_results(outcomes))


def _append_marker(ctx: BrokerContext, o: _Outcome, now_ms: int) -> None:
    """Append ``o``'s control batch as leader; on success ``o.hosted`` is set for the wait."""
    try:
        # Kafka's order: a local log, leadership, min.insync.replicas, then the producer-state
        # checks the log makes on a coordinator's append (stale producer or coordinator epoch).
        _local_log(ctx, o.topic, o.partition)
        hosted = ctx.replicas.leader(o.topic, o.partition)
        ctx.replicas.check_min_insync(hosted)
        batch = marker_batch(producer_id=o.producer_id, producer_epoch=o.producer_epoch, commit=o.commit,
                             coordinator_epoch=o.coordinator_epoch, now_ms=now_ms)
        result = ctx.replicas.append(hosted, bytearray(batch), now_ms=now_ms, from_client=False)
    except KafkaError as exc:
        o.code = exc.code
        o.detail = exc.message
        return
    except Exception:
        # A bug of ours, confined to this partition.
        log.exception("Error appending a transaction marker for producer %d to %s-%d", o.producer_id,
                      o.topic, o.partition)
        o.code = ErrorCode.UNKNOWN_SERVER_ERROR
        return
    o.hosted, o.required_offset = hosted, result.next_offset


def _local_log(ctx: BrokerContext, topic: str, partition: int) -> None:
    """UNKNOWN_TOPIC_OR_PARTITION unless an online log of the partition is here: Kafka answers
    so before appending (its check of the log's message format), also for a replica in an
    offline log dir or one whose log is still being created."""
    try:
        ctx.replicas.get(topic, partition)
    except KafkaError:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) from None


async def _await_replication(ctx: BrokerContext, o: _Outcome, deadline: float) -> None:
    assert o.hosted is not None
    try:
        o.code = await ctx.replicas.wait_for_replication(o.hosted, o.required_offset, deadline)
    except Exception:
        log.exception("Error waiting for replication of a transaction marker on %s-%d", o.topic, o.partition)
        o.code = ErrorCode.UNKNOWN_SERVER_ERROR


def _complete_offsets(ctx: BrokerContext, o: _Outcome) -> None:
    """The marker is in the offsets partition: the group coordinator materialises (commit) or
    drops (abort) the transaction's pending offset commits."""
    if ctx.groups is None:
        return  # no coordinator running here: it reads the marker when it loads the partition
    try:
        ctx.groups.complete_transaction(o.partition, o.producer_id, o.commit)
    except Exception:
        log.exception("Completing the transactional offset commits of producer %d in %s-%d failed",
                      o.producer_id, o.topic, o.partition)
        o.code = ErrorCode.UNKNOWN_SERVER_ERROR


def _results(outcomes: list[_Outcome]) -> list[Any]:
    """The response's markers: one entry per producer id (Kafka keys its answer by producer id),
    topics and partitions in the order the request named them."""
    by_producer: dict[int, dict[str, list[Any]]] = {}
    for o in outcomes:
        topics = by_producer.setdefault(o.producer_id, {})
        topics.setdefault(o.topic, []).append(PartitionResult(partition_index=o.partition, error_code=int(o.code)))
    return [MarkerResult(producer_id=pid, topics=[TopicResult(name=name, partitions=parts)
                                                  for name, parts in topics.items()])
            for pid, topics in by_producer.items()]
