"""ReplicaFetcherManager against an in-memory leader: copies, divergence, out of range, retargets.

The "leader" is a real PartitionLog answering Fetch requests the way the broker's replica path
does (records up to its log end, a DivergingEpoch when the follower's last epoch ended earlier);
the follower is another PartitionLog. Trio's mock clock makes the waits instant.
"""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from kafkapy.log.config import LogConfig
from kafkapy.log.partition_log import PartitionLog
from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import ErrorCode
from kafkapy.records.builder import Record, build_batch
from kafkapy.replication.fetcher import FetcherSettings, FollowTarget, ReplicaFetcherManager

KEY = ("t", 0)
R = m.FetchResponse
T = R.FetchableTopicResponse
P = T.PartitionData


def open_log(path, name: str) -> PartitionLog:
    return PartitionLog.open(str(path / f"{name}" / "t-0"), LogConfig(), now_ms=0, recover=False)


def write(plog: PartitionLog, epoch: int, *values: bytes) -> None:
    plog.append_as_leader(bytearray(build_batch([Record(None, v) for v in values], now_ms=0)),
                          now_ms=0, leader_epoch=epoch)


class FakeLeader:
    """A broker answering replica fetches from ``log``; ``error`` overrides the answer."""

    def __init__(self, log: PartitionLog) -> None:
        self.log = log
        self.error = ErrorCode.NONE
        self.requests = 0

    async def send(self, request: Any, version: int, timeout: Any = None) -> Any:
        self.requests += 1
        await trio.sleep(0.01)
        (part,) = request.topics[0].partitions
        plog = self.log
        out = P(partition_index=0, error_code=self.error, high_watermark=plog.high_watermark,
                last_stable_offset=plog.high_watermark, log_start_offset=plog.log_start_offset,
                aborted_transactions=None, preferred_read_replica=-1, records=b"")
        if self.error == ErrorCode.NONE:
            epoch, end = plog.leader_epoch_cache.end_offset_for(part.last_fetched_epoch, plog.log_end_offset)
            if part.last_fetched_epoch >= 0 and (epoch < part.last_fetched_epoch or end < part.fetch_offset):
                out.diverging_epoch = P.EpochEndOffset(epoch=epoch, end_offset=end)
            elif part.fetch_offset < plog.local_log_start_offset:
                out.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
            else:
                data = plog.read(part.fetch_offset, part.partition_max_bytes)
                out.records = data.read_bytes() if data is not None else b""
        return R(throttle_time_ms=0, error_code=0, session_id=0, responses=[T(topic="t", partitions=[out])])

    async def aclose(self) -> None:
        pass


class Host:
    node_id = 2

    def __init__(self, follower: PartitionLog, leaders: dict[int, FakeLeader]) -> None:
        self.follower = follower
        self.leaders = leaders
        self.epoch = 0
        self.progress = 0

    def follower_log(self, topic: str, partition: int, leader_epoch: int):
        return self.follower if leader_epoch == self.epoch else None

    async def connect(self, broker_id: int):
        if broker_id not in self.leaders:
            raise OSError("connection refused")
        return self.leaders[broker_id]

    def on_follower_progress(self, topic: str, partition: int) -> None:
        self.progress += 1


def follow(host: Host, leader_id: int, epoch: int, seconds: float) -> ReplicaFetcherManager:
    manager = ReplicaFetcherManager(host, FetcherSettings(backoff_ms=100), lambda: 0)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(manager.run)
            host.epoch = epoch
            manager.follow({KEY: FollowTarget(leader_id, epoch)})
            await trio.sleep(seconds)
            nursery.cancel_scope.cancel()
    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return manager


def test_the_follower_copies_the_leaders_batches_byte_for_byte(tmp_path):
    leader_log, follower = open_log(tmp_path, "leader"), open_log(tmp_path, "follower")
    leader_log.hw_follows_leo = follower.hw_follows_leo = False
    write(leader_log, 0, b"a", b"b")
    write(leader_log, 1, b"c")
    leader_log.update_high_watermark(2)
    follow(Host(follower, {1: FakeLeader(leader_log)}), 1, 1, seconds=2)
    assert follower.log_end_offset == 3
    assert follower.high_watermark == 2, "the leader's high watermark, no further"
    assert follower.read(0, 1 << 20).read_bytes() == leader_log.read(0, 1 << 20).read_bytes()
    assert [(e.epoch, e.start_offset) for e in follower.leader_epoch_cache.entries] == [(0, 0), (1, 2)]


