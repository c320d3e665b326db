"""The quorum's default clock: Trio's clock, anchored to the wall clock.

The Raft core needs ``now_ms`` on every call and the driver sleeps until the core's next
deadline; both must run on the same clock, or a test on Trio's ``MockClock`` would see timers
that never fire (or all fire at once). ``TrioClock`` reads ``trio.current_time()`` and adds the
wall-clock offset taken on first use, so its values look like Kafka's wall-clock milliseconds
(DescribeQuorum reports them) yet advance exactly as Trio's sleeps do.
"""

from __future__ import annotations

import time

import trio


class TrioClock:
    """``now_ms()`` on Trio's clock (virtual under ``MockClock``), wall-clock-like in value.

    Must be first read inside ``trio.run``; one instance may be shared by several drivers."""

    def __init__(self) -> None:
        self._offset_ms: int | None = None

    def now_ms(self) -> int:
        trio_ms = int(trio.current_time() * 1000)
        if self._offset_ms is None:
            self._offset_ms = time.time_ns() // 1_000_000 - trio_ms
        return self._offset_ms + trio_ms


__all__ = ["TrioClock"]
