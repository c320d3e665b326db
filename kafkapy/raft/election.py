"""Elections for ``RaftReplica``: answering Vote (and pre-vote), BeginQuorumEpoch and
EndQuorumEpoch, and counting vote responses. A mixin beside ``replication``; the role
transitions these call (``_become_*``) are in ``transitions``.

Voting rules (KIP-595, KIP-996): a vote is granted to a voter whose log is at least as
up-to-date as ours — last epoch first, then end offset — and at most once per epoch; the vote is
in quorum-state before the response is queued. A pre-vote changes nothing locally: it is granted
on the log alone, except that a follower still hearing from its leader refuses it, and a leader
or resigned leader refuses everything in its own epoch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kafkapy.protocol.errors import ErrorCode
from kafkapy.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    RaftRequest,
    VoteRequest,
    VoteResponse,
)
from kafkapy.raft.raft_log import RaftLog
from kafkapy.raft.roles import (
    Candidate,
    Follower,
    Leader,
    Prospective,
    Resigned,
    RoleState,
    Unattached,
)


class ElectionMixin:
    """Vote/BeginQuorumEpoch/EndQuorumEpoch on both sides; mixed into ``core.RaftReplica``."""

    # Owned by RaftReplica.
    node_id: int
    _static_voters: frozenset[int] | None
    cluster_id: str
    log: RaftLog
    retry_backoff_ms: int
    election_backoff_max_ms: int
    _epoch: int
    _leader_id: int
    _voted_id: int
    _state: RoleState
    _inflight: dict[int, Any]
    _send: Callable[[int, RaftRequest, int], None]
    _persist: Callable[[], None]
    _random_election_deadline: Callable[[int], int]
    _become_unattached: Callable[..., None]
    _become_follower: Callable[[int, int, int], None]
    _transition_on_leader_info: Callable[[int, int, int], bool]

    if TYPE_CHECKING:  # RaftReplica's read-only properties; declared for the type checker only
        @property
        def voters(self) -> frozenset[int]: ...

        @property
        def is_voter(self) -> bool: ...

    def _solicit_votes(self, answered: set[int], pre_vote: bool, now_ms: int) -> None:
        for v in sorted(self.voters):
            if v != self.node_id and v not in answered and v not in self._inflight:
                self._send(v, VoteRequest(
                    self.cluster_id, v, self._epoch, self.node_id,
                    self.log.last_fetched_epoch, self.log.end_offset, pre_vote), now_ms)

    def _on_vote(self, req: VoteRequest, now_ms: int) -> VoteResponse:
        def reply(code: ErrorCode, granted: bool) -> VoteResponse:
            return VoteResponse(code, self._leader_id, self._epoch, granted)

        if self._static_voters is not None and (not self.is_voter
                                                or req.replica_id not in self.voters):
            # A dynamic quorum (KIP-853) judges a candidate by its log alone: a new voter may
            # know of its own addition before this replica has the record.
            return reply(ErrorCode.INCONSISTENT_VOTER_SET, False)
        if req.replica_epoch < self._epoch:
            return reply(ErrorCode.FENCED_LEADER_EPOCH, False)
        if req.replica_epoch > self._epoch and not req.pre_vote:
            # The epoch moves on but the election timer does not restart (Raft's rule: only a
            # granted vote or a live leader resets it). A voter whose log is behind can then not
            # hold the others back forever by standing again and again — without pre-vote on
            # Kafka 3.9's wire that livelocked a loaded 3-node quorum; a granted vote below
            # still draws a fresh timeout.
            self._become_unattached(req.replica_epoch, now_ms,
                                    deadline=self._pending_election_deadline(now_ms))
        up_to_date = ((req.last_offset_epoch, req.last_offset)
                      >= (self.log.last_fetched_epoch, self.log.end_offset))
        if req.replica_epoch > self._epoch:  # a pre-vote from a later epoch: only the log counts
            return reply(ErrorCode.NONE, up_to_date)
        granted = self._can_grant(req.replica_id, req.pre_vote, up_to_date, now_ms)
        if granted and not req.pre_vote and self._voted_id != req.replica_id:
            self._voted_id = req.replica_id
            self._persist()  # the vote is durable before the response is queued
            if isinstance(self._state, Unattached):
                self._state.election_deadline = self._random_election_deadline(now_ms)
        return reply(ErrorCode.NONE, granted)

    def _pending_election_deadline(self, now_ms: int) -> int:
        """When this voter would stand for election on its own, as things are now (the next
        timer of its role), or a fresh random timeout when it has none (a leader)."""
        st = self._state
        if isinstance(st, Follower):
            return st.fetch_deadline
        if isinstance(st, Candidate):
            return st.backoff_until if st.backoff_until is not None else st.election_deadline
        if isinstance(st, (Unattached, Prospective, Resigned)) and st.election_deadline is not None:
            return st.election_deadline
        return self._random_election_deadline(now_ms)

    def _can_grant(self, candidate: int, pre_vote: bool, up_to_date: bool, now_ms: int) -> bool:
        st = self._state
        if isinstance(st, (Leader, Resigned)):
            return False
        if isinstance(st, Follower):
            # A follower still hearing from its leader refuses to help depose it.
            return pre_vote and (not st.has_fetched or st.leader_resigned) and up_to_date
        if pre_vote:
            return up_to_date
        if self._voted_id >= 0:
            return self._voted_id == candidate
        if self._leader_id >= 0:
            return False  # this epoch already has a leader
        return up_to_date

    def _on_begin_epoch(self, req: BeginQuorumEpochRequest,
                        now_ms: int) -> BeginQuorumEpochResponse:
        if self._static_voters is not None and (not self.is_voter
                                                or req.leader_id not in self.voters):
            code = ErrorCode.INCONSISTENT_VOTER_SET
        elif req.leader_epoch < self._epoch:
            code = ErrorCode.FENCED_LEADER_EPOCH
        else:
            code = ErrorCode.NONE
            if not (isinstance(self._state, Follower) and self._epoch == req.leader_epoch
                    and self._leader_id == req.leader_id):
                self._become_follower(req.leader_epoch, req.leader_id, now_ms)
        return BeginQuorumEpochResponse(code, self._leader_id, self._epoch)

    def _on_end_epoch(self, req: EndQuorumEpochRequest, now_ms: int) -> EndQuorumEpochResponse:
        if self._static_voters is not None and (not self.is_voter
                                                or req.leader_id not in self.voters):
            return EndQuorumEpochResponse(ErrorCode.INCONSISTENT_VOTER_SET, self._leader_id,
                                          self._epoch)
        if req.leader_epoch < self._epoch:
            return EndQuorumEpochResponse(ErrorCode.FENCED_LEADER_EPOCH, self._leader_id,
                                          self._epoch)
        if req.leader_epoch > self._epoch and req.leader_id != self.node_id:
            self._become_follower(req.leader_epoch, req.leader_id, now_ms)
        st = self._state
        if isinstance(st, Follower) and self._leader_id == req.leader_id:
            successors = list(req.preferred_successors)
            # The most caught-up successor runs at once; the others give it a head start.
            if self.node_id not in successors:
                delay = self.election_backoff_max_ms
            else:
                rank = successors.index(self.node_id)
                delay = 0 if rank == 0 else min(self.election_backoff_max_ms,
                                                 self.retry_backoff_ms << min(rank, 20))
            st.leader_resigned = True
            st.fetch_deadline = min(st.fetch_deadline, now_ms + delay)
            self._inflight.pop(req.leader_id, None)
        return EndQuorumEpochResponse(ErrorCode.NONE, self._leader_id, self._epoch)

    def _on_vote_response(self, source: int, resp: VoteResponse, now_ms: int) -> None:
        if self._transition_on_leader_info(resp.leader_id, resp.leader_epoch, now_ms):
            return
        st = self._state
        if isinstance(st, Prospective):
            pass  # a granted pre-vote from a voter still in an older epoch counts too
        elif isinstance(st, Candidate):
            if resp.leader_epoch != self._epoch or st.backoff_until is not None:
                return
        else:
            return
        if resp.error_code == ErrorCode.NONE and resp.vote_granted:
            st.granted.add(source)
        else:
            st.rejected.add(source)
