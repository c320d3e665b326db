"""KIP-932 on the partition leader: ShareFetch and ShareAcknowledge (v1-v2).

Both name their share session by (group, member) and ShareSessionEpoch (:mod:`kafkapy.share.sessions`):
0 opens one, -1 closes it (acknowledgements only, then the member's records are released), any
other value must be the session's next. Acknowledgements are applied and written to the share
state before the answer says they were; a ShareFetch applies its piggy-backed ones first, then
acquires records in every partition of its session, waiting up to MaxWaitMs for some to become
acquirable. Records go out as the log's whole batches, with AcquiredRecords naming the offsets the
member now holds; the client drops the rest.

The caller needs READ on the group (checked before the handler, ``request_authorization``) and
READ on each topic (here: the others are answered TOPIC_AUTHORIZATION_FAILED and neither
acknowledged nor read).

v2 adds ShareAcquireMode (KIP-1206): in record_limit mode MaxRecords is a hard limit, even if
that cuts a log batch (the Java client's ``share.acquire.mode=record_limit`` needs v2 and fails
every fetch locally without it). It also adds Renew acknowledgements (KIP-1222): the records stay
acquired with a fresh lock; a ShareFetch whose IsRenewAck is set only acknowledges.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import trio

from kafkapy.broker.context import BrokerContext, client_address, request_listener
from kafkapy.broker.gated_apis import SHARE_VERSION_FEATURE, GatedApi
from kafkapy.broker.handlers.fetch import _over_quota
from kafkapy.broker.leader_hints import MOVED, LeaderHints
from kafkapy.broker.request_throttle import current_throttle
from kafkapy.broker.share_partitions import ShareKey, SharePartitionManager, ShareRead
from kafkapy.protocol import messages as m
from kafkapy.protocol.apis import ApiKey
from kafkapy.protocol.connection import Request
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.events import FileRegion
from kafkapy.security.acl import AclOperation, ResourceType
from kafkapy.share.partition import AcknowledgementBatch, AcknowledgeType
from kafkapy.share.sessions import FINAL_EPOCH, INITIAL_EPOCH, TopicIdPartition

# A full session cache first ends sessions unused this long: a share consumer fetches far more
# often, and by then its group membership has expired too (group.share.session.timeout.ms'
# default). Kafka ends them when their connection closes instead (see connection_key).
_IDLE_SESSION_MS = 45_000

FetchResp: Any = m.ShareFetchResponse
AckResp: Any = m.ShareAcknowledgeResponse
# ShareAcquireMode: 0 batch_optimized (MaxRecords rounded up to whole batches), 1 record_limit.
RECORD_LIMIT = 1
# The first version with ShareAcquireMode and Renew acknowledgements.
_V2 = 2


@dataclass
class _Answer:
    """What one partition's entry in the response says."""

    error: int = ErrorCode.NONE
    message: str | None = None
    ack_error: int = ErrorCode.NONE
    ack_message: str | None = None
    read: ShareRead = field(default_factory=ShareRead)
    acked: bool = False


def _invalid_ids(body: Any) -> str | None:
    """Kafka's checks of the ids before anything else: a group id, and a member id of 1 to 36
    characters (a client-chosen UUID string)."""
    if body.group_id is None:
        return "Invalid group id in the request."
    if not body.member_id or len(body.member_id) > 36:
        return "Invalid member id in the request."
    return None


def connection_key(listener: str | None, peer: tuple[Any, ...] | None) -> str | None:
    """The connection a share session is tied to (Kafka closes a session with its connection):
    the listener and the client's address, which name one open connection at a time. The edge
    that sees a connection close passes the same key to ``SharePartitionManager.connection_closed``."""
    return None if peer is None else f"{listener}/{peer}"


def _connection() -> str | None:
    return connection_key(request_listener.get(), client_address.get())


def _manager(ctx: BrokerContext) -> SharePartitionManager | None:
    return ctx.share_partitions


def _names(ctx: BrokerContext, topic_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, str]:
    by_id = ctx.image().topics.by_id
    return {tid: by_id[tid].name for tid in set(topic_ids) if tid in by_id}


def _readable(ctx: BrokerContext, names: dict[uuid.UUID, str]) -> set[uuid.UUID]:
    allowed = ctx.authorized_names(AclOperation.READ, ResourceType.TOPIC, names.values())
    return {tid for tid, name in names.items() if name in allowed}


def _ack_batches(partition: Any) -> list[AcknowledgementBatch]:
    return [AcknowledgementBatch(b.first_offset, b.last_offset, tuple(b.acknowledge_types))
            for b in partition.acknowledgement_batches or ()]


