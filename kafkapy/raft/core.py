"""``RaftReplica``: the KRaft consensus core (KIP-595, pre-vote KIP-996) as a sans-I/O state machine.

This module owns the timers and the dispatch of messages, and decides when roles change; mixins
do the rest: ``election`` answers and counts votes, ``replication`` serves and follows
Fetch/FetchSnapshot and moves the high watermark, ``transitions`` changes roles and writes
quorum-state, ``voter_changes`` adds, removes and updates voters (KIP-853). ``roles`` holds
per-role data, ``raft_log`` the log with its epoch cache and snapshots, ``messages`` the RPCs.
Everything the outside world provides comes in as an argument: messages (``handle``), time
(``now_ms`` on every call), the stores, and a ``random.Random`` for election jitter. Everything
it produces comes out on request: messages (``poll_outbound``), the next time it needs a
``tick`` (``next_deadline_ms``) and committed entries (``take_committed``). ``quorum-state`` is
written synchronously before any message that depends on it is queued.

Durability (where Kafka flushes): a leader appends without flushing; the flush happens at the
start of the next ``tick``/``handle`` (Kafka drains its accumulator and flushes in one poll), and
only the flushed end offset counts toward the high watermark. A follower flushes what it fetched
before sending the next Fetch, whose ``fetch_offset`` is what the leader counts.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import NamedTuple

from kafkapy.protocol.errors import ErrorCode
from kafkapy.raft.election import ElectionMixin
from kafkapy.raft.events import CommitEvent, CommittedBatch, SnapshotLoad
from kafkapy.raft.local import NotLeaderError
from kafkapy.raft.membership import VoterHistory
from kafkapy.raft.messages import (
    NO_LEADER,
    RESPONSE_FOR,
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
    SnapshotId,
    VoteRequest,
    VoteResponse,
)
from kafkapy.raft.quorum_state import QuorumState, QuorumStateStore
from kafkapy.raft.raft_log import RaftInvariantError, RaftLog, batch_epoch
from kafkapy.raft.replication import ReplicationMixin
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
from kafkapy.raft.snapshot_store import SnapshotStore
from kafkapy.raft.store import RaftLogStore
from kafkapy.raft.transitions import TransitionsMixin
from kafkapy.raft.voter_changes import VoterChangesMixin
from kafkapy.raft.voters import (
    snapshot_with_voters,
)
from kafkapy.records.builder import Record, build_batch


class _Inflight(NamedTuple):
    correlation_id: int
    request_type: type
    sent_ms: int


class RaftReplica(ElectionMixin, ReplicationMixin, TransitionsMixin, VoterChangesMixin):
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
        self._snapshot_not_stored: str | None = None
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
    def catch_up_target(self) -> int:
        """The offset a node must have applied to be current: the leader's own high watermark
        on the leader (nobody reports one to it), the one the leader reported elsewhere; -1 or 0
        until there is one."""
        return self._hw if self.is_leader else self._leader_hw

    @property
    def log_end_offset(self) -> int:
        return self.log.end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.start_offset

    @property
    def state(self) -> RoleState:
        return self._state

    @property
    def snapshot_not_stored(self) -> str | None:
        """Why the snapshot this follower fetched could not be stored (``SnapshotNotStored``:
        the disk is full), while that lasts; it fetches again after a back-off. None once a
        snapshot is installed, or the leader's log serves it without one."""
        return self._snapshot_not_stored

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

    # -- sending -------------------------------------------------------------------------------

    def _send(self, destination: int, request: RaftRequest, now_ms: int) -> None:
        self._next_correlation = (self._next_correlation + 1) & 0x7FFFFFFF
        cid = self._next_correlation
        self._inflight[destination] = _Inflight(cid, type(request), now_ms)
        self._outbound.append(Outbound(destination, request, cid))

    def _reply(self, destination: int, correlation_id: int, response: RaftMessage) -> None:
        self._outbound.append(Outbound(destination, response, correlation_id))

    def _current_leader(self) -> LeaderIdAndEpoch:
        return LeaderIdAndEpoch(self._leader_id, self._epoch)

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
