"""The voter set of ``RaftReplica`` and changes to it (KIP-853). A mixin beside ``election`` and
``replication``.

The voters in force are the configured ones (kraft.version 0, ``controller.quorum.voters``) or
those of the latest VotersRecord in the log or snapshot, committed or not (kraft.version 1).
The leader changes them on AddRaftVoter, RemoveRaftVoter and UpdateRaftVoter, as Kafka's
AddVoterHandler, RemoveVoterHandler and UpdateVoterHandler do.

A change is a VotersRecord appended in the leader's epoch; it is in force as soon as it is in
the log and done once it commits. One change at a time, and only once the leader has committed
in its own epoch (Raft's single-server change rule, with the fix that a new leader first
commits an entry of its term).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from kafkapy.protocol.errors import ErrorCode
from kafkapy.raft.membership import VoterHistory
from kafkapy.raft.messages import SnapshotId
from kafkapy.raft.raft_log import RaftLog
from kafkapy.raft.roles import Leader, ReplicaProgress, RoleState
from kafkapy.raft.voters import Voter, VoterSet, build_voters_batch


class VoterChangesMixin:
    """Which voters are in force, and the leader's side of adding, removing and updating them;
    mixed into ``core.RaftReplica``."""

    # Owned by RaftReplica.
    node_id: int
    fetch_timeout_ms: int
    log: RaftLog
    _static_voters: frozenset[int] | None
    _history: VoterHistory
    _epoch: int
    _leader_id: int
    _hw: int
    _now: int
    _state: RoleState
    _flush_leader: Callable[[int], None]
    _drive: Callable[[int], None]

    if TYPE_CHECKING:  # read-only properties of RaftReplica
        @property
        def is_leader(self) -> bool: ...

        @property
        def leader_epoch_start_offset(self) -> int: ...

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.voters

    @property
    def can_stand(self) -> bool:
        """May this replica run for leader? Voters may; so may a replica whose removal is the
        latest, still uncommitted change in its log: the voters left may lack that record and
        need its log to elect anyone (it counts their votes, not its own, and resigns once the
        removal commits)."""
        if self.is_voter:
            return True
        if self._static_voters is not None:
            return False
        latest = self._history.latest_offset
        return (latest >= self._hw
                and self.node_id in self._history.at(latest)[0].ids)

    @property
    def voters(self) -> frozenset[int]:
        """The voter ids in force: the configured ones, or those of the latest VotersRecord in
        the log, committed or not (KIP-853)."""
        if self._static_voters is not None:
            return self._static_voters
        return self._history.latest.ids

    @property
    def is_dynamic(self) -> bool:
        """Are the voters data in the log (kraft.version 1) rather than configuration?"""
        return self._static_voters is None

    @property
    def voter_set(self) -> VoterSet:
        """The voters in force with their directory ids and endpoints (static voters: ids only)."""
        if self._static_voters is not None:
            return VoterSet.of(Voter(v) for v in self._static_voters)
        return self._history.latest

    @property
    def kraft_version(self) -> int:
        return 0 if self._static_voters is not None else self._history.kraft_version

    def _on_snapshot(self, snapshot_id: SnapshotId, compacted: bool) -> None:
        if compacted:
            self._history.compact(snapshot_id.end_offset)
        else:
            self._history.load_snapshot(self.log.snapshots.read(snapshot_id))

    def _change_refused(self, now_ms: int) -> tuple[ErrorCode, str, int] | None:
        """Why the leader cannot start a voter change now (None: it can). One change at a time,
        and only once this leader has committed in its own epoch (Raft's single-server change
        rule, with the fix that a new leader first commits an entry of its term)."""
        self._now = now_ms
        self._flush_leader(now_ms)
        if not self.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, (f"node {self.node_id} is not the leader "
                                                      f"(leader {self._leader_id})"), -1
        if self._static_voters is not None:
            return ErrorCode.UNSUPPORTED_VERSION, ("the voters are static (controller.quorum."
                                                   "voters, kraft.version 0)"), -1
        if self._hw <= self.leader_epoch_start_offset:
            return ErrorCode.REQUEST_TIMED_OUT, "the leader has not committed in its epoch yet", -1
        if self._history.latest_offset >= self._hw:
            return ErrorCode.REQUEST_TIMED_OUT, "another voter change is not committed yet", -1
        return None

    def add_voter(self, voter: Voter, now_ms: int) -> tuple[ErrorCode, str, int]:
        """Leader: add ``voter`` (an observer that has caught up) to the voter set. Returns
        (error, message, offset of the VotersRecord); the change is done once that commits."""
        refused = self._change_refused(now_ms)
        if refused is not None:
            return refused
        current = self._history.latest
        if voter.voter_id in current.ids:
            return ErrorCode.DUPLICATE_VOTER, f"node {voter.voter_id} is already a voter", -1
        st = self._state
        assert isinstance(st, Leader)
        prog = st.replicas.get(voter.voter_id)
        if (prog is None or prog.last_fetch_ms is None
                or now_ms - prog.last_fetch_ms > self.fetch_timeout_ms
                or prog.end_offset < self._hw):
            return (ErrorCode.REQUEST_TIMED_OUT,
                    f"node {voter.voter_id} is not a caught-up observer of this leader", -1)
        return self._append_voters(current.with_voter(voter), now_ms)

    def remove_voter(self, voter_id: int, directory_id: uuid.UUID | None,
                     now_ms: int) -> tuple[ErrorCode, str, int]:
        """Leader: remove ``voter_id`` (this leader too: it resigns once the change commits)."""
        refused = self._change_refused(now_ms)
        if refused is not None:
            return refused
        current = self._history.latest
        found = current.get(voter_id)
        if found is None or (directory_id is not None and directory_id.int
                             and found.directory_id.int and directory_id != found.directory_id):
            return ErrorCode.VOTER_NOT_FOUND, f"node {voter_id} is not a voter", -1
        if len(current.voters) == 1:
            return ErrorCode.INVALID_REQUEST, "the last voter cannot be removed", -1
        return self._append_voters(current.without(voter_id), now_ms)

    def update_voter(self, voter: Voter, now_ms: int) -> tuple[ErrorCode, str, int]:
        """Leader: a voter's new endpoints / supported kraft.versions (UpdateRaftVoter). Same
        id and directory id; nothing to append when nothing changed (offset -1)."""
        refused = self._change_refused(now_ms)
        if refused is not None:
            return refused
        current = self._history.latest
        found = current.get(voter.voter_id)
        if found is None or (voter.directory_id.int and found.directory_id.int
                             and voter.directory_id != found.directory_id):
            return ErrorCode.VOTER_NOT_FOUND, f"node {voter.voter_id} is not a voter", -1
        if found == voter:
            return ErrorCode.NONE, "", -1
        return self._append_voters(current.with_voter(voter), now_ms)

    def _append_voters(self, voters: VoterSet, now_ms: int) -> tuple[ErrorCode, str, int]:
        base = self.log.end_offset
        self.log.append(build_voters_batch(base_offset=base, epoch=self._epoch, voters=voters,
                                           now_ms=now_ms))
        st = self._state
        if isinstance(st, Leader):
            for v in voters.ids:
                st.replicas.setdefault(v, ReplicaProgress(next_begin_ms=now_ms))
        self._drive(now_ms)
        return ErrorCode.NONE, "", base
