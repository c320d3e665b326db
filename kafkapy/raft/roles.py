"""The per-role state of a Raft replica (Kafka's ``UnattachedState``, ``ProspectiveState``,
``CandidateState``, ``LeaderState``, ``FollowerState``, ``ResignedState``).

Only data and timers live here; ``core.RaftReplica`` owns the transitions. The epoch, the vote
and the known leader are replica-wide (they are what ``quorum-state`` persists).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from kafkapy.raft.messages import FetchRequest, SnapshotId


class Role(enum.Enum):
    UNATTACHED = "unattached"
    PROSPECTIVE = "prospective"
    CANDIDATE = "candidate"
    LEADER = "leader"
    FOLLOWER = "follower"
    RESIGNED = "resigned"


@dataclass(slots=True)
class Unattached:
    """No leader known (or, after a failed pre-vote, one we stopped following). A voter starts
    a pre-vote at ``election_deadline``; an observer asks a random voter who leads once
    ``backoff_until`` has passed."""

    election_deadline: int | None
    backoff_until: int = 0
    role: Role = Role.UNATTACHED


@dataclass(slots=True)
class Prospective:
    """Pre-vote (KIP-996): would a majority vote for us? The epoch is not bumped yet."""

    election_deadline: int
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)
    role: Role = Role.PROSPECTIVE


@dataclass(slots=True)
class Candidate:
    """A real election in our own (persisted) epoch. After losing, waits ``backoff_until``."""

    election_deadline: int
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)
    backoff_until: int | None = None
    role: Role = Role.CANDIDATE


@dataclass(slots=True)
class ReplicaProgress:
    """What the leader knows of one replica: its flushed end offset, last valid fetch."""

    end_offset: int = -1
    last_fetch_ms: int | None = None
    last_sent_hw: int = -1
    next_begin_ms: int = 0


@dataclass(slots=True)
class ParkedFetch:
    """A Fetch with nothing to return yet, answered on new data, a new HW, or ``deadline``."""

    correlation_id: int
    request: FetchRequest
    deadline: int


@dataclass(slots=True)
class Leader:
    epoch_start_offset: int
    granting_voters: frozenset[int]
    check_quorum_deadline: int
    replicas: dict[int, ReplicaProgress] = field(default_factory=dict)
    fetched_voters: set[int] = field(default_factory=set)
    parked: dict[int, ParkedFetch] = field(default_factory=dict)
    role: Role = Role.LEADER


@dataclass(slots=True)
class SnapshotFetch:
    snapshot_id: SnapshotId
    data: bytearray = field(default_factory=bytearray)


@dataclass(slots=True)
class Follower:
    """Pulls from the leader; ``fetch_deadline`` is the leader-liveness (fetch) timeout.

    ``has_fetched``: a fetch succeeded in this epoch, so pre-votes are refused (the leader is
    alive). ``leader_resigned``: EndQuorumEpoch arrived; stop fetching and wait for the
    deadline (set from our rank among the preferred successors) to start a pre-vote.
    """

    fetch_deadline: int
    has_fetched: bool = False
    leader_resigned: bool = False
    backoff_until: int = 0
    snapshot_fetch: SnapshotFetch | None = None
    role: Role = Role.FOLLOWER


@dataclass(slots=True)
class Resigned:
    """A leader that gave up (shutdown or lost check-quorum): tells voters with EndQuorumEpoch
    until they acknowledge, serves nothing, and becomes prospective at ``election_deadline``."""

    election_deadline: int
    preferred_successors: tuple[int, ...]
    unacked: set[int] = field(default_factory=set)
    role: Role = Role.RESIGNED


RoleState = Unattached | Prospective | Candidate | Leader | Follower | Resigned

__all__ = [
    "Candidate", "Follower", "Leader", "ParkedFetch", "Prospective", "ReplicaProgress",
    "Resigned", "Role", "RoleState", "SnapshotFetch", "Unattached",
]
