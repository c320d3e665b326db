"""Fetch: read from the hosted logs, long-poll until min_bytes or max_wait_ms, honour sessions.

Consumers only read below the high watermark. A fetch at an offset outside [log start, log end]
answers OFFSET_OUT_OF_RANGE so the client applies auto.offset.reset; a fetch in the middle of a
batch returns that whole batch (clients skip the records before their position). The first
partition with data always gets at least one whole batch, even above the byte limits, so a record
larger than max.partition.fetch.bytes never stalls a consumer (KIP-74).

A fetch with a replica id is a follower replicating (``replication.fetcher``): it reads up to the
log end rather than the high watermark, tells the leader how far the follower has got (which moves
the ISR and the high watermark), and is answered with a DivergingEpoch instead of records when the
follower's last fetched epoch ended earlier here, so the follower truncates its divergent tail
first (Kafka 2.7+'s truncation through Fetch). Replication throttles (``replication.throttle``)
hold back the data of throttled partitions for replicas outside the ISR while the leader's quota
is exceeded; what throttled partitions send counts against that quota.

A consumer fetch from v11 carries the client's rack and may be served by a follower, up to the
high watermark the follower learnt from its leader (KIP-392). A leader with
``replica.selector.class`` set may instead name a preferred read replica for the client's rack:
that partition is then answered at once, without records (``broker.replica_selector``).

A read_committed consumer (Fetch v4+) reads up to the last stable offset and gets, with the
records, the aborted transactions overlapping them (``broker.aborted_txns``), so it can drop
aborted records itself; read_uncommitted consumers and followers get null there, as from Kafka.

A consumer over its ``consumer_byte_rate`` quota gets an empty response carrying the throttle
time, and never more in one fetch than its quota allows in a window (``broker.request_throttle``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace

import trio

from kafkapy.broker.aborted_txns import NO_ABORTED
from kafkapy.broker.context import BrokerContext
from kafkapy.broker.fetch_session import (
    FetchPartitionRequest,
    SessionContext,
    SessionKey,
)
from kafkapy.broker.leader_hints import LeaderHints
from kafkapy.broker.replica_results import FetchParams, ReadResult
from kafkapy.broker.request_throttle import RequestThrottle, current_throttle
from kafkapy.protocol import messages as m
from kafkapy.protocol.connection import Request
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.protocol.events import FileRegion, Reply
from kafkapy.protocol.fetch_response import (
    FetchPartitionResult,
    FetchTopicResult,
    fetch_response_parts,
)
from kafkapy.security.acl import AclOperation, ResourceType

Resp = m.FetchResponse

READ_COMMITTED = 1

# Errors Kafka answers before reading the partition (KafkaApis' "erroneous" partitions): their
# partition data keeps the generated default for AbortedTransactions, an empty array rather
# than the null of a read that failed.
_ANSWERED_UNREAD = frozenset({ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                              ErrorCode.TOPIC_AUTHORIZATION_FAILED})


async def handle_fetch(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    version = request.api_version
    replica_id = _replica_id(body, version)
    if replica_id >= 0:
        if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER):
            # Only brokers replicate: anyone else claiming a replica id reads nothing.
            return _unauthorized_replica_fetch(request)
        return await _handle_replica_fetch(ctx, request, replica_id)
    wanted: list[FetchPartitionRequest] = []
    for topic in body.topics:
        # An id unknown here ("": the client's metadata may be ahead of this broker's) joins the
        # session all the same, answered UNKNOWN_TOPIC_ID until a later fetch resolves it.
        name = ctx.topic_name(topic, version, field="topic") or ""
        topic_id = topic.topic_id if version >= 13 else None
        for p in topic.partitions:
            wanted.append(
                FetchPartitionRequest(name, p.partition, p.fetch_offset, p.partition_max_bytes,
                                      p.current_leader_epoch, p.log_start_offset, topic_id)
            )
    forgotten: list[SessionKey] = []
    for ft in body.forgotten_topics_data or ():
        # By id from v13, unresolved: a deleted topic's id names no topic any more, and the
        # client forgetting it is how its partitions leave the session.
        key = ft.topic_id if version >= 13 else ft.topic
        forgotten.extend((key, idx) for idx in ft.partitions)
    now_ms = ctx.clock.now_ms()
    session = ctx.fetch_sessions.new_context(
        session_id=body.session_id if version >= 7 else 0,
        epoch=body.session_epoch if version >= 7 else -1,
        partitions=wanted,
        forgotten=forgotten,
        now_ms=now_ms,
        uses_topic_ids=version >= 13,
        resolve=_topic_names(ctx),
    )
    if session.error != ErrorCode.NONE:
        return Resp(version=version, throttle_time_ms=0, error_code=session.error, session_id=0, responses=[])

    deadline = trio.current_time() + max(0, body.max_wait_ms) / 1000.0
    max_bytes = body.max_bytes if version >= 3 else 0x7FFFFFFF
    min_bytes = body.min_bytes
    throttle = current_throttle.get()
    if throttle is not None:
        # Never more than the consumer's quota allows in a window, as Kafka caps it.
        cap = throttle.quotas.fetch.max_value_in_window(throttle.user, throttle.client_id)
        if cap < max_bytes:
            max_bytes = int(cap)
            min_bytes = min(min_bytes, max_bytes)
    # From v11 a consumer may read from followers, and the leader may name one (KIP-392).
    params = FetchParams(read_committed=version >= 4 and body.isolation_level == READ_COMMITTED,
                         now_ms=now_ms, client_rack=(body.rack_id or "") if version >= 11 else None,
                         listener=ctx.listener_name())
    # Topics the caller may not READ are answered TOPIC_AUTHORIZATION_FAILED and never read.
    refused: list[FetchPartitionRequest] = []
    partitions = session.partitions
    if ctx.authorizer is not None:
        allowed = ctx.authorized_names(AclOperation.READ, ResourceType.TOPIC,
                                       (p.topic for p in session.partitions if p.topic))
        refused = [p for p in session.partitions if p.topic and p.topic not in allowed]
        if refused:
            partitions = [p for p in session.partitions if not p.topic or p.topic in allowed]
    readable = any(p.topic for p in partitions)
    while True:
        results, total = _read_all(ctx, partitions, params, max_bytes)
        results.update((p.key, ReadResult.failed(ErrorCode.TOPIC_AUTHORIZATION_FAILED)) for p in refused)
        if ctx.remote is not None:
            total = await _read_remote(ctx, results, max_bytes, total, params.read_committed)
        # As in Kafka, an unknown topic id does not cut the long poll short; nothing to read does,
        # and so does a read from another segment than the readable end's (ReadResult.across_segments)
        # or a preferred read replica to send the client to.
        urgent = any((r.error != ErrorCode.NONE and r.error != ErrorCode.UNKNOWN_TOPIC_ID)
                     or r.across_segments or r.preferred_read_replica >= 0 for r in results.values())
        if total >= min_bytes or urgent or trio.current_time() >= deadline or not readable:
            break
        await ctx.replicas.wait_for_append(deadline)
    if throttle is not None and _over_quota(ctx, throttle, total):
        # Over the quota: nothing is sent, so nothing counts (Kafka's throttled response).
        ctx.fetch_sessions.discard_new(session)
        for r in results.values():
            if isinstance(r.records, FileRegion):
                r.records.release()
        return Reply(parts=fetch_response_parts(
            request, throttle_time_ms=throttle.throttle_ms, error_code=0,
            session_id=session.session_id if session.incremental else 0, topics=[]))
    return _build_response(ctx, session, results, request)


def _over_quota(ctx: BrokerContext, throttle: RequestThrottle, size: int) -> bool:
    """Record a response of ``size`` bytes against the consumer's quota and the request's time
    against its request quota; True (and the bytes taken back) when either is over."""
    fetch, now_ms = throttle.quotas.fetch, ctx.clock.now_ms()
    throttle.settle_request_time(now_ms)
    ms = fetch.record_and_throttle(throttle.user, throttle.client_id, size, now_ms)
    if ms <= 0 and throttle.throttle_ms <= 0:
        return False
    # Over either quota: an empty answer, and the bytes not sent do not count (Kafka's).
    fetch.unrecord(throttle.user, throttle.client_id, size, now_ms)
    throttle.add(ms)
    return True


def _read_all(ctx: BrokerContext, partitions: list[FetchPartitionRequest], params: FetchParams,
              max_bytes: int) -> tuple[dict[SessionKey, ReadResult], int]:
    """Each partition's read, the first one with data at least one whole batch (KIP-74)."""
    results: dict[SessionKey, ReadResult] = {}
    total = 0
    for p in partitions:
        result = ctx.replicas.read(p, params, budget=max(0, max_bytes - total), min_one=(total == 0),
                                   remote=ctx.remote)
        total += result.size
        results[p.key] = result
    return results, total


