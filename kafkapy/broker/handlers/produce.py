"""Produce: validate and append each partition's batches, then answer per partition.

Errors are per partition (Kafka never fails a whole produce request for one bad partition), and
no answer reports failure for records that were appended, since a client would retry them into
duplicates: the request's shape is checked as a whole before the first append (a null where
Kafka's schema has none refuses every partition with INVALID_REQUEST and appends nothing), and an
unexpected exception while appending one partition is that partition's UNKNOWN_SERVER_ERROR alone
(or its success, if its log grew regardless). acks=1 answers once the leader has appended; acks=0
gets no response at all, and a connection that sent a failing acks=0 produce is closed, Kafka's
only way to tell the producer. acks=-1 (all) first
checks that the ISR has ``min.insync.replicas`` members (NOT_ENOUGH_REPLICAS, nothing appended),
then waits in the purgatory until the high watermark passes the batch, i.e. every in-sync replica
has it, or the request's timeout (REQUEST_TIMED_OUT); if the ISR shrank below the minimum by then
the answer is NOT_ENOUGH_REPLICAS_AFTER_APPEND, as in Kafka. Transactional records need the request's
transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition, nothing
appended), and a write that would open a transaction in a partition is first verified with the
transaction coordinator (KIP-890 part 1, ``kafkapy.broker.txn_verification``). The response frame is packed
directly (``protocol.produce_response``), not through kafka-python's object tree: it is a fixed
cost on every request.
"""

from __future__ import annotations

import logging
from typing import Any

import trio

from kafkapy.broker.context import BrokerContext
from kafkapy.broker.leader_hints import LeaderHints
from kafkapy.broker.partition import Partition
from kafkapy.broker.request_throttle import produce_throttle_ms
from kafkapy.broker.txn_verification import Verdicts, verify_produce
from kafkapy.protocol.connection import Request
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.protocol.events import Reply
from kafkapy.protocol.produce_response import (
    ProducePartitionResult,
    ProduceTopicResult,
    produce_response_frame,
)
from kafkapy.records.format import (
    ATTRIBUTES,
    BATCH_LENGTH,
    CURRENT_MAGIC,
    LOG_OVERHEAD,
    MAGIC,
    PRODUCER_EPOCH,
    PRODUCER_ID,
    TRANSACTIONAL_MASK,
)
from kafkapy.records.record_checks import RecordValidationError
from kafkapy.security.acl import AclOperation, ResourceType

log = logging.getLogger(__name__)

VALID_ACKS = (-1, 0, 1)
# An acks=all partition in the purgatory: (its topic's results, its index there, the partition,
# the offset its high watermark must reach).
_Waiting = tuple[list[ProducePartitionResult], int, Partition, int]
# Failures are counted per topic only for topics that exist: a client naming topics that do
# not must not grow the series.
_UNKNOWN_TOPIC = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID)
# The attributes of a v2 batch are big-endian: their low byte, which holds the transactional flag.
_ATTRIBUTES_LOW = ATTRIBUTES + 1


