"""``QuorumDriver``: the Trio task that owns a ``RaftReplica`` and connects it to the network.

The replica is a synchronous state machine; the driver is the only code that calls it, and every
call is followed at once (no ``await`` in between) by ``_process``, which drains what the call
produced: outbound requests go to ``PeerSet`` (sent in background tasks), responses to inbound
requests go to the dispatcher task waiting for them, committed batches go to ``on_commit`` in
order, and the main loop is woken to re-read ``next_deadline_ms()``.

Task structure (all in the nursery of :meth:`QuorumDriver.run`):

* the main loop: ``tick`` at the core's next deadline (or when woken after another call);
* one short task per outbound request (``peers.PeerSet``), which feeds the response back with
  :meth:`_on_response` in its own task;
* inbound requests arrive in the listener's connection tasks (``QuorumDispatcher``), which call
  :meth:`handle_request` and wait for the core's answer.

Matching: the core echoes the ``correlation_id`` it was given with a request in its response
(``Outbound``). Inbound requests are given a driver-local token instead of the Kafka header's
correlation id — two connections (a restarted peer, an observer) may reuse the same ids — and
the response is routed back by that token. Responses from peers carry the core's own
correlation id, so the core drops stale and duplicated answers itself.

Time: every ``now_ms`` comes from the injected clock (``now_ms()``; default
``clock.TrioClock``, which follows Trio's clock so ``MockClock`` works); sleeps use Trio.

Pre-vote (KIP-996) does not exist on Kafka 3.9's wire (Vote v0-1). The core's pre-vote requests
are therefore answered here, at once, with a grant: a replica whose election timer fires becomes
a candidate straight away, which is exactly Kafka 3.9's behaviour. Real votes go on the wire.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import trio

from kafkapy.net.client import KafkaClient, KafkaClientError
from kafkapy.net.client_security import ClientSecurity
from kafkapy.protocol import ErrorCode, KafkaError
from kafkapy.protocol import messages as m
from kafkapy.quorum.clock import TrioClock
from kafkapy.quorum.peers import PeerSet
from kafkapy.raft import wire
from kafkapy.raft.core import RaftReplica
from kafkapy.raft.events import CommitEvent, CommittedBatch, SnapshotLoad
from kafkapy.raft.local import NotLeaderError
from kafkapy.raft.messages import (
    FetchRequest,
    RaftRequest,
    RaftResponse,
    VoteRequest,
    VoteResponse,
    is_request,
)
from kafkapy.raft.roles import Leader
from kafkapy.raft.snapshot_store import SnapshotNotStored
from kafkapy.raft.voters import Voter, VoterSet
from kafkapy.records import format as fmt

log = logging.getLogger("kafkapy.quorum.driver")

#: How often a voter compares its endpoints with its entry in the voter set.
UPDATE_VOTER_INTERVAL_S = 1.0
#: How long the driver waits before touching the core again after a full-disk write failure.
DISK_FULL_RETRY_S = 0.5


def _is_disk_full(exc: BaseException) -> bool:
    # A log write that failed for lack of space and was rolled back (log.storage_errors); the
    # quorum layer does not import the log layer, so it is recognised by its attributes.
    return (isinstance(exc, KafkaError) and exc.code == ErrorCode.KAFKA_STORAGE_ERROR
            and getattr(exc, "offline", True) is False)


class Clock(Protocol):
    def now_ms(self) -> int: ...


class CommitLost(Exception):
    """An appended entry will never commit: another leader's entry took its offset."""


@dataclass(slots=True)
class _Answer:
    """An inbound request waiting for the core's response."""

    done: trio.Event = field(default_factory=trio.Event)
    response: RaftResponse | None = None
    error: BaseException | None = None


@dataclass(slots=True)
class _CommitWaiter:
    offset: int
    epoch: int | None
    done: trio.Event = field(default_factory=trio.Event)
    error: BaseException | None = None


@dataclass(slots=True)
class _FetchTimes:
    """Kafka's per-replica fetch bookkeeping in ``LeaderState`` (for DescribeQuorum)."""

    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    leader_end_at_last_fetch: int = -1


@dataclass(frozen=True, slots=True)
class ReplicaDescription:
    """One row of DescribeQuorum: what the leader knows of a replica."""

    replica_id: int
    log_end_offset: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int


