"""Runtime: a role's tasks live exactly as long as its ``async with`` block, and a failing
start-up surfaces as its own exception with the started tasks stopped."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from kafkapy.node.runtime import Runtime


class Ticker(Runtime):
    def __init__(self, fail_start: bool = False) -> None:
        self.ticks = 0
        self.fail_start = fail_start

    async def _start(self, nursery: trio.Nursery) -> None:
        nursery.start_soon(self._tick)
        if self.fail_start:
            await trio.sleep(1)
            raise RuntimeError("the broker was not unfenced in time")

    async def _tick(self) -> None:
        while True:
            await trio.sleep(1)
            self.ticks += 1


def run(fn) -> None:
    trio.run(fn, clock=trio.testing.MockClock(autojump_threshold=0))


def test_the_tasks_run_while_the_block_runs_and_stop_when_it_exits():
    ticker = Ticker()

    async def main() -> None:
        async with ticker:
            await trio.sleep(5.5)
        assert ticker.ticks == 5
        await trio.sleep(10)
        assert ticker.ticks == 5  # cancelled with the block

    run(main)


def test_a_failing_start_raises_its_own_error_and_stops_what_it_started():
    ticker = Ticker(fail_start=True)

    async def main() -> None:
        with pytest.raises(RuntimeError, match="not unfenced"):
            async with ticker:
                raise AssertionError("the body must not run")
        ticks = ticker.ticks
        await trio.sleep(10)
        assert ticker.ticks == ticks

    run(main)


def test_a_failing_task_cancels_the_block():
    class Failing(Runtime):
        async def _start(self, nursery: trio.Nursery) -> None:
            async def crash() -> None:
                await trio.sleep(2)
                raise OSError("disk gone")
            nursery.start_soon(crash)

    async def main() -> None:
        with pytest.raises(BaseExceptionGroup) as failed:
            async with Failing():
                await trio.sleep(100)
        assert failed.group_contains(OSError, match="disk gone")
        assert trio.current_time() == 2

    run(main)