async def _acknowledge_all(ctx: BrokerContext, mgr: SharePartitionManager, group_id: str,
                           member_id: str, topics: Any, names: dict[uuid.UUID, str],
                           readable: set[uuid.UUID], answers: dict[TopicIdPartition, _Answer],
                           version: int) -> None:
    """Apply each partition's acknowledgements (in request order), noting the outcome."""
    for topic in topics or ():
        for p in topic.partitions or ():
            batches = _ack_batches(p)
            if not batches:
                continue
            tp = TopicIdPartition(topic.topic_id, p.partition_index)
            answer = answers.setdefault(tp, _Answer())
            answer.acked = True
            name = names.get(topic.topic_id)
            if version < _V2 and any(AcknowledgeType.RENEW in b.acknowledge_types for b in batches):
                answer.ack_error = ErrorCode.INVALID_REQUEST  # no Renew before v2
            elif name is None:
                answer.ack_error = ErrorCode.UNKNOWN_TOPIC_ID
            elif topic.topic_id not in readable:
                answer.ack_error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            else:
                key = ShareKey(group_id, topic.topic_id, p.partition_index)
                answer.ack_error, answer.ack_message = await mgr.acknowledge(key, name, member_id, batches)


def _leader(hints: LeaderHints, name: str | None, partition: int, error: int) -> tuple[int, int]:
    """CurrentLeader: where a moved partition went ((-1, -1) when unknown); zeros otherwise, the
    generated default Kafka leaves there."""
    if error not in MOVED:
        return 0, 0
    hint = hints.hint(name, partition, error) if name is not None else None
    return hint if hint is not None else (-1, -1)


# -- ShareFetch -------------------------------------------------------------------------------------


async def handle_share_fetch(ctx: BrokerContext, request: Request) -> object:
    body, version = request.body, request.api_version
    mgr = _manager(ctx)
    if mgr is None:
        return FetchResp(version=version, throttle_time_ms=0, error_code=ErrorCode.UNSUPPORTED_VERSION,
                         acquisition_lock_timeout_ms=0, responses=[], node_endpoints=[])
    invalid = _invalid_ids(body)
    if invalid is not None:
        return FetchResp(version=version, throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST,
                         error_message=invalid, acquisition_lock_timeout_ms=0, responses=[], node_endpoints=[])
    group_id, member_id, epoch = body.group_id, body.member_id, body.share_session_epoch
    wanted = [TopicIdPartition(t.topic_id, p.partition_index) for t in body.topics or () for p in t.partitions or ()]
    forgotten = [TopicIdPartition(t.topic_id, i) for t in body.forgotten_topics_data or () for i in t.partitions or ()]
    has_acks = any(p.acknowledgement_batches for t in body.topics or () for p in t.partitions or ())
    session = mgr.sessions.fetch(group_id, member_id, epoch, topics=wanted, forgotten=forgotten,
                                 has_acknowledgements=has_acks, connection_id=_connection(),
                                 now_ms=ctx.clock.now_ms())
    if session.error == ErrorCode.SHARE_SESSION_LIMIT_REACHED and \
            await mgr.evict_idle_sessions(_IDLE_SESSION_MS):
        session = mgr.sessions.fetch(group_id, member_id, epoch, topics=wanted, forgotten=forgotten,
                                     has_acknowledgements=has_acks, connection_id=_connection(),
                                     now_ms=ctx.clock.now_ms())
    lock_ms = mgr.lock_duration_ms(group_id)
    if session.error != ErrorCode.NONE:
        return FetchResp(version=version, throttle_time_ms=0, error_code=session.error,
                         acquisition_lock_timeout_ms=0, responses=[], node_endpoints=[])
    fetching = sorted(session.session.partitions) if epoch != FINAL_EPOCH and session.session else []
    names = _names(ctx, [tp.topic_id for tp in (*wanted, *fetching)])
    readable = _readable(ctx, names)
    answers: dict[TopicIdPartition, _Answer] = {}
    await _acknowledge_all(ctx, mgr, group_id, member_id, body.topics, names, readable, answers, version)
    if epoch == FINAL_EPOCH:
        await mgr.release_member(group_id, member_id, session.release)
    elif not (version >= _V2 and body.is_renew_ack):
        await _fetch_all(ctx, mgr, group_id, member_id, body, fetching, names, readable, answers)
        throttle = current_throttle.get()
        if throttle is not None and _over_quota(ctx, throttle, sum(a.read.size for a in answers.values())):
            # Over the consumer's byte (or request) quota: Kafka's throttled answer carries
            # nothing. The records go back at once rather than when their locks lapse.
            await _give_back(mgr, group_id, member_id, answers, names)
            return FetchResp(version=version, throttle_time_ms=0, error_code=0,
                             acquisition_lock_timeout_ms=lock_ms, responses=[], node_endpoints=[])
    _count(ctx, answers, names)
    # An initial fetch answers every partition of the new session; later ones only those with
    # something to say (records, an error, an acknowledgement's outcome), as Kafka's sessions do.
    shown = {tp: a for tp, a in answers.items()
             if epoch == INITIAL_EPOCH or a.acked or a.error != ErrorCode.NONE or a.read.acquired}
    return _fetch_response(ctx, version, lock_ms, shown, names)


