"""Where a follower cuts its log when the leader says it diverged (sans-I/O).

The leader answers a fetch whose last fetched epoch does not line up with its own history with a
DivergingEpoch: the largest epoch it has at or below the follower's, and where that epoch ends in
its log. The follower finds the same epoch in its own leader-epoch cache and truncates to the
smaller of the two end offsets. When the follower's largest epoch at or below the leader's is a
different epoch, that cut may not be the last: the next fetch carries the follower's new last
epoch and the leader checks again (Kafka's ``getOffsetTruncationState``).
"""

from __future__ import annotations

from typing import Protocol

UNDEFINED = -1


class EpochHistory(Protocol):
    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]: ...


def divergence_truncation(cache: EpochHistory, log_end_offset: int, high_watermark: int,
                          diverging_epoch: int, diverging_end_offset: int) -> tuple[int, bool]:
    """(offset to truncate to, whether truncation is complete)."""
    if diverging_end_offset == UNDEFINED:
        # The leader knows nothing of our epochs: only what was committed is safe.
        return min(high_watermark, log_end_offset), True
    if diverging_epoch == UNDEFINED:
        return min(diverging_end_offset, log_end_offset), True
    local_epoch, local_end = cache.end_offset_for(diverging_epoch, log_end_offset)
    if local_epoch == UNDEFINED or local_end == UNDEFINED:
        return min(diverging_end_offset, log_end_offset), True
    offset = min(diverging_end_offset, local_end, log_end_offset)
    return offset, local_epoch == diverging_epoch
