"""A mirror fetcher with nothing it may fetch waits instead of spinning the event loop."""

from __future__ import annotations

import trio
import trio.testing

from kafkapy.link.cluster_client import ClusterMetadata, PartitionInfo, TopicInfo
from kafkapy.link.mirror_fetcher import MirrorAssignment, MirrorFetcher
from kafkapy.metadata.link_configs import LinkSettings


class _Source:
    """A source that leads ``orders``-0 on broker 1 and is never asked anything else."""

    timeout = 5.0

    def __init__(self) -> None:
        self.metadata: ClusterMetadata | None = None
        self.requests = 0

    async def refresh(self, topics: list[str] | None) -> ClusterMetadata:
        await trio.lowlevel.checkpoint()
        topic = TopicInfo("orders", None, {0: PartitionInfo(1, 7)})  # type: ignore[arg-type]
        self.metadata = ClusterMetadata("source", {1: ("h", 9092)}, {"orders": topic}, trio.current_time())
        return self.metadata

    async def send_to(self, *args: object, **kwargs: object) -> object:
        self.requests += 1
        raise AssertionError("nothing should be fetched")

    async def aclose(self) -> None:
        pass


class Spinning(BaseException):
    """Raised past the fetcher's ``except Exception`` so a busy loop fails the test, not hangs it."""


class _Replica:
    """A mirror partition whose log is not available (leadership suspended: contact with the
    controllers lost, or not yet leading the assigned epoch)."""

    def __init__(self) -> None:
        self.asked = 0

    def mirror_log(self, leader_epoch: int) -> None:
        self.asked += 1
        if self.asked > 10_000:
            raise Spinning(f"asked {self.asked} times for the log")
        return None


class _Host:
    def __init__(self) -> None:
        self.replica = _Replica()

    def mirror_replica(self, topic: str, partition: int) -> _Replica:
        return self.replica


def test_a_partition_whose_log_is_unavailable_is_retried_after_the_backoff_not_in_a_busy_loop() -> None:
    host, source = _Host(), _Source()
    settings = LinkSettings.of({"bootstrap.servers": "h:9092", "replica.fetch.backoff.ms": "1000"})

    async def main() -> None:
        fetcher = MirrorFetcher("from-tokyo", source, settings, host, lambda: 0)  # type: ignore[arg-type]
        async with trio.open_nursery() as nursery:
            await nursery.start(fetcher.run)
            fetcher.assign({("orders", 0): MirrorAssignment("orders", 3)})
            # Without a checkpoint between two idle rounds this sleep never ends: the loop
            # starves every other task of the broker (its heartbeats included).
            await trio.sleep(10)
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    # Two looks (validate, fetch) per round, a round per backoff second; no request sent.
    assert 0 < host.replica.asked <= 2 * 12
    assert source.requests == 0
