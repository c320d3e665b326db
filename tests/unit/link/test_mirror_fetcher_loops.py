"""The mirror fetcher's loops: idle without spinning, and back as soon as a source partition has a leader."""

from __future__ import annotations

import trio
import trio.testing

from kafkapy.link.cluster_client import ClusterMetadata, PartitionInfo, TopicInfo
from kafkapy.link.mirror_fetcher import MirrorAssignment, MirrorFetcher
from kafkapy.metadata.link_configs import LinkSettings


class _Source:
    """A source whose ``orders``-0 is led by broker 1 (after ``leaderless`` answers naming no
    leader, as during an election) and which is never asked anything but metadata."""

    timeout = 5.0

    def __init__(self, leaderless: int = 0) -> None:
        self.metadata: ClusterMetadata | None = None
        self.requests = 0
        self.leaderless = leaderless

    async def refresh(self, topics: list[str] | None) -> ClusterMetadata:
        await trio.lowlevel.checkpoint()
        leader = -1 if self.leaderless > 0 else 1
        self.leaderless -= 1
        topic = TopicInfo("orders", None, {0: PartitionInfo(leader, 7)})  # type: ignore[arg-type]
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


SETTINGS = LinkSettings.of({"bootstrap.servers": "h:9092", "replica.fetch.backoff.ms": "1000"})


def run_for(seconds: float, host: _Host, source: _Source) -> None:
    """The fetcher filling ``orders``-0 for ``seconds`` of virtual time."""
    async def main() -> None:
        fetcher = MirrorFetcher("from-tokyo", source, SETTINGS, host, lambda: 0)  # type: ignore[arg-type]
        async with trio.open_nursery() as nursery:
            await nursery.start(fetcher.run)
            fetcher.assign({("orders", 0): MirrorAssignment("orders", 3)})
            await trio.sleep(seconds)
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_a_partition_whose_log_is_unavailable_is_retried_after_the_backoff_not_in_a_busy_loop() -> None:
    host, source = _Host(), _Source()
    # Without a checkpoint between two idle rounds the loop starves every other task of the
    # broker (its heartbeats included): virtual time would never reach 10 s.
    run_for(10, host, source)
    # Two looks (validate, fetch) per round, a round per backoff second; no request sent.
    assert 0 < host.replica.asked <= 2 * 12
    assert source.requests == 0


def test_a_source_partition_without_a_leader_is_looked_up_again_after_the_backoff() -> None:
    # The first two answers name no leader (an election on the source): the fetcher asks
    # again every replica.fetch.backoff.ms, not only after metadata.max.age.ms (5 minutes).
    host, source = _Host(), _Source(leaderless=2)
    run_for(10, host, source)
    assert host.replica.asked > 0  # a task for broker 1 runs: the partition is being filled
