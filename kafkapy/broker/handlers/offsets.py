"""OffsetCommit, TxnOffsetCommit, OffsetFetch and OffsetDelete: committed offsets stored in
``__consumer_offsets``.

A commit from a group member is checked against the group (member id, generation, static
instance); a commit with generation -1 and no member id is a standalone commit, accepted while
the group has no members, as tools and Spark do. Commits for partitions that do not exist get
UNKNOWN_TOPIC_OR_PARTITION, metadata longer than ``offset.metadata.max.bytes`` gets
OFFSET_METADATA_TOO_LARGE. The records are appended to the group's ``__consumer_offsets``
partition before the answer, so a restarted broker reloads them.

TxnOffsetCommit writes its offsets as one transactional batch of the request's producer: they stay
pending, invisible to OffsetFetch, until that transaction's marker reaches the partition (an
OffsetFetch with ``require_stable`` gets UNSTABLE_OFFSET_COMMIT for them meanwhile). From v3 the
request carries the consumer's group metadata (KIP-447) and is fenced like a member's commit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from kafkapy.broker.context import BrokerContext
from kafkapy.broker.handlers.groups import _coordinator_error
from kafkapy.protocol import messages as m
from kafkapy.protocol.connection import Request
from kafkapy.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkapy.coordinator.group import GroupShard
    from kafkapy.coordinator.outcome import Outcome

CommitResp = m.OffsetCommitResponse
FetchResp = m.OffsetFetchResponse
TxnCommitResp = m.TxnOffsetCommitResponse
DeleteResp = m.OffsetDeleteResponse


def _write_error(code: int) -> int:
    if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_COORDINATOR):
        return ErrorCode.NOT_COORDINATOR
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    return ErrorCode.UNKNOWN_SERVER_ERROR


def _partition_exists(ctx: BrokerContext, topic: str, partition: int) -> bool:
    t = ctx.image().topics.by_name.get(topic)
    return t is not None and partition in t.partitions


#: (topic, partition, offset, leader epoch, metadata), as the shard's commit calls take them
CommitEntry = tuple[str, int, int, int, str | None]
PartitionCodes = dict[tuple[str, int], int]


def _commit_entries(ctx: BrokerContext, topics: Any, version: int, epoch_since: int
                    ) -> tuple[PartitionCodes, list[CommitEntry]]:
    """Split an OffsetCommit's or TxnOffsetCommit's partitions (same field names in both):
    UNKNOWN_TOPIC_OR_PARTITION for those that do not exist, entries for the others. The committed
    leader epoch is in the request from version ``epoch_since`` on; before it the entry has -1."""
    codes: PartitionCodes = {}
    entries: list[CommitEntry] = []
    for t in topics:
        for p in t.partitions:
            if not _partition_exists(ctx, t.name, p.partition_index):
                codes[(t.name, p.partition_index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                epoch = p.committed_leader_epoch if version >= epoch_since else -1
                entries.append((t.name, p.partition_index, p.committed_offset, epoch, p.committed_metadata))
    return codes, entries


async def _write_commit(ctx: BrokerContext, shard: GroupShard, outcome: Outcome, entries: list[CommitEntry],
                        codes: PartitionCodes, write_error: Callable[[int], int]) -> None:
    """Run a commit's write and put each entry's code in ``codes``; a failed write stores
    nothing, and every entry gets ``write_error`` of the append's error."""
    assert ctx.groups is not None  # the shard came from it
    try:
        results = cast(list[int], await ctx.groups.run_op(shard, outcome, timeout_ms=0, on_timeout=None))
    except KafkaError as exc:
        results = [write_error(exc.code)] * len(entries)
    except OSError:
        results = [ErrorCode.COORDINATOR_NOT_AVAILABLE] * len(entries)
    for (topic, partition, *_), code in zip(entries, results):
        codes[(topic, partition)] = code


