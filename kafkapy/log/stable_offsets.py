"""The high watermark and what transactions make of it: the last stable offset and the aborted
transactions a READ_COMMITTED fetch must be told about (Kafka's UnifiedLog, its LSO parts).

A base class of ``PartitionLog``, which owns the fields named below; kept apart so the
transaction rules read in one place.
"""

from __future__ import annotations

from abc import abstractmethod

from kafkapy.log.local_log import LocalLog
from kafkapy.log.producer_state import ProducerStateManager
from kafkapy.log.transaction_index import AbortedTxn

__all__ = ["StableOffsets"]


class StableOffsets:
    """High watermark, last stable offset and aborted-transaction lookups of a partition log."""

    # Set by PartitionLog.
    producer_state: ProducerStateManager
    _local: LocalLog
    _log_hw: int

    @property
    @abstractmethod
    def log_start_offset(self) -> int:
        """Where the whole log starts, the floor of the last stable offset: PartitionLog's."""

    @property
    def high_watermark(self) -> int:
        """The last committed offset + 1: what READ_UNCOMMITTED consumers may read up to."""
        return self._log_hw

    @property
    def _high_watermark(self) -> int:
        return self._log_hw

    @_high_watermark.setter
    def _high_watermark(self, hw: int) -> None:
        # Every move is told to the producer state: completed transactions whose marker falls
        # below it become stable (Kafka's onHighWatermarkUpdated).
        self._log_hw = hw
        self.producer_state.on_high_watermark_updated(hw)

    @property
    def last_stable_offset(self) -> int:
        """READ_COMMITTED bound (Kafka's lastStableOffset): the first offset of the oldest
        unstable transaction (open, or completed with its marker not yet below the high
        watermark), never below the log start; the high watermark when there is none or it
        lies above."""
        first = self.producer_state.first_unstable_offset()
        hw = self._log_hw
        return hw if first is None else min(max(first, self.log_start_offset), hw)

    def collect_aborted_transactions(self, start_offset: int,
                                     upper_bound_offset: int) -> list[AbortedTxn]:
        """Every aborted transaction with last offset >= ``start_offset`` and first offset <
        ``upper_bound_offset``, from the ``.txnindex`` files of the segment holding
        ``start_offset`` on, stopping where Kafka does (at an entry whose last stable offset
        reaches the upper bound); in marker order. For READ_COMMITTED fetches."""
        return self._local.collect_aborted_transactions(start_offset, upper_bound_offset)
