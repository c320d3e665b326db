"""The leader's half of a replicated partition: followers' progress, the ISR, the high watermark.

Sans-I/O: fetches, appends, controller answers and ``now_ms`` come in as calls; ISR proposals
come out (``take_proposal``) for the edge to send as AlterPartition. The rules are Kafka's:

* a follower's log end is the offset it fetches at; it is *caught up* at a fetch that reaches the
  leader's log end, or at the time of its previous fetch if this one reaches the log end the
  leader had then (so a follower that keeps pace with a busy leader is never "behind");
* the high watermark is the smallest log end over the *maximal* ISR: the committed ISR plus a
  member being added (a member being removed still counts until the controller confirms), so
  the HW never counts on a replica the controller may not consider in sync; it never goes back;
* it does not advance at all while the committed ISR is smaller than the topic's effective
  ``min.insync.replicas`` (at most the replica count): Kafka 4.x's strict min ISR rule (KIP-966),
  which lets the controller elect any replica that left the ISR below that size (its ELR)
  without losing a committed record;
* a replica outside the ISR joins once its log end reaches both the HW and the start of the
  current leader epoch; an ISR member not caught up for ``replica.lag.time.max.ms`` leaves;
* observers (``confluent.placement.constraints``) replicate like any follower but join the ISR
  only while their topic's promotion policy says the partition needs them, and leave it once the
  synchronous replicas alone satisfy the policy again (``kafkapy.metadata.placement_constraints``;
  the controller checks the same rule);
* one proposal is in flight at a time and nothing new is proposed until it is answered (the next
  one must build on the partition epoch the answer brings); the metadata image
  (``update_registration``) is the truth and supersedes whatever was pending.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from kafkapy.metadata.placement_constraints import observer_may_join, observers_to_demote
from kafkapy.protocol.errors import ErrorCode

#: Errors after which the same proposal may simply be sent again.
_RETRIABLE = frozenset({
    ErrorCode.OPERATION_NOT_ATTEMPTED, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_CONTROLLER,
    ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.BROKER_NOT_AVAILABLE, ErrorCode.NETWORK_EXCEPTION,
})


class ObserverPolicy(NamedTuple):
    """The topic configs the leader reads as it goes: the observer promotion policy (None:
    never promote) and ``min.insync.replicas`` (observer promotion and the high watermark rule
    depend on it)."""

    promotion_policy: str | None
    min_insync: int


NO_OBSERVER_POLICY = ObserverPolicy(None, 1)


class IsrProposal(NamedTuple):
    """An ISR change for the controller, based on the partition epoch it was computed from."""

    new_isr: tuple[int, ...]
    leader_epoch: int
    partition_epoch: int


@dataclass
class FollowerProgress:
    """What the leader knows of one follower."""

    log_end_offset: int = -1
    # -1 until the follower's first fetch says (Fetch v5+ carries it): DeleteRecords waits for it.
    log_start_offset: int = -1
    last_caught_up_ms: int = 0
    last_fetch_ms: int = -1
    last_fetch_leader_leo: int = -1


class PartitionLeaderState:
    """ISR and high watermark of one partition this broker leads (see the module docstring)."""

    def __init__(self, *, node_id: int, replicas: Sequence[int], isr: Sequence[int], leader_epoch: int,
                 partition_epoch: int, log_end_offset: int, high_watermark: int,
                 leader_epoch_start_offset: int, now_ms: int, observers: Sequence[int] = (),
                 observer_policy: Callable[[], ObserverPolicy] = lambda: NO_OBSERVER_POLICY) -> None:
        self.node_id = node_id
        self.observers: tuple[int, ...] = tuple(observers)
        # A callable: the topic's config can change while this broker leads.
        self._observer_policy = observer_policy
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.leader_epoch_start_offset = leader_epoch_start_offset
        self.isr: tuple[int, ...] = tuple(isr)
        self._leo = log_end_offset
        self._hw = high_watermark
        self._replicas: tuple[int, ...] = tuple(replicas)
        # Every follower starts caught up (Kafka resets them on election): the lag clock runs
        # from the moment this broker leads.
        self._followers: dict[int, FollowerProgress] = {
            r: FollowerProgress(last_caught_up_ms=now_ms) for r in replicas if r != node_id}
        self._queued: IsrProposal | None = None
        self.in_flight: IsrProposal | None = None
        self._recompute_hw()

    # ---------------------------------------------------------------- views
    @property
    def high_watermark(self) -> int:
        return self._hw

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        pending = self.in_flight or self._queued
        if pending is None:
            return self.isr
        extra = tuple(r for r in pending.new_isr if r not in self.isr)
        return self.isr + extra

    def follower_log_end_offset(self, broker_id: int) -> int:
        f = self._followers.get(broker_id)
        return -1 if f is None else f.log_end_offset

    def follower_log_start_offset(self, broker_id: int) -> int:
        f = self._followers.get(broker_id)
        return -1 if f is None else f.log_start_offset

    def follower_last_caught_up_ms(self, broker_id: int) -> int:
        """When the follower was last caught up (-1 for a broker that is no follower here)."""
        f = self._followers.get(broker_id)
        return -1 if f is None else f.last_caught_up_ms

    def low_watermark(self, log_start_offset: int, alive: Callable[[int], bool]) -> int:
        """The smallest log start offset over this leader (``log_start_offset``) and its live
        followers: what DeleteRecords reports, and waits for, as Kafka's lowWatermarkIfLeader.
        A replica on a broker that is not alive does not hold the answer back."""
        low = log_start_offset
        for r, f in self._followers.items():
            if alive(r) and f.log_start_offset < low:
                low = f.log_start_offset
        return low

    def enough_replicas(self, min_insync: int) -> bool:
        return len(self.isr) >= min_insync

    # ---------------------------------------------------------------- events
    def update_registration(self, *, replicas: Sequence[int], isr: Sequence[int], leader_epoch: int,
                            partition_epoch: int, now_ms: int,
                            observers: Sequence[int] | None = None) -> bool:
        """The metadata image moved while this broker still leads; True if the high watermark
        advanced.

        An image older than what an AlterPartition answer already told us (a smaller partition
        epoch in the same leader epoch) is ignored, as Kafka's makeLeader does: the answer can
        overtake the metadata record it produced. A newer one supersedes any pending proposal,
        which the controller would refuse anyway (it was based on an older partition epoch).
        """
        if leader_epoch == self.leader_epoch and partition_epoch < self.partition_epoch:
            return False
        if partition_epoch > self.partition_epoch or leader_epoch != self.leader_epoch:
            self._queued = None
            self.in_flight = None
        self._replicas = tuple(replicas)
        if observers is not None:
            self.observers = tuple(observers)
        for r in list(self._followers):
            if r not in self._replicas:
                del self._followers[r]
        for r in self._replicas:
            if r != self.node_id and r not in self._followers:
                self._followers[r] = FollowerProgress(last_caught_up_ms=now_ms)
        self.isr = tuple(isr)
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        return self._recompute_hw()

    def on_leader_append(self, log_end_offset: int) -> bool:
        self._leo = log_end_offset
        return self._recompute_hw()

    def on_follower_fetch(self, broker_id: int, fetch_offset: int, leader_log_end_offset: int,
                          now_ms: int, log_start_offset: int = -1) -> bool:
        """A follower fetched at ``fetch_offset`` with its log starting at ``log_start_offset``;
        True if the high watermark advanced."""
        self._leo = leader_log_end_offset
        f = self._followers.get(broker_id)
        if f is None:
            return False  # not a replica (any more)
        if fetch_offset >= leader_log_end_offset:
            f.last_caught_up_ms = now_ms
        elif f.last_fetch_leader_leo >= 0 and fetch_offset >= f.last_fetch_leader_leo:
            f.last_caught_up_ms = max(f.last_caught_up_ms, f.last_fetch_ms)
        f.log_end_offset = fetch_offset
        f.log_start_offset = log_start_offset
        f.last_fetch_ms = now_ms
        f.last_fetch_leader_leo = leader_log_end_offset
        advanced = self._recompute_hw()
        self._maybe_expand(broker_id)
        return advanced

    def maybe_shrink(self, now_ms: int, lag_time_max_ms: int) -> None:
        """Queue a proposal without the ISR members that were not caught up for too long."""
        base = self._pending_isr()
        out = [r for r in base if r != self.node_id and r in self._followers
               and now_ms - self._followers[r].last_caught_up_ms > lag_time_max_ms]
        if out:
            self._propose(tuple(r for r in base if r not in out))
        elif self.observers:
            demoted = self._demotable(base)
            if demoted:
                self._propose(tuple(r for r in base if r not in demoted))

    def take_proposal(self) -> IsrProposal | None:
        """The next proposal to send; it is then in flight until its result arrives."""
        if self.in_flight is not None or self._queued is None:
            return None
        self.in_flight, self._queued = self._queued, None
        return self.in_flight

    def on_alter_partition_result(self, *, error: int, isr: Sequence[int] = (), leader_epoch: int = -1,
                                  partition_epoch: int = -1,
                                  proposal: IsrProposal | None = None) -> bool:
        """The controller's answer to the proposal in flight; True if the high watermark advanced
        (a confirmed shrink stops waiting for the members it removed).

        ``proposal`` names the proposal answered: an answer to one that is no longer in flight
        (superseded by metadata meanwhile) is ignored, as Kafka ignores a response that does not
        match its pending ISR state. Without it the answer is taken for the one in flight.
        """
        if proposal is not None and proposal != self.in_flight:
            return False
        sent, self.in_flight = self.in_flight, None
        if error == ErrorCode.NONE:
            if partition_epoch >= self.partition_epoch and leader_epoch in (-1, self.leader_epoch):
                self.isr = tuple(isr)
                self.partition_epoch = partition_epoch
            return self._recompute_hw()
        if error in _RETRIABLE and sent is not None and self._queued is None:
            self._queued = sent  # proposable again: the edge sends it with the next event
        # Anything else (stale epochs, ineligible replicas): wait for the metadata image.
        return False

    # ---------------------------------------------------------------- internals
    def _pending_isr(self) -> tuple[int, ...]:
        pending = self.in_flight or self._queued
        return pending.new_isr if pending is not None else self.isr

    def _propose(self, new_isr: tuple[int, ...]) -> None:
        # Kafka changes nothing while a proposal is in flight: the next one must be based on the
        # partition epoch the controller answers with, or the controller would refuse it.
        if self.in_flight is not None or new_isr == self._pending_isr():
            return
        self._queued = IsrProposal(new_isr, self.leader_epoch, self.partition_epoch)

    def _maybe_expand(self, broker_id: int) -> None:
        base = self._pending_isr()
        if broker_id in base or broker_id not in self._replicas:
            return
        if broker_id in self.observers and not self._may_promote(base):
            return
        leo = self._followers[broker_id].log_end_offset
        if leo >= self._hw and leo >= self.leader_epoch_start_offset:
            members = set(base) | {broker_id}
            self._propose(tuple(r for r in self._replicas if r in members))

    def _may_promote(self, isr: tuple[int, ...]) -> bool:
        policy = self._observer_policy()
        return observer_may_join(policy.promotion_policy, isr=isr, observers=self.observers,
                                 replicas=self._replicas, leader=self.node_id,
                                 min_insync=policy.min_insync)

    def _demotable(self, isr: tuple[int, ...]) -> tuple[int, ...]:
        policy = self._observer_policy()
        return observers_to_demote(policy.promotion_policy, isr=isr, observers=self.observers,
                                   replicas=self._replicas, leader=self.node_id,
                                   min_insync=policy.min_insync)

    def _under_min_isr(self) -> bool:
        # Kafka's Partition.isUnderMinIsr: the committed ISR against min(min ISR, replicas).
        return len(self.isr) < min(self._observer_policy().min_insync, len(self._replicas))

    def _recompute_hw(self) -> bool:
        if self._under_min_isr():
            return False
        candidate = self._leo
        for r in self.maximal_isr:
            if r == self.node_id:
                continue
            f = self._followers.get(r)
            candidate = min(candidate, f.log_end_offset if f is not None else -1)
        if candidate > self._hw:
            self._hw = candidate
            return True
        return False
