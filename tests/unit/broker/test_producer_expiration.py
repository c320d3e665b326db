"""The broker's producer-expiration task (Kafka's PeriodicProducerExpirationCheck) on Trio's
virtual clock: every producer.id.expiration.check.interval.ms each log forgets its idle
producers, with the producer.id.expiration.ms in force at that pass."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Awaitable, Callable, Iterator

import pytest
import trio
import trio.testing

from kafkapy.broker.config_view import BrokerLayers, broker_config_entries
from kafkapy.broker.producer_expiration import ProducerExpiration
from kafkapy.config import CLUSTER_WIDE, READ_ONLY, BrokerConfig, broker_update_mode
from kafkapy.log.config import LogConfig
from kafkapy.log.log_manager import LogManager
from kafkapy.records.builder import Record, build_batch

INTERVAL_MS = 600_000
PID = 9000


def on_virtual_clock(main: Callable[[], Awaitable[None]]) -> None:
    """Run ``main`` on MockClock (virtual time jumps whenever every task waits), bounded."""
    async def bounded() -> None:
        with trio.fail_after(24 * 3600):  # virtual seconds
            await main()
    trio.run(bounded, clock=trio.testing.MockClock(autojump_threshold=0))


def virtual_ms() -> int:
    return int(trio.current_time() * 1000)


class FakeLogs:
    """Records each expiry pass: (now_ms, producer.id.expiration.ms given)."""

    def __init__(self, fail_first: bool = False) -> None:
        self.passes: list[tuple[int, int | None]] = []
        self.fail_first = fail_first

    def expire_producers(self, now_ms: int, *, expiration_ms: int | None = None) -> int:
        self.passes.append((now_ms, expiration_ms))
        if self.fail_first and len(self.passes) == 1:
            raise RuntimeError("boom")
        return 0


def test_configs_have_kafkas_names_defaults_and_update_modes():
    config = BrokerConfig.from_sources({})
    assert config.get("producer.id.expiration.ms") == 86_400_000
    assert config.get("producer.id.expiration.check.interval.ms") == 600_000
    # As Kafka 4.x: the expiration is a cluster-wide dynamic config, the check interval static.
    assert broker_update_mode("producer.id.expiration.ms") == CLUSTER_WIDE
    assert broker_update_mode("producer.id.expiration.check.interval.ms") == READ_ONLY
    # Internal in Kafka: DescribeConfigs lists the interval only when it is set.
    names = {e.name: e for e in broker_config_entries(BrokerLayers(config))}
    assert "producer.id.expiration.ms" in names
    assert "producer.id.expiration.check.interval.ms" not in names
    set_ = BrokerConfig.from_sources({"producer.id.expiration.check.interval.ms": "500"})
    entry = {e.name: e for e in broker_config_entries(BrokerLayers(set_))}[
        "producer.id.expiration.check.interval.ms"]
    assert (entry.value, entry.read_only) == ("500", True)


def test_a_pass_every_check_interval_first_one_interval_after_start():
    logs = FakeLogs()
    expiration = {"ms": 86_400_000}

    async def main() -> None:
        task = ProducerExpiration(logs, virtual_ms, interval_ms=INTERVAL_MS,
                                  expiration_ms=lambda: expiration["ms"])
        async with trio.open_nursery() as nursery:
            await nursery.start(task.run)
            await trio.sleep(INTERVAL_MS / 1000 - 1)
            assert logs.passes == []
            await trio.sleep(1.5)
            expiration["ms"] = 5_000  # changed at runtime: the next pass uses it
            await trio.sleep(INTERVAL_MS / 1000)
            nursery.cancel_scope.cancel()

    on_virtual_clock(main)
    assert logs.passes == [(INTERVAL_MS, 86_400_000), (2 * INTERVAL_MS, 5_000)]


def test_a_failing_pass_does_not_stop_the_task():
    logs = FakeLogs(fail_first=True)

    async def main() -> None:
        task = ProducerExpiration(logs, virtual_ms, interval_ms=INTERVAL_MS,
                                  expiration_ms=lambda: 1_000)
        async with trio.open_nursery() as nursery:
            await nursery.start(task.run)
            await trio.sleep(2.5 * INTERVAL_MS / 1000)
            nursery.cancel_scope.cancel()

    on_virtual_clock(main)
    assert [now for now, _ in logs.passes] == [INTERVAL_MS, 2 * INTERVAL_MS]


@pytest.fixture
def log_dir() -> Iterator[str]:
    d = tempfile.mkdtemp(prefix="kafkapy-pidexp-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_idle_producer_of_a_real_log_goes_at_the_first_pass_past_its_expiration(log_dir):
    lm = LogManager([log_dir], LogConfig(), now_ms=0)
    log = lm.get_or_create("t", 0)
    # Written at virtual time 0; expires 1.2 s later, checked every 0.5 s: gone at 1.5 s.
    batch = build_batch([Record(None, b"v", timestamp=0)], producer_id=PID, producer_epoch=0,
                        base_sequence=0)
    log.append_as_leader(bytearray(batch), now_ms=0, leader_epoch=0)
    seen: list[tuple[int, bool]] = []

    async def main() -> None:
        task = ProducerExpiration(lm, virtual_ms, interval_ms=500, expiration_ms=lambda: 1_200)
        async with trio.open_nursery() as nursery:
            await nursery.start(task.run)
            for _ in range(4):
                await trio.sleep(0.5)
                await trio.sleep(0.01)  # just past the pass due at this time
                seen.append((virtual_ms() // 10 * 10,
                             log.producer_state.last_entry(PID) is not None))
            nursery.cancel_scope.cancel()

    try:
        on_virtual_clock(main)
    finally:
        lm.shutdown()
    assert seen == [(510, True), (1020, True), (1530, False), (2040, False)]
