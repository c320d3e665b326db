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
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

import trio

from kafkapy.broker.context import BrokerContext
from kafkapy.broker.fetch_session import FetchPartitionRequest, SessionContext
from kafkapy.broker.leader_hints import LeaderHints
from kafkapy.protocol import messages as m
from kafkapy.protocol.events import Reply
from kafkapy.protocol.connection import FileRegion, Request
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.protocol.fetch_response import FetchPartitionResult, FetchTopicResult, fetch_response_parts

Resp = m.FetchResponse

READ_COMMITTED = 1


async def handle_fetch(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    version = request.api_version
    replica_id = _replica_id(body, version)
    if replica_id >= 0:
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
    forgotten = []
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
    read_committed = version >= 4 and body.isolation_level == READ_COMMITTED
    while True:
        results, total = _read_all(ctx, session.partitions, max_bytes, read_committed)
        if ctx.remote is not None:
            total = await _read_remote(ctx, results, max_bytes, total)
        # As in Kafka, an unknown topic id does not cut the long poll short; nothing to read does.
        has_error = any(r[1] != ErrorCode.NONE and r[1] != ErrorCode.UNKNOWN_TOPIC_ID
                        for r in results.values())
        readable = any(p.topic for p in session.partitions)
        if total >= body.min_bytes or has_error or trio.current_time() >= deadline or not readable:
            break
        await ctx.replicas.wait_for_append(deadline)
    return _build_response(ctx, version, session, results, request)


class _RemotePending:
    """A partition whose fetch offset lies below the local log but inside the remote log: read
    from remote storage (tiered, KIP-405) once the local reads are done, off the event loop."""

    __slots__ = ("hosted", "offset", "limit")

    def __init__(self, hosted: object, offset: int, limit: int) -> None:
        self.hosted, self.offset, self.limit = hosted, offset, limit

    def __len__(self) -> int:
        return 0


async def _read_remote(ctx: BrokerContext, results: dict[tuple[str, int], tuple], max_bytes: int,
                       total: int) -> int:
    """Replace each _RemotePending in ``results`` by the batches remote storage holds there."""
    for key, (records, _error, hw, start, lso) in list(results.items()):
        if not isinstance(records, _RemotePending):
            continue
        limit = min(records.limit, max(0, max_bytes - total))
        try:
            data = await ctx.remote.read_remote(records.hosted, records.offset, limit, min_one=(total == 0))
        except KafkaError as exc:
            results[key] = (b"", exc.code, hw, start, lso)
            continue
        if data is None:
            results[key] = (b"", ErrorCode.OFFSET_OUT_OF_RANGE, hw, start, lso)
            continue
        total += len(data)
        results[key] = (data, ErrorCode.NONE, hw, start, lso)
    return total


def _read_all(ctx: BrokerContext, partitions: list[FetchPartitionRequest], max_bytes: int,
              read_committed: bool) -> tuple[dict[tuple[str, int], tuple], int]:
    results: dict[tuple[str, int], tuple] = {}
    total = 0
    remote = ctx.remote
    for p in partitions:
        key = p.key
        if not p.topic and p.topic_id is not None:
            results[key] = (b"", ErrorCode.UNKNOWN_TOPIC_ID, -1, -1, -1)
            continue
        hosted = None
        try:
            hosted = ctx.replicas.leader(p.topic, p.partition, p.current_leader_epoch, topic_id=p.topic_id)
            plog = hosted.log
            hw = plog.high_watermark
            lso = min(plog.last_stable_offset, hw)
            limit = min(p.max_bytes, max(0, max_bytes - total))
            records: FileRegion | bytes = b""
            if limit > 0 or total == 0:
                # read_committed consumers stop at the last stable offset, as in Kafka.
                fslice = plog.read(p.fetch_offset, limit, max_offset=lso if read_committed else hw,
                                   min_one_message=(total == 0))
                if fslice is not None and fslice.size > 0:
                    # Zero-copy: the listener sends the segment bytes with os.sendfile (or reads
                    # them itself on streams that aren't plain sockets). The region owns the slice,
                    # and so the segment's descriptor, until the reply has been written.
                    records = FileRegion.of(fslice)
            total += len(records)
            results[key] = (records, ErrorCode.NONE, hw, plog.whole_log_start_offset, lso)
        except KafkaError as exc:
            if (remote is not None and hosted is not None and exc.code == ErrorCode.OFFSET_OUT_OF_RANGE
                    and remote.serves_remotely(hosted, p.fetch_offset)):
                # Below the local log start but tiered: served from remote storage.
                results[key] = (_RemotePending(hosted, p.fetch_offset, limit), ErrorCode.NONE, hw,
                                plog.whole_log_start_offset, lso)
                continue
            hw = lso = start = -1
            try:
                hosted_log = ctx.replicas.get(p.topic, p.partition).log
                # Not when the log here is another topic's (the name was re-created).
                if exc.code != ErrorCode.INCONSISTENT_TOPIC_ID:
                    hw, start = hosted_log.high_watermark, hosted_log.whole_log_start_offset
                    lso = hw
            except KafkaError:
                pass
            results[key] = (b"", exc.code, hw, start, lso)
        except OSError as exc:
            # A read fault: KAFKA_STORAGE_ERROR, and the dir goes offline (as in Kafka).
            ctx.replicas.read_fault(p.topic, p.partition, exc)
            results[key] = (b"", ErrorCode.KAFKA_STORAGE_ERROR, -1, -1, -1)
    return results, total


def _build_response(ctx: BrokerContext, version: int, session: SessionContext, results: dict,
                    request: Request) -> Reply:
    # The frame is packed directly (protocol.fetch_response) rather than through kafka-python's
    # object tree: the records stay FileRegions, so Python builds only the small framing.
    # By name and id: a re-created topic's old and new ids may both be in a session.
    by_topic: dict[tuple[str, object], list[FetchPartitionResult]] = {}
    hints = LeaderHints(ctx)
    stats = ctx.stats
    for p in session.partitions:
        key = p.key
        records, error, hw, start, lso = results[key]
        if stats is not None:
            if error == ErrorCode.NONE:
                stats.fetched(p.topic, len(records))
            elif error != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and error != ErrorCode.UNKNOWN_TOPIC_ID:
                stats.fetched(p.topic, 0, failed=True)
        if not session.should_include(key, has_records=bool(records), error=error, high_watermark=hw,
                                      log_start_offset=start, last_stable_offset=lso):
            continue
        parts = by_topic.get((p.topic, p.topic_id))
        if parts is None:
            parts = by_topic[(p.topic, p.topic_id)] = []
        parts.append(FetchPartitionResult(p.partition, error, hw, lso, start, records,
                                          current_leader=hints.hint(p.topic, p.partition, error)))
    # From v13 every session entry carries the id the client named its topic by (an incremental
    # fetch answers for partitions of earlier requests): the answer is under that id, even when
    # the topic has been deleted since.
    topics = [FetchTopicResult(name, tid, parts) for (name, tid), parts in by_topic.items()]
    return Reply(parts=fetch_response_parts(request, throttle_time_ms=0, error_code=0,
                                            session_id=session.session_id, topics=topics,
                                            node_endpoints=hints.endpoints))


def _topic_names(ctx: BrokerContext) -> Callable[[uuid.UUID], str | None]:
    """Topic id to name in the current metadata, for session entries not resolved yet."""
    def name(topic_id: uuid.UUID) -> str | None:
        topic = ctx.image().topics.by_id.get(topic_id)
        return None if topic is None else topic.name
    return name


def _replica_id(body: object, version: int) -> int:
    if version >= 15:
        state = getattr(body, "replica_state", None)
        return -1 if state is None else int(getattr(state, "replica_id", -1))
    return int(getattr(body, "replica_id", -1))


async def _handle_replica_fetch(ctx: BrokerContext, request: Request, replica_id: int) -> Reply:
    """A follower's fetch: sessionless, up to the log end, with divergence checks."""
    body = request.body
    version = request.api_version
    wanted: list[tuple[str | None, object, object]] = []
    for topic in body.topics:
        name = ctx.topic_name(topic, version, field="topic")
        for p in topic.partitions:
            wanted.append((name, topic, p))
    now_ms = ctx.clock.now_ms()
    # The follower's position is its log end: recorded once per request, before any long poll,
    # so the high watermark can move while this request waits for more data.
    for name, _, p in wanted:
        if name is None:
            continue
        try:
            hosted = ctx.replicas.leader(name, p.partition, p.current_leader_epoch)
        except KafkaError:
            continue
        ctx.replicas.on_follower_fetch(hosted, replica_id, p.fetch_offset, now_ms,
                                       log_start_offset=getattr(p, "log_start_offset", -1))
    deadline = trio.current_time() + max(0, body.max_wait_ms) / 1000.0
    max_bytes = body.max_bytes if version >= 3 else 0x7FFFFFFF
    while True:
        results: list[tuple[str | None, object, FetchPartitionResult]] = []
        total = 0
        urgent = False
        throttled_bytes = 0
        read_ms = ctx.clock.now_ms()
        for name, topic, p in wanted:
            result, throttled = _replica_read(ctx, name, p, version, max(0, max_bytes - total),
                                              total == 0, replica_id, read_ms)
            if throttled:
                throttled_bytes += len(result.records or b"")
            total += len(result.records or b"")
            urgent = urgent or result.error_code != ErrorCode.NONE or result.diverging_epoch is not None
            results.append((name, topic, result))
        if total >= body.min_bytes or urgent or trio.current_time() >= deadline or not wanted:
            break
        await ctx.replicas.wait_for_append(deadline)
    ctx.replicas.leader_quota.record(throttled_bytes, ctx.clock.now_ms())
    by_topic: dict[object, tuple[str | None, object, list[FetchPartitionResult]]] = {}
    for name, topic, result in results:
        key = topic.topic_id if version >= 13 else name  # type: ignore[attr-defined]
        entry = by_topic.get(key)
        if entry is None:
            entry = by_topic[key] = (name, topic.topic_id if version >= 13 else None, [])  # type: ignore[attr-defined]
        entry[2].append(result)
    topics = [FetchTopicResult(name, tid, parts) for name, tid, parts in by_topic.values()]
    return Reply(parts=fetch_response_parts(request, throttle_time_ms=0, error_code=0,
                                            session_id=0, topics=topics))


def _replica_read(ctx: BrokerContext, name: str | None, p: object, version: int, budget: int,
                  first: bool, replica_id: int, now_ms: int) -> tuple[FetchPartitionResult, bool]:
    """One partition's answer to a replica fetch, and whether it is a throttled one."""
    index = p.partition  # type: ignore[attr-defined]
    if name is None:
        return FetchPartitionResult(index, ErrorCode.UNKNOWN_TOPIC_ID, -1, -1, -1, b""), False
    throttled = ctx.replicas.leader_quota.is_throttled(name, index)
    return _replica_read_partition(ctx, name, index, p, version, budget, first, replica_id, now_ms), throttled


def _replica_read_partition(ctx: BrokerContext, name: str, index: int, p: object, version: int,
                            budget: int, first: bool, replica_id: int, now_ms: int) -> FetchPartitionResult:
    try:
        hosted = ctx.replicas.leader(name, index, p.current_leader_epoch)  # type: ignore[attr-defined]
        plog = hosted.log
        hw, local_start, leo = plog.high_watermark, plog.log_start_offset, plog.log_end_offset
        # Followers keep the whole log's start (DeleteRecords below the local log start of a
        # tiered log), except when out of range: they restart at the leader's local log start.
        start = plog.replicated_log_start_offset
        offset = p.fetch_offset  # type: ignore[attr-defined]
        last_epoch = p.last_fetched_epoch if version >= 12 else -1  # type: ignore[attr-defined]
        if last_epoch >= 0:
            epoch, end = plog.leader_epoch_cache.end_offset_for(last_epoch, leo)
            if epoch < last_epoch or end < offset:
                return FetchPartitionResult(index, ErrorCode.NONE, hw, hw, start, b"",
                                            diverging_epoch=(epoch, end))
        if offset < local_start or offset > leo:
            return FetchPartitionResult(index, ErrorCode.OFFSET_OUT_OF_RANGE, hw, hw, local_start, b"")
        limit = min(p.partition_max_bytes, budget)  # type: ignore[attr-defined]
        records: FileRegion | bytes = b""
        if ctx.replicas.leader_throttled(hosted, replica_id, now_ms):
            limit, first = 0, False
        if limit > 0 or first:
            fslice = plog.read(offset, limit, max_offset=None, min_one_message=first)
            if fslice is not None and fslice.size > 0:
                records = FileRegion.of(fslice)
        return FetchPartitionResult(index, ErrorCode.NONE, hw, min(plog.last_stable_offset, hw), start, records)
    except KafkaError as exc:
        return FetchPartitionResult(index, exc.code, -1, -1, -1, b"")
    except OSError as exc:
        ctx.replicas.read_fault(name, index, exc)
        return FetchPartitionResult(index, ErrorCode.KAFKA_STORAGE_ERROR, -1, -1, -1, b"")