async def _fetch_all(ctx: BrokerContext, mgr: SharePartitionManager, group_id: str, member_id: str,
                     body: Any, fetching: list[TopicIdPartition], names: dict[uuid.UUID, str],
                     readable: set[uuid.UUID], answers: dict[TopicIdPartition, _Answer]) -> None:
    """Acquire records in the session's partitions, waiting up to MaxWaitMs for the first."""
    deadline = trio.current_time() + max(0, body.max_wait_ms) / 1000.0
    max_bytes = body.max_bytes if body.max_bytes > 0 else 0x7FFFFFFF
    throttle = current_throttle.get()
    if throttle is not None:
        # Never more than the consumer's quota allows in a window, as Kafka caps it.
        cap = throttle.quotas.fetch.max_value_in_window(throttle.user, throttle.client_id)
        if cap < max_bytes:
            max_bytes = int(cap)
    min_bytes = min(body.min_bytes, max_bytes)
    strict = body.share_acquire_mode == RECORD_LIMIT
    readable_parts = []
    for tp in fetching:
        answer = answers.setdefault(tp, _Answer())
        if tp.topic_id not in names:
            answer.error = ErrorCode.UNKNOWN_TOPIC_ID
        elif tp.topic_id not in readable:
            answer.error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        else:
            readable_parts.append(tp)
    if readable_parts:
        # Kafka's round-robin: each request starts one partition further on, so MaxRecords and
        # MaxBytes do not always go to the first partitions of a session.
        turn = max(0, body.share_session_epoch) % len(readable_parts)
        readable_parts = readable_parts[turn:] + readable_parts[:turn]
    while True:
        if min_bytes > 1 and trio.current_time() < deadline:
            pending = await _pending_bytes(mgr, group_id, readable_parts, names, max_bytes)
            if 0 <= pending < min_bytes:
                await mgr.wait(deadline)
                continue
        records_left, total, got = body.max_records, 0, False
        for tp in readable_parts:
            answer = answers[tp]
            if records_left <= 0 or total >= max_bytes:
                break
            read = await mgr.fetch(ShareKey(group_id, tp.topic_id, tp.partition), names[tp.topic_id],
                                   member_id, max_records=records_left, limit=max_bytes - total,
                                   min_one=total == 0, batch_size=body.batch_size, strict=strict)
            answer.read, answer.error, answer.message = read, read.error, read.message
            got = got or bool(read.acquired)
            total += read.size
            records_left -= sum(a.last_offset - a.first_offset + 1 for a in read.acquired)
        # Acquired records are locked to this member: once any are, they go out now.
        urgent = any(answers[tp].error != ErrorCode.NONE for tp in readable_parts)
        if got or urgent or not readable_parts or trio.current_time() >= deadline:
            return
        await mgr.wait(deadline)


async def _give_back(mgr: SharePartitionManager, group_id: str, member_id: str,
                     answers: dict[TopicIdPartition, _Answer], names: dict[uuid.UUID, str]) -> None:
    """Release what this fetch acquired and drop its batches: the answer will not carry them."""
    for tp, answer in answers.items():
        read = answer.read
        if isinstance(read.records, FileRegion):
            read.records.release()
        if read.acquired:
            await mgr.acknowledge(ShareKey(group_id, tp.topic_id, tp.partition), names[tp.topic_id], member_id,
                                  [AcknowledgementBatch(a.first_offset, a.last_offset, (AcknowledgeType.RELEASE,))
                                   for a in read.acquired])


async def _pending_bytes(mgr: SharePartitionManager, group_id: str, parts: list[TopicIdPartition],
                         names: dict[uuid.UUID, str], max_bytes: int) -> int:
    """Bytes the session's partitions could hand out now (MinBytes' measure, as Kafka's
    DelayedShareFetch checks before acquiring); -1 when one must be fetched at once."""
    total = 0
    for tp in parts:
        size = await mgr.acquirable_bytes(ShareKey(group_id, tp.topic_id, tp.partition),
                                          names[tp.topic_id], limit=max_bytes - total)
        if size < 0:
            return -1
        total += size
        if total >= max_bytes:
            break
    return total