async def _read_remote(ctx: BrokerContext, results: dict[SessionKey, ReadResult],
                       max_bytes: int, total: int, read_committed: bool = False) -> int:
    """Complete the reads that continue in remote storage (tiered, KIP-405), off the event loop
    once the local reads are done; read_committed ones with their aborted transactions."""
    remote = ctx.remote
    assert remote is not None
    for key, result in list(results.items()):
        pending = result.remote
        if pending is None:
            continue
        limit = min(pending.limit, max(0, max_bytes - total))
        aborted = None  # null for read_uncommitted, as for a local read
        try:
            if read_committed:
                got = await remote.read_remote_committed(pending.partition, pending.offset, limit,
                                                         min_one=(total == 0))
                data = None if got is None else got[0]
                aborted = None if got is None else got[1]
            else:
                data = await remote.read_remote(pending.partition, pending.offset, limit,
                                                min_one=(total == 0))
        except KafkaError as exc:
            results[key] = replace(result, error=exc.code, remote=None)
            continue
        if data is None:
            results[key] = replace(result, error=ErrorCode.OFFSET_OUT_OF_RANGE, remote=None)
            continue
        total += len(data)
        results[key] = replace(result, records=data, remote=None, aborted_transactions=aborted)
    return total


def _build_response(ctx: BrokerContext, session: SessionContext,
                    results: dict[SessionKey, ReadResult], request: Request) -> Reply:
    # The frame is packed directly (protocol.fetch_response) rather than through kafka-python's
    # object tree: the records stay FileRegions, so Python builds only the small framing.
    # By name and id: a re-created topic's old and new ids may both be in a session.
    by_topic: dict[tuple[str, uuid.UUID | None], list[FetchPartitionResult]] = {}
    hints = LeaderHints(ctx)
    stats = ctx.stats
    for p in session.partitions:
        key = p.key
        r = results[key]
        error = r.error
        if stats is not None:
            if error == ErrorCode.NONE:
                stats.fetched(p.topic, r.size)
                stats.partition_fetched(p.topic, p.partition, r.size,
                                        redirected=r.preferred_read_replica >= 0)
            elif error != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and error != ErrorCode.UNKNOWN_TOPIC_ID:
                stats.fetched(p.topic, 0, failed=True)
        included = session.should_include(key, has_records=bool(r.records), error=error,
                                          high_watermark=r.high_watermark, log_start_offset=r.log_start_offset,
                                          last_stable_offset=r.last_stable_offset)
        # A preferred read replica is always sent, as Kafka's incremental sessions do.
        if not included and r.preferred_read_replica < 0:
            continue
        parts = by_topic.get((p.topic, p.topic_id))
        if parts is None:
            parts = by_topic[(p.topic, p.topic_id)] = []
        parts.append(FetchPartitionResult(p.partition, error, r.high_watermark, r.last_stable_offset,
                                          r.log_start_offset, r.records,
                                          current_leader=hints.hint(p.topic, p.partition, error),
                                          aborted_transactions=_aborted(r),
                                          preferred_read_replica=r.preferred_read_replica))
    # From v13 every session entry carries the id the client named its topic by (an incremental
    # fetch answers for partitions of earlier requests): the answer is under that id, even when
    # the topic has been deleted since.
    topics = [FetchTopicResult(name, tid, parts) for (name, tid), parts in by_topic.items()]
    return Reply(parts=fetch_response_parts(request, throttle_time_ms=0, error_code=0,
                                            session_id=session.session_id, topics=topics,
                                            node_endpoints=hints.endpoints))


