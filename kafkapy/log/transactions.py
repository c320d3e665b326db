"""Which transactions of a partition are still unstable (the bookkeeping of Kafka's
ProducerStateManager behind the last stable offset).

A transaction is *ongoing* from its first transactional batch until its end marker is appended;
it is then *completed* but stays *unreplicated* while its marker is at or above the high
watermark, since a new leader might not have the marker. The first offset of the oldest
unstable (ongoing or unreplicated) transaction bounds what READ_COMMITTED consumers may read:
the partition log's last stable offset.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["CompletedTxn", "TransactionTracker"]


class CompletedTxn(NamedTuple):
    """A transaction an end marker closed: from its first offset to the marker's offset."""

    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    aborted: bool


class TransactionTracker:
    """Ongoing and unreplicated transactions of one partition, keyed by first offset (a
    producer has at most one open transaction, and no two start at the same offset)."""

    def __init__(self) -> None:
        self.ongoing: dict[int, int] = {}  # first offset -> producer id
        self.unreplicated: dict[int, CompletedTxn] = {}  # first offset -> the completed txn

    def clear(self) -> None:
        self.ongoing.clear()
        self.unreplicated.clear()

    def start(self, producer_id: int, first_offset: int) -> None:
        self.ongoing[first_offset] = producer_id

    def first_undecided_offset(self) -> int | None:
        """First offset of the oldest ongoing transaction (None when none is open)."""
        return min(self.ongoing) if self.ongoing else None

    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest ongoing or unreplicated transaction, or None."""
        firsts = [*self.ongoing, *self.unreplicated]
        return min(firsts) if firsts else None

    def last_stable_offset(self, txn: CompletedTxn) -> int:
        """The LSO a completed transaction's ``.txnindex`` entry records (Kafka's
        lastStableOffset(completedTxn)): where the oldest ongoing transaction of another producer
        starts, else just past the marker."""
        others = [first for first, pid in self.ongoing.items() if pid != txn.producer_id]
        return min(others) if others else txn.last_offset + 1

    def complete(self, txn: CompletedTxn) -> None:
        """The transaction's marker is in the log: it waits for the high watermark to pass it."""
        self.ongoing.pop(txn.first_offset, None)
        self.unreplicated[txn.first_offset] = txn

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Completed transactions whose marker is now below the high watermark are stable."""
        self.remove_unreplicated_below(high_watermark)

    def remove_unreplicated_below(self, offset: int) -> None:
        """Forget completed transactions whose marker is below ``offset`` (the high watermark, or
        a new log start offset)."""
        if self.unreplicated:
            self.unreplicated = {first: t for first, t in self.unreplicated.items()
                                 if t.last_offset >= offset}
