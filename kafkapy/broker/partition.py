"""One partition replica hosted on this broker, and the one owner of its replica state.

Kafka's ``Partition``: the leader id and epoch, the partition epoch, the replicas and ISR as the
metadata image last said, the leader's view of its followers (``PartitionLeaderState``) and the
wake-up of everything waiting on the high watermark are fields of this class, and only its methods
change them. The replica manager finds partitions and follows the metadata; it hands each
partition its events (a registration, an append, a follower's fetch, the controller's answer to
an ISR proposal, the ISR-expiry tick) and the partition tells the broker around it what follows
through its ``PartitionHost``: follow a leader or stop, send an ISR proposal, wake parked fetches,
report a disk fault.

The high watermark and the log start offsets live in the log (``PartitionLog``, Kafka's
UnifiedLog); on a leader this class is what moves the high watermark, on a follower the fetcher.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any, Protocol

import trio

from kafkapy.broker.aborted_txns import NO_ABORTED, aborted_transactions, offset_after
from kafkapy.broker.replica_results import AppendResult, ReadResult, RemoteRead
from kafkapy.broker.replica_selector import FollowerView
from kafkapy.log.partition_log import FetchSlice, PartitionLog
from kafkapy.log.storage_errors import LogStorageError, storage_error
from kafkapy.metadata.image import MirrorTopic, PartitionRegistration
from kafkapy.metadata.placement_constraints import ConstraintError
from kafkapy.metadata.placement_constraints import parse as parse_constraints
from kafkapy.protocol.errors import ErrorCode, KafkaError, error_name
from kafkapy.protocol.events import FileRegion
from kafkapy.replication.fetcher import FollowTarget
from kafkapy.replication.leader_state import IsrProposal, ObserverPolicy, PartitionLeaderState

log = logging.getLogger(__name__)

#: The controller's answer to an ISR proposal: (error code, the AlterPartition partition data).
IsrCallback = Callable[[int, Any], None]


class PartitionHost(Protocol):
    """What a partition needs from the broker hosting it (the replica manager)."""

    @property
    def leadership_suspended(self) -> bool:
        """This broker lost the controllers: it may not lead anything now."""

    def follow(self, key: tuple[str, int], target: FollowTarget | None) -> None:
        """Replicate ``key`` from ``target`` (None: from nobody)."""

    @property
    def can_propose_isr(self) -> bool:
        """Whether ISR changes can be sent (unit tests may run without a sender)."""

    def propose_isr(self, topic_id: uuid.UUID, partition: int, proposal: IsrProposal,
                    on_result: IsrCallback) -> None:
        """Send an ISR change to the controller (AlterPartition)."""

    def wake_fetches(self) -> None:
        """Fetches parked in a long poll look again (new data, a moved high watermark)."""

    def storage_fault(self, topic: str, partition: int, exc: LogStorageError) -> None:
        """Writing the partition's log failed on disk."""

    def storage_ok(self, topic: str, partition: int) -> None:
        """A write to the partition's log succeeded (ends a full-disk episode)."""