def _aborted(r: ReadResult) -> Sequence[tuple[int, int]] | None:
    """The AbortedTransactions Kafka sends for this read (see ``_ANSWERED_UNREAD``)."""
    return NO_ABORTED if r.error in _ANSWERED_UNREAD else r.aborted_transactions


def _topic_names(ctx: BrokerContext) -> Callable[[uuid.UUID], str | None]:
    """Topic id to name in the current metadata, for session entries not resolved yet."""
    def name(topic_id: uuid.UUID) -> str | None:
        topic = ctx.image().topics.by_id.get(topic_id)
        return None if topic is None else topic.name
    return name


def _unauthorized_replica_fetch(request: Request) -> object:
    """A replica fetch without CLUSTER_ACTION: TOPIC_AUTHORIZATION_FAILED for every partition."""
    T, P = Resp.FetchableTopicResponse, Resp.FetchableTopicResponse.PartitionData
    return Resp(version=request.api_version, throttle_time_ms=0, error_code=0, session_id=0, responses=[
        T(topic=t.topic, topic_id=t.topic_id, partitions=[
            P(partition_index=p.partition, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, high_watermark=-1,
              last_stable_offset=-1, log_start_offset=-1, aborted_transactions=[], preferred_read_replica=-1,
              records=b"")
            for p in t.partitions])
        for t in request.body.topics])