@dataclass(frozen=True, slots=True)
class QuorumDescription:
    """The leader's view of the quorum, as DescribeQuorum reports it."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[ReplicaDescription, ...]
    observers: tuple[ReplicaDescription, ...]


class QuorumDriver:
    """Runs ``replica`` (node ``node_id``) on the network: see the module docstring.

    ``voters`` maps every voter id to its controller listener (host, port) and may be filled in
    after construction (it is read at connect time). ``on_commit`` receives each committed
    ``CommittedBatch`` / ``SnapshotLoad`` exactly once, in order, from the task that caused the
    commit; it must not block (a slow state machine should queue) but may call :meth:`append`.
    """

    def __init__(self, replica: RaftReplica, node_id: int, voters: Mapping[int, tuple[str, int]],
                 cluster_id: str, clock: Clock | None = None, *,
                 on_commit: Callable[[CommitEvent], None] | None = None,
                 listener_name: str = "CONTROLLER", connect_timeout: float = 5.0,
                 reconnect_backoff_max: float = 1.0,
                 own_voter: Callable[[], Voter | None] = lambda: None,
                 security: ClientSecurity | None = None) -> None:
        if replica.node_id != node_id:
            raise ValueError(f"the replica is node {replica.node_id}, not {node_id}")
        if replica.cluster_id != cluster_id:
            raise ValueError(f"the replica's cluster id is {replica.cluster_id!r}, "
                             f"not {cluster_id!r}")
        self.replica = replica
        self.node_id = node_id
        self.voter_addresses = voters
        self.cluster_id = cluster_id
        self.clock: Clock = clock if clock is not None else TrioClock()
        self.on_commit = on_commit
        self.listener_name = listener_name
        self.peers = PeerSet(node_id, voters, self._on_response,
                             request_timeout=replica.request_timeout_ms / 1000,
                             connect_timeout=connect_timeout,
                             reconnect_backoff=max(replica.retry_backoff_ms, 10) / 1000,
                             reconnect_backoff_max=reconnect_backoff_max,
                             listener_name=listener_name, security=security)
        self._tokens = itertools.count(1)
        self._answers: dict[int, _Answer] = {}
        self._commit_waiters: list[_CommitWaiter] = []
        self._committed_end = 0
        self._wake = trio.Event()
        self._started = trio.Event()
        self._running = False
        self._fatal: BaseException | None = None
        #: Why the metadata log's last write failed for lack of space (None: it did not, or a
        #: later write went through).
        self.disk_full: str | None = None
        self._disk_full_end = 0  # the log's end offset when that write failed
        self._snapshot_not_stored: str | None = None
        #: A response's batches found the disk full: the next tick waits DISK_FULL_RETRY_S.
        self._disk_full_pause = False
        self._processing = False
        self._fetch_times: dict[int, _FetchTimes] = {}
        self._fetch_times_epoch = -1
        self._last_transition: tuple[Any, int, int] | None = None
        self._known_voters: VoterSet | None = None
        #: This controller as it runs now (id, directory id, controller endpoints), from the
        #: node: a voter whose entry in the voter set differs tells the leader (UpdateRaftVoter).
        self.own_voter = own_voter

    # -- the replica's view --------------------------------------------------------------------

    @property
    def leader_id(self) -> int:
        return self.replica.leader_id

    @property
    def epoch(self) -> int:
        return self.replica.epoch

    @property
    def is_leader(self) -> bool:
        return self.replica.is_leader

    @property
    def high_watermark(self) -> int:
        return self.replica.high_watermark

    @property
    def committed_end(self) -> int:
        """One past the last offset delivered to ``on_commit``."""
        return self._committed_end

    @property
    def running(self) -> bool:
        return self._running

    # -- lifecycle -----------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Start the replica and drive it until cancelled. A core failure (an invariant broke)
        is raised from here: the node must stop, as Kafka's fatal fault handler stops it."""
        if self._running or self._started.is_set():
            raise RuntimeError("a QuorumDriver runs once; make a new one (and replica) to restart")
        try:
            async with trio.open_nursery() as nursery:
                self.peers.start(nursery)
                self._running = True
                self._call(lambda now: self.replica.start(now))
                self._started.set()
                task_status.started()
                nursery.start_soon(self._keep_own_entry)
                await self._loop()
        finally:
            self._running = False
            self._fail_waiters(NotLeaderError(f"node {self.node_id}'s quorum driver stopped"))
            with trio.CancelScope(shield=True):
                await self.peers.aclose()

    async def _loop(self) -> None:
        due_in_a_row = 0
        while True:
            self._raise_fatal()
            now = self.clock.now_ms()
            deadline = self.replica.next_deadline_ms()
            if deadline is not None and deadline <= now:
                if not await self._tick():
                    continue
                due_in_a_row += 1
                # A deadline that stays due would spin; yield for real now and then.
                await (trio.sleep(0.001) if due_in_a_row > 3 else trio.lowlevel.checkpoint())
                continue
            due_in_a_row = 0
            self._wake = trio.Event()
            delay = math.inf if deadline is None else (deadline - now) / 1000
            with trio.move_on_after(delay):
                await self._wake.wait()
            self._raise_fatal()
            await self._tick()

    async def _tick(self) -> bool:
        """One tick of the core; False (after a pause) when the metadata log's disk is full."""
        if self._disk_full_pause:
            self._disk_full_pause = False
            await trio.sleep(DISK_FULL_RETRY_S)
            return False
        try:
            self._call(self.replica.tick)
        except KafkaError as exc:
            if not _is_disk_full(exc):
                raise
            await trio.sleep(DISK_FULL_RETRY_S)
            return False
        return True

    def _raise_fatal(self) -> None:
        if self._fatal is not None:
            raise self._fatal

    def _fail_waiters(self, error: BaseException) -> None:
        for answer in self._answers.values():
            if not answer.done.is_set():
                answer.error = error
                answer.done.set()
        self._answers.clear()
        for waiter in self._commit_waiters:
            waiter.error = error
            waiter.done.set()
        self._commit_waiters.clear()

    # -- calling the core ----------------------------------------------------------------------

    def _call(self, fn: Callable[[int], Any]) -> Any:
        """Run one core call at the current time, then route everything it produced."""
        if not self._running:
            raise NotLeaderError(f"node {self.node_id}'s quorum driver is not running")
        try:
            result = fn(self.clock.now_ms())
            self._process()
        except BaseException as exc:
            # NotLeaderError / ValueError: the caller's mistake (append off the leader, a bad
            # snapshot boundary), raised before the core changed anything.
            if _is_disk_full(exc):
                # The metadata log's disk is full: the write was rolled back and fails; the
                # quorum goes on and writes again once space is freed.
                if self.disk_full is None:
                    self.disk_full = exc.message or str(exc)  # type: ignore[attr-defined]
                    log.error("node %d: the metadata log cannot be written: %s", self.node_id,
                              self.disk_full)
                self._disk_full_end = self.replica.log_end_offset
                raise
            # SnapshotNotStored: the disk had no room for this node's own snapshot
            # (snapshot_written); the log is whole. A follower's install handles it in the core.
            if self._fatal is None and not isinstance(exc, (NotLeaderError, ValueError, SnapshotNotStored,
                                                            trio.Cancelled)):
                log.critical("node %d: the Raft core failed: %r", self.node_id, exc)
                self._fatal = exc
                self._wake.set()
            raise
        # The episode ends with a write that went through: a call that wrote nothing (a
        # follower's tick that only sends the next Fetch) proves nothing about the disk.
        if self.disk_full is not None and self.replica.log_end_offset > self._disk_full_end:
            self.disk_full = None
            log.info("node %d: the metadata log is writable again", self.node_id)
        self._note_snapshot_not_stored()
        return result

    def _note_snapshot_not_stored(self) -> None:
        """One ERROR line when a snapshot fetched from the leader finds no room (the core
        fetches it again after a back-off, so the same failure repeats), one INFO line when
        that is over."""
        problem = self.replica.snapshot_not_stored
        if (problem is None) == (self._snapshot_not_stored is None):
            return
        self._snapshot_not_stored = problem
        if problem is not None:
            log.error("node %d: the metadata snapshot fetched from the leader was not stored, the "
                      "disk is full: %s; fetching it again later", self.node_id, problem)
        else:
            log.info("node %d: this replica no longer waits for room for a snapshot", self.node_id)

    def _process(self) -> None:
        """Route what the core produced until it has nothing more to say. Re-entrant calls
        (``on_commit`` appending, say) only add output; the outermost call routes it, so
        committed batches are still delivered in order."""
        if self._processing:
            return
        self._processing = True
        replica = self.replica
        try:
            while True:
                outbound = replica.poll_outbound()
                events = replica.take_committed()
                if not outbound and not events:
                    break
                local_votes = []
                for out in outbound:
                    msg = out.message
                    if not is_request(msg):
                        answer = self._answers.pop(out.correlation_id, None)
                        if answer is not None:  # else the asker has gone (connection closed)
                            answer.response = msg  # type: ignore[assignment]
                            answer.done.set()
                    elif isinstance(msg, VoteRequest) and msg.pre_vote:
                        local_votes.append(out)
                    else:
                        self.peers.send(out)
                self._deliver(events)
                now = self.clock.now_ms()
                for out in local_votes:
                    # Kafka 3.9 has no pre-vote: grant it here, so the core stands for election
                    # exactly when a 3.9 controller would. Leader unknown, our own epoch.
                    vote = out.message
                    assert isinstance(vote, VoteRequest)
                    replica.handle(out.destination_id,
                                   VoteResponse(ErrorCode.NONE, -1, vote.replica_epoch, True),
                                   now, out.correlation_id)
        finally:
            self._processing = False
        if replica.is_dynamic and replica.voter_set is not self._known_voters:
            self._learn_voters()
        self._log_transition()
        self._wake.set()

    def _learn_voters(self) -> None:
        """KIP-853: the voters' addresses come from the log's VotersRecord; keep the shared
        address map (peers, the controller channel) in step with it."""
        voters = self._known_voters = self.replica.voter_set
        if isinstance(self.voter_addresses, dict):
            for vid, address in voters.addresses(self.listener_name).items():
                self.voter_addresses[vid] = address
        if voters.voters:
            log.info("node %d: the voters are now %s (kraft.version %d)", self.node_id,
                     sorted(voters.ids), self.replica.kraft_version)
        else:
            log.info("node %d: no voter set yet (a controller formatted with "
                     "--no-initial-controllers waits to be added)", self.node_id)

    def _log_transition(self) -> None:
        """One line per role or epoch change, as Kafka's "Completed transition to ..." lines:
        what an operator reads to follow elections."""
        replica = self.replica
        now = (replica.role, replica.epoch, replica.leader_id)
        if now != self._last_transition:
            self._last_transition = now
            log.info("node %d: %s in epoch %d (leader %d, voted for %d, log end %d, high watermark %d)",
                     self.node_id, replica.role.name.lower(), replica.epoch, replica.leader_id,
                     replica.voted_id, replica.log_end_offset, replica.high_watermark)

    def _deliver(self, events: list[CommitEvent]) -> None:
        for event in events:
            if isinstance(event, CommittedBatch):
                header = fmt.parse_header(memoryview(event.batch))
                end, base = header.next_offset, event.base_offset
                epoch: int | None = header.partition_leader_epoch
            else:
                assert isinstance(event, SnapshotLoad)
                end, epoch, base = event.snapshot_id.end_offset, None, -1
            if self.on_commit is not None:
                self.on_commit(event)
            self._committed_end = end
            still = []
            for w in self._commit_waiters:
                if w.offset >= end:
                    still.append(w)
                    continue
                if w.epoch is not None and (epoch is None
                                            or (w.offset >= base and epoch != w.epoch)):
                    w.error = CommitLost(f"offset {w.offset} committed in epoch {epoch}, "
                                         f"not {w.epoch}")
                w.done.set()
            self._commit_waiters = still

    def _on_response(self, peer_id: int, response: RaftResponse, correlation_id: int) -> None:
        if not self._running:
            return
        try:
            self._call(lambda now: self.replica.handle(peer_id, response, now, correlation_id))
        except KafkaError as exc:
            if not _is_disk_full(exc):
                raise
            # Fetched batches found no room (``_call`` logged it; the failed write was rolled
            # back). The core fetches them again at its next tick: let that wait a little
            # rather than download them again at once, and the node keeps running.
            self._disk_full_pause = True
            self._wake.set()

    # -- inbound requests (the dispatcher's calls) ---------------------------------------------

    async def handle_request(self, request: RaftRequest) -> RaftResponse:
        """Feed an inbound request to the core and wait for its answer (a Fetch may be parked
        by the leader until there is data, a new high watermark or ``max_wait_ms``)."""
        await self._started.wait()
        if not self._running:
            # This incarnation has stopped; the peer retries (and finds the next one).
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                             f"node {self.node_id}'s quorum driver stopped")
        source = wire.request_source(request)
        token = next(self._tokens) & 0x7FFFFFFF
        answer = self._answers[token] = _Answer()
        try:
            if isinstance(request, FetchRequest):
                self._note_fetch(source, request)
            self._call(lambda now: self.replica.handle(source, request, now, token))
            await answer.done.wait()
        finally:
            self._answers.pop(token, None)
        if answer.error is not None:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, str(answer.error))
        assert answer.response is not None
        return answer.response

    def _note_fetch(self, replica_id: int, request: FetchRequest) -> None:
        """Kafka's ``ReplicaState.updateFollowerState``: a replica is caught up at the time of
        a fetch that reaches our end offset, or at its previous fetch if this one reaches what
        our end offset was then."""
        replica = self.replica
        if not replica.is_leader or request.current_leader_epoch != replica.epoch:
            return
        if self._fetch_times_epoch != replica.epoch:
            self._fetch_times, self._fetch_times_epoch = {}, replica.epoch
        now = self.clock.now_ms()
        times = self._fetch_times.setdefault(replica_id, _FetchTimes())
        leader_end = replica.log_end_offset
        if request.fetch_offset >= leader_end:
            times.last_caught_up_ms = max(times.last_caught_up_ms, now)
        elif 0 <= times.leader_end_at_last_fetch <= request.fetch_offset:
            times.last_caught_up_ms = max(times.last_caught_up_ms, times.last_fetch_ms)
        times.last_fetch_ms = now
        times.leader_end_at_last_fetch = leader_end

    # -- the leader's API ----------------------------------------------------------------------

    def append(self, records: Sequence[bytes]) -> int:
        """Leader only: append ``records`` (values) as one batch; return its last offset.
        Raises ``NotLeaderError`` elsewhere. Use :meth:`wait_committed` to wait for it."""
        last: int = self._call(lambda now: self.replica.append(records, now))
        return last

    async def wait_committed(self, offset: int, timeout: float, *,
                             epoch: int | None = None) -> None:
        """Wait until ``offset`` has been delivered to ``on_commit``. With ``epoch`` (the epoch
        of the :meth:`append`), raise ``CommitLost`` if another leader's entry took the offset.
        ``trio.TooSlowError`` after ``timeout`` seconds; ``NotLeaderError`` if the driver stops."""
        if offset < self._committed_end:
            return
        waiter = _CommitWaiter(offset, epoch)
        self._commit_waiters.append(waiter)
        try:
            with trio.fail_after(timeout):
                await waiter.done.wait()
        finally:
            if waiter in self._commit_waiters:
                self._commit_waiters.remove(waiter)
        if waiter.error is not None:
            raise waiter.error

    def snapshot_written(self, end_offset: int, epoch: int, data: bytes) -> None:
        """The state machine wrote a snapshot of everything below ``end_offset`` (a delivered
        batch boundary; ``epoch`` is that batch's): the core stores it and drops the log prefix,
        and replicas behind the new log start will fetch it with FetchSnapshot."""
        self._call(lambda now: self.replica.snapshot_written(end_offset, epoch, data, now))

    # -- membership changes (KIP-853) ----------------------------------------------------------

    async def change_voters(self, change: Callable[[int], tuple[ErrorCode, str, int]],
                            timeout: float) -> tuple[ErrorCode, str]:
        """Run a voter change on the leader (``change(now)``: the core's ``add_voter`` or
        ``remove_voter``) and wait until it commits. A change refused for now (another one
        pending, the new voter still catching up) is retried until ``timeout`` seconds."""
        deadline = trio.current_time() + timeout
        while True:
            try:
                code, message, offset = self._call(change)
            except NotLeaderError as exc:
                return ErrorCode.NOT_LEADER_OR_FOLLOWER, str(exc)
            if code == ErrorCode.NONE:
                if offset < 0:
                    return code, ""  # nothing to change
                break
            if code != ErrorCode.REQUEST_TIMED_OUT or trio.current_time() >= deadline:
                return code, message
            await trio.sleep(0.05)
        epoch = self.replica.epoch
        try:
            await self.wait_committed(offset, max(0.001, deadline - trio.current_time()),
                                      epoch=epoch)
        except (CommitLost, NotLeaderError) as exc:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, f"the voter change was lost: {exc}"
        except trio.TooSlowError:
            return ErrorCode.REQUEST_TIMED_OUT, "the voter change did not commit in time"
        return ErrorCode.NONE, ""

    async def _keep_own_entry(self) -> None:
        """KIP-853: a voter that now listens elsewhere than its VotersRecord entry says (it
        moved, or was formatted with other addresses) has the leader update the entry, so the
        other voters and the brokers can reach it. The leader updates its own entry itself."""
        while True:
            await trio.sleep(UPDATE_VOTER_INTERVAL_S)
            me, replica = self.own_voter(), self.replica
            if me is None or not replica.is_dynamic or not replica.is_voter or replica.leader_id < 0:
                continue
            known = replica.voter_set.get(self.node_id)
            if known is None or dict(known.endpoints) == dict(me.endpoints):
                continue
            wanted = Voter(me.voter_id, known.directory_id, dict(me.endpoints),
                           me.min_kraft_version, me.max_kraft_version)
            if replica.is_leader:
                code, message = await self.change_voters(
                    lambda now: replica.update_voter(wanted, now), UPDATE_VOTER_INTERVAL_S * 10)
            else:
                code, message = await self._send_update_voter(wanted)
            log.info("node %d: asked to update its voter entry to %s: %s %s", self.node_id,
                     dict(wanted.endpoints), code.name, message)

    async def _send_update_voter(self, voter: Voter) -> tuple[ErrorCode, str]:
        address = self.voter_addresses.get(self.replica.leader_id)
        if address is None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, "the leader's address is not known"
        r = m.UpdateRaftVoterRequest
        body = r(version=0, cluster_id=self.cluster_id or None,
                 current_leader_epoch=self.replica.epoch, voter_id=voter.voter_id,
                 voter_directory_id=voter.directory_id,
                 listeners=[r.Listener(version=0, name=n, host=h, port=p)
                            for n, (h, p) in sorted(voter.endpoints.items())],
                 k_raft_version_feature=r.KRaftVersionFeature(
                     version=0, min_supported_version=voter.min_kraft_version,
                     max_supported_version=voter.max_kraft_version))
        try:
            with trio.fail_after(UPDATE_VOTER_INTERVAL_S * 10):
                client = await KafkaClient.connect(*address, client_id=f"raft-client-{self.node_id}",
                                                   security=self.peers.security)
                try:
                    response = await client.send(body, version=0)
                finally:
                    await client.aclose()
        except (OSError, KafkaClientError, trio.TooSlowError) as exc:
            return ErrorCode.NETWORK_EXCEPTION, str(exc)
        return ErrorCode(response.error_code), ""

    def resign(self) -> None:
        """Graceful shutdown of a leader: resign and send EndQuorumEpoch (no-op otherwise)."""
        if self._running:
            self._call(self.replica.propose_resign)

    # -- DescribeQuorum ------------------------------------------------------------------------

    def describe(self) -> QuorumDescription | None:
        """The leader's view of voters and observers, or None when we do not lead."""
        replica = self.replica
        st = replica.state
        if not isinstance(st, Leader):
            return None
        now = self.clock.now_ms()
        times = self._fetch_times if self._fetch_times_epoch == replica.epoch else {}

        def row(rid: int) -> ReplicaDescription:
            if rid == self.node_id:
                # Kafka reports the leader as fetching and caught up "now".
                return ReplicaDescription(rid, replica.log_end_offset, now, now)
            prog = st.replicas.get(rid)
            t = times.get(rid, _FetchTimes())
            return ReplicaDescription(rid, prog.end_offset if prog is not None else -1,
                                      t.last_fetch_ms, t.last_caught_up_ms)

        voters = tuple(row(v) for v in sorted(replica.voters))
        observers = tuple(row(r) for r in sorted(st.replicas) if r not in replica.voters)
        return QuorumDescription(self.node_id, replica.epoch, replica.high_watermark, voters,
                                 observers)


__all__ = ["CommitLost", "QuorumDescription", "QuorumDriver", "ReplicaDescription"]