async def handle_produce(ctx: BrokerContext, request: Request) -> Reply | None:
    body = request.body
    version = request.api_version
    problem = malformed(body, version)
    if problem is not None:
        # Refused whole, before anything is appended: Kafka's parser would not have let it in.
        log.info("%s rejected: %s", request.describe(), problem)
        return _refused(request, problem)
    if body.transactional_id is None and _has_transactional_records(body.topic_data):
        # Kafka's rule: transactional records come with the transactional id they belong to
        # (the id is what ACLs and the coordinator's verification check), else nothing is taken.
        log.info("%s rejected: transactional records without a transactional id", request.describe())
        return _refused(request, None, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if body.transactional_id is not None and not ctx.authorize(
            AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id):
        return _refused(request, None, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    # Topics the caller may not WRITE: TOPIC_AUTHORIZATION_FAILED per partition, nothing appended.
    writable = None if ctx.authorizer is None else ctx.authorized_names(
        AclOperation.WRITE, ResourceType.TOPIC,
        (n for t in body.topic_data if (n := ctx.topic_name(t, version)) is not None))
    acks = body.acks
    verdicts: Verdicts = {}
    if body.transactional_id is not None and acks in VALID_ACKS:
        # KIP-890 part 1: writes that would start a transaction here are checked with its
        # coordinator first (only requests with a transactional id ever wait for this).
        verdicts = await verify_produce(ctx, body.transactional_id, body.topic_data, version,
                                        _first_batch_transactional)
    now_ms = ctx.clock.now_ms()
    duplicates = _duplicate_partitions(body.topic_data, version)
    topics_out = []
    # acks=all: (results, index in them, partition, offset the high watermark must reach).
    waiting: list[_Waiting] = []
    hints = LeaderHints(ctx)
    appended = False
    for topic_data in body.topic_data:
        name = ctx.topic_name(topic_data, version)
        parts_out: list[ProducePartitionResult] = []
        for pdata in topic_data.partition_data:
            hosted: Partition | None = None
            log_end = -1
            try:
                if acks not in VALID_ACKS:
                    raise KafkaError(ErrorCode.INVALID_REQUIRED_ACKS)
                if name is None:
                    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID if version >= 13
                                     else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                if writable is not None and name not in writable:
                    raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                if (_topic_key(topic_data, version), pdata.index) in duplicates:
                    raise KafkaError(ErrorCode.INVALID_REQUEST,
                                     f"Partition {name}-{pdata.index} appears more than once in the request")
                hosted = ctx.replicas.get(name, pdata.index)
                if pdata.records is None:
                    raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "Produce request has no records")
                records = pdata.records
                if len(records) >= LOG_OVERHEAD:
                    first_size = int.from_bytes(records[BATCH_LENGTH:LOG_OVERHEAD], "big", signed=True) + LOG_OVERHEAD
                    if LOG_OVERHEAD <= first_size < len(records):
                        raise KafkaError(
                            ErrorCode.INVALID_RECORD,
                            "Produce requests with version 3 are only allowed to contain exactly one record batch",
                        )
                if verdicts and (name, pdata.index) in verdicts:
                    _check_verified(verdicts[(name, pdata.index)], hosted, records)
                if acks == -1:
                    ctx.replicas.check_min_insync(hosted)
                log_end = hosted.log.log_end_offset
                # records is a writable view into the request frame: validated, rewritten in
                # place (offsets, epoch) and written to the segment without a copy.
                result = ctx.replicas.append(hosted, records, now_ms=now_ms)
                if ctx.stats is not None and not result.duplicate:
                    # (A retried batch the log already has is acknowledged, not appended again.)
                    ctx.stats.produced(name, result.record_count, len(records))
            except KafkaError as exc:
                parts_out.append(_rejected(ctx, request, hints, name, pdata.index, exc, hosted))
                continue
            except Exception:
                # A bug of ours, confined to this partition: the others keep their results.
                outcome = _unexpected(ctx, request, name, pdata.index, hosted, log_end)
                parts_out.append(outcome)
                if outcome.error_code == ErrorCode.NONE and hosted is not None:
                    appended = True
                    if acks == -1:
                        waiting.append((parts_out, len(parts_out) - 1, hosted, hosted.log.log_end_offset))
                continue
            appended = True
            if acks == -1:
                waiting.append((parts_out, len(parts_out), hosted, result.next_offset))
            parts_out.append(ProducePartitionResult(
                pdata.index, 0, result.first_offset, result.log_append_time, result.log_start_offset))
        topics_out.append(ProduceTopicResult(topic_data.name, topic_data.topic_id, parts_out))
    if acks == 0:
        return _acks0_reply(request, topics_out)
    if waiting:
        await _await_replication(ctx, waiting, body.timeout_ms)
    try:
        frame = produce_response_frame(request, topics_out, node_endpoints=hints.endpoints,
                                       throttle_time_ms=produce_throttle_ms(ctx.clock.now_ms()))
    except Exception:
        if not appended:
            raise
        # An error response would claim that the appended records failed (and a retry would
        # write them twice); hanging up leaves the outcome open, as a lost response would.
        log.exception("Cannot encode the response to %s after appending; closing the connection",
                      request.describe())
        return Reply(close=True)
    return Reply(parts=[frame])


def malformed(body: object, version: int) -> str | None:
    """Why a Produce request's shape is one Kafka's parser would refuse (a null where the schema
    has none: the topics, a topic's name or id, a topic's partitions), or None when it is well
    formed. Checked before the first append, so a broken entry late in a request cannot leave
    the entries before it written and then reported as failed."""
    topics = getattr(body, "topic_data", None)
    if not isinstance(topics, (list, tuple)):
        return "topic_data is null"
    for i, t in enumerate(topics):
        if t is None:
            return f"topic entry {i} is null"
        if version >= 13:
            if t.topic_id is None:
                return f"topic entry {i} has a null topic_id"
        elif not isinstance(t.name, str):
            return f"topic entry {i} has a null name"
        parts = t.partition_data
        if not isinstance(parts, (list, tuple)):
            return f"topic entry {i} ({_topic_label(t, version)}) has null partition_data"
        for p in parts:
            if p is None or not isinstance(p.index, int):
                return f"topic entry {i} ({_topic_label(t, version)}) has a null partition entry"
            if p.records is not None and not isinstance(p.records, (bytes, bytearray, memoryview)):
                return f"partition {_topic_label(t, version)}-{p.index} has records of type {type(p.records).__name__}"
    return None


def _topic_label(t: object, version: int) -> str:
    return str(t.topic_id if version >= 13 else t.name)  # type: ignore[attr-defined]


def _topic_key(t: object, version: int) -> object:
    return t.topic_id if version >= 13 else t.name  # type: ignore[attr-defined]


def _duplicate_partitions(topics: list[Any], version: int) -> set[tuple[object, int]]:
    """Partitions named more than once. Kafka keeps only the last entry of such a partition and
    drops the others unanswered; here every entry of it is refused instead, so nothing a client
    sent is silently lost."""
    seen: set[tuple[object, int]] = set()
    twice: set[tuple[object, int]] = set()
    for t in topics:
        for p in t.partition_data:
            key = (_topic_key(t, version), p.index)
            (twice if key in seen else seen).add(key)
    return twice


def _first_batch_transactional(records: Any) -> bool:
    """Whether the first batch of a partition's records is transactional, the test Kafka
    applies (one header read: the attributes of a v2 batch)."""
    return bool(len(records) > _ATTRIBUTES_LOW and records[MAGIC] >= CURRENT_MAGIC
                and records[_ATTRIBUTES_LOW] & TRANSACTIONAL_MASK)


def _has_transactional_records(topic_data: list[Any]) -> bool:
    return any(p.records is not None and _first_batch_transactional(p.records)
               for t in topic_data for p in t.partition_data)


def _check_verified(verdict: object, hosted: Partition, records: Any) -> None:
    """Refuse a verified partition's append unless the coordinator placed it in the
    transaction and its guard still holds (no marker or new epoch came in while waiting)."""
    if isinstance(verdict, KafkaError):
        raise verdict
    pid = int.from_bytes(records[PRODUCER_ID:PRODUCER_ID + 8], "big", signed=True)
    epoch = int.from_bytes(records[PRODUCER_EPOCH:PRODUCER_EPOCH + 2], "big", signed=True)
    if not hosted.log.producer_state.verification_holds(pid, epoch, verdict):
        raise KafkaError(ErrorCode.INVALID_TXN_STATE, "Record was not part of an ongoing transaction")


def _refused(request: Request, problem: str | None, code: ErrorCode = ErrorCode.INVALID_REQUEST) -> Reply:
    """``code`` (INVALID_REQUEST for a malformed request) for every partition a refused request
    lists, nothing appended (acks=0: hang up)."""
    if not request.expects_response:
        return Reply(close=True)
    version = request.api_version
    topics = []
    listed = request.body.topic_data
    for t in listed if isinstance(listed, (list, tuple)) else ():
        if t is None or (version >= 13 and t.topic_id is None):
            continue
        parts = [ProducePartitionResult(p.index, code, -1, -1, -1, problem)
                 for p in (t.partition_data if isinstance(t.partition_data, (list, tuple)) else ())
                 if p is not None and isinstance(p.index, int)]
        topics.append(ProduceTopicResult(t.name if isinstance(t.name, str) else None, t.topic_id, parts))
    return Reply(parts=[produce_response_frame(request, topics)])


def _rejected(ctx: BrokerContext, request: Request, hints: LeaderHints, name: str | None,
              index: int, exc: KafkaError, hosted: Partition | None = None) -> ProducePartitionResult:
    """A partition's expected failure: its error code, counted and logged as Kafka does."""
    if (ctx.stats is not None and name is not None and exc.code not in _UNKNOWN_TOPIC
            and name in ctx.image().topics.by_name):
        ctx.stats.produce_failed(name)
    # A storage fault is logged once per episode where it is detected (the log
    # manager's StorageFaults), not once per request.
    if exc.code not in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                        ErrorCode.KAFKA_STORAGE_ERROR):
        log.info(
            "Produce to %s-%d from %s rejected: %s %s",
            name, index, request.client_id, exc.code.name, exc.message or "",
        )
    message = exc.message if exc.message != exc.code.name else None
    if isinstance(exc, RecordValidationError) and hosted is not None:
        # As Kafka: each refused record listed, and the log's start offset.
        return ProducePartitionResult(
            index, exc.code, -1, -1, hosted.log.log_start_offset, message,
            record_errors=[(e.batch_index, e.message) for e in exc.record_errors])
    return ProducePartitionResult(
        index, exc.code, -1, -1, -1, message,
        current_leader=hints.hint(name, index, exc.code) if name else None)


