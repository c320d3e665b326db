"""The Raft core's messages on Kafka's wire: ``raft.messages`` dataclasses <-> Kafka messages.

Pure conversion (no sockets, no clock). ``messages.py`` is flat and speaks for the single
``__cluster_metadata-0`` partition; Kafka's RPCs nest it in topic/partition arrays and carry a
``ClusterId``. This module adds and checks that nesting, fills the cluster id on the way out, and
rejects on the way in what Kafka's ``KafkaRaftClient`` rejects before its state machine sees a
request (as a :class:`RejectedRequest` carrying the exact error response to send):

* a ``ClusterId`` that is set and differs from ours: INCONSISTENT_CLUSTER_ID, top level
  (a null one is accepted, as Kafka does for old senders);
* anything but exactly one topic/partition naming ``__cluster_metadata-0`` (Fetch v13+: topic id
  ``AAAAAAAAAAAAAAAAAAAAAQ``): INVALID_REQUEST, top level ("until we support multi-raft");
* (:func:`has_invalid_fields`) field values Kafka refuses — the responder answers those itself,
  with a partition-level INVALID_REQUEST naming its leader and epoch.

Versions: :data:`VERSIONS` are what Kafka 3.9 controllers negotiate with each other (the highest
each side serves): Vote v1, BeginQuorumEpoch v1, EndQuorumEpoch v1, FetchSnapshot v1, Fetch v17.
Older versions down to :data:`SUPPORTED` decode too (Fetch below v12 has no ``LastFetchedEpoch``
or diverging epoch, so KRaft cannot use it).

Pre-vote: Kafka 3.9's Vote (v0-1) has no ``PreVote`` field (KIP-996 adds it in Vote v2, Kafka 4.0).
:func:`encode_request` refuses a pre-vote ``VoteRequest`` (``ValueError``) rather than send it
as a real vote, which would make the receiver grant — and persist — a vote in the sender's
*current* epoch. The Trio edge answers pre-votes locally instead (see ``kafkapy.quorum.driver``).

Tagged struct fields whose value is the schema default are left ``None``: kafka-python writes
any struct it is given, Java omits a default-valued one, and the bytes must match Java's.
Decoding turns an absent struct back into the default.

Directory ids (KIP-853, the v1 fields) are the zero UUID (Kafka's ``ReplicaKey.NO_DIRECTORY_ID``):
the core has none. Plain uuid fields go out as 16 zero bytes, as Java writes them; the tagged
ones (Fetch/FetchSnapshot ``ReplicaDirectoryId``) stay None and are not sent.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, Final

from kafkapy.protocol import ApiKey, ErrorCode
from kafkapy.protocol import messages as m
from kafkapy.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    EpochEndOffset,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    LeaderIdAndEpoch,
    RaftRequest,
    RaftResponse,
    SnapshotId,
    VoteRequest,
    VoteResponse,
)
from kafkapy.records.reader import iter_batches

METADATA_TOPIC: Final = "__cluster_metadata"
METADATA_PARTITION: Final = 0
#: Kafka's fixed topic id of ``__cluster_metadata`` (``Uuid.METADATA_TOPIC_ID``, i.e. 1).
METADATA_TOPIC_ID: Final = uuid.UUID(int=1)
NO_DIRECTORY_ID: Final = uuid.UUID(int=0)

#: The version Kafka 3.9 controllers use with each other for each Raft RPC.
VERSIONS: Final[Mapping[ApiKey, int]] = {
    ApiKey.VOTE: 1,
    ApiKey.BEGIN_QUORUM_EPOCH: 1,
    ApiKey.END_QUORUM_EPOCH: 1,
    ApiKey.FETCH: 17,
    ApiKey.FETCH_SNAPSHOT: 1,
}

#: The versions this module converts (and a controller listener may advertise).
SUPPORTED: Final[Mapping[ApiKey, tuple[int, int]]] = {
    ApiKey.VOTE: (0, 1),
    ApiKey.BEGIN_QUORUM_EPOCH: (0, 1),
    ApiKey.END_QUORUM_EPOCH: (0, 1),
    ApiKey.FETCH: (12, 17),
    ApiKey.FETCH_SNAPSHOT: (0, 1),
}

API_KEY_OF: Final[Mapping[type, ApiKey]] = {
    VoteRequest: ApiKey.VOTE, VoteResponse: ApiKey.VOTE,
    BeginQuorumEpochRequest: ApiKey.BEGIN_QUORUM_EPOCH,
    BeginQuorumEpochResponse: ApiKey.BEGIN_QUORUM_EPOCH,
    EndQuorumEpochRequest: ApiKey.END_QUORUM_EPOCH,
    EndQuorumEpochResponse: ApiKey.END_QUORUM_EPOCH,
    FetchRequest: ApiKey.FETCH, FetchResponse: ApiKey.FETCH,
    FetchSnapshotRequest: ApiKey.FETCH_SNAPSHOT, FetchSnapshotResponse: ApiKey.FETCH_SNAPSHOT,
}

# Fetch's tagged structs default to -1/-1 (FetchResponse.json); FetchSnapshot's CurrentLeader
# declares no defaults, so its fields default to 0 — and Java omits it when both are 0.
_FETCH_NO_LEADER = LeaderIdAndEpoch(-1, -1)
_SNAPSHOT_DEFAULT_LEADER = LeaderIdAndEpoch(0, 0)


class RejectedRequest(Exception):
    """An inbound request Kafka refuses before Raft sees it; ``response`` is the answer to send."""

    def __init__(self, code: ErrorCode, response: Any, reason: str) -> None:
        super().__init__(f"{code.name}: {reason}")
        self.code = code
        self.response = response


# -- helpers ----------------------------------------------------------------------------------


def _check_version(api_key: ApiKey, version: int) -> None:
    lo, hi = SUPPORTED[api_key]
    if not lo <= version <= hi:
        raise ValueError(f"{api_key.message_name} v{version} is outside {lo}-{hi}")


def _wire_cluster_id(cluster_id: str) -> str | None:
    return cluster_id or None


def _endpoints(cls: Any, endpoints: Mapping[int, tuple[str, int]], ids: list[int],
               version: int, *, with_rack: bool = False) -> list[Any]:
    out = []
    for node in ids:
        if node in endpoints:
            host, port = endpoints[node]
            kw: dict[str, Any] = {"node_id": node, "host": host, "port": port}
            if with_rack:
                kw["rack"] = None
            out.append(cls(version=version, **kw))
    return out


def _leader_endpoints(cls: Any, endpoints: Mapping[int, tuple[str, int]], leader_id: int,
                      listener: str, version: int) -> list[Any]:
    if leader_id not in endpoints:
        return []
    host, port = endpoints[leader_id]
    return [cls(version=version, name=listener, host=host, port=port)]


def top_level_error(api_key: ApiKey, version: int, code: ErrorCode) -> Any:
    """A response of ``api_key`` failing the whole request with ``code`` and no partitions, as
    Kafka answers a request it rejects before looking at the partition."""
    if api_key == ApiKey.FETCH:
        return m.FetchResponse(version=version, throttle_time_ms=0, error_code=int(code),
                               session_id=0, responses=[])
    if api_key == ApiKey.FETCH_SNAPSHOT:
        return m.FetchSnapshotResponse(version=version, throttle_time_ms=0, error_code=int(code),
                                       topics=[])
    cls = {ApiKey.VOTE: m.VoteResponse, ApiKey.BEGIN_QUORUM_EPOCH: m.BeginQuorumEpochResponse,
           ApiKey.END_QUORUM_EPOCH: m.EndQuorumEpochResponse}[api_key]
    return cls(version=version, error_code=int(code), topics=[])


def _reject(api_key: ApiKey, version: int, code: ErrorCode, reason: str) -> RejectedRequest:
    return RejectedRequest(code, top_level_error(api_key, version, code), reason)


def _check_cluster(api_key: ApiKey, version: int, theirs: str | None, ours: str) -> None:
    # Kafka's hasValidClusterId: a null cluster id is accepted; otherwise it must match.
    if theirs is not None and theirs != ours:
        raise _reject(api_key, version, ErrorCode.INCONSISTENT_CLUSTER_ID,
                      f"cluster id {theirs!r} is not ours ({ours!r})")


def _single_partition(api_key: ApiKey, version: int, topics: list[Any], *,
                      name_attr: str = "topic_name", parts_attr: str = "partitions",
                      index_attr: str = "partition_index", topic_id: bool = False) -> Any:
    """The one partition of a KRaft request, or INVALID_REQUEST (Kafka's hasValidTopicPartition)."""
    if len(topics) == 1 and len(getattr(topics[0], parts_attr)) == 1:
        topic = topics[0]
        partition = getattr(topic, parts_attr)[0]
        named = (topic.topic_id == METADATA_TOPIC_ID if topic_id
                 else getattr(topic, name_attr) == METADATA_TOPIC)
        if named and getattr(partition, index_attr) == METADATA_PARTITION:
            return partition
    raise _reject(api_key, version, ErrorCode.INVALID_REQUEST,
                  "a KRaft request must name exactly __cluster_metadata-0")


def _single_response_partition(topics: list[Any], *, parts_attr: str = "partitions") -> Any | None:
    if topics and getattr(topics[0], parts_attr):
        return getattr(topics[0], parts_attr)[0]
    return None


# -- requests: raft -> wire -------------------------------------------------------------------


def encode_request(msg: RaftRequest, version: int | None = None, *,
                   endpoints: Mapping[int, tuple[str, int]] | None = None,
                   listener: str = "CONTROLLER") -> Any:
    """The Kafka request object for ``msg`` at ``version`` (default: :data:`VERSIONS`).

    ``endpoints`` (node id -> host, port) fills BeginQuorumEpoch/EndQuorumEpoch v1's
    ``LeaderEndpoints`` for the sending leader, under listener name ``listener``.
    """
    api_key = API_KEY_OF[type(msg)]
    v = VERSIONS[api_key] if version is None else version
    _check_version(api_key, v)
    eps = endpoints or {}
    if isinstance(msg, VoteRequest):
        if msg.pre_vote:
            raise ValueError("Kafka 3.9's Vote has no pre-vote; answer pre-votes locally")
        part = m.VoteRequest.TopicData.PartitionData(
            version=v, partition_index=METADATA_PARTITION, candidate_epoch=msg.replica_epoch,
            candidate_id=msg.replica_id, last_offset_epoch=msg.last_offset_epoch,
            last_offset=msg.last_offset)
        if v >= 1:
            part.candidate_directory_id = NO_DIRECTORY_ID
            part.voter_directory_id = NO_DIRECTORY_ID
        body = m.VoteRequest(version=v, cluster_id=_wire_cluster_id(msg.cluster_id), topics=[
            m.VoteRequest.TopicData(version=v, topic_name=METADATA_TOPIC, partitions=[part])])
        if v >= 1:
            body.voter_id = msg.voter_id
        return body
    if isinstance(msg, BeginQuorumEpochRequest):
        part = m.BeginQuorumEpochRequest.TopicData.PartitionData(
            version=v, partition_index=METADATA_PARTITION, leader_id=msg.leader_id,
            leader_epoch=msg.leader_epoch)
        body = m.BeginQuorumEpochRequest(
            version=v, cluster_id=_wire_cluster_id(msg.cluster_id), topics=[
                m.BeginQuorumEpochRequest.TopicData(version=v, topic_name=METADATA_TOPIC,
                                                    partitions=[part])])
        if v >= 1:
            part.voter_directory_id = NO_DIRECTORY_ID
            body.voter_id = msg.voter_id
            body.leader_endpoints = _leader_endpoints(
                m.BeginQuorumEpochRequest.LeaderEndpoint, eps, msg.leader_id, listener, v)
        return body
    if isinstance(msg, EndQuorumEpochRequest):
        part_cls = m.EndQuorumEpochRequest.TopicData.PartitionData
        part = part_cls(version=v, partition_index=METADATA_PARTITION, leader_id=msg.leader_id,
                        leader_epoch=msg.leader_epoch)
        if v >= 1:
            part.preferred_candidates = [
                part_cls.ReplicaInfo(version=v, candidate_id=c,
                                     candidate_directory_id=NO_DIRECTORY_ID)
                for c in msg.preferred_successors]
        else:
            part.preferred_successors = list(msg.preferred_successors)
        body = m.EndQuorumEpochRequest(
            version=v, cluster_id=_wire_cluster_id(msg.cluster_id), topics=[
                m.EndQuorumEpochRequest.TopicData(version=v, topic_name=METADATA_TOPIC,
                                                  partitions=[part])])
        if v >= 1:
            body.leader_endpoints = _leader_endpoints(
                m.EndQuorumEpochRequest.LeaderEndpoint, eps, msg.leader_id, listener, v)
        return body
    if isinstance(msg, FetchRequest):
        return _encode_fetch_request(msg, v)
    if isinstance(msg, FetchSnapshotRequest):
        ps = m.FetchSnapshotRequest.TopicSnapshot.PartitionSnapshot
        part = ps(version=v, partition=METADATA_PARTITION,
                  current_leader_epoch=msg.current_leader_epoch,
                  snapshot_id=ps.SnapshotId(version=v, end_offset=msg.snapshot_id.end_offset,
                                            epoch=msg.snapshot_id.epoch),
                  position=msg.position)
        return m.FetchSnapshotRequest(
            version=v, cluster_id=_wire_cluster_id(msg.cluster_id), replica_id=msg.replica_id,
            max_bytes=msg.max_bytes, topics=[m.FetchSnapshotRequest.TopicSnapshot(
                version=v, name=METADATA_TOPIC, partitions=[part])])
    raise TypeError(f"not a Raft request: {msg!r}")


def _encode_fetch_request(msg: FetchRequest, v: int) -> Any:
    F = m.FetchRequest
    part = F.FetchTopic.FetchPartition(
        version=v, partition=METADATA_PARTITION, current_leader_epoch=msg.current_leader_epoch,
        fetch_offset=msg.fetch_offset, last_fetched_epoch=msg.last_fetched_epoch,
        log_start_offset=msg.log_start_offset, partition_max_bytes=msg.partition_max_bytes)
    topic = F.FetchTopic(version=v, partitions=[part])
    if v >= 13:
        topic.topic_id = METADATA_TOPIC_ID
    else:
        topic.topic = METADATA_TOPIC
    body = F(version=v, cluster_id=_wire_cluster_id(msg.cluster_id), max_wait_ms=msg.max_wait_ms,
             min_bytes=0, max_bytes=msg.max_bytes, isolation_level=0, session_id=0,
             session_epoch=-1, topics=[topic], forgotten_topics_data=[], rack_id="")
    if v >= 15:
        # A tagged struct: written only when it differs from its default (-1, -1), as Java does.
        body.replica_state = (None if msg.replica_id == -1
                              else F.ReplicaState(version=v, replica_id=msg.replica_id,
                                                  replica_epoch=-1))
    else:
        body.replica_id = msg.replica_id
    return body


# -- requests: wire -> raft -------------------------------------------------------------------


def decode_request(api_key: int, version: int, body: Any, *, cluster_id: str) -> RaftRequest:
    """The Raft request in Kafka request ``body`` (``api_key`` at ``version``), checked as
    Kafka checks it; raises :class:`RejectedRequest` with the response to send otherwise."""
    key = ApiKey(api_key)
    _check_version(key, version)
    if key == ApiKey.VOTE:
        _check_cluster(key, version, body.cluster_id, cluster_id)
        p = _single_partition(key, version, body.topics)
        return VoteRequest(cluster_id=body.cluster_id or "",
                           voter_id=body.voter_id if version >= 1 else -1,
                           replica_epoch=p.candidate_epoch, replica_id=p.candidate_id,
                           last_offset_epoch=p.last_offset_epoch, last_offset=p.last_offset)
    if key == ApiKey.BEGIN_QUORUM_EPOCH:
        _check_cluster(key, version, body.cluster_id, cluster_id)
        p = _single_partition(key, version, body.topics)
        return BeginQuorumEpochRequest(cluster_id=body.cluster_id or "",
                                       voter_id=body.voter_id if version >= 1 else -1,
                                       leader_id=p.leader_id, leader_epoch=p.leader_epoch)
    if key == ApiKey.END_QUORUM_EPOCH:
        _check_cluster(key, version, body.cluster_id, cluster_id)
        p = _single_partition(key, version, body.topics)
        if version >= 1:
            successors = tuple(c.candidate_id for c in p.preferred_candidates or ())
        else:
            successors = tuple(p.preferred_successors or ())
        return EndQuorumEpochRequest(cluster_id=body.cluster_id or "", leader_id=p.leader_id,
                                     leader_epoch=p.leader_epoch,
                                     preferred_successors=successors)
    if key == ApiKey.FETCH:
        _check_cluster(key, version, body.cluster_id, cluster_id)
        p = _single_partition(key, version, body.topics, name_attr="topic",
                              index_attr="partition", topic_id=version >= 13)
        if version >= 15:
            replica_id = body.replica_state.replica_id if body.replica_state is not None else -1
        else:
            replica_id = body.replica_id
        return FetchRequest(cluster_id=body.cluster_id or "", replica_id=replica_id,
                            max_wait_ms=body.max_wait_ms, max_bytes=body.max_bytes,
                            current_leader_epoch=p.current_leader_epoch,
                            fetch_offset=p.fetch_offset, last_fetched_epoch=p.last_fetched_epoch,
                            log_start_offset=p.log_start_offset,
                            partition_max_bytes=p.partition_max_bytes)
    if key == ApiKey.FETCH_SNAPSHOT:
        _check_cluster(key, version, body.cluster_id, cluster_id)
        p = _single_partition(key, version, body.topics, name_attr="name", index_attr="partition")
        return FetchSnapshotRequest(
            cluster_id=body.cluster_id or "", replica_id=body.replica_id,
            max_bytes=body.max_bytes, current_leader_epoch=p.current_leader_epoch,
            snapshot_id=SnapshotId(p.snapshot_id.end_offset, p.snapshot_id.epoch),
            position=p.position)
    raise ValueError(f"{key.message_name} is not a Raft RPC")


def has_invalid_fields(msg: RaftRequest) -> bool:
    """Field values Kafka answers with a partition-level INVALID_REQUEST (its
    ``handleVoteRequest`` / ``handleFetchRequest`` checks), which the responder builds with its
    own leader and epoch: a candidate's negative last offset/epoch, or a last epoch not below
    the epoch it stands in; a fetch's negative wait, offset or last epoch, or a last epoch past
    the leader epoch it names."""
    if isinstance(msg, VoteRequest):
        return (msg.last_offset < 0 or msg.last_offset_epoch < 0
                or msg.last_offset_epoch >= msg.replica_epoch)
    if isinstance(msg, FetchRequest):
        return (msg.max_wait_ms < 0 or msg.fetch_offset < 0 or msg.last_fetched_epoch < 0
                or msg.last_fetched_epoch > msg.current_leader_epoch)
    return False


def request_source(msg: RaftRequest) -> int:
    """The replica id of the node that sent ``msg`` (where the core's answer goes)."""
    if isinstance(msg, VoteRequest):
        return msg.replica_id
    if isinstance(msg, (BeginQuorumEpochRequest, EndQuorumEpochRequest)):
        return msg.leader_id
    return msg.replica_id


# -- responses: raft -> wire ------------------------------------------------------------------


def encode_response(msg: RaftResponse, version: int, *,
                    endpoints: Mapping[int, tuple[str, int]] | None = None) -> Any:
    """The Kafka response object for the core's ``msg`` at ``version`` (the request's).

    ``endpoints`` fills v1's tagged ``NodeEndpoints`` with the leader the response names, as
    Kafka does for its listener; left empty (and so not sent) when unknown.
    """
    api_key = API_KEY_OF[type(msg)]
    _check_version(api_key, version)
    v = version
    eps = endpoints or {}
    if isinstance(msg, VoteResponse):
        r = m.VoteResponse
        body = r(version=v, error_code=0, topics=[r.TopicData(
            version=v, topic_name=METADATA_TOPIC, partitions=[r.TopicData.PartitionData(
                version=v, partition_index=METADATA_PARTITION, error_code=int(msg.error_code),
                leader_id=msg.leader_id, leader_epoch=msg.leader_epoch,
                vote_granted=msg.vote_granted)])])
        if v >= 1:
            body.node_endpoints = _endpoints(r.NodeEndpoint, eps, [msg.leader_id], v)
        return body
    if isinstance(msg, (BeginQuorumEpochResponse, EndQuorumEpochResponse)):
        r = (m.BeginQuorumEpochResponse if isinstance(msg, BeginQuorumEpochResponse)
             else m.EndQuorumEpochResponse)
        body = r(version=v, error_code=0, topics=[r.TopicData(
            version=v, topic_name=METADATA_TOPIC, partitions=[r.TopicData.PartitionData(
                version=v, partition_index=METADATA_PARTITION, error_code=int(msg.error_code),
                leader_id=msg.leader_id, leader_epoch=msg.leader_epoch)])])
        if v >= 1:
            body.node_endpoints = _endpoints(r.NodeEndpoint, eps, [msg.leader_id], v)
        return body
    if isinstance(msg, FetchResponse):
        return _encode_fetch_response(msg, v, eps)
    if isinstance(msg, FetchSnapshotResponse):
        r = m.FetchSnapshotResponse
        ps = r.TopicSnapshot.PartitionSnapshot
        leader = msg.current_leader
        part = ps(version=v, index=METADATA_PARTITION, error_code=int(msg.error_code),
                  snapshot_id=ps.SnapshotId(version=v, end_offset=msg.snapshot_id.end_offset,
                                            epoch=msg.snapshot_id.epoch),
                  current_leader=(None if leader == _SNAPSHOT_DEFAULT_LEADER else
                                  ps.LeaderIdAndEpoch(version=v, leader_id=leader.leader_id,
                                                      leader_epoch=leader.leader_epoch)),
                  size=msg.size, position=msg.position,
                  unaligned_records=bytes(msg.unaligned_records))
        body = r(version=v, throttle_time_ms=0, error_code=0, topics=[r.TopicSnapshot(
            version=v, name=METADATA_TOPIC, partitions=[part])])
        if v >= 1:
            body.node_endpoints = _endpoints(r.NodeEndpoint, eps, [leader.leader_id], v)
        return body
    raise TypeError(f"not a Raft response: {msg!r}")


def _encode_fetch_response(msg: FetchResponse, v: int,
                           eps: Mapping[int, tuple[str, int]]) -> Any:
    r = m.FetchResponse
    pd = r.FetchableTopicResponse.PartitionData
    leader = msg.current_leader
    part = pd(version=v, partition_index=METADATA_PARTITION, error_code=int(msg.error_code),
              high_watermark=msg.high_watermark, last_stable_offset=-1,
              log_start_offset=msg.log_start_offset,
              diverging_epoch=(None if msg.diverging_epoch is None
                               or msg.diverging_epoch == EpochEndOffset(-1, -1)
                               else pd.EpochEndOffset(version=v, epoch=msg.diverging_epoch.epoch,
                                                      end_offset=msg.diverging_epoch.end_offset)),
              current_leader=(None if leader == _FETCH_NO_LEADER
                              else pd.LeaderIdAndEpoch(version=v, leader_id=leader.leader_id,
                                                       leader_epoch=leader.leader_epoch)),
              snapshot_id=(None if msg.snapshot_id is None or msg.snapshot_id == SnapshotId(-1, -1)
                           else pd.SnapshotId(version=v, end_offset=msg.snapshot_id.end_offset,
                                              epoch=msg.snapshot_id.epoch)),
              aborted_transactions=[], preferred_read_replica=-1,
              records=b"".join(bytes(b) for b in msg.records))
    topic = r.FetchableTopicResponse(version=v, partitions=[part])
    if v >= 13:
        topic.topic_id = METADATA_TOPIC_ID
    else:
        topic.topic = METADATA_TOPIC
    body = r(version=v, throttle_time_ms=0, error_code=0, session_id=0, responses=[topic])
    if v >= 16 and msg.error_code in (ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                      ErrorCode.FENCED_LEADER_EPOCH):
        # KIP-951: the new leader's endpoint rides along with these two errors.
        body.node_endpoints = _endpoints(r.NodeEndpoint, eps, [leader.leader_id], v,
                                         with_rack=True)
    return body


# -- responses: wire -> raft ------------------------------------------------------------------


def decode_response(api_key: int, version: int, body: Any) -> RaftResponse:
    """The core's view of Kafka response ``body``. A top-level error (or a response without our
    partition) becomes that error with no leader and epoch -1, which the core ignores for its
    state (a stale-looking answer) and counts as a failed request."""
    key = ApiKey(api_key)
    _check_version(key, version)
    top = ErrorCode(body.error_code) if getattr(body, "error_code", 0) else ErrorCode.NONE
    if key == ApiKey.VOTE:
        p = _single_response_partition(body.topics)
        if top or p is None:
            return VoteResponse(top or ErrorCode.INVALID_REQUEST, -1, -1, False)
        return VoteResponse(ErrorCode(p.error_code), p.leader_id, p.leader_epoch,
                            bool(p.vote_granted))
    if key in (ApiKey.BEGIN_QUORUM_EPOCH, ApiKey.END_QUORUM_EPOCH):
        cls = (BeginQuorumEpochResponse if key == ApiKey.BEGIN_QUORUM_EPOCH
               else EndQuorumEpochResponse)
        p = _single_response_partition(body.topics)
        if top or p is None:
            return cls(top or ErrorCode.INVALID_REQUEST, -1, -1)
        return cls(ErrorCode(p.error_code), p.leader_id, p.leader_epoch)
    if key == ApiKey.FETCH:
        p = _single_response_partition(body.responses)
        if top or p is None:
            return FetchResponse(top or ErrorCode.INVALID_REQUEST, -1, -1, (), _FETCH_NO_LEADER)
        cl = p.current_leader
        de = p.diverging_epoch
        sid = p.snapshot_id
        records = p.records
        batches = (tuple(bytes(b) for _h, b in iter_batches(records)) if records else ())
        return FetchResponse(
            ErrorCode(p.error_code), p.high_watermark, p.log_start_offset, batches,
            _FETCH_NO_LEADER if cl is None else LeaderIdAndEpoch(cl.leader_id, cl.leader_epoch),
            diverging_epoch=(None if de is None or (de.epoch, de.end_offset) == (-1, -1)
                             else EpochEndOffset(de.epoch, de.end_offset)),
            snapshot_id=(None if sid is None or (sid.end_offset, sid.epoch) == (-1, -1)
                         else SnapshotId(sid.end_offset, sid.epoch)))
    if key == ApiKey.FETCH_SNAPSHOT:
        p = _single_response_partition(body.topics)
        if top or p is None:
            return FetchSnapshotResponse(top or ErrorCode.INVALID_REQUEST, SnapshotId(-1, -1),
                                         LeaderIdAndEpoch(-1, -1), -1, -1, b"")
        cl = p.current_leader
        return FetchSnapshotResponse(
            ErrorCode(p.error_code), SnapshotId(p.snapshot_id.end_offset, p.snapshot_id.epoch),
            _SNAPSHOT_DEFAULT_LEADER if cl is None
            else LeaderIdAndEpoch(cl.leader_id, cl.leader_epoch),
            p.size, p.position, bytes(p.unaligned_records or b""))
    raise ValueError(f"{key.message_name} is not a Raft RPC")


__all__ = [
    "API_KEY_OF", "METADATA_PARTITION", "METADATA_TOPIC", "METADATA_TOPIC_ID", "NO_DIRECTORY_ID",
    "RejectedRequest", "SUPPORTED", "VERSIONS", "decode_request", "decode_response",
    "encode_request", "encode_response", "has_invalid_fields", "request_source",
    "top_level_error",
]
