"""What the replica manager answers for one partition: an append, a fetch read.

Typed results rather than tuples, so the Produce and Fetch handlers (and the coordinators that
write to internal topics) name what they use. A read that must continue in remote storage says so
in ``remote`` (Kafka's RemoteStorageFetchInfo) instead of hiding a placeholder in ``records``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.events import FileRegion

if TYPE_CHECKING:
    from kafkapy.broker.partition import Partition


@dataclass(frozen=True, slots=True)
class AppendResult:
    """One partition's append as leader: what the Produce response reports."""

    first_offset: int
    last_offset: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    record_count: int
    # A retried batch the log already holds: acknowledged at its first offset, not appended again.
    duplicate: bool = False

    @property
    def next_offset(self) -> int:
        """The offset the high watermark must reach for acks=all (the end of the append)."""
        return self.last_offset + 1


@dataclass(frozen=True, slots=True)
class FetchParams:
    """What one Fetch request asks of every partition it reads (Kafka's FetchParams)."""

    replica_id: int = -1  # >= 0: a follower replicating, reading up to the log end
    read_committed: bool = False  # consumers with isolation.level=read_committed stop at the LSO
    now_ms: int = 0
    # A consumer's client.rack from Fetch v11+ ("" when it set none); None before v11, whose
    # consumers read from leaders only (Kafka's FetchParams without ClientMetadata).
    client_rack: str | None = None
    # The listener the fetch came in on: a preferred read replica needs an endpoint there.
    listener: str = ""

    @property
    def from_follower(self) -> bool:
        return self.replica_id >= 0


@dataclass(frozen=True, slots=True)
class RemoteRead:
    """The rest of a read below the local log start of a tiered log: ``limit`` bytes from
    ``offset`` out of remote storage (KIP-405), done off the event loop after the local reads."""

    partition: Partition
    offset: int
    limit: int


@dataclass(frozen=True, slots=True)
class ReadResult:
    """One partition of a fetch response."""

    error: ErrorCode = ErrorCode.NONE
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: FileRegion | bytes = b""
    # A follower's last fetched epoch ended earlier here: (epoch, end offset) to truncate to.
    diverging_epoch: tuple[int, int] | None = None
    remote: RemoteRead | None = None
    # A replica fetch of a throttled partition: its bytes count against the leader's quota.
    throttled: bool = False
    # read_committed: (producer id, first offset) of the aborted transactions overlapping what
    # was read (empty when none); None for every other read (null in the response, as Kafka).
    aborted_transactions: Sequence[tuple[int, int]] | None = None
    # The fetch offset and the readable end lie in different segments. From an older segment a
    # read stops at that segment's end, so waiting for min_bytes cannot make this partition's
    # answer bigger; from a newer one the offset is past an end that truncation moved back (a
    # new leader's high watermark, say). Kafka's DelayedFetch completes both at once (the two
    # halves of its case F), and so does ours.
    across_segments: bool = False
    # The leader names another replica for this consumer to read from (KIP-392): no records.
    preferred_read_replica: int = -1

    @property
    def size(self) -> int:
        return len(self.records)

    @classmethod
    def failed(cls, error: ErrorCode, high_watermark: int = -1, log_start_offset: int = -1,
               last_stable_offset: int = -1) -> ReadResult:
        return cls(error, high_watermark, last_stable_offset, log_start_offset)