def _unexpected(ctx: BrokerContext, request: Request, name: str | None, index: int,
                hosted: Partition | None, log_end: int) -> ProducePartitionResult:
    """The result for a partition whose append raised something unexpected (logged once, with
    its traceback). If the log grew anyway the records are there: that is success at the old
    log end offset, never an error a client would retry into a duplicate."""
    log_obj = hosted.log if hosted is not None else None
    now_end = log_obj.log_end_offset if log_obj is not None and log_end >= 0 else -1
    if log_obj is not None and now_end > log_end >= 0:
        log.exception("Produce to %s-%d from %s: error after appending offsets %d-%d (reported "
                      "as appended)", name, index, request.client_id, log_end, now_end - 1)
        return ProducePartitionResult(index, 0, log_end, -1, log_obj.log_start_offset)
    log.exception("Error processing append operation on partition %s-%d from %s", name, index,
                  request.client_id)
    if ctx.stats is not None and name is not None and name in ctx.image().topics.by_name:
        ctx.stats.produce_failed(name)
    return ProducePartitionResult(index, ErrorCode.UNKNOWN_SERVER_ERROR, -1, -1, -1,
                                  "Unexpected error appending to the partition")


def _acks0_reply(request: Request, topics_out: list[ProduceTopicResult]) -> Reply | None:
    """acks=0 gets no answer; if a partition failed Kafka closes the connection instead, the
    only way the producer learns of it (and refreshes its metadata)."""
    failed = [(t.name or str(t.topic_id), p.index, ErrorCode(p.error_code).name)
              for t in topics_out for p in t.partitions if p.error_code != ErrorCode.NONE]
    if not failed:
        return None
    log.info("Closing connection due to error during %s with acks=0: %s", request.describe(),
             ", ".join(f"{t}-{i}: {code}" for t, i, code in failed[:10]))
    return Reply(close=True)


