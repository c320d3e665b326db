"""Role transitions for ``RaftReplica`` and the quorum-state they persist (the part of KIP-595
that Kafka's QuorumState owns). A mixin beside ``election`` and ``replication``; ``core``
decides *when* to transition (its timers and the RPC handlers), this module *how*.

Every transition leaves the old role first (parked fetches answered, in-flight requests
dropped), then writes quorum-state before any message that depends on it is queued. Election
timers draw from the replica's seeded ``random.Random``, so a simulation replays exactly.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kafkapy.raft.control import build_leader_change_batch
from kafkapy.raft.membership import VoterHistory
from kafkapy.raft.messages import NO_LEADER
from kafkapy.raft.quorum_state import QuorumState, QuorumStateStore
from kafkapy.raft.raft_log import RaftInvariantError, RaftLog
from kafkapy.raft.roles import (
    Candidate,
    Follower,
    Leader,
    Prospective,
    ReplicaProgress,
    Resigned,
    RoleState,
    Unattached,
)
from kafkapy.raft.voters import build_voters_batch

# Kafka: a leader resigns if a majority has not fetched within 1.5 x quorum.fetch.timeout.ms.
CHECK_QUORUM_TIMEOUT_FACTOR = 1.5


class TransitionsMixin:
    """Becoming unattached, follower, prospective, candidate, leader or resigned; mixed into
    ``core.RaftReplica``."""

    # Owned by RaftReplica.
    node_id: int
    cluster_id: str
    log: RaftLog
    election_timeout_ms: int
    fetch_timeout_ms: int
    election_backoff_max_ms: int
    retry_backoff_ms: int
    _static_voters: frozenset[int] | None
    _history: VoterHistory
    _state_store: QuorumStateStore
    _persisted: QuorumState | None
    _rng: random.Random
    _election_retries: int
    _epoch: int
    _voted_id: int
    _leader_id: int
    _state: RoleState
    _inflight: dict[int, Any]  # core._Inflight entries; this mixin only clears them
    _orphaned_fetches: list[tuple[int, int]]
    _flush_leader: Callable[[int], None]

    if TYPE_CHECKING:  # read-only properties of RaftReplica
        @property
        def voters(self) -> frozenset[int]: ...

        @property
        def can_stand(self) -> bool: ...

    def _persist(self) -> None:
        if self._static_voters is None:
            new = QuorumState(leader_id=self._leader_id, leader_epoch=self._epoch,
                              voted_id=self._voted_id, data_version=1)
        else:
            new = QuorumState(leader_id=self._leader_id, leader_epoch=self._epoch,
                              voted_id=self._voted_id, cluster_id=self.cluster_id,
                              current_voters=tuple(sorted(self.voters)), data_version=0)
        if self._persisted != new:
            self._state_store.write(new)
            self._persisted = new

    def _random_election_deadline(self, now_ms: int) -> int:
        return now_ms + self.election_timeout_ms + self._rng.randrange(
            max(1, self.election_timeout_ms))

    def _election_backoff(self) -> int:
        """Binary exponential backoff after a lost election, capped, with full jitter."""
        bound = min(self.election_backoff_max_ms,
                    self.retry_backoff_ms << min(self._election_retries, 20))
        return 1 + self._rng.randrange(max(1, bound))

    def _leave_state(self, now_ms: int) -> None:
        """Tidy up the role we are leaving: answer parked fetches, drop in-flight requests
        (their responses will be ignored as stale)."""
        st = self._state
        self._inflight.clear()
        if isinstance(st, Leader):
            # Answered at the end of this call, once the new epoch and leader are known.
            self._orphaned_fetches.extend((r, p.correlation_id) for r, p in st.parked.items())
            st.parked = {}

    def _become_unattached(self, epoch: int, now_ms: int, *, deadline: int | None = None,
                           leader_id: int = NO_LEADER) -> None:
        self._leave_state(now_ms)
        if epoch != self._epoch:
            self._voted_id = -1
        elif self._leader_id == self.node_id:
            # We led this epoch: keep saying so in quorum-state, or a restart could make us
            # a candidate — and leader — of the same epoch again, with a different log.
            leader_id = self.node_id
        self._epoch, self._leader_id = epoch, leader_id
        self._persist()
        if self.can_stand:
            self._state = Unattached(deadline if deadline is not None
                                     else self._random_election_deadline(now_ms))
        else:
            self._state = Unattached(None)

    def _become_follower(self, epoch: int, leader_id: int, now_ms: int) -> None:
        if leader_id == self.node_id:
            raise RaftInvariantError(f"told that we lead epoch {epoch}")
        if epoch == self._epoch and isinstance(self._state, (Leader, Resigned)):
            raise RaftInvariantError(f"node {leader_id} claims epoch {epoch}, which we lead")
        self._leave_state(now_ms)
        if epoch != self._epoch:
            self._voted_id = -1
        self._epoch, self._leader_id = epoch, leader_id
        self._persist()
        self._election_retries = 0
        self._state = Follower(now_ms + self.fetch_timeout_ms)

    def _transition_on_leader_info(self, leader_id: int, epoch: int, now_ms: int) -> bool:
        """Kafka's ``maybeHandleCommonResponse``: adopt a higher epoch, or learn the leader of
        ours if we did not know it. True if we transitioned."""
        if epoch > self._epoch:
            if leader_id >= 0 and leader_id != self.node_id:
                self._become_follower(epoch, leader_id, now_ms)
            else:
                self._become_unattached(epoch, now_ms)
            return True
        if (epoch == self._epoch and leader_id >= 0 and leader_id != self.node_id
                and self._leader_id == NO_LEADER):
            self._become_follower(epoch, leader_id, now_ms)
            return True
        return False

    def _become_prospective(self, now_ms: int) -> None:
        self._leave_state(now_ms)
        # Vote requests advertise our end offset: it must survive a crash, or a restarted
        # candidate could collect re-granted votes with less than it claimed.
        self.log.flush()
        self._state = Prospective(self._random_election_deadline(now_ms), {self.node_id})

    def _become_candidate(self, now_ms: int) -> None:
        self._leave_state(now_ms)
        self._epoch += 1
        self._voted_id = self.node_id
        self._leader_id = NO_LEADER
        self._persist()  # before any Vote request goes out
        self.log.flush()
        self._state = Candidate(self._random_election_deadline(now_ms), {self.node_id})

    def _become_leader(self, now_ms: int) -> None:
        st = self._state
        assert isinstance(st, Candidate)
        granted = frozenset(st.granted)
        self._leave_state(now_ms)
        self._leader_id = self.node_id
        self._persist()
        self._election_retries = 0
        start = self.log.end_offset
        self.log.append(build_leader_change_batch(
            base_offset=start, epoch=self._epoch, leader_id=self.node_id, voters=self.voters,
            granting_voters=granted, now_ms=now_ms))
        if self._static_voters is None and not self._history.in_log:
            # The first leader of a dynamic quorum copies the bootstrap voter set into the log,
            # so replicas that start from an empty log (new controllers, brokers) learn it.
            self.log.append(build_voters_batch(
                base_offset=self.log.end_offset, epoch=self._epoch, voters=self._history.latest,
                now_ms=now_ms, kraft_version=self._history.kraft_version or 1))
        leader = Leader(epoch_start_offset=start, granting_voters=granted,
                        check_quorum_deadline=now_ms + self._check_quorum_timeout())
        for v in self.voters:
            leader.replicas[v] = ReplicaProgress(next_begin_ms=now_ms)
        self._state = leader
        self._flush_leader(now_ms)

    def _check_quorum_timeout(self) -> int:
        return int(self.fetch_timeout_ms * CHECK_QUORUM_TIMEOUT_FACTOR)

    def _resign(self, now_ms: int) -> None:
        st = self._state
        assert isinstance(st, Leader)
        others = [v for v in self.voters if v != self.node_id]
        successors = tuple(sorted(others, key=lambda v: (
            -st.replicas.get(v, ReplicaProgress()).end_offset, v)))
        self._leave_state(now_ms)
        self._state = Resigned(self._random_election_deadline(now_ms), successors, set(others))

    def _lose_election(self, now_ms: int) -> None:
        st = self._state
        self._election_retries += 1
        if isinstance(st, Prospective):
            if self._leader_id >= 0 and self._leader_id != self.node_id:
                # Kafka 4.0: a prospective that still knows its leader goes back to it.
                self._become_follower(self._epoch, self._leader_id, now_ms)
            else:
                self._become_unattached(self._epoch, now_ms,
                                        deadline=now_ms + self._election_backoff())
        elif isinstance(st, Candidate):
            self._inflight.clear()
            st.backoff_until = now_ms + self._election_backoff()