def _count(ctx: BrokerContext, answers: dict[TopicIdPartition, _Answer], names: dict[uuid.UUID, str]) -> None:
    """Bytes out per topic and partition, in the broker's topic metrics, as Fetch counts them."""
    stats = ctx.stats
    if stats is None:
        return
    for tp, a in answers.items():
        name = names.get(tp.topic_id)
        if name is None:
            continue
        if a.error == ErrorCode.NONE:
            stats.fetched(name, a.read.size)
            stats.partition_fetched(name, tp.partition, a.read.size)
        else:
            stats.fetched(name, 0, failed=True)


def _fetch_response(ctx: BrokerContext, version: int, lock_ms: int,
                    answers: dict[TopicIdPartition, _Answer], names: dict[uuid.UUID, str]) -> Any:
    T = FetchResp.ShareFetchableTopicResponse
    P = T.PartitionData
    hints = LeaderHints(ctx)
    by_topic: dict[uuid.UUID, list[Any]] = {}
    for tp, a in answers.items():
        leader = _leader(hints, names.get(tp.topic_id), tp.partition, a.error or a.ack_error)
        records: FileRegion | bytes = a.read.records
        by_topic.setdefault(tp.topic_id, []).append(P(
            partition_index=tp.partition, error_code=a.error, error_message=a.message,
            acknowledge_error_code=a.ack_error, acknowledge_error_message=a.ack_message,
            current_leader=P.LeaderIdAndEpoch(leader_id=leader[0], leader_epoch=leader[1]),
            records=records,
            acquired_records=[P.AcquiredRecords(first_offset=r.first_offset, last_offset=r.last_offset,
                                                delivery_count=r.delivery_count) for r in a.read.acquired]))
    return FetchResp(version=version, throttle_time_ms=0, error_code=0, acquisition_lock_timeout_ms=lock_ms,
                     responses=[T(topic_id=tid, partitions=parts) for tid, parts in by_topic.items()],
                     node_endpoints=_endpoints(FetchResp, hints))


def _endpoints(resp: Any, hints: LeaderHints) -> list[Any]:
    return [resp.NodeEndpoint(node_id=e.node_id, host=e.host, port=e.port, rack=e.rack)
            for e in hints.endpoints]


# -- ShareAcknowledge -------------------------------------------------------------------------------


async def handle_share_acknowledge(ctx: BrokerContext, request: Request) -> object:
    body, version = request.body, request.api_version
    mgr = _manager(ctx)
    if mgr is None:
        return AckResp(version=version, throttle_time_ms=0, error_code=ErrorCode.UNSUPPORTED_VERSION,
                       responses=[], node_endpoints=[])
    invalid = _invalid_ids(body)
    if invalid is not None:
        return AckResp(version=version, throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST,
                       error_message=invalid, responses=[], node_endpoints=[])
    group_id, member_id, epoch = body.group_id, body.member_id, body.share_session_epoch
    session = mgr.sessions.acknowledge(group_id, member_id, epoch, now_ms=ctx.clock.now_ms())
    if session.error != ErrorCode.NONE:
        return AckResp(version=version, throttle_time_ms=0, error_code=session.error, responses=[],
                       node_endpoints=[])
    names = _names(ctx, [t.topic_id for t in body.topics or ()])
    answers: dict[TopicIdPartition, _Answer] = {}
    await _acknowledge_all(ctx, mgr, group_id, member_id, body.topics, names, _readable(ctx, names), answers,
                           version)
    if epoch == FINAL_EPOCH:
        await mgr.release_member(group_id, member_id, session.release)
    T = AckResp.ShareAcknowledgeTopicResponse
    P = T.PartitionData
    hints = LeaderHints(ctx)
    by_topic: dict[uuid.UUID, list[Any]] = {}
    for tp, a in answers.items():
        leader = _leader(hints, names.get(tp.topic_id), tp.partition, a.ack_error)
        by_topic.setdefault(tp.topic_id, []).append(P(
            partition_index=tp.partition, error_code=a.ack_error, error_message=a.ack_message,
            current_leader=P.LeaderIdAndEpoch(leader_id=leader[0], leader_epoch=leader[1])))
    return AckResp(version=version, throttle_time_ms=0, error_code=0,
                   acquisition_lock_timeout_ms=mgr.lock_duration_ms(group_id),
                   responses=[T(topic_id=tid, partitions=parts) for tid, parts in by_topic.items()],
                   node_endpoints=_endpoints(AckResp, hints))


SHARE_FETCH_APIS: list[GatedApi] = [
    GatedApi(ApiKey.SHARE_FETCH, 1, 2, handle_share_fetch, SHARE_VERSION_FEATURE, 1),
    GatedApi(ApiKey.SHARE_ACKNOWLEDGE, 1, 2, handle_share_acknowledge, SHARE_VERSION_FEATURE, 1),
]

__all__ = ["SHARE_FETCH_APIS", "connection_key", "handle_share_acknowledge", "handle_share_fetch"]