def _replica_id(body: object, version: int) -> int:
    if version >= 15:
        state = getattr(body, "replica_state", None)
        return -1 if state is None else int(getattr(state, "replica_id", -1))
    return int(getattr(body, "replica_id", -1))


async def _handle_replica_fetch(ctx: BrokerContext, request: Request, replica_id: int) -> Reply:
    """A follower's fetch: sessionless, up to the log end, with divergence checks."""
    body = request.body
    version = request.api_version
    # (topic id, the partition's request, its last fetched epoch), by name: "" for an unknown id.
    wanted: list[tuple[uuid.UUID | None, FetchPartitionRequest, int]] = []
    for topic in body.topics:
        name = ctx.topic_name(topic, version, field="topic") or ""
        for p in topic.partitions:
            wanted.append((topic.topic_id if version >= 13 else None,
                           FetchPartitionRequest(name, p.partition, p.fetch_offset, p.partition_max_bytes,
                                                 p.current_leader_epoch, getattr(p, "log_start_offset", -1)),
                           p.last_fetched_epoch if version >= 12 else -1))
    now_ms = ctx.clock.now_ms()
    # The follower's position is its log end: recorded once per request, before any long poll,
    # so the high watermark can move while this request waits for more data.
    for _, p, _ in wanted:
        if not p.topic:
            continue
        try:
            hosted = ctx.replicas.leader(p.topic, p.partition, p.current_leader_epoch)
        except KafkaError:
            continue
        ctx.replicas.on_follower_fetch(hosted, replica_id, p.fetch_offset, now_ms,
                                       log_start_offset=p.log_start_offset)
    deadline = trio.current_time() + max(0, body.max_wait_ms) / 1000.0
    max_bytes = body.max_bytes if version >= 3 else 0x7FFFFFFF
    while True:
        params = FetchParams(replica_id=replica_id, now_ms=ctx.clock.now_ms())
        results: list[ReadResult] = []
        total = throttled_bytes = 0
        urgent = False
        for _, p, last_epoch in wanted:
            result = ctx.replicas.read(p, params, budget=max(0, max_bytes - total), min_one=(total == 0),
                                       last_fetched_epoch=last_epoch)
            if result.throttled:
                throttled_bytes += result.size
            total += result.size
            urgent = (urgent or result.error != ErrorCode.NONE or result.diverging_epoch is not None
                      or result.across_segments)
            results.append(result)
        if total >= body.min_bytes or urgent or trio.current_time() >= deadline or not wanted:
            break
        await ctx.replicas.wait_for_append(deadline)
    ctx.replicas.leader_quota.record(throttled_bytes, ctx.clock.now_ms())
    by_topic: dict[object, tuple[str | None, uuid.UUID | None, list[FetchPartitionResult]]] = {}
    for (topic_id, p, _), r in zip(wanted, results):
        key = topic_id if version >= 13 else p.topic
        entry = by_topic.get(key)
        if entry is None:
            entry = by_topic[key] = (p.topic or None, topic_id, [])
        entry[2].append(FetchPartitionResult(p.partition, r.error, r.high_watermark, r.last_stable_offset,
                                             r.log_start_offset, r.records,
                                             diverging_epoch=r.diverging_epoch,
                                             aborted_transactions=_aborted(r)))
    topics = [FetchTopicResult(name, tid, parts) for name, tid, parts in by_topic.values()]
    return Reply(parts=fetch_response_parts(request, throttle_time_ms=0, error_code=0,
                                            session_id=0, topics=topics))
