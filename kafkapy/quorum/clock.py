"""The node's one clock: wall-clock milliseconds, a monotonic clock and sleeps, all on Trio.

A node has timers in every layer (the Raft core's election and fetch deadlines, broker
heartbeats, the controller's session expiry, ISR expiry, retention passes, request deadlines).
They must all run on the same clock, or a test on Trio's ``MockClock`` would see some timers
jump while others never fire. ``NodeClock`` is that clock:

* ``monotonic()`` / ``monotonic_ms()`` and ``sleep``/``sleep_until`` are Trio's clock, virtual
  under ``MockClock``;
* ``now_ms()`` is the wall clock Kafka stamps records with and compares retention against. On
  Trio's real clock it is the system's time of day (as Kafka's ``System.currentTimeMillis``);
  under any other Trio clock (``MockClock``) it is the wall time at first use plus Trio's
  elapsed time, so it moves exactly as virtual time does.

``TrioClock`` (the quorum's clock) is the same anchored reading for every Trio clock: the Raft
core compares its deadlines with ``now_ms`` and the driver sleeps on Trio, so a step of the
system time must not fire (or stall) its timers. ``NodeClock.raft`` hands the quorum that view
of the node's clock.
"""

from __future__ import annotations

import time

import trio
import trio.testing


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


class NodeClock:
    """The one time source of a node (see the module docstring); created by ``Node`` and passed
    down to every part that reads the time or sleeps.

    ``virtual`` forces the anchored wall clock (True) or the system's (False); by default it is
    chosen on first use from the running Trio clock (anchored under ``MockClock``)."""

    def __init__(self, *, virtual: bool | None = None) -> None:
        self._virtual = virtual
        self.raft = TrioClock()

    def _is_virtual(self) -> bool:
        if self._virtual is None:
            self._virtual = isinstance(trio.lowlevel.current_clock(), trio.testing.MockClock)
        return self._virtual

    def now_ms(self) -> int:
        """Wall-clock milliseconds since the epoch."""
        if self._is_virtual():
            return self.raft.now_ms()
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        """Seconds on Trio's clock (only differences mean anything)."""
        return trio.current_time()

    def monotonic_ms(self) -> int:
        return int(trio.current_time() * 1000)

    async def sleep(self, seconds: float) -> None:
        await trio.sleep(max(0.0, seconds))

    async def sleep_until(self, deadline: float) -> None:
        """Sleep until ``monotonic()`` reaches ``deadline``."""
        await trio.sleep_until(deadline)


__all__ = ["NodeClock", "TrioClock"]
