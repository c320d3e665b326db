"""Reads for Fetch (Kafka's readFromLog): a consumer's, from a leader or, with KIP-392, a follower,
and a follower replica's from its leader.

Before Fetch v11 only a leader serves consumers; from v11 a follower does too, below the high
watermark it learnt, and a leader with ``replica.selector.class`` set may answer with a preferred
read replica instead of records (``replica_selector``). Errors come back in the ``ReadResult``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from kafkapy.broker.edges import RemoteReads
from kafkapy.broker.fetch_session import FetchPartitionRequest
from kafkapy.broker.partition import Partition
from kafkapy.broker.replica_results import FetchParams, ReadResult
from kafkapy.broker.replica_selector import preferred_read_replica
from kafkapy.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkapy.broker.replica_manager import ReplicaManager


def read(manager: ReplicaManager, p: FetchPartitionRequest, params: FetchParams, *, budget: int, min_one: bool,
         last_fetched_epoch: int = -1, remote: RemoteReads | None = None) -> ReadResult:
    """One partition's part of a fetch (Kafka's readFromLog): at most ``min(p.max_bytes,
    budget)`` bytes, or the first whole batch with ``min_one``. Errors are in the result."""
    if not p.topic and (params.from_follower or p.topic_id is not None):
        return ReadResult.failed(ErrorCode.UNKNOWN_TOPIC_ID)
    limit = min(p.max_bytes, budget)
    if params.from_follower:
        return _read_for_follower(manager, p, params, limit, min_one, last_fetched_epoch)
    hosted = None
    try:
        if params.client_rack is None:
            hosted = manager.leader(p.topic, p.partition, p.current_leader_epoch, topic_id=p.topic_id)
        else:
            hosted = manager.replica(p.topic, p.partition, p.current_leader_epoch, topic_id=p.topic_id)
            preferred = _preferred_read_replica(manager, hosted, p.fetch_offset, params)
            if preferred is not None:
                # Kafka skips the read: the client goes to ``preferred`` for the records.
                plog = hosted.log
                hw = plog.high_watermark
                return ReadResult(ErrorCode.NONE, hw, min(plog.last_stable_offset, hw),
                                  plog.log_start_offset, preferred_read_replica=preferred)
        return hosted.read(p.fetch_offset, limit, min_one=min_one, read_committed=params.read_committed)
    except KafkaError as exc:
        if (remote is not None and hosted is not None and exc.code == ErrorCode.OFFSET_OUT_OF_RANGE
                and remote.serves_remotely(hosted, p.fetch_offset)):
            return hosted.remote_read(p.fetch_offset, limit)  # below the local log, but tiered
        return _failed_read(manager, p, exc)
    except OSError as exc:
        # A read fault: KAFKA_STORAGE_ERROR, and the dir goes offline (as in Kafka).
        manager.read_fault(p.topic, p.partition, exc)
        return ReadResult.failed(ErrorCode.KAFKA_STORAGE_ERROR)


def _known(manager: ReplicaManager, topic: str, partition: int) -> bool:
    """Whether the metadata last applied has this partition (hosted here or not)."""
    image = manager.applied_image
    t = None if image is None else image.topics.by_name.get(topic)
    return t is not None and partition in t.partitions


def _preferred_read_replica(manager: ReplicaManager, hosted: Partition, fetch_offset: int,
                            params: FetchParams) -> int | None:
    """Another replica the consumer should read ``hosted`` from, when this broker leads it
    and ``replica.selector.class`` is set (Kafka's findPreferredReadReplica)."""
    selector = manager.replica_selector
    if selector is None or params.client_rack is None or not hosted.is_leader():
        return None
    return preferred_read_replica(
        selector, client_rack=params.client_rack, leader_id=manager.node_id,
        leader_log_end_offset=hosted.log.log_end_offset, followers=hosted.follower_views(),
        racks=_replica_racks(manager, hosted, params.listener), fetch_offset=fetch_offset,
        now_ms=params.now_ms)


def _replica_racks(manager: ReplicaManager, hosted: Partition, listener: str) -> dict[int, str | None]:
    """Rack of each replica's broker that is unfenced with an endpoint on ``listener``
    (Kafka's getPartitionReplicaEndpoints): only those can be named to a client."""
    image = manager.applied_image
    if image is None:
        return {}
    racks: dict[int, str | None] = {}
    for r in hosted.replicas:
        broker = image.cluster.brokers.get(r)
        if broker is not None and not broker.fenced and broker.listener(listener) is not None:
            racks[r] = broker.rack
    return racks


def _failed_read(manager: ReplicaManager, p: FetchPartitionRequest, exc: KafkaError) -> ReadResult:
    """A consumer read's error, with the offsets of the log here when it is this topic's."""
    if exc.code == ErrorCode.INCONSISTENT_TOPIC_ID:
        return ReadResult.failed(exc.code)  # the log here is another topic's (re-created)
    if exc.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and _known(manager, p.topic, p.partition):
        # The partition exists but has no replica here (moved away, or a client following a
        # stale preferred read replica): Kafka's getPartitionOrException sends the client
        # back to its metadata with NOT_LEADER_OR_FOLLOWER.
        return ReadResult.failed(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    try:
        plog = manager.get(p.topic, p.partition).log
    except KafkaError:
        return ReadResult.failed(exc.code)
    hw = plog.high_watermark
    return ReadResult.failed(exc.code, hw, plog.log_start_offset, hw)


def _read_for_follower(manager: ReplicaManager, p: FetchPartitionRequest, params: FetchParams, limit: int,
                       min_one: bool, last_fetched_epoch: int) -> ReadResult:
    throttled = manager.leader_quota.is_throttled(p.topic, p.partition)
    try:
        hosted = manager.leader(p.topic, p.partition, p.current_leader_epoch)
        result = hosted.read_for_follower(
            p.fetch_offset, limit, min_one=min_one, last_fetched_epoch=last_fetched_epoch,
            throttled=manager.leader_throttled(hosted, params.replica_id, params.now_ms))
    except KafkaError as exc:
        return ReadResult(exc.code, throttled=throttled)
    except OSError as exc:
        manager.read_fault(p.topic, p.partition, exc)
        return ReadResult(ErrorCode.KAFKA_STORAGE_ERROR, throttled=throttled)
    return replace(result, throttled=throttled) if throttled else result
