"""``RaftReplica``: the KRaft consensus core (KIP-595, pre-vote KIP-996) as a sans-I/O state machine.

This module owns elections and role transitions; ``replication`` (a mixin) serves and
follows Fetch/FetchSnapshot and moves the high watermark; ``roles`` holds per-role data,
``raft_log`` the log with its epoch cache and snapshots, ``messages`` the RPCs. Everything the outside world provides comes
in as an argument: messages (``handle``), time (``now_ms`` on every call), the stores, and a
``random.Random`` for election jitter. Everything it produces comes out on request: messages
(``poll_outbound``), the next time it needs a ``tick`` (``next_deadline_ms``) and committed
entries (``take_committed``). ``quorum-state`` is written synchronously before any message that
depends on it is queued.

Durability (where Kafka flushes): a leader appends without flushing; the flush happens at the
start of the next ``tick``/``handle`` (Kafka drains its accumulator and flushes in one poll), and
only the flushed end offset counts toward the high watermark. A follower flushes what it fetched
before sending the next Fetch, whose ``fetch_offset`` is what the leader counts.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence
from typing import NamedTuple

from kafkapy.protocol.errors import ErrorCode
from kafkapy.raft.control import build_leader_change_batch
from kafkapy.raft.local import NotLeaderError
from kafkapy.raft.messages import (
    NO_LEADER,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    LeaderIdAndEpoch,
    Outbound,
    RaftMessage,
    RaftRequest,
    RESPONSE_FOR,
    SnapshotId,
    VoteRequest,
    VoteResponse,
)
from kafkapy.raft.election import ElectionMixin
from kafkapy.raft.events import CommitEvent, CommittedBatch, SnapshotLoad
from kafkapy.raft.replication import ReplicationMixin
from kafkapy.raft.quorum_state import QuorumState, QuorumStateStore
from kafkapy.raft.raft_log import RaftInvariantError, RaftLog, batch_epoch
from kafkapy.raft.roles import (
    Candidate,
    Follower,
    Leader,
    Prospective,
    ReplicaProgress,
    Resigned,
    Role,
    RoleState,
    Unattached,
)
from kafkapy.raft.membership import VoterHistory
from kafkapy.raft.snapshot_store import SnapshotStore
from kafkapy.raft.store import RaftLogStore
from kafkapy.raft.voters import Voter, VoterSet, build_voters_batch, snapshot_with_voters
from kafkapy.records.builder import Record, build_batch

# Kafka: a leader resigns if a majority has not fetched within 1.5 x quorum.fetch.timeout.ms.
CHECK_QUORUM_TIMEOUT_FACTOR = 1.5


class _Inflight(NamedTuple):
    correlation_id: int
    request_type: type
    sent_ms: int


class RaftReplica(ElectionMixin, ReplicationMixin):
    """One member of the metadata quorum: a voter if ``node_id`` is in ``voters``, else an
    observer that only fetches (a broker). See the module docstring for the I/O contract.

    Config names follow Kafka's ``controller.quorum.*`` settings: ``election_timeout_ms``,
    ``fetch_timeout_ms``, ``election_backoff_max_ms``, ``request_timeout_ms``,
    ``retry_backoff_ms``; ``fetch_max_wait_ms`` is how long the leader parks an empty Fetch.
    """

    def __init__(
        self,
        node_id: int,
        voters: frozenset[int] | None,
        log_store: RaftLogStore,
        state_store: QuorumStateStore,
        snapshot_store: SnapshotStore,
        rng: random.Random,
        *,
        cluster_id: str = "",
        election_timeout_ms: int = 1000,
        fetch_timeout_ms: int = 2000,
        election_backoff_max_ms: int = 1000,
        request_timeout_ms: int = 2000,
        retry_backoff_ms: int = 20,
        fetch_max_wait_ms: int = 500,
        fetch_max_bytes: int = 8 * 1024 * 1024,
        bootstrap_ids: Sequence[int] = (),
    ) -> None:
        if voters is not None and not voters:
            raise ValueError("the voter set is empty")
        self.node_id = node_id
        # kraft.version 0: the voters are configuration (controller.quorum.voters). None: they
        # are data in the log and snapshots (KIP-853), followed by ``_history``.
        self._static_voters = frozenset(voters) if voters is not None else None
        # Who an observer asks for the leader when it knows no voter (controller.quorum.
        # bootstrap.servers): ids the I/O edge maps to addresses.
        self.bootstrap_ids = tuple(bootstrap_ids)
        self.cluster_id = cluster_id
        self.log = RaftLog(log_store, snapshot_store)
        self._history = VoterHistory()
        if self._static_voters is None:
            self.log.on_batch = self._history.observe
            self.log.on_truncate = self._history.truncate
            self.log.on_snapshot = self._on_snapshot
        self._state_store = state_store
        self._rng = rng
        self.election_timeout_ms = election_timeout_ms
        self.fetch_timeout_ms = fetch_timeout_ms
        self.election_backoff_max_ms = election_backoff_max_ms
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.fetch_max_bytes = fetch_max_bytes

        self._epoch = 0
        self._voted_id = -1
        self._leader_id = NO_LEADER
        self._state: RoleState = Unattached(election_deadline=None)
        self._hw = 0
        self._leader_hw = -1
        self._delivered = 0
        self._events: list[CommitEvent] = []
        self._outbound: list[Outbound] = []
        self._inflight: dict[int, _Inflight] = {}
        self._next_correlation = rng.getrandbits(30)
        self._election_retries = 0
        self._now = 0
        self._started = False
        self._orphaned_fetches: list[tuple[int, int]] = []
        self._persisted: QuorumState | None = None

    # -- read-only view ------------------------------------------------------------------------

    @property
    def epoch(self) -> int:
        return self._epoch

    @property
    def leader_id(self) -> int:
        return self._leader_id

    @property
    def voted_id(self) -> int:
        return self._voted_id

    @property
    def role(self) -> Role:
        return self._state.role

    @property
    def is_leader(self) -> bool:
        return self._state.role is Role.LEADER

    @property
    def leader_epoch_start_offset(self) -> int:
        """Where this leader's epoch starts in the log (its LeaderChange batch); -1 when not
        leading. Entries below it are from earlier epochs."""
        st = self._state
        return st.epoch_start_offset if isinstance(st, Leader) else -1

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

    @property
    def high_watermark(self) -> int:
        """One past the last committed offset known here (monotonic within a run)."""
        return self._hw

    @property
    def leader_high_watermark(self) -> int:
        """The highest high watermark a leader has reported to this follower or observer (not
        capped by our own log end, unlike :attr:`high_watermark`), or -1 before the first
        answer: how far this replica must get to be caught up."""
        return self._leader_hw

    @property
    def log_end_offset(self) -> int:
        return self.log.end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.start_offset

    @property
    def state(self) -> RoleState:
        return self._state

    def _majority(self, count: int) -> bool:
        return count * 2 > len(self.voters)

    def _won(self, granted: set[int]) -> bool:
        """Do the votes ``granted`` (ours included) make a majority of the voters?"""
        voters = self.voters
        return self._majority(len(granted & voters) if self._static_voters is None
                              else len(granted))

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self, now_ms: int) -> None:
        """Load the log, snapshots and quorum-state; take the role Kafka takes after a restart:
        resigned if we led, candidate if we voted for ourselves, follower if a leader is
        known, else unattached."""
        self._now = now_ms
        self.log.start()
        saved = self._persisted = self._state_store.read()
        epoch = saved.leader_epoch if saved is not None and saved.leader_epoch >= 0 else 0
        voted = saved.voted_id if saved is not None else -1
        leader = saved.leader_id if saved is not None else NO_LEADER
        if self.log.last_fetched_epoch > epoch:
            # The log is ahead of the state file: trust the log, forget the stale vote/leader.
            epoch, voted, leader = self.log.last_fetched_epoch, -1, NO_LEADER
        self._epoch, self._voted_id, self._leader_id = epoch, voted, leader
        self._hw = self._delivered = self.log.start_offset
        if self.log.latest_snapshot is not None and self.log.latest_snapshot.end_offset > 0:
            # (0, 0) is the bootstrap checkpoint of `storage format`: voters, no state.
            data = self.log.snapshots.read(self.log.latest_snapshot)
            if data is None:
                raise RaftInvariantError(f"snapshot {self.log.latest_snapshot} is missing")
            self._events.append(SnapshotLoad(self.log.latest_snapshot, data))
        self._started = True
        if leader == self.node_id and self.can_stand:
            self._state = Resigned(self._random_election_deadline(now_ms), (),
                                   set(self.voters - {self.node_id}))
        elif leader == self.node_id:
            # We led, and have since been removed from the voters: an observer now.
            self._leader_id = NO_LEADER
            self._state = Unattached(None)
        elif voted == self.node_id and self.can_stand and leader == NO_LEADER:
            self._state = Candidate(self._random_election_deadline(now_ms), {self.node_id})
        elif leader >= 0 and leader != self.node_id:
            self._state = Follower(now_ms + self.fetch_timeout_ms)
        else:
            self._leader_id = NO_LEADER
            self._state = Unattached(self._random_election_deadline(now_ms)
                                     if self.can_stand else None)
        self._persist()
        self._drive(now_ms)

    # -- the I/O edge's calls ------------------------------------------------------------------

    def poll_outbound(self) -> list[Outbound]:
        out, self._outbound = self._outbound, []
        return out

    def take_committed(self) -> list[CommitEvent]:
        """Committed entries not yet taken, exactly once and in order; a snapshot install comes
        as a ``SnapshotLoad`` before the batches after it."""
        events, self._events = self._events, []
        while self._delivered < self._hw:
            found = self.log.batch_at(self._delivered)
            if found is None:
                break
            base, nxt, batch = found
            if base != self._delivered:
                raise RaftInvariantError(f"no batch starts at committed offset {self._delivered}")
            if nxt > self._hw:
                break
            events.append(CommittedBatch(base, batch))
            self._delivered = nxt
        return events

    def next_deadline_ms(self) -> int | None:
        """When ``tick`` must next run (None: only a message can change anything)."""
        st = self._state
        if st.role is Role.LEADER and self.log.needs_flush:
            return self._now
        times = [inf.sent_ms + self.request_timeout_ms for inf in self._inflight.values()]
        if isinstance(st, Unattached):
            if st.election_deadline is not None:
                times.append(st.election_deadline)
            elif not self._inflight:
                times.append(st.backoff_until)
        elif isinstance(st, (Prospective, Resigned)):
            times.append(st.election_deadline)
        elif isinstance(st, Candidate):
            times.append(st.backoff_until if st.backoff_until is not None
                         else st.election_deadline)
        elif isinstance(st, Leader):
            times.append(st.check_quorum_deadline)
            times.extend(p.deadline for p in st.parked.values())
            times.extend(p.next_begin_ms for v, p in st.replicas.items()
                         if v in self.voters and v != self.node_id and v not in self._inflight)
        elif isinstance(st, Follower):
            times.append(st.fetch_deadline)
            if not self._inflight and not st.leader_resigned:
                times.append(st.backoff_until)
        return min(times) if times else None

    def tick(self, now_ms: int) -> None:
        """Run timers due at ``now_ms``."""
        self._drive(now_ms)

    def handle(self, source_id: int, message: RaftMessage, now_ms: int,
               correlation_id: int = 0) -> None:
        """Process one inbound request or response from ``source_id``."""
        self._now = now_ms
        self._flush_leader(now_ms)
        kind = type(message)
        if kind in RESPONSE_FOR:
            self._handle_request(source_id, message, now_ms, correlation_id)  # type: ignore[arg-type]
        else:
            inflight = self._inflight.get(source_id)
            if (inflight is None or inflight.correlation_id != correlation_id
                    or RESPONSE_FOR[inflight.request_type] is not kind):
                return  # stale, duplicated or unsolicited: ignore
            del self._inflight[source_id]
            self._handle_response(source_id, message, now_ms)
        self._drive(now_ms)

    def append(self, records: Sequence[bytes], now_ms: int) -> int:
        """Leader only: write ``records`` (values) as one batch in our epoch; return its last
        offset. It is flushed on the next tick/handle and committed once a majority has it."""
        if not self.is_leader:
            raise NotLeaderError(f"node {self.node_id} is not the leader (leader "
                                 f"{self._leader_id}, epoch {self._epoch})")
        self._now = now_ms
        base = self.log.end_offset
        if not records:
            return base - 1
        batch = build_batch([Record(None, bytes(r), (), now_ms) for r in records],
                            base_offset=base, partition_leader_epoch=self._epoch, now_ms=now_ms)
        self.log.append(batch)
        return base + len(records) - 1

    def propose_resign(self, now_ms: int) -> None:
        """Graceful shutdown of a leader: resign and tell voters (EndQuorumEpoch), naming the
        most caught-up voters as preferred successors. No-op for other roles."""
        self._now = now_ms
        if isinstance(self._state, Leader):
            self._flush_leader(now_ms)
            self._resign(now_ms)
        self._drive(now_ms)

    # -- membership changes (KIP-853) ----------------------------------------------------------

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

    def snapshot_written(self, end_offset: int, epoch: int, data: bytes, now_ms: int) -> None:
        """The state machine wrote a snapshot of everything below ``end_offset`` (a committed,
        delivered batch boundary whose last batch has ``epoch``); the log prefix goes."""
        self._now = now_ms
        if end_offset <= self.log.start_offset:
            return
        if end_offset > self._delivered:
            raise ValueError(f"snapshot end {end_offset} is past the delivered offset "
                             f"{self._delivered}")
        found = self.log.batch_at(end_offset - 1)
        if found is None or found[1] != end_offset or batch_epoch(found[2]) != epoch:
            raise ValueError(f"({end_offset}, {epoch}) is not the end of a batch in the log")
        self._flush_leader(now_ms)
        sid = SnapshotId(end_offset, epoch)
        if self._static_voters is None:
            voters, version = self._history.at(end_offset)
            data = snapshot_with_voters(data, voters, kraft_version=version or 1)
        self.log.snapshots.write(sid, data)
        self.log.delete_before_snapshot(sid)
        self._drive(now_ms)

    # -- persistence and sending ---------------------------------------------------------------

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

    def _send(self, destination: int, request: RaftRequest, now_ms: int) -> None:
        self._next_correlation = (self._next_correlation + 1) & 0x7FFFFFFF
        cid = self._next_correlation
        self._inflight[destination] = _Inflight(cid, type(request), now_ms)
        self._outbound.append(Outbound(destination, request, cid))

    def _reply(self, destination: int, correlation_id: int, response: RaftMessage) -> None:
        self._outbound.append(Outbound(destination, response, correlation_id))

    def _random_election_deadline(self, now_ms: int) -> int:
        return now_ms + self.election_timeout_ms + self._rng.randrange(
            max(1, self.election_timeout_ms))

    def _election_backoff(self) -> int:
        """Binary exponential backoff after a lost election, capped, with full jitter."""
        bound = min(self.election_backoff_max_ms,
                    self.retry_backoff_ms << min(self._election_retries, 20))
        return 1 + self._rng.randrange(max(1, bound))

    def _current_leader(self) -> LeaderIdAndEpoch:
        return LeaderIdAndEpoch(self._leader_id, self._epoch)

    # -- transitions ---------------------------------------------------------------------------

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

    # -- timers and sending (the end of every call) --------------------------------------------

    def _drive(self, now_ms: int) -> None:
        if not self._started:
            return
        self._now = now_ms
        self._flush_leader(now_ms)
        while self._orphaned_fetches:
            replica, cid = self._orphaned_fetches.pop(0)
            self._reply(replica, cid, self._fetch_error(ErrorCode.NOT_LEADER_OR_FOLLOWER))
        for dest, inf in list(self._inflight.items()):
            if now_ms >= inf.sent_ms + self.request_timeout_ms:
                del self._inflight[dest]
        for _ in range(8):  # transitions may chain (a single voter elects itself at once)
            before = self._state
            self._drive_role(now_ms)
            if self._state is before:
                break

    def _drive_role(self, now_ms: int) -> None:
        st = self._state
        if isinstance(st, Unattached):
            if st.election_deadline is not None:
                if now_ms >= st.election_deadline:
                    self._become_prospective(now_ms)
            elif not self._inflight and now_ms >= st.backoff_until:
                # An observer without a leader asks a bootstrap server, else a random voter.
                targets = sorted(set(self.bootstrap_ids or self.voters) - {self.node_id})
                if targets:
                    self._send(self._rng.choice(targets), self._fetch_request(), now_ms)
        elif isinstance(st, Prospective):
            if self._won(st.granted):
                self._become_candidate(now_ms)
            elif self._majority(len(st.rejected)) or now_ms >= st.election_deadline:
                self._lose_election(now_ms)
            else:
                self._solicit_votes(st.granted | st.rejected, True, now_ms)
        elif isinstance(st, Candidate):
            if st.backoff_until is not None:
                if now_ms >= st.backoff_until:
                    self._become_prospective(now_ms)
            elif self._won(st.granted):
                self._become_leader(now_ms)
            elif self._majority(len(st.rejected)) or now_ms >= st.election_deadline:
                self._lose_election(now_ms)
            else:
                self._solicit_votes(st.granted | st.rejected, False, now_ms)
        elif isinstance(st, Leader):
            self._drive_leader(st, now_ms)
        elif isinstance(st, Follower):
            if now_ms >= st.fetch_deadline:
                if self.can_stand:
                    self._become_prospective(now_ms)
                else:
                    self._become_unattached(self._epoch, now_ms)
            elif not self._inflight and not st.leader_resigned and now_ms >= st.backoff_until:
                self._send_fetch(st, now_ms)
        elif isinstance(st, Resigned):
            if now_ms >= st.election_deadline:
                if self.can_stand:
                    self._become_prospective(now_ms)
                else:
                    self._become_unattached(self._epoch, now_ms)
            else:
                for v in sorted(st.unacked):
                    if v not in self._inflight:
                        self._send(v, EndQuorumEpochRequest(
                            self.cluster_id, self.node_id, self._epoch,
                            st.preferred_successors), now_ms)

    def _drive_leader(self, st: Leader, now_ms: int) -> None:
        if (not self.is_voter and self._history.latest_offset >= 0
                and self._hw > self._history.latest_offset):
            # KIP-853: a leader removed from the voters leads until that change commits, then
            # steps down (it would not count toward any later commit).
            self._resign(now_ms)
            return
        if now_ms >= st.check_quorum_deadline:
            # Fetches from a majority would have pushed the deadline (replication's
            # _note_follower_alive); reaching it means the majority is gone.
            if len(self.voters) == 1:
                st.check_quorum_deadline = now_ms + self._check_quorum_timeout()
            else:
                self._resign(now_ms)
                return
        expired = [(r, p) for r, p in st.parked.items() if now_ms >= p.deadline]
        for replica, _ in expired:
            del st.parked[replica]
        for replica, p in expired:
            self._answer_fetch(replica, p.correlation_id, p.request, now_ms, park=False)
        half = self.fetch_timeout_ms // 2
        for v in sorted(self.voters):
            prog = st.replicas.setdefault(v, ReplicaProgress(next_begin_ms=now_ms))
            if v == self.node_id or v in self._inflight or now_ms < prog.next_begin_ms:
                continue
            if prog.last_fetch_ms is None or now_ms - prog.last_fetch_ms >= half:
                # A voter that has not fetched lately may not know we lead: tell it again.
                prog.next_begin_ms = now_ms + half
                self._send(v, BeginQuorumEpochRequest(self.cluster_id, v, self.node_id,
                                                      self._epoch), now_ms)
            else:
                prog.next_begin_ms = prog.last_fetch_ms + half

    # -- requests ------------------------------------------------------------------------------

    def _handle_request(self, source: int, req: RaftRequest, now_ms: int, cid: int) -> None:
        if isinstance(req, FetchRequest):
            self._answer_fetch(source, cid, req, now_ms, park=True)
        elif isinstance(req, VoteRequest):
            self._reply(source, cid, self._on_vote(req, now_ms))
        elif isinstance(req, BeginQuorumEpochRequest):
            self._reply(source, cid, self._on_begin_epoch(req, now_ms))
        elif isinstance(req, EndQuorumEpochRequest):
            self._reply(source, cid, self._on_end_epoch(req, now_ms))
        elif isinstance(req, FetchSnapshotRequest):
            self._reply(source, cid, self._on_fetch_snapshot(source, req, now_ms))

    # -- responses -----------------------------------------------------------------------------

    def _handle_response(self, source: int, resp: RaftMessage, now_ms: int) -> None:
        if isinstance(resp, FetchResponse):
            self._on_fetch_response(source, resp, now_ms)
        elif isinstance(resp, VoteResponse):
            self._on_vote_response(source, resp, now_ms)
        elif isinstance(resp, BeginQuorumEpochResponse):
            if not self._transition_on_leader_info(resp.leader_id, resp.leader_epoch, now_ms):
                st = self._state
                if isinstance(st, Leader) and resp.error_code == ErrorCode.NONE:
                    st.replicas[source].next_begin_ms = now_ms + self.fetch_timeout_ms // 2
        elif isinstance(resp, EndQuorumEpochResponse):
            if not self._transition_on_leader_info(resp.leader_id, resp.leader_epoch, now_ms):
                st = self._state
                if isinstance(st, Resigned):
                    st.unacked.discard(source)
        elif isinstance(resp, FetchSnapshotResponse):
            self._on_fetch_snapshot_response(source, resp, now_ms)

__all__ = ["CommitEvent", "CommittedBatch", "RaftReplica", "SnapshotLoad"]