def test_a_divergent_tail_is_truncated_before_fetching_on(tmp_path):
    leader_log, follower = open_log(tmp_path, "leader"), open_log(tmp_path, "follower")
    write(leader_log, 0, b"a", b"b")
    write(follower, 0, b"a", b"b")
    write(follower, 1, b"only-on-the-old-leader")  # epoch 1 never reached the new leader
    write(leader_log, 2, b"c", b"d")               # the new leader's epoch 2
    follow(Host(follower, {3: FakeLeader(leader_log)}), 3, 2, seconds=2)
    assert follower.log_end_offset == 4
    assert follower.read(0, 1 << 20).read_bytes() == leader_log.read(0, 1 << 20).read_bytes()


def test_behind_the_leaders_log_start_the_follower_restarts_there(tmp_path):
    leader_log, follower = open_log(tmp_path, "leader"), open_log(tmp_path, "follower")
    write(leader_log, 0, b"a", b"b", b"c")
    leader_log.maybe_increment_log_start_offset(2)
    leader_log.delete_old_segments(0)
    follow(Host(follower, {1: FakeLeader(leader_log)}), 1, 0, seconds=2)
    assert follower.local_log_start_offset == 2 and follower.log_end_offset == 3


def test_errors_back_off_and_an_unreachable_leader_is_retried(tmp_path):
    leader_log, follower = open_log(tmp_path, "leader"), open_log(tmp_path, "follower")
    write(leader_log, 0, b"a")
    fake = FakeLeader(leader_log)
    fake.error = ErrorCode.NOT_LEADER_OR_FOLLOWER
    follow(Host(follower, {1: fake}), 1, 0, seconds=1)
    assert follower.log_end_offset == 0
    assert fake.requests <= 12, "backs off (100 ms) instead of spinning"
    # A leader that cannot be reached at all: nothing breaks, nothing is written.
    follow(Host(follower, {}), 9, 0, seconds=1)
    assert follower.log_end_offset == 0


def test_a_stale_leader_epoch_is_not_followed(tmp_path):
    leader_log, follower = open_log(tmp_path, "leader"), open_log(tmp_path, "follower")
    write(leader_log, 0, b"a")
    host = Host(follower, {1: FakeLeader(leader_log)})
    manager = ReplicaFetcherManager(host, FetcherSettings(backoff_ms=100), lambda: 0)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(manager.run)
            host.epoch = 5  # the broker already follows a newer epoch than the target below
            manager.follow({KEY: FollowTarget(1, 4)})
            await trio.sleep(1)
            manager.unfollow([KEY])
            assert manager.following() == {}
            nursery.cancel_scope.cancel()
    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert follower.log_end_offset == 0


def test_data_for_a_partition_retargeted_mid_request_is_discarded(tmp_path):
    leader_log, follower = open_log(tmp_path, "leader"), open_log(tmp_path, "follower")
    write(leader_log, 0, b"a", b"b")
    slow = FakeLeader(leader_log)
    original_send = slow.send

    async def slow_send(request: Any, version: int, timeout: Any = None) -> Any:
        await trio.sleep(1)  # the answer arrives after the retarget below
        return await original_send(request, version, timeout)
    slow.send = slow_send  # type: ignore[method-assign]
    host = Host(follower, {1: slow})  # broker 3 is unreachable
    manager = ReplicaFetcherManager(host, FetcherSettings(backoff_ms=100), lambda: 0)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(manager.run)
            manager.follow({KEY: FollowTarget(1, 0)})
            await trio.sleep(0.5)
            host.epoch = 1
            manager.follow({KEY: FollowTarget(3, 1)})
            await trio.sleep(2)
            assert manager.following() == {KEY: FollowTarget(3, 1)}
            nursery.cancel_scope.cancel()
    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert slow.requests == 1, "the old leader's fetcher ended once it had nothing to follow"
    assert follower.log_end_offset == 0, "the old leader's answer was dropped"


def test_fetch_v12_diverging_epoch_round_trips_through_the_codec():
    out = P(partition_index=0, error_code=0, high_watermark=5, last_stable_offset=5, log_start_offset=0,
            aborted_transactions=None, preferred_read_replica=-1, records=b"")
    out.diverging_epoch = P.EpochEndOffset(epoch=3, end_offset=7)
    resp = R(throttle_time_ms=0, error_code=0, session_id=0, responses=[T(topic="t", partitions=[out])])
    resp = R.decode(resp.encode(version=12), version=12)
    (p,) = resp.responses[0].partitions
    assert (p.diverging_epoch.epoch, p.diverging_epoch.end_offset) == (3, 7)