async def _await_replication(ctx: BrokerContext, waiting: list[_Waiting], timeout_ms: int) -> None:
    """The purgatory: every acks=all partition waits for its high watermark, concurrently, all
    bounded by the request's timeout; a partition that fails gets its error in place."""
    deadline = trio.current_time() + max(0, timeout_ms) / 1000.0

    async def one(parts_out: list[ProducePartitionResult], i: int, hosted: Partition, required: int) -> None:
        try:
            code = await ctx.replicas.wait_for_replication(hosted, required, deadline)
        except Exception:
            # A bug of ours stays with its partition; the others' waits go on.
            log.exception("Error waiting for replication of %s-%d", hosted.topic, hosted.index)
            parts_out[i] = ProducePartitionResult(parts_out[i].index, ErrorCode.UNKNOWN_SERVER_ERROR, -1, -1, -1, None)
            return
        if code != ErrorCode.NONE:
            # No leader hint here: it would come from the image the request started with,
            # the one that has just changed; the client refreshes its metadata instead.
            parts_out[i] = ProducePartitionResult(parts_out[i].index, code, -1, -1, -1, None)
            log.info("Produce to %s-%d completed with %s", hosted.topic, hosted.index, code.name)

    if len(waiting) == 1:
        await one(*waiting[0])
        return
    async with trio.open_nursery() as nursery:
        for entry in waiting:
            nursery.start_soon(one, *entry)
