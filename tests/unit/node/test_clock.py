"""NodeClock: one time source whose wall clock, monotonic clock and sleeps move together under
Trio's MockClock, and whose wall clock is the system's on Trio's real clock."""

from __future__ import annotations

import time

import trio
import trio.testing

from kafkapy.quorum.clock import NodeClock


def test_under_mock_clock_wall_time_monotonic_time_and_sleeps_move_together():
    async def main() -> None:
        clock = NodeClock()
        wall, mono, raft = clock.now_ms(), clock.monotonic(), clock.raft.now_ms()
        await clock.sleep(3600)
        assert clock.now_ms() - wall == 3_600_000
        assert clock.monotonic() - mono == 3600
        assert clock.raft.now_ms() - raft == 3_600_000
        await clock.sleep_until(clock.monotonic() + 1.5)
        assert clock.now_ms() - wall == 3_601_500
        assert abs(wall - time.time() * 1000) < 60_000, "anchored at the wall clock"

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_on_trios_real_clock_the_wall_clock_is_the_systems():
    async def main() -> None:
        clock = NodeClock()
        before = time.time_ns() // 1_000_000
        now = clock.now_ms()
        assert before <= now <= time.time_ns() // 1_000_000

    trio.run(main)