def run_for(manager: ReplicaFetcherManager, seconds: float, during=None) -> None:
    async def main() -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(manager.run)
            if during is not None:
                await during()
            await trio.sleep(seconds)
            nursery.cancel_scope.cancel()
    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_the_request_is_a_sessionless_v12_replica_fetch_from_the_logs_position(tmp_path):
    leader_log, follower = open_log(tmp_path, "leader"), open_log(tmp_path, "follower")
    write(leader_log, 0, b"a")
    write(leader_log, 4, b"b")
    write(follower, 0, b"a")
    seen: list[tuple[Any, int]] = []
    fake = FakeLeader(leader_log)
    original = fake.send

    async def recording_send(request: Any, version: int, timeout: Any = None) -> Any:
        seen.append((request, version))
        return await original(request, version, timeout)
    fake.send = recording_send  # type: ignore[method-assign]
    settings = FetcherSettings(max_wait_ms=250, min_bytes=7, max_bytes=9999, partition_max_bytes=777)
    host = Host(follower, {1: fake})
    host.epoch = 4
    manager = ReplicaFetcherManager(host, settings, lambda: 0)
    manager.follow({KEY: FollowTarget(1, 4)})
    run_for(manager, 0.005)
    request, version = seen[0]
    assert version == 12
    assert (request.replica_id, request.max_wait_ms, request.min_bytes, request.max_bytes) == (2, 250, 7, 9999)
    assert (request.isolation_level, request.session_id, request.session_epoch) == (0, 0, -1)
    assert request.forgotten_topics_data == [] and request.rack_id == ""
    (topic,) = request.topics
    (p,) = topic.partitions
    assert topic.topic == "t"
    assert (p.partition, p.current_leader_epoch, p.fetch_offset, p.last_fetched_epoch,
            p.log_start_offset, p.partition_max_bytes) == (0, 4, 1, 0, 0, 777)


def test_an_ex_leaders_tail_of_an_epoch_the_new_leader_never_had_is_cut_in_two_rounds(tmp_path, caplog):
    leader_log, follower = open_log(tmp_path, "leader"), open_log(tmp_path, "follower")
    # Both wrote offsets 0..4 in epoch 0. Then the new leader took epoch 2 (5..9) and, after a
    # failover, epoch 4 (10..11); the restarted ex-leader had instead kept leading epoch 0 to
    # offset 9 and then led epoch 3 (10..14), which nobody else ever got.
    write(leader_log, 0, *[b"x%d" % i for i in range(5)])
    write(follower, 0, *[b"x%d" % i for i in range(5)])
    write(leader_log, 2, *[b"leader%d" % i for i in range(5, 10)])
    write(follower, 0, *[b"ex-leader%d" % i for i in range(5, 10)])
    write(follower, 3, *[b"ex-leader%d" % i for i in range(10, 15)])
    write(leader_log, 4, b"leader10", b"leader11")
    host = Host(follower, {1: FakeLeader(leader_log)})
    caplog.set_level("INFO", logger="kafkapy.replication.fetcher")
    follow(host, 1, 4, seconds=2)
    assert follower.read(0, 1 << 20).read_bytes() == leader_log.read(0, 1 << 20).read_bytes()
    assert follower.log_end_offset == 12
    assert [(e.epoch, e.start_offset) for e in follower.leader_epoch_cache.entries] == [(0, 0), (2, 5), (4, 10)]
    truncations = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Truncating")]
    assert truncations == ["Truncating t-0 to 10 (diverged from leader 1 at epoch 2)",
                           "Truncating t-0 to 5 (diverged from leader 1 at epoch 0)"]
    assert host.progress >= 3


def test_an_unreachable_leader_is_retried_after_the_backoff(tmp_path):
    follower = open_log(tmp_path, "follower")
    attempts: list[float] = []

    class Unreachable(Host):
        async def connect(self, broker_id: int):
            attempts.append(trio.current_time())
            raise OSError("connection refused")

    host = Unreachable(follower, {})
    manager = ReplicaFetcherManager(host, FetcherSettings(backoff_ms=100), lambda: 0)
    manager.follow({KEY: FollowTarget(1, 0)})
    run_for(manager, 1.0)
    assert 5 <= len(attempts) <= 11, "retries, one per backoff"
    gaps = [b - a for a, b in zip(attempts, attempts[1:])]
    assert min(gaps) >= 0.1 - 1e-9
    assert manager.following() == {KEY: FollowTarget(1, 0)}


