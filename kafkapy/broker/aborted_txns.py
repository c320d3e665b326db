"""The aborted transactions a read_committed fetch lists with its records.

A read_committed consumer filters aborted records itself: with the batches it reads, the broker
sends the (producer id, first offset) of every aborted transaction that overlaps the range read,
[fetch offset, upper bound), and the consumer drops the transactional batches of those producers
from each first offset until the producer's ABORT marker (Kafka's
LocalLog.addAbortedTransactions). The log's transaction index answers which transactions overlap
(``collect_aborted_transactions``); this module finds the upper bound and shapes the answer.

The upper bound is the offset just past the bytes returned: the next batch's base offset when
the read stopped inside its segment, else the next segment's base offset, or the log end after
the active segment. Kafka takes the first offset-index entry at or after the end of the read
instead, which can lie a few kilobytes of batches further on; the transactions the two bounds
disagree on all start after the returned records, where no consumer looks, so the lists differ
only in entries that are never used.
"""

from __future__ import annotations

import bisect
import os
import struct
from collections.abc import Sequence
from typing import Final, Protocol

from kafkapy.log.partition_log import PartitionLog

__all__ = ["NO_ABORTED", "AbortedTxnIndex", "aborted_transactions", "offset_after"]

#: A read_committed answer without aborted transactions (an empty array, not null).
NO_ABORTED: Final[tuple[tuple[int, int], ...]] = ()

# The log's framing of each batch: base offset, then the length of the rest (Kafka's
# LOG_OVERHEAD). Reading it is enough to learn where the next batch starts and at which offset.
_FRAME = struct.Struct(">qi")


class AbortedTxnEntry(Protocol):
    """One aborted transaction as the log's transaction index gives it."""

    @property
    def producer_id(self) -> int: ...

    @property
    def first_offset(self) -> int: ...


class AbortedTxnIndex(Protocol):
    """What the partition log answers: the aborted transactions overlapping a range."""

    def collect_aborted_transactions(self, start_offset: int,
                                     upper_bound_offset: int) -> Sequence[AbortedTxnEntry]: ...


class ReadSlice(Protocol):
    """The part of a log read this module looks at (a log ``FetchSlice``)."""

    position: int
    size: int

    def fileno(self) -> int: ...


def offset_after(plog: PartitionLog, read: ReadSlice) -> int:
    """The offset just past the batches of ``read`` (a non-empty slice of one segment file)."""
    fd = read.fileno()
    head = os.pread(fd, _FRAME.size, read.position + read.size)
    if len(head) == _FRAME.size:
        base, length = _FRAME.unpack(head)
        if length > 0:
            return int(base)
    # The read ran to the end of its segment: what follows starts at the next segment's base.
    first = int(_FRAME.unpack(os.pread(fd, _FRAME.size, read.position))[0])
    if first >= plog.active.base_offset:
        return plog.log_end_offset
    bases = [s.base_offset for s in plog.segments]
    i = bisect.bisect_right(bases, first)
    return bases[i] if i < len(bases) else plog.log_end_offset


def aborted_transactions(log: AbortedTxnIndex, start_offset: int,
                         upper_bound_offset: int) -> Sequence[tuple[int, int]]:
    """(producer id, first offset) of each aborted transaction of ``log`` overlapping
    [start_offset, upper_bound_offset), in the index's order."""
    found = log.collect_aborted_transactions(start_offset, upper_bound_offset)
    if not found:
        return NO_ABORTED
    return [(t.producer_id, t.first_offset) for t in found]