def _topic_results(T: Any, P: Any, version: int, topics: Any, codes: PartitionCodes) -> list[Any]:
    """The response's topics, in the request's order, one code per partition."""
    return [T(version=version, name=t.name, partitions=[
        P(version=version, partition_index=p.partition_index, error_code=codes[(t.name, p.partition_index)])
        for p in t.partitions]) for t in topics]


# ------------------------------------------------------------------------------------ OffsetCommit

async def handle_offset_commit(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    version = request.api_version
    now = ctx.clock.now_ms()
    codes, entries = _commit_entries(ctx, body.topics, version, epoch_since=6)
    shard, error = _coordinator_error(ctx, body.group_id)
    if shard is not None:
        instance_id = body.group_instance_id if version >= 7 else None
        error = shard.validate_commit(body.group_id, body.generation_id_or_member_epoch, body.member_id,
                                      instance_id, now, api_version=version)
    if error == ErrorCode.NONE and entries:
        expire = -1
        if 2 <= version <= 4 and body.retention_time_ms >= 0:
            expire = now + body.retention_time_ms
        # error is NONE only once validate_commit ran on a shard of ctx.groups.
        assert shard is not None and ctx.groups is not None
        outcome = shard.commit(body.group_id, entries, now, expire)
        await _write_commit(ctx, shard, outcome, entries, codes, _write_error)
    else:
        for topic, partition, *_ in entries:
            codes[(topic, partition)] = error
    T = CommitResp.OffsetCommitResponseTopic
    topics = _topic_results(T, T.OffsetCommitResponsePartition, version, body.topics, codes)
    return CommitResp(version=version, throttle_time_ms=0, topics=topics)


# ------------------------------------------------------------------------------------ TxnOffsetCommit

def _txn_write_error(code: int) -> int:
    """Kafka's mapping of a failed transactional write: producer errors reach the client as they are."""
    if code in (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED, ErrorCode.TRANSACTION_ABORTABLE,
                ErrorCode.INVALID_TXN_STATE):
        return code
    return _write_error(code)


async def handle_txn_offset_commit(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    version = request.api_version
    now = ctx.clock.now_ms()
    codes, entries = _commit_entries(ctx, body.topics, version, epoch_since=2)
    error: int = ErrorCode.NONE
    if entries:
        shard, error = _coordinator_error(ctx, body.group_id)
        if shard is not None:
            if version >= 3:
                error = shard.validate_txn_commit(body.group_id, body.generation_id, body.member_id,
                                                  body.group_instance_id)
            else:
                error = shard.validate_txn_commit(body.group_id, -1, "", None)
        if error == ErrorCode.NONE:
            assert shard is not None and ctx.groups is not None
            outcome = shard.txn_commit(body.group_id, body.producer_id, body.producer_epoch, entries, now)
            await _write_commit(ctx, shard, outcome, entries, codes, _txn_write_error)
        else:
            for topic, partition, *_ in entries:
                codes[(topic, partition)] = error
    T = TxnCommitResp.TxnOffsetCommitResponseTopic
    topics = _topic_results(T, T.TxnOffsetCommitResponsePartition, version, body.topics, codes)
    return TxnCommitResp(version=version, throttle_time_ms=0, topics=topics)


# ------------------------------------------------------------------------------------ OffsetFetch

def _fetch_group(ctx: BrokerContext, group_id: str, topics: list[tuple[str, list[int]]] | None,
                 require_stable: bool = False, member: tuple[str | None, int] | None = None
                 ) -> tuple[int, list[tuple[str, list[tuple[int, int, int, str, int]]]]]:
    """(group error, [(topic, [(partition, offset, epoch, metadata, error)])]).

    ``require_stable`` (v7+): a partition with a pending transactional offset answers
    UNSTABLE_OFFSET_COMMIT (the client retries) rather than the offset committed before.
    ``member`` (v9+): the member id and epoch a consumer group's member fetches with."""
    shard, error = _coordinator_error(ctx, group_id)
    if shard is None:
        return error, [(t, [(p, -1, -1, "", error) for p in ps]) for t, ps in (topics or [])]
    if member is not None:
        error = shard.validate_fetch(group_id, member[0], member[1])
        if error != ErrorCode.NONE:
            return error, []
    wanted = None if topics is None else [(t, p) for t, ps in topics for p in ps]
    found = shard.fetch_offsets(group_id, wanted)
    unstable = shard.unstable_partitions(group_id) if require_stable else set()
    by_topic: dict[str, list[tuple[int, int, int, str, int]]] = {}
    for topic, partition, c in found:
        if (topic, partition) in unstable:
            row = (partition, -1, -1, "", ErrorCode.UNSTABLE_OFFSET_COMMIT)
        else:
            row = (partition, -1, -1, "", ErrorCode.NONE) if c is None else \
                (partition, c.offset, c.leader_epoch, c.metadata, ErrorCode.NONE)
        by_topic.setdefault(topic, []).append(row)
    if topics is not None:
        for t, _ps in topics:
            by_topic.setdefault(t, [])
    return ErrorCode.NONE, list(by_topic.items())


async def handle_offset_fetch(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    version = request.api_version
    if version >= 8:
        G = FetchResp.OffsetFetchResponseGroup
        T = G.OffsetFetchResponseTopics
        P = T.OffsetFetchResponsePartitions
        groups = []
        for g in body.groups:
            wanted = None if g.topics is None else [(t.name, list(t.partition_indexes)) for t in g.topics]
            member = (g.member_id, g.member_epoch) if version >= 9 else None
            error, rows = _fetch_group(ctx, g.group_id, wanted, body.require_stable, member)
            if error != ErrorCode.NONE:
                rows = []
            groups.append(G(version=version, group_id=g.group_id, error_code=error, topics=[
                T(version=version, name=topic, partitions=[
                    P(version=version, partition_index=p, committed_offset=o, committed_leader_epoch=e,
                      metadata=md, error_code=c) for p, o, e, md, c in parts])
                for topic, parts in rows]))
        return FetchResp(version=version, throttle_time_ms=0, groups=groups)
    T = FetchResp.OffsetFetchResponseTopic
    P = T.OffsetFetchResponsePartition
    wanted = None if body.topics is None else [(t.name, list(t.partition_indexes)) for t in body.topics]
    error, rows = _fetch_group(ctx, body.group_id, wanted, version >= 7 and body.require_stable)
    if error != ErrorCode.NONE and version >= 2:
        rows = []  # the error is reported once, at the top
    resp = FetchResp(version=version, throttle_time_ms=0, topics=[
        T(version=version, name=topic, partitions=[
            P(version=version, partition_index=p, committed_offset=o, committed_leader_epoch=e,
              metadata=md, error_code=c) for p, o, e, md, c in parts])
        for topic, parts in rows])
    if version >= 2:
        resp.error_code = error
    return resp


# ------------------------------------------------------------------------------------ OffsetDelete

async def handle_offset_delete(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    version = request.api_version
    T = DeleteResp.OffsetDeleteResponseTopic
    P = T.OffsetDeleteResponsePartition
    shard, error = _coordinator_error(ctx, body.group_id)
    codes: dict[tuple[str, int], int] = {}
    if shard is not None:
        existing = [(t.name, p.partition_index) for t in body.topics for p in t.partitions
                    if _partition_exists(ctx, t.name, p.partition_index)]
        outcome = shard.delete_offsets(body.group_id, existing)
        assert ctx.groups is not None  # a shard came from it
        error, per = cast(tuple[int, list[int]],
                          await ctx.groups.run_op(shard, outcome, timeout_ms=0, on_timeout=None))
        if error == ErrorCode.NONE:
            codes = dict(zip(existing, per))
    if error != ErrorCode.NONE:
        return DeleteResp(version=version, error_code=error, throttle_time_ms=0, topics=[])
    topics = [T(version=version, name=t.name, partitions=[
        P(version=version, partition_index=p.partition_index,
          error_code=codes.get((t.name, p.partition_index), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        for p in t.partitions]) for t in body.topics]
    return DeleteResp(version=version, error_code=ErrorCode.NONE, throttle_time_ms=0, topics=topics)