def test_a_leader_that_never_answers_times_out_and_is_reconnected(tmp_path):
    follower = open_log(tmp_path, "follower")
    connects = 0

    class Silent:
        async def send(self, request: Any, version: int, timeout: Any = None) -> Any:
            await trio.sleep_forever()

        async def aclose(self) -> None:
            pass

    class SilentHost(Host):
        async def connect(self, broker_id: int):
            nonlocal connects
            connects += 1
            return Silent()

    manager = ReplicaFetcherManager(SilentHost(follower, {}),
                                    FetcherSettings(backoff_ms=100, request_timeout_ms=2000), lambda: 0)
    manager.follow({KEY: FollowTarget(1, 0)})
    run_for(manager, 5.0)
    assert connects == 3, "a new connection after each 2 s timeout plus 100 ms backoff"


def test_corrupt_data_backs_the_partition_off_and_replication_resumes(tmp_path, caplog):
    leader_log, follower = open_log(tmp_path, "leader"), open_log(tmp_path, "follower")
    write(leader_log, 0, b"a", b"b")
    fake = FakeLeader(leader_log)
    original = fake.send
    corrupt_answers = 3
    corrupted_at: list[float] = []

    async def corrupting_send(request: Any, version: int, timeout: Any = None) -> Any:
        nonlocal corrupt_answers
        response = await original(request, version, timeout)
        p = response.responses[0].partitions[0]
        if corrupt_answers and p.records:
            corrupt_answers -= 1
            corrupted_at.append(trio.current_time())
            data = bytearray(p.records)
            data[-1] ^= 0xFF  # breaks the batch CRC
            p.records = bytes(data)
        return response
    fake.send = corrupting_send  # type: ignore[method-assign]
    follow(Host(follower, {1: fake}), 1, 0, seconds=1)
    assert follower.log_end_offset == 2
    gaps = [b - a for a, b in zip(corrupted_at, corrupted_at[1:])]
    assert len(gaps) == 2 and min(gaps) >= 0.1, "each corrupt answer costs one backoff (100 ms)"
    assert any("CRC" in r.getMessage() for r in caplog.records if r.levelname == "ERROR")


def test_a_top_level_error_backs_the_whole_fetcher_off(tmp_path):
    leader_log, follower = open_log(tmp_path, "leader"), open_log(tmp_path, "follower")

    class Throttling(FakeLeader):
        async def send(self, request: Any, version: int, timeout: Any = None) -> Any:
            self.requests += 1
            return R(throttle_time_ms=0, error_code=ErrorCode.UNKNOWN_SERVER_ERROR, session_id=0,
                     responses=[])
    fake = Throttling(leader_log)
    follow(Host(follower, {1: fake}), 1, 0, seconds=1)
    assert 5 <= fake.requests <= 11


def test_the_leaders_log_start_offset_is_followed(tmp_path):
    leader_log, follower = open_log(tmp_path, "leader"), open_log(tmp_path, "follower")
    write(leader_log, 0, b"a", b"b", b"c")
    write(leader_log, 0, b"d")
    host = Host(follower, {1: FakeLeader(leader_log)})
    manager = ReplicaFetcherManager(host, FetcherSettings(backoff_ms=100), lambda: 0)

    async def during() -> None:
        manager.follow({KEY: FollowTarget(1, 0)})
        await trio.sleep(1)
        assert follower.log_end_offset == 4 and follower.local_log_start_offset == 0
        leader_log.maybe_increment_log_start_offset(3)  # DeleteRecords on the leader
    run_for(manager, 1.0, during)
    assert follower.local_log_start_offset == 3 and follower.log_end_offset == 4


def test_a_fetcher_with_nothing_left_to_follow_ends(tmp_path):
    leader_log, follower = open_log(tmp_path, "leader"), open_log(tmp_path, "follower")
    write(leader_log, 0, b"a")
    fake = FakeLeader(leader_log)
    host = Host(follower, {1: fake})
    manager = ReplicaFetcherManager(host, FetcherSettings(max_wait_ms=100), lambda: 0)

    async def during() -> None:
        manager.follow({KEY: FollowTarget(1, 0)})
        await trio.sleep(1)
        manager.unfollow([KEY])
        await trio.sleep(1)
        requests = fake.requests
        await trio.sleep(5)
        assert fake.requests == requests, "no more fetches for an empty fetcher"
        assert manager.following() == {}
        # Following again starts a new fetcher for that broker.
        write(leader_log, 0, b"b")
        manager.follow({KEY: FollowTarget(1, 0)})
    run_for(manager, 1.0, during)
    assert follower.log_end_offset == 2
