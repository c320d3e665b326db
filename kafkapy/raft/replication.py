"""Log replication for ``RaftReplica``: the leader serving Fetch and FetchSnapshot, moving the
high watermark, parking empty fetches; the follower fetching, truncating on divergence,
appending, and installing snapshots.

A mixin so the election logic (``core``) and the replication logic each fit in one module; it
only touches state ``RaftReplica`` owns and declares here.

High watermark: the leader counts, per voter, the last ``fetch_offset`` it validated (a
follower flushed before sending it) and its own flushed end offset; the HW is the largest
offset a majority has reached, moved only forward and only past the epoch's start offset, so an
entry from an older epoch commits only together with one of ours (KIP-595, Raft section 5.4.2).
A follower's HW is the leader's, capped by its own end offset.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kafkapy.protocol.errors import ErrorCode
from kafkapy.raft.events import CommitEvent, SnapshotLoad
from kafkapy.raft.messages import (
    EpochEndOffset,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    LeaderIdAndEpoch,
    RaftMessage,
    RaftRequest,
    SnapshotId,
)
from kafkapy.raft.raft_log import RaftInvariantError, RaftLog, ValidKind
from kafkapy.raft.roles import (
    Follower,
    Leader,
    ParkedFetch,
    ReplicaProgress,
    RoleState,
    SnapshotFetch,
    Unattached,
)
from kafkapy.raft.snapshot_store import SnapshotNotStored
from kafkapy.records import format as fmt


class ReplicationMixin:
    """Fetch/FetchSnapshot on both sides; mixed into ``core.RaftReplica``."""

    # Owned by RaftReplica.
    node_id: int
    cluster_id: str
    log: RaftLog
    fetch_timeout_ms: int
    retry_backoff_ms: int
    fetch_max_wait_ms: int
    fetch_max_bytes: int
    _epoch: int
    _leader_id: int
    _state: RoleState
    _hw: int
    _leader_hw: int
    _delivered: int
    _events: list[CommitEvent]
    _snapshot_not_stored: str | None
    _send: Callable[[int, RaftRequest, int], None]
    _reply: Callable[[int, int, RaftMessage], None]
    _current_leader: Callable[[], LeaderIdAndEpoch]
    _transition_on_leader_info: Callable[[int, int, int], bool]
    _check_quorum_timeout: Callable[[], int]

    if TYPE_CHECKING:  # RaftReplica's read-only properties; declared for the type checker only
        @property
        def voters(self) -> frozenset[int]: ...

        @property
        def is_leader(self) -> bool: ...

    def _flush_leader(self, now_ms: int) -> None:
        st = self._state
        if isinstance(st, Leader) and self.log.needs_flush:
            self.log.flush()
            self._update_replica(self.node_id, self.log.end_offset, now_ms)
            self._complete_parked(now_ms, force=False)


    def _fetch_request(self) -> FetchRequest:
        return FetchRequest(
            cluster_id=self.cluster_id, replica_id=self.node_id,
            max_wait_ms=self.fetch_max_wait_ms, max_bytes=self.fetch_max_bytes,
            current_leader_epoch=self._epoch, fetch_offset=self.log.end_offset,
            last_fetched_epoch=self.log.last_fetched_epoch,
            log_start_offset=self.log.start_offset, partition_max_bytes=self.fetch_max_bytes)

    def _send_fetch(self, st: Follower, now_ms: int) -> None:
        if st.snapshot_fetch is not None:
            self._send(self._leader_id, FetchSnapshotRequest(
                self.cluster_id, self.node_id, self.fetch_max_bytes, self._epoch,
                st.snapshot_fetch.snapshot_id, len(st.snapshot_fetch.data)), now_ms)
            return
        # What we report as our fetch offset must survive a crash: flush first.
        self.log.flush()
        self._send(self._leader_id, self._fetch_request(), now_ms)


    def _fetch_error(self, code: ErrorCode) -> FetchResponse:
        return FetchResponse(code, -1, self.log.start_offset, (), self._current_leader())

    def _leader_only_error(self, request_epoch: int) -> ErrorCode | None:
        if request_epoch < self._epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if request_epoch > self._epoch:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        if not self.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return None

    def _answer_fetch(self, source: int, cid: int, req: FetchRequest, now_ms: int, *,
                      park: bool) -> None:
        error = self._leader_only_error(req.current_leader_epoch)
        if error is None and (req.fetch_offset < 0 or req.last_fetched_epoch < 0
                              or req.last_fetched_epoch > req.current_leader_epoch):
            error = ErrorCode.INVALID_REQUEST
        if error is not None:
            self._reply(source, cid, self._fetch_error(error))
            return
        st = self._state
        assert isinstance(st, Leader)
        if park:  # a fresh request, not a parked one being answered
            self._note_follower_alive(st, source, now_ms)
        valid = self.log.validate_offset_and_epoch(req.fetch_offset, req.last_fetched_epoch)
        if valid.kind is ValidKind.SNAPSHOT:
            self._reply(source, cid, FetchResponse(
                ErrorCode.NONE, self._hw, self.log.start_offset, (), self._current_leader(),
                snapshot_id=SnapshotId(valid.offset, valid.epoch)))
            return
        if valid.kind is ValidKind.DIVERGING:
            self._reply(source, cid, FetchResponse(
                ErrorCode.NONE, self._hw, self.log.start_offset, (), self._current_leader(),
                diverging_epoch=EpochEndOffset(valid.epoch, valid.offset)))
            return
        self._update_replica(source, req.fetch_offset, now_ms)
        if not isinstance(self._state, Leader):
            return  # cannot happen: a fetch never makes the leader resign
        prog = st.replicas.setdefault(source, ReplicaProgress())
        records = self.log.read(req.fetch_offset, min(req.max_bytes, req.partition_max_bytes))
        if park and not records and req.max_wait_ms > 0 and prog.last_sent_hw >= self._hw:
            old = st.parked.pop(source, None)
            if old is not None:
                self._answer_fetch(source, old.correlation_id, old.request, now_ms, park=False)
            st.parked[source] = ParkedFetch(cid, req, now_ms + req.max_wait_ms)
            return
        prog.last_sent_hw = self._hw
        self._reply(source, cid, FetchResponse(ErrorCode.NONE, self._hw, self.log.start_offset,
                                               records, self._current_leader()))

    def _note_follower_alive(self, st: Leader, source: int, now_ms: int) -> None:
        """Check-quorum (Kafka's ``updateCheckQuorumForFollowingVoter``): once a majority of
        voters has fetched in this period, the period restarts."""
        if source not in self.voters:
            return
        st.fetched_voters.add(source)
        me = {self.node_id} if self.node_id in self.voters else set()
        if len(st.fetched_voters | me) * 2 > len(self.voters):
            st.fetched_voters.clear()
            st.check_quorum_deadline = now_ms + self._check_quorum_timeout()

    def _update_replica(self, replica: int, end_offset: int, now_ms: int) -> None:
        """A replica (or we) reached ``end_offset``; move the high watermark if a majority of
        voters has reached past it and it is inside our epoch."""
        st = self._state
        assert isinstance(st, Leader)
        prog = st.replicas.setdefault(replica, ReplicaProgress())
        prog.end_offset = end_offset
        prog.last_fetch_ms = now_ms
        if replica not in self.voters:
            return  # observers never count toward the high watermark
        ends = sorted((st.replicas[v].end_offset if v in st.replicas else -1
                       for v in self.voters), reverse=True)
        new_hw = ends[len(self.voters) // 2]
        if new_hw > st.epoch_start_offset and new_hw > self._hw:
            self._hw = new_hw
            self._complete_parked(now_ms, force=True)

    def _complete_parked(self, now_ms: int, *, force: bool) -> None:
        """Answer parked fetches that now have something to say (new data or a new HW)."""
        st = self._state
        if not isinstance(st, Leader):
            return
        ready = [(r, p) for r, p in st.parked.items()
                 if force or self.log.end_offset > p.request.fetch_offset]
        for replica, _ in ready:  # answering may move the HW and re-enter: detach them first
            del st.parked[replica]
        for replica, p in ready:
            self._answer_fetch(replica, p.correlation_id, p.request, now_ms, park=False)

    def _on_fetch_snapshot(self, source: int, req: FetchSnapshotRequest,
                           now_ms: int) -> FetchSnapshotResponse:
        def reply(code: ErrorCode, size: int = -1, position: int = -1,
                  chunk: bytes = b"") -> FetchSnapshotResponse:
            return FetchSnapshotResponse(code, req.snapshot_id, self._current_leader(), size,
                                         position, chunk)

        error = self._leader_only_error(req.current_leader_epoch)
        if error is not None:
            return reply(error)
        st = self._state
        assert isinstance(st, Leader)
        self._note_follower_alive(st, source, now_ms)  # fetching a snapshot is following too
        data = self.log.snapshots.read(req.snapshot_id)
        if data is None:
            return reply(ErrorCode.SNAPSHOT_NOT_FOUND)
        if req.position < 0 or req.position >= len(data):
            return reply(ErrorCode.POSITION_OUT_OF_RANGE)
        chunk = data[req.position:req.position + max(1, req.max_bytes)]
        return reply(ErrorCode.NONE, len(data), req.position, bytes(chunk))


    def _on_fetch_response(self, source: int, resp: FetchResponse, now_ms: int) -> None:
        leader = resp.current_leader
        if self._transition_on_leader_info(leader.leader_id, leader.leader_epoch, now_ms):
            return
        st = self._state
        if isinstance(st, Unattached):
            st.backoff_until = now_ms + self.retry_backoff_ms  # nobody leads yet: ask again
            return
        if not isinstance(st, Follower) or source != self._leader_id:
            return
        if resp.error_code != ErrorCode.NONE or leader.leader_epoch != self._epoch:
            st.backoff_until = now_ms + self.retry_backoff_ms
            return
        st.has_fetched = True
        st.fetch_deadline = now_ms + self.fetch_timeout_ms
        if resp.diverging_epoch is not None:
            truncated = self.log.truncate_to_end_offset(resp.diverging_epoch)
            if truncated < self._hw:
                raise RaftInvariantError(
                    f"node {self.node_id}: leader {source} asked to truncate to {truncated}, "
                    f"below the high watermark {self._hw}")
        elif resp.snapshot_id is not None:
            st.snapshot_fetch = SnapshotFetch(resp.snapshot_id)
            return
        else:
            self._snapshot_not_stored = None  # the log serves us again: no snapshot needed
            for batch in resp.records:
                header = fmt.parse_header(memoryview(batch))
                if header.base_offset != self.log.end_offset:
                    raise RaftInvariantError(
                        f"node {self.node_id}: fetched batch at {header.base_offset}, log ends "
                        f"at {self.log.end_offset}")
                if header.partition_leader_epoch > self._epoch:
                    raise RaftInvariantError("fetched a batch from a future epoch")
                self.log.append(batch)
            # Only here: the leader validated our whole log up to the fetch offset, so every
            # offset below our end offset is the leader's. After a divergence it is not (the
            # truncation may stop above the real divergence point; the next fetch tells).
            self._update_follower_hw(resp.high_watermark)

    def _snapshot_retry_backoff_ms(self) -> int:
        """How long a follower whose disk refused a fetched snapshot waits before fetching
        again: half the fetch timeout, so the next Fetch reaches the leader before this replica
        would think it gone (and stand for election), yet the whole snapshot is not downloaded
        again every ``retry_backoff_ms``."""
        return max(self.retry_backoff_ms, self.fetch_timeout_ms // 2)

    def _update_follower_hw(self, leader_hw: int) -> None:
        if leader_hw >= 0:
            self._leader_hw = max(self._leader_hw, leader_hw)
            self._hw = max(self._hw, min(leader_hw, self.log.end_offset))

    def _on_fetch_snapshot_response(self, source: int, resp: FetchSnapshotResponse,
                                    now_ms: int) -> None:
        leader = resp.current_leader
        if self._transition_on_leader_info(leader.leader_id, leader.leader_epoch, now_ms):
            return
        st = self._state
        if not isinstance(st, Follower) or source != self._leader_id or st.snapshot_fetch is None:
            return
        fetch = st.snapshot_fetch
        if resp.error_code != ErrorCode.NONE or resp.snapshot_id != fetch.snapshot_id:
            # The leader replaced the snapshot (or we asked nonsense): start over with a Fetch.
            st.snapshot_fetch = None
            st.backoff_until = now_ms + self.retry_backoff_ms
            return
        if resp.position != len(fetch.data):
            st.snapshot_fetch = None
            return
        st.fetch_deadline = now_ms + self.fetch_timeout_ms
        fetch.data += resp.unaligned_records
        if len(fetch.data) < resp.size:
            return
        sid, data = fetch.snapshot_id, bytes(fetch.data)
        st.snapshot_fetch = None
        if sid.end_offset < self._hw:
            raise RaftInvariantError(f"snapshot {sid} is below the high watermark {self._hw}")
        try:
            self.log.snapshots.write(sid, data)  # durable before the log forgets its prefix
        except SnapshotNotStored as exc:
            # A full disk: nothing was kept and the log is as it was. Fetch again later (the
            # leader names its newest snapshot then); meanwhile keep no bytes in memory.
            self._snapshot_not_stored = str(exc)
            st.backoff_until = now_ms + self._snapshot_retry_backoff_ms()
            return
        self._snapshot_not_stored = None
        self.log.reset_to_snapshot(sid)
        self._hw = sid.end_offset
        if sid.end_offset > self._delivered:
            self._events.append(SnapshotLoad(sid, data))
            self._delivered = sid.end_offset
        else:
            raise RaftInvariantError(f"snapshot {sid} is below what we delivered")
