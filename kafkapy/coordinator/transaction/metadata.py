"""One transactional id's state and its two-phase transitions (Kafka's TransactionMetadata).

A change is made in two steps, as in Kafka: ``prepare_*`` checks it, marks the id with a pending
state (so no second change can start meanwhile) and returns a :class:`TxnTransition`, the whole
new state, which is what the ``__transaction_state`` record says; once that record is in the log,
:meth:`TransactionMetadata.complete` applies it, and if the write failed,
:meth:`TransactionMetadata.abandon` drops the pending state, leaving the id as it was.

One deliberate exception, Kafka's: fencing a producer (a second InitProducerId, or a timed-out
transaction) bumps the in-memory epoch before the abort is written, so the zombie is fenced at
once even if that write fails; ``failed_epoch_fence`` then stops the retry from bumping again.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kafkapy.coordinator.transaction.state import TransactionState
from kafkapy.protocol.errors import ErrorCode, KafkaError

TopicPartition = tuple[str, int]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_PRODUCER_EPOCH = 32767  # Short.MAX_VALUE

S = TransactionState


def epoch_exhausted(epoch: int) -> bool:
    """No epoch past this one may be handed to a client: the coordinator keeps the last one to
    fence with."""
    return epoch >= MAX_PRODUCER_EPOCH - 1


def supports_epoch_bump(transaction_version: int) -> bool:
    """transaction.version 2 (KIP-890 part 2) bumps the epoch on every commit and abort."""
    return transaction_version >= 2


class TransitionError(RuntimeError):
    """A transition broke the state machine's rules: a bug, never a client's doing."""


@dataclass(frozen=True)
class TxnTransition:
    """The state of a transactional id after one write (Kafka's TxnTransitMetadata)."""

    state: TransactionState
    producer_id: int
    prev_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int
    client_transaction_version: int


class TransactionMetadata:
    """A transactional id: its producer id and epoch, the open transaction's partitions and
    timestamps, and the state transition in flight (``pending``), if any."""

    def __init__(self, transactional_id: str, producer_id: int, *, prev_producer_id: int = NO_PRODUCER_ID,
                 next_producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
                 last_producer_epoch: int = NO_PRODUCER_EPOCH, txn_timeout_ms: int = 60_000,
                 state: TransactionState = S.EMPTY, partitions: set[TopicPartition] | None = None,
                 txn_start_timestamp: int = -1, txn_last_update_timestamp: int = -1,
                 client_transaction_version: int = 0) -> None:
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.prev_producer_id = prev_producer_id
        self.next_producer_id = next_producer_id
        self.producer_epoch = producer_epoch
        self.last_producer_epoch = last_producer_epoch
        self.txn_timeout_ms = txn_timeout_ms
        self.state = state
        self.partitions: set[TopicPartition] = set(partitions or ())
        self.txn_start_timestamp = txn_start_timestamp
        self.txn_last_update_timestamp = txn_last_update_timestamp
        self.client_transaction_version = client_transaction_version
        self.pending: TransactionState | None = None
        self.failed_epoch_fence = False
        self._fence_in_flight = False  # the pending PrepareAbort is an epoch fence's

    def __repr__(self) -> str:
        return (f"TransactionMetadata({self.transactional_id!r}, pid={self.producer_id}, "
                f"epoch={self.producer_epoch}, state={self.state.display_name}, pending={self.pending}, "
                f"partitions={sorted(self.partitions)})")

    @property
    def epoch_exhausted(self) -> bool:
        return epoch_exhausted(self.producer_epoch)

    @property
    def has_pending_transaction(self) -> bool:
        return self.state in (S.ONGOING, S.PREPARE_ABORT, S.PREPARE_COMMIT)

    def snapshot(self) -> TxnTransition:
        """The current state as a transition (what a record of it would say)."""
        return TxnTransition(self.state, self.producer_id, self.prev_producer_id, self.next_producer_id,
                             self.producer_epoch, self.last_producer_epoch, self.txn_timeout_ms,
                             frozenset(self.partitions), self.txn_start_timestamp,
                             self.txn_last_update_timestamp, self.client_transaction_version)

    # ------------------------------------------------------------------ prepare
    def _prepare(self, state: TransactionState, **changes: object) -> TxnTransition:
        if self.pending is not None:
            raise TransitionError(f"{self.transactional_id}: preparing {state.display_name} while "
                                  f"{self.pending.display_name} is pending")
        base = replace(self.snapshot(), state=state, prev_producer_id=self.producer_id)
        t = replace(base, **changes)  # type: ignore[arg-type]
        if t.producer_id < 0:
            raise TransitionError(f"{self.transactional_id}: illegal producer id {t.producer_id}")
        if state is not S.DEAD and t.producer_epoch < 0:
            raise TransitionError(f"{self.transactional_id}: illegal producer epoch {t.producer_epoch}")
        if not state.may_follow(self.state):
            raise TransitionError(f"{self.transactional_id}: {self.state.display_name} cannot become "
                                  f"{state.display_name}")
        self.pending = state
        return t

    def prepare_increment_epoch(self, txn_timeout_ms: int, expected_epoch: int | None,
                                now_ms: int) -> TxnTransition:
        """InitProducerId on an idle id: the next epoch, to Empty. With ``expected_epoch`` (KIP-360,
        a producer recovering after an error) a retry of a bump that already happened gets the
        same epoch back; an epoch that is neither current nor the last one is fenced."""
        if self.epoch_exhausted:
            raise TransitionError(f"{self.transactional_id}: producer id {self.producer_id} has no epochs left")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            # The response to an earlier bump was lost; a newer producer would have reset the last
            # epoch to -1, so handing the current one out again fences nobody.
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            raise KafkaError(ErrorCode.PRODUCER_FENCED,
                             f"expected epoch {expected_epoch} is neither the current epoch "
                             f"{self.producer_epoch} nor the last one {self.last_producer_epoch}")
        return self._prepare(S.EMPTY, producer_epoch=epoch, last_producer_epoch=last, txn_timeout_ms=txn_timeout_ms,
                             partitions=frozenset(), txn_start_timestamp=-1, txn_last_update_timestamp=now_ms)

    def prepare_rotate_producer_id(self, new_producer_id: int, txn_timeout_ms: int, now_ms: int,
                                   record_last_epoch: bool) -> TxnTransition:
        """InitProducerId when the epochs of the producer id are used up: a new id, epoch 0."""
        if self.has_pending_transaction:
            raise TransitionError(f"{self.transactional_id}: rotating the producer id with a transaction open")
        return self._prepare(S.EMPTY, producer_id=new_producer_id, producer_epoch=0,
                             last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
                             txn_timeout_ms=txn_timeout_ms, partitions=frozenset(), txn_start_timestamp=-1,
                             txn_last_update_timestamp=now_ms)

    def prepare_add_partitions(self, added: set[TopicPartition] | frozenset[TopicPartition], now_ms: int,
                               client_transaction_version: int) -> TxnTransition:
        """AddPartitionsToTxn / AddOffsetsToTxn: to Ongoing with the partitions added; the first
        partition starts the transaction's clock."""
        start = now_ms if self.state in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT) else self.txn_start_timestamp
        return self._prepare(S.ONGOING, partitions=frozenset(self.partitions | set(added)),
                             txn_start_timestamp=start, txn_last_update_timestamp=now_ms,
                             client_transaction_version=client_transaction_version)

    def prepare_fence_epoch(self) -> TxnTransition:
        """Mark an Ongoing transaction for an abort with a bumped epoch (only in memory: the write
        that follows is the abort, :meth:`prepare_fenced_abort`). A bump whose write failed is
        not repeated; nor is one past the largest epoch."""
        keep = self.failed_epoch_fence or self.producer_epoch >= MAX_PRODUCER_EPOCH
        epoch = self.producer_epoch if keep else self.producer_epoch + 1
        return self._prepare(S.PREPARE_EPOCH_FENCE, producer_epoch=epoch)

    def prepare_fenced_abort(self, fence: TxnTransition, server_transaction_version: int, now_ms: int) -> TxnTransition:
        """After :meth:`prepare_fence_epoch`: the PrepareAbort to write, under the fenced epoch."""
        if self.pending is not S.PREPARE_EPOCH_FENCE:
            raise TransitionError(f"{self.transactional_id}: no epoch fence in progress")
        self.pending = None
        self.producer_epoch = fence.producer_epoch
        self.last_producer_epoch = NO_PRODUCER_EPOCH
        t = self.prepare_abort_or_commit(S.PREPARE_ABORT, server_transaction_version, NO_PRODUCER_ID, now_ms)
        self._fence_in_flight = True
        return t

    def prepare_abort_or_commit(self, state: TransactionState, client_transaction_version: int,
                                next_producer_id: int, now_ms: int, no_partition_added: bool = False
                                ) -> TxnTransition:
        """EndTxn: to PrepareCommit or PrepareAbort. Under transaction.version 2 the epoch moves
        on here (KIP-890 part 2); before, it stays."""
        if supports_epoch_bump(client_transaction_version):
            at_max = self.producer_epoch >= MAX_PRODUCER_EPOCH and state is S.PREPARE_ABORT
            epoch = self.producer_epoch if at_max else self.producer_epoch + 1
            last = self.producer_epoch
        else:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        return self._prepare(state, producer_epoch=epoch, last_producer_epoch=last,
                             txn_start_timestamp=now_ms if no_partition_added else self.txn_start_timestamp,
                             next_producer_id=next_producer_id, txn_last_update_timestamp=now_ms,
                             client_transaction_version=client_transaction_version)

    def prepare_complete(self, now_ms: int) -> TxnTransition:
        """Every marker is written: PrepareCommit -> CompleteCommit, PrepareAbort -> CompleteAbort."""
        self.failed_epoch_fence = False  # the abort it led to is in the log
        state = S.COMPLETE_COMMIT if self.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        if supports_epoch_bump(self.client_transaction_version) and self.next_producer_id != NO_PRODUCER_ID:
            pid, epoch = self.next_producer_id, 0
        else:
            pid, epoch = self.producer_id, self.producer_epoch
        return self._prepare(state, producer_id=pid, producer_epoch=epoch, next_producer_id=NO_PRODUCER_ID,
                             partitions=frozenset(), txn_last_update_timestamp=now_ms)

    def prepare_dead(self) -> TxnTransition:
        """transactional.id.expiration.ms: the id is about to be tombstoned."""
        return self._prepare(S.DEAD, partitions=frozenset())

    # ------------------------------------------------------------------ complete / abandon
    def complete(self, t: TxnTransition) -> None:
        """The record of ``t`` is in the log: make it the state (Kafka's completeTransitionTo)."""
        if self.pending is None or self.pending is not t.state:
            raise TransitionError(f"{self.transactional_id}: completing {t.state.display_name} while "
                                  f"{'nothing' if self.pending is None else self.pending.display_name} is pending")
        if not self._valid_completion(t):
            raise TransitionError(f"{self.transactional_id}: {self!r} cannot complete to {t}")
        self.producer_id = t.producer_id
        self.prev_producer_id = t.prev_producer_id
        self.next_producer_id = t.next_producer_id
        self.producer_epoch = t.producer_epoch
        self.last_producer_epoch = t.last_producer_epoch
        self.txn_timeout_ms = t.txn_timeout_ms
        self.partitions = set(t.partitions)
        self.txn_start_timestamp = t.txn_start_timestamp
        self.txn_last_update_timestamp = t.txn_last_update_timestamp
        self.client_transaction_version = t.client_transaction_version
        self.pending = None
        self._fence_in_flight = False
        self.state = t.state

    def abandon(self) -> None:
        """The write of the pending transition failed: nothing changes (but see the module's note
        on epoch fences)."""
        if self._fence_in_flight:
            self.failed_epoch_fence = True
        self._fence_in_flight = False
        self.pending = None

    def _valid_completion(self, t: TxnTransition) -> bool:
        state = t.state
        if state is S.EMPTY:  # InitProducerId
            bump_ok = t.producer_epoch == self.producer_epoch + 1 or (
                t.producer_epoch == 0 and t.producer_id != self.producer_id)
            return (t.producer_epoch == self.producer_epoch or bump_ok) and not t.partitions \
                and t.txn_start_timestamp == -1
        if state is S.ONGOING:
            return self._same_producer(t) and t.partitions >= self.partitions \
                and t.txn_timeout_ms == self.txn_timeout_ms
        if state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            empty_abort = state is S.PREPARE_ABORT and supports_epoch_bump(t.client_transaction_version) \
                and self.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
            return self._same_producer(t) and t.partitions == self.partitions \
                and t.txn_timeout_ms == self.txn_timeout_ms \
                and (t.txn_start_timestamp == self.txn_start_timestamp or empty_abort)
        if state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            return self._same_producer(t) and t.txn_timeout_ms == self.txn_timeout_ms \
                and t.txn_start_timestamp != -1
        return False  # PrepareEpochFence and Dead are never completed

    def _same_producer(self, t: TxnTransition) -> bool:
        v2 = supports_epoch_bump(t.client_transaction_version)
        if v2 and t.state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT) and t.producer_epoch == 0:
            return t.last_producer_epoch == self.last_producer_epoch and t.prev_producer_id == self.producer_id
        if v2 and t.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return t.last_producer_epoch == self.producer_epoch and t.producer_id == self.producer_id
        return t.producer_epoch == self.producer_epoch and t.producer_id == self.producer_id

    # ------------------------------------------------------------------ markers
    def remove_partitions(self, partitions: set[TopicPartition] | frozenset[TopicPartition]) -> None:
        """Markers are in these partitions: they no longer wait for one."""
        if self.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            raise TransitionError(f"{self.transactional_id}: removing marker partitions in {self.state.display_name}")
        self.partitions -= set(partitions)


__all__ = [
    "MAX_PRODUCER_EPOCH", "NO_PRODUCER_EPOCH", "NO_PRODUCER_ID", "TopicPartition", "TransactionMetadata",
    "TransitionError", "TxnTransition", "epoch_exhausted", "supports_epoch_bump",
]