class Partition:
    """One partition replica on this broker (see the module docstring)."""

    def __init__(self, topic: str, topic_id: uuid.UUID, index: int, log: PartitionLog, *,
                 node_id: int, host: PartitionHost) -> None:
        self.topic = topic
        self.topic_id = topic_id
        self.index = index
        self.log = log
        self._node_id = node_id
        self._host = host
        self._leader_id = -1
        self._leader_epoch = -1
        self._partition_epoch = 0
        self._replicas: list[int] = []
        self._isr: list[int] = []
        self._observers: tuple[int, ...] = ()
        # (the constraints value last parsed, its promotion policy)
        self._constraints_seen: tuple[str, str | None] = ("", None)
        # Set while this broker leads the partition (None as a follower).
        self._leader_state: PartitionLeaderState | None = None
        # Replaced (after being set) whenever the high watermark moves or leadership changes, so
        # acks=all produce requests waiting in the purgatory look again.
        self._hw_changed = trio.Event()
        # The high watermark consumers reading this follower last could see: its fetcher's
        # progress wakes their long polls only when it moves.
        self._follower_hw = -1
        # The mirror entry while the partition is a read-only mirror topic's (a cluster link
        # fills it; clients may not write), None otherwise.
        self._mirror: MirrorTopic | None = None

    def __repr__(self) -> str:
        return (f"Partition({self.topic}-{self.index}, leader={self._leader_id}, "
                f"epoch={self._leader_epoch}, isr={self._isr})")

    # -- views ------------------------------------------------------------------------------------

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.index)

    @property
    def leader_id(self) -> int:
        return self._leader_id

    @property
    def leader_epoch(self) -> int:
        return self._leader_epoch

    @property
    def partition_epoch(self) -> int:
        return self._partition_epoch

    @property
    def replicas(self) -> list[int]:
        return self._replicas

    @property
    def isr(self) -> list[int]:
        """The ISR of the registration in the metadata image."""
        return self._isr

    @property
    def leader_state(self) -> PartitionLeaderState | None:
        return self._leader_state

    @property
    def hw_changed(self) -> trio.Event:
        return self._hw_changed

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    def is_leader(self, node_id: int | None = None) -> bool:
        """Whether this broker (``node_id``, by default this one) leads the partition now."""
        return self._leader_id == (self._node_id if node_id is None else node_id) \
            and self._leader_state is not None

    def wake(self) -> None:
        self._hw_changed.set()
        self._hw_changed = trio.Event()

    def follower_high_watermark_moved(self) -> bool:
        """After the fetcher moved this follower's log: whether the high watermark (what
        consumers reading from this follower may see) differs from the last time asked."""
        hw = self.log.high_watermark
        moved, self._follower_hw = hw != self._follower_hw, hw
        return moved

    def follower_views(self) -> list[FollowerView]:
        """The leader's view of each follower, for choosing a preferred read replica (empty
        unless this broker leads)."""
        state = self._leader_state
        if state is None:
            return []
        isr = state.isr  # the committed ISR, as Kafka's inSyncReplicaIds
        # Observers serve consumers too, as in Confluent Server: a site that holds only an
        # observer still reads locally. The selector's log-end check keeps a lagging one unnamed.
        eligible = set(isr) | set(self._observers)
        return [FollowerView(r, r in eligible, state.follower_log_end_offset(r),
                             state.follower_log_start_offset(r), state.follower_last_caught_up_ms(r))
                for r in self._replicas if r != self._node_id]

    # -- the metadata: registrations and leadership -----------------------------------------------

    def apply_registration(self, reg: PartitionRegistration, now_ms: int, *, new: bool,
                           offline: bool = False, mirror: MirrorTopic | None = None) -> None:
        """Take what the metadata image now says of this partition: lead, follow or stay.
        ``mirror``: the topic's mirror entry when it is a cluster link's mirror topic."""
        changed = new or reg.leader != self._leader_id or reg.leader_epoch != self._leader_epoch
        self._mirror = mirror if mirror is not None and mirror.read_only else None
        self._leader_id, self._leader_epoch = reg.leader, reg.leader_epoch
        self._replicas, self._isr = list(reg.replicas), list(reg.isr)
        self._observers = reg.observers
        self._partition_epoch = reg.partition_epoch
        if offline:
            return  # its dir failed: neither leading nor following until a restart
        if reg.leader == self._node_id:
            state = self._leader_state
            if changed or state is None:
                self.make_leader(now_ms)
                return
            if state.update_registration(replicas=reg.replicas, isr=reg.isr,
                                         leader_epoch=reg.leader_epoch,
                                         partition_epoch=reg.partition_epoch, now_ms=now_ms,
                                         observers=reg.observers):
                self._advance_high_watermark(state.high_watermark)
            self.wake()  # the ISR size changed: min.insync.replicas may be met or not
        elif changed or self._leader_state is not None:
            self.make_follower()

    def make_leader(self, now_ms: int) -> None:
        """Start leading at the current leader epoch from this replica's log end."""
        plog = self.log
        plog.hw_follows_leo = False
        self._host.follow(self.key, None)
        leo = plog.log_end_offset
        # A new leader epoch starts at our log end: followers ahead of it in an older epoch
        # will find their tail diverges from here and truncate. Not on a mirror: its log holds
        # the source's epochs, batch by batch, and ours would break their order (a stopped
        # mirror leads at an epoch above every source epoch, see MirrorTopic.epoch_ceiling).
        if self._mirror is None:
            try:
                plog.leader_epoch_cache.assign(self._leader_epoch, leo)
            except OSError as exc:
                # The cache holds the new epoch; only its checkpoint file is behind, and it is
                # written again with the next epoch. A full disk must not stop the leadership.
                self._host.storage_fault(self.topic, self.index,
                                         storage_error(exc, "write the leader epoch checkpoint of", plog.dir))
        self._start_leader_state(now_ms)
        # A brand-new partition taking its first leader is not news; a leader change is.
        log.log(logging.INFO if self._leader_epoch > 0 or leo > 0 else logging.DEBUG,
                "Leading %s-%d at leader epoch %d from offset %d (high watermark %d, ISR %s)",
                self.topic, self.index, self._leader_epoch, leo, plog.high_watermark, self._isr)
        self.wake()
        self._host.wake_fetches()

    def _start_leader_state(self, now_ms: int) -> None:
        """The leader's view of its followers, starting from this replica's log end."""
        plog = self.log
        leo = plog.log_end_offset
        state = PartitionLeaderState(
            node_id=self._node_id, replicas=self._replicas, isr=self._isr,
            leader_epoch=self._leader_epoch, partition_epoch=self._partition_epoch,
            log_end_offset=leo, high_watermark=plog.high_watermark,
            leader_epoch_start_offset=leo, now_ms=now_ms, observers=self._observers,
            observer_policy=self._observer_policy)
        self._leader_state = state
        if state.high_watermark > plog.high_watermark:
            plog.maybe_increment_high_watermark(state.high_watermark)

    def _observer_policy(self) -> ObserverPolicy:
        """The topic's observer promotion policy and min.insync.replicas, read when needed: both
        are topic configs that can change while this broker leads."""
        config = self.log.config
        raw = config.confluent_placement_constraints
        if self._constraints_seen[0] != raw:
            try:
                parsed = parse_constraints(raw)
            except ConstraintError:
                parsed = None  # validated when set; an unreadable value promotes nobody
            # Observers ask on every fetch: parse the JSON once per value.
            self._constraints_seen = (raw, parsed.promotion_policy if parsed is not None else None)
        return ObserverPolicy(self._constraints_seen[1], config.min_insync_replicas)

    def make_follower(self) -> None:
        """Stop leading (if we did) and replicate from the leader the registration names."""
        was_leader = self._leader_state is not None
        self._leader_state = None
        self.log.hw_follows_leo = False
        self.wake()  # acks=all waiters answer NOT_LEADER_OR_FOLLOWER
        if self._leader_id >= 0 and self._leader_id != self._node_id:
            self._host.follow(self.key, FollowTarget(self._leader_id, self._leader_epoch))
        else:
            self._host.follow(self.key, None)
        if was_leader:
            log.info("Following %s-%d: leader %d at epoch %d", self.topic, self.index,
                     self._leader_id, self._leader_epoch)

    def stop(self) -> None:
        """Neither lead nor serve any more (dropped, its dir offline, the broker stopping):
        waiters answer NOT_LEADER_OR_FOLLOWER."""
        self._leader_state = None
        self.wake()

    # -- the leader's side: appends, followers, the ISR, the high watermark ------------------------

    def append(self, records: bytearray | memoryview, *, now_ms: int,
               from_client: bool = True) -> AppendResult:
        """Append a produce request's batches (``from_client=False``: the broker's own records)
        as leader, and wake the fetches waiting for data."""
        state = self._leader_state
        if state is None or not self.is_leader() or self._host.leadership_suspended:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if self._mirror is not None:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"Cannot append records to {self.topic}: it is a read-only mirror topic "
                             "(promote or fail it over to write to it)")
        try:
            result = self.log.append_as_leader(records, now_ms=now_ms, leader_epoch=self._leader_epoch,
                                               from_client=from_client)
        except LogStorageError as exc:
            self._host.storage_fault(self.topic, self.index, exc)
            raise
        self._host.storage_ok(self.topic, self.index)
        if not result.duplicate:
            # Followers parked in a long poll read the new batches now; with the leader alone
            # in the ISR the high watermark moves at once.
            if state.on_leader_append(self.log.log_end_offset):
                self._advance_high_watermark(state.high_watermark)
            self._host.wake_fetches()
        return AppendResult(result.first_offset, result.last_offset, result.log_append_time,
                            result.log_start_offset, result.record_count, result.duplicate)

    def check_min_insync(self) -> None:
        """acks=all's check before appending: the committed ISR must have min.insync.replicas."""
        state = self._leader_state
        needed = self.log.config.min_insync_replicas
        if state is not None and not state.enough_replicas(needed):
            raise KafkaError(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"The size of the current ISR {list(state.isr)} is insufficient to satisfy the "
                f"min.isr requirement of {needed} for partition {self.topic}-{self.index}")

    def delete_records_on_leader(self, offset: int) -> int:
        """DeleteRecords on this leader (Kafka's deleteRecordsOnLeader): move the log start to
        ``offset`` (-1: the high watermark) and return the offset the low watermark must reach."""
        plog = self.log
        if self._mirror is not None:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"Cannot delete records of {self.topic}: it is a read-only mirror topic "
                             "(it follows its source's log start)")
        if not plog.config.delete:
            raise KafkaError(ErrorCode.POLICY_VIOLATION,
                             f"Records of partition {self.topic}-{self.index} can not be deleted "
                             "due to the configured policy")
        target = plog.high_watermark if offset == -1 else offset
        if target < 0:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE, f"Invalid offset {offset}")
        if plog.maybe_increment_log_start_offset(target):
            log.info("Deleted records of %s-%d before offset %d", self.topic, self.index, target)
        return target

    def on_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: int, *,
                          log_start_offset: int = -1) -> None:
        """A follower fetched at ``fetch_offset`` (its log end): track it for the ISR and HW."""
        state = self._leader_state
        if state is None:
            return
        before = state.follower_log_start_offset(replica_id)
        if state.on_follower_fetch(replica_id, fetch_offset, self.log.log_end_offset, now_ms,
                                   log_start_offset=log_start_offset):
            self._advance_high_watermark(state.high_watermark)
        elif log_start_offset != before:
            self.wake()  # DeleteRecords waits for the followers' log starts
        self._send_proposal()

    def maybe_shrink_isr(self, now_ms: int, lag_time_max_ms: int) -> None:
        """Propose an ISR without the followers that fell behind for too long."""
        state = self._leader_state
        if state is not None:
            state.maybe_shrink(now_ms, lag_time_max_ms)
            self._send_proposal()

    def _send_proposal(self) -> None:
        state = self._leader_state
        if state is None or not self._host.can_propose_isr:
            return  # (without a sender the proposal stays queued)
        proposal = state.take_proposal()
        if proposal is None:
            return
        log.info("Proposing ISR %s for %s-%d (leader epoch %d, partition epoch %d)",
                 list(proposal.new_isr), self.topic, self.index, proposal.leader_epoch,
                 proposal.partition_epoch)

        def on_result(error: int, data: Any) -> None:
            self._on_isr_result(state, proposal, error, data)

        self._host.propose_isr(self.topic_id, self.index, proposal, on_result)

    def _on_isr_result(self, state: PartitionLeaderState, proposal: IsrProposal, error: int,
                       data: Any) -> None:
        if self._leader_state is not state:
            return  # leadership moved on meanwhile: the image is the truth now
        if error == ErrorCode.NONE:
            advanced = state.on_alter_partition_result(
                error=error, isr=tuple(data.isr), leader_epoch=data.leader_epoch,
                partition_epoch=data.partition_epoch, proposal=proposal)
        else:
            log.info("ISR change of %s-%d refused: %s", self.topic, self.index, error_name(error))
            advanced = state.on_alter_partition_result(error=error, proposal=proposal)
        if advanced:
            self._advance_high_watermark(state.high_watermark)
        self.wake()  # the ISR size decides NOT_ENOUGH_REPLICAS_AFTER_APPEND

    # -- a mirror topic's leader: its cluster link writes the source's batches -----------------------

    def mirror_log(self, leader_epoch: int) -> PartitionLog | None:
        """The log while this replica leads ``leader_epoch`` of a read-only mirror; None once
        it no longer does (a retargeted or stopped mirror drops what its fetch brought)."""
        if (self._mirror is None or self._leader_state is None or self._leader_epoch != leader_epoch
                or self._host.leadership_suspended):
            return None
        return self.log

    @property
    def mirror_epoch_ceiling(self) -> int:
        """The highest source leader epoch this mirror may hold (-1: not a mirror)."""
        return -1 if self._mirror is None else self._mirror.epoch_ceiling

    def append_mirrored(self, records: bytes | memoryview, *, now_ms: int) -> None:
        """Append the source's batches byte for byte at their own offsets, as a follower
        would, and move the high watermark as a leader does after an append."""
        state = self._leader_state
        assert state is not None and self._mirror is not None
        try:
            result = self.log.append_as_follower(records, now_ms=now_ms)
        except LogStorageError as exc:
            self._host.storage_fault(self.topic, self.index, exc)
            raise
        self._host.storage_ok(self.topic, self.index)
        if result is not None:
            if state.on_leader_append(self.log.log_end_offset):
                self._advance_high_watermark(state.high_watermark)
            self._host.wake_fetches()

    def truncate_mirrored(self, offset: int, *, now_ms: int, why: str) -> None:
        """Drop this mirror's tail from ``offset`` (the source truncated it, e.g. after an
        unclean election there, or this topic was a writable one restored as a mirror), or, for
        ``offset`` below the log start, restart the log empty there."""
        _require_mirror(self, self._mirror, "truncate")
        plog = self.log
        leo, hw = plog.log_end_offset, plog.high_watermark
        if offset < plog.log_start_offset:
            plog.truncate_fully_and_start_at(offset if offset >= 0 else leo, now_ms=now_ms)
        elif not plog.truncate_to(offset, now_ms=now_ms):
            return
        log.warning("Mirror %s-%d truncated from %d to %d (%d records dropped%s): %s", self.topic,
                    self.index, leo, plog.log_end_offset, leo - plog.log_end_offset,
                    f", {hw - plog.log_end_offset} below the high watermark"
                    if hw > plog.log_end_offset else "", why)
        # Followers find the cut through the leader epochs of their next fetch.
        self._start_leader_state(now_ms)
        self.wake()
        self._host.wake_fetches()

    def restart_mirrored_at(self, offset: int, *, now_ms: int, why: str) -> None:
        """Restart this mirror's log empty at ``offset`` (the source no longer has the
        records between our log end and it)."""
        _require_mirror(self, self._mirror, "restart")
        plog = self.log
        log.warning("Mirror %s-%d restarts at offset %d (log was %d-%d): %s", self.topic,
                    self.index, offset, plog.log_start_offset, plog.log_end_offset, why)
        plog.truncate_fully_and_start_at(offset, now_ms=now_ms)
        self._start_leader_state(now_ms)
        self.wake()
        self._host.wake_fetches()

    def follow_source_log_start(self, offset: int) -> None:
        """The source's log start moved (retention, DeleteRecords): so does the mirror's, up
        to what it has committed."""
        plog = self.log
        target = min(offset, plog.high_watermark)
        if target > plog.log_start_offset and plog.maybe_increment_log_start_offset(target):
            log.info("Mirror %s-%d follows its source's log start to %d", self.topic, self.index,
                     target)

    def _advance_high_watermark(self, hw: int) -> None:
        if _raise_high_watermark(self, hw):
            self.wake()
            self._host.wake_fetches()  # consumers read up to the high watermark

    # -- purgatories ----------------------------------------------------------------------------

    async def wait_for_replication(self, required_offset: int, deadline: float) -> ErrorCode:
        """The produce purgatory for acks=all (Kafka's DelayedProduce): wait until the high
        watermark reaches ``required_offset``, leadership is lost, or ``deadline`` (trio time)."""
        while True:
            state = self._leader_state
            if state is None or not self.is_leader():
                return ErrorCode.NOT_LEADER_OR_FOLLOWER
            if self.log.high_watermark >= required_offset:
                if not state.enough_replicas(self.log.config.min_insync_replicas):
                    return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
                return ErrorCode.NONE
            if trio.current_time() >= deadline:
                return ErrorCode.REQUEST_TIMED_OUT
            event = self._hw_changed
            with trio.move_on_at(deadline):
                await event.wait()

    async def wait_for_low_watermark(self, required_offset: int, deadline: float,
                                     alive: Callable[[int], bool]) -> tuple[ErrorCode, int]:
        """DeleteRecords' purgatory (Kafka's DelayedDeleteRecords): wait until every live
        replica's log starts at ``required_offset`` or later; answer the error and the low
        watermark reached (REQUEST_TIMED_OUT at ``deadline``, trio time)."""
        while True:
            state = self._leader_state
            if state is None or not self.is_leader():
                return ErrorCode.NOT_LEADER_OR_FOLLOWER, -1
            low = state.low_watermark(self.log.log_start_offset, alive)
            if low >= required_offset:
                return ErrorCode.NONE, low
            if trio.current_time() >= deadline:
                return ErrorCode.REQUEST_TIMED_OUT, low
            event = self._hw_changed
            with trio.move_on_at(deadline):
                await event.wait()

    # -- reads (Kafka's fetchRecords) -------------------------------------------------------------

    def read(self, offset: int, limit: int, *, min_one: bool, read_committed: bool) -> ReadResult:
        """A consumer's read, as leader or (KIP-392) as follower: below the high watermark (the
        last stable offset for read_committed, with the aborted transactions overlapping what
        was read, as Kafka's TXN_COMMITTED reads); OFFSET_OUT_OF_RANGE (a KafkaError) outside
        the local log. A follower's high watermark and last stable offset are the ones it learnt
        from the leader, so it never shows a consumer more than the leader would have; an offset
        between them and its log end reads nothing, one past its log end is out of range."""
        plog = self.log
        hw = plog.high_watermark
        lso = min(plog.last_stable_offset, hw)
        if not read_committed:
            records = self._read_region(offset, limit, hw, min_one)
            return ReadResult(ErrorCode.NONE, hw, lso, plog.log_start_offset, records,
                              across_segments=plog.on_other_segment(offset, hw))
        fslice = self._read_slice(offset, limit, lso, min_one)
        if fslice is None:
            # Nothing below the LSO to read: Kafka answers an empty list, not null.
            return ReadResult(ErrorCode.NONE, hw, lso, plog.log_start_offset, b"",
                              aborted_transactions=NO_ABORTED, across_segments=plog.on_other_segment(offset, lso))
        aborted = aborted_transactions(plog, offset, offset_after(plog, fslice))
        return ReadResult(ErrorCode.NONE, hw, lso, plog.log_start_offset, FileRegion.of(fslice),
                          aborted_transactions=aborted, across_segments=plog.on_other_segment(offset, lso))

    def remote_read(self, offset: int, limit: int) -> ReadResult:
        """A consumer's read below the local log start that remote storage serves."""
        plog = self.log
        hw = plog.high_watermark
        return ReadResult(ErrorCode.NONE, hw, min(plog.last_stable_offset, hw),
                          plog.log_start_offset, remote=RemoteRead(self, offset, limit))

    def read_for_follower(self, offset: int, limit: int, *, min_one: bool, last_fetched_epoch: int,
                          throttled: bool) -> ReadResult:
        """A follower's read up to the log end, with Kafka's divergence check: a last fetched
        epoch that ended earlier here is answered with a DivergingEpoch instead of records."""
        plog = self.log
        hw, local_start, leo = plog.high_watermark, plog.local_log_start_offset, plog.log_end_offset
        # Followers keep the whole log's start (DeleteRecords below the local log start of a
        # tiered log), except when out of range: they restart at the leader's local log start.
        start = plog.replicated_log_start_offset
        if last_fetched_epoch >= 0:
            epoch, end = plog.leader_epoch_cache.end_offset_for(last_fetched_epoch, leo)
            if epoch < last_fetched_epoch or end < offset:
                return ReadResult(ErrorCode.NONE, hw, hw, start, diverging_epoch=(epoch, end))
        if offset < local_start or offset > leo:
            return ReadResult(ErrorCode.OFFSET_OUT_OF_RANGE, hw, hw, local_start)
        if throttled:
            limit, min_one = 0, False
        records = self._read_region(offset, limit, None, min_one)
        return ReadResult(ErrorCode.NONE, hw, min(plog.last_stable_offset, hw), start, records,
                          across_segments=not throttled and plog.on_other_segment(offset, leo))

    def _read_region(self, offset: int, limit: int, max_offset: int | None,
                     min_one: bool) -> FileRegion | bytes:
        fslice = self._read_slice(offset, limit, max_offset, min_one)
        # Zero-copy: the listener sends the segment bytes with os.sendfile (or reads them itself
        # on streams that aren't plain sockets). The region owns the slice, and so the segment's
        # descriptor, until the reply has been written.
        return b"" if fslice is None else FileRegion.of(fslice)

    def _read_slice(self, offset: int, limit: int, max_offset: int | None,
                    min_one: bool) -> FetchSlice | None:
        """The log's read, None when it returns no bytes."""
        if limit <= 0 and not min_one:
            return None
        fslice = self.log.read(offset, limit, max_offset=max_offset, min_one_message=min_one)
        if fslice is None or fslice.size <= 0:
            return None
        return fslice


def _require_mirror(hosted: Partition, mirror: MirrorTopic | None, what: str) -> None:
    """Only a link's read-only mirror led here may have its log cut by the link: once stopped,
    the topic takes acknowledged writes of its own."""
    if mirror is None or hosted.leader_state is None:
        raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                         f"{hosted.topic}-{hosted.index} is no longer a mirror led here: not {what}ing its log")


def _raise_high_watermark(hosted: Partition, hw: int) -> bool:
    """Move the leader's high watermark up to ``hw`` (never back); True if it moved."""
    if hw > hosted.log.high_watermark:
        hosted.log.maybe_increment_high_watermark(hw)
        return True
    return False

