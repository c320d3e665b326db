"""The KRaft RPCs the Raft core speaks, as frozen dataclasses.

Field names are Kafka's (``VoteRequest.json``, ``FetchRequest.json``, ...) in snake_case, for the
single ``__cluster_metadata-0`` partition, so the wire adapter maps each one 1:1 onto the
partition-level fields of Kafka's schemas (the topic/partition nesting is the adapter's job).
A request and its response are separate types. ``-1`` means "none" where Kafka uses it (leader
ids, epochs, high watermarks); optional structs Kafka sends with default values
(``diverging_epoch``, ``snapshot_id``) are ``None`` here.

Envelopes: the core emits ``Outbound(destination_id, message, correlation_id)``; a response
carries the correlation id of the request it answers (Kafka's request header field), which is how
the core matches it to its one outstanding request per destination and drops stale or duplicated
responses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from kafkapy.protocol.errors import ErrorCode

NO_LEADER = -1
NO_EPOCH = -1


@dataclass(frozen=True, slots=True)
class SnapshotId:
    """Kafka's ``SnapshotId``: a snapshot holds every record below ``end_offset``; ``epoch`` is
    the epoch of the last batch it includes."""

    end_offset: int
    epoch: int


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    """Kafka's ``DivergingEpoch``: the leader's log ends epoch ``epoch`` at ``end_offset``."""

    epoch: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class LeaderIdAndEpoch:
    """Kafka's ``CurrentLeader``: who the responder believes leads, and in which epoch."""

    leader_id: int
    leader_epoch: int


# -- Vote (v2: pre_vote, KIP-996) -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VoteRequest:
    """Ask ``voter_id`` for its vote (or, with ``pre_vote``, whether it would vote).

    A pre-vote carries the sender's current epoch; a real vote the epoch it is a candidate for.
    ``last_offset_epoch``/``last_offset``: the sender's last log epoch and end offset.
    """

    cluster_id: str
    voter_id: int
    replica_epoch: int
    replica_id: int
    last_offset_epoch: int
    last_offset: int
    pre_vote: bool = False


@dataclass(frozen=True, slots=True)
class VoteResponse:
    error_code: ErrorCode
    leader_id: int
    leader_epoch: int
    vote_granted: bool


# -- BeginQuorumEpoch / EndQuorumEpoch ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    """The new leader of ``leader_epoch`` announces itself to voter ``voter_id``."""

    cluster_id: str
    voter_id: int
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    error_code: ErrorCode
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    """The leader of ``leader_epoch`` resigns; ``preferred_successors`` are the voters it would
    like to see elected, most up-to-date first."""

    cluster_id: str
    leader_id: int
    leader_epoch: int
    preferred_successors: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    error_code: ErrorCode
    leader_id: int
    leader_epoch: int


# -- Fetch (KRaft use) ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """A follower or observer pulls from ``fetch_offset``; ``last_fetched_epoch`` is the epoch of
    the batch just below it, which the leader checks against its own log (divergence)."""

    cluster_id: str
    replica_id: int
    max_wait_ms: int
    max_bytes: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    log_start_offset: int
    partition_max_bytes: int


@dataclass(frozen=True, slots=True)
class FetchResponse:
    """``records``: whole batches starting at the fetch offset. At most one of ``records``,
    ``diverging_epoch`` (truncate, then fetch again) and ``snapshot_id`` (fetch that snapshot)
    is meaningful."""

    error_code: ErrorCode
    high_watermark: int
    log_start_offset: int
    records: tuple[bytes, ...]
    current_leader: LeaderIdAndEpoch
    diverging_epoch: EpochEndOffset | None = None
    snapshot_id: SnapshotId | None = None


# -- FetchSnapshot ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    """Read ``max_bytes`` of snapshot ``snapshot_id`` from byte ``position``."""

    cluster_id: str
    replica_id: int
    max_bytes: int
    current_leader_epoch: int
    snapshot_id: SnapshotId
    position: int


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    error_code: ErrorCode
    snapshot_id: SnapshotId
    current_leader: LeaderIdAndEpoch
    size: int
    position: int
    unaligned_records: bytes


RaftRequest = Union[VoteRequest, BeginQuorumEpochRequest, EndQuorumEpochRequest, FetchRequest,
                    FetchSnapshotRequest]
RaftResponse = Union[VoteResponse, BeginQuorumEpochResponse, EndQuorumEpochResponse,
                     FetchResponse, FetchSnapshotResponse]
RaftMessage = Union[RaftRequest, RaftResponse]

#: Which response type answers which request type.
RESPONSE_FOR: dict[type, type] = {
    VoteRequest: VoteResponse,
    BeginQuorumEpochRequest: BeginQuorumEpochResponse,
    EndQuorumEpochRequest: EndQuorumEpochResponse,
    FetchRequest: FetchResponse,
    FetchSnapshotRequest: FetchSnapshotResponse,
}


@dataclass(frozen=True, slots=True)
class Outbound:
    """A message the core wants sent to ``destination_id``. For a request, ``correlation_id`` is
    fresh and the response must echo it; for a response, it is the request's."""

    destination_id: int
    message: RaftMessage
    correlation_id: int


def is_request(message: RaftMessage) -> bool:
    return type(message) in RESPONSE_FOR


__all__ = [
    "BeginQuorumEpochRequest", "BeginQuorumEpochResponse", "EndQuorumEpochRequest",
    "EndQuorumEpochResponse", "EpochEndOffset", "FetchRequest", "FetchResponse",
    "FetchSnapshotRequest", "FetchSnapshotResponse", "LeaderIdAndEpoch", "NO_EPOCH", "NO_LEADER",
    "Outbound", "RESPONSE_FOR", "RaftMessage", "RaftRequest", "RaftResponse", "SnapshotId",
    "VoteRequest", "VoteResponse", "is_request",
]
