"""The states of a transactional id, with Kafka's ids (the ``TransactionStatus`` byte of
``__transaction_state`` values), the names DescribeTransactions and ListTransactions report, and
which state may follow which.

PrepareEpochFence is never written: it only marks, in memory, an Ongoing transaction the
coordinator is about to abort with a bumped epoch (a second InitProducerId, or a timeout).
"""

from __future__ import annotations

from enum import IntEnum


class TransactionState(IntEnum):
    """A transactional id's state; the value is the id Kafka writes."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display_name(self) -> str:
        """The name DescribeTransactions / ListTransactions report ("Ongoing", ...)."""
        return _NAMES[self]

    @property
    def expiration_allowed(self) -> bool:
        """Whether transactional.id.expiration.ms may remove an id idle in this state."""
        return self in (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT,
                        TransactionState.COMPLETE_ABORT)

    @property
    def valid_previous(self) -> frozenset[TransactionState]:
        """The states a transition into this one may start from."""
        return _PREVIOUS[self]

    def may_follow(self, current: TransactionState) -> bool:
        return current in _PREVIOUS[self]

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        """The state called ``name`` (case-sensitive, as Kafka), or None."""
        return _BY_NAME.get(name)


S = TransactionState

_NAMES: dict[TransactionState, str] = {
    S.EMPTY: "Empty",
    S.ONGOING: "Ongoing",
    S.PREPARE_COMMIT: "PrepareCommit",
    S.PREPARE_ABORT: "PrepareAbort",
    S.COMPLETE_COMMIT: "CompleteCommit",
    S.COMPLETE_ABORT: "CompleteAbort",
    S.DEAD: "Dead",
    S.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: state for state, name in _NAMES.items()}

_COMPLETE = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})
_PREVIOUS: dict[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: _COMPLETE,
    S.ONGOING: _COMPLETE | {S.ONGOING},
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    # Empty and Complete* may go to PrepareAbort only under transaction.version 2 (an abort the
    # client sends when unsure whether anything was added); the coordinator checks the version.
    S.PREPARE_ABORT: _COMPLETE | {S.ONGOING, S.PREPARE_EPOCH_FENCE},
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: _COMPLETE,
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}

__all__ = ["TransactionState"]
