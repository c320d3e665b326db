"""Replication throttles: which partitions are throttled, how the rate is measured, and that
in-sync replicas are never held back (Kafka's ReplicationQuotaManager semantics)."""

from __future__ import annotations

from kafkapy.replication.throttle import (
    ALL_PARTITIONS,
    FOLLOWER_REPLICAS as FOLLOWER_REPLICAS_KEY,
    LEADER_REPLICAS as LEADER_REPLICAS_KEY,
    Rate,
    ReplicationQuota,
    quota_bound,
    throttled_partitions,
    UNLIMITED,
)


def test_throttled_replicas_name_partitions_of_this_broker_or_all() -> None:
    assert throttled_partitions("0:1,1:2,2:1", 1) == {0, 2}
    assert throttled_partitions("0:1, 1:2", 2) == {1}
    assert throttled_partitions("*", 7) == ALL_PARTITIONS
    assert throttled_partitions("", 1) == frozenset()
    assert throttled_partitions(None, 1) == frozenset()
    assert throttled_partitions("x:1,3", 1) == frozenset()  # malformed entries are skipped


def test_rate_counts_at_least_the_window_minus_one_sample() -> None:
    r = Rate(samples=11, window_ms=1000)
    r.record(10_000, now_ms=0)
    # A fresh burst is spread over ten seconds, as Kafka's Rate does.
    assert r.measure(0) == 1000.0
    r.record(10_000, now_ms=5000)
    assert r.measure(5000) == 2000.0
    # Eleven seconds after the first sample, it has left the window.
    assert r.measure(11_500) == 1000.0
    assert r.measure(30_000) == 0.0


def test_quota_throttles_only_out_of_sync_throttled_replicas_while_exceeded() -> None:
    q = ReplicationQuota(broker_id=1, samples=11, window_ms=1000)
    q.set_topics({"t": "0:1,1:2", "u": "*", "v": None})
    assert q.is_throttled("t", 0) and not q.is_throttled("t", 1)
    assert q.is_throttled("u", 5) and not q.is_throttled("v", 0)
    assert not q.exceeded(0), "unlimited by default"
    q.record(1_000_000, now_ms=0)
    assert not q.exceeded(0)

    q.set_bound(1000)
    assert q.exceeded(0)
    assert q.should_throttle("t", 0, in_sync=False, now_ms=0)
    assert not q.should_throttle("t", 0, in_sync=True, now_ms=0), "the ISR is never slowed"
    assert not q.should_throttle("t", 1, in_sync=False, now_ms=0), "not throttled on this broker"
    # Once the burst leaves the window the quota lets data through again.
    assert not q.should_throttle("t", 0, in_sync=False, now_ms=12_000)

    q.set_topic("t", None)
    q.record(1_000_000, now_ms=12_000)
    assert not q.should_throttle("t", 0, in_sync=False, now_ms=12_000)
    assert q.should_throttle("u", 0, in_sync=False, now_ms=12_000)


def test_quota_bound_treats_the_default_as_unlimited() -> None:
    assert quota_bound(None) is None
    assert quota_bound(UNLIMITED) is None
    assert quota_bound("1024") == 1024


# -- the replica manager keeps the quotas in step with the metadata ---------------------------------

def _apply(image, records):
    from kafkapy.metadata.delta import MetadataDelta
    delta = MetadataDelta(image)
    for offset, record in enumerate(records, start=image.offset + 1):
        delta.replay(record, offset)
    return delta.apply()


def test_replica_manager_takes_rates_and_throttled_replicas_from_the_metadata(tmp_path) -> None:
    import uuid

    from kafkapy.broker.replica_manager import ReplicaManager
    from kafkapy.config import BrokerConfig
    from kafkapy.log.config import LogConfig
    from kafkapy.log.log_manager import LogManager
    from kafkapy.metadata.image import RESOURCE_BROKER, RESOURCE_TOPIC, MetadataImage
    from kafkapy.metadata.records import ConfigRecord, PartitionRecord, RegisterBrokerRecord, TopicRecord
    from kafkapy.metadata.update import MetadataUpdate

    tid = uuid.UUID(int=7)
    image = _apply(MetadataImage.empty("c"), [
        *(RegisterBrokerRecord(broker_id=b, incarnation_id=uuid.UUID(int=b), broker_epoch=b, fenced=False)
          for b in (1, 2, 3)),
        TopicRecord(name="t", topic_id=tid),
        PartitionRecord(partition_id=0, topic_id=tid, replicas=(1, 2, 3), isr=(1, 2), leader=1,
                        leader_epoch=0, partition_epoch=0),
        ConfigRecord(resource_type=RESOURCE_TOPIC, resource_name="t",
                     name=LEADER_REPLICAS_KEY, value="0:1,0:2"),
        ConfigRecord(resource_type=RESOURCE_TOPIC, resource_name="t",
                     name=FOLLOWER_REPLICAS_KEY, value="0:3"),
        ConfigRecord(resource_type=RESOURCE_BROKER, resource_name="", name="leader.replication.throttled.rate",
                     value="100"),
        ConfigRecord(resource_type=RESOURCE_BROKER, resource_name="1",
                     name="follower.replication.throttled.rate", value="200"),
    ])
    log_manager = LogManager([str(tmp_path)], LogConfig(), now_ms=0)
    try:
        manager = ReplicaManager(log_manager, BrokerConfig.from_sources({}), 1)
        manager.apply_update(MetadataUpdate.whole(image), now_ms=0)
        assert (manager.leader_quota.bound, manager.follower_quota.bound) == (100, 200)
        assert manager.leader_quota.is_throttled("t", 0)
        assert not manager.follower_quota.is_throttled("t", 0), "0:3 names another broker"

        hosted = manager.get("t", 0)
        manager.leader_quota.record(100_000, now_ms=0)
        assert manager.leader_throttled(hosted, 3, now_ms=0), "broker 3 is outside the ISR"
        assert not manager.leader_throttled(hosted, 2, now_ms=0), "the ISR is never throttled"

        after = _apply(image, [ConfigRecord(resource_type=RESOURCE_TOPIC, resource_name="t",
                                            name=LEADER_REPLICAS_KEY, value=None)])
        manager.apply_update(MetadataUpdate(image, after, changed_configs=frozenset({(RESOURCE_TOPIC, "t")})),
                             now_ms=0)
        assert not manager.leader_throttled(manager.get("t", 0), 3, now_ms=0)
    finally:
        log_manager.shutdown()


# -- the follower leaves throttled partitions out while its quota is exceeded -----------------------

def test_the_fetcher_stops_fetching_a_throttled_partition_while_over_its_quota(tmp_path) -> None:
    import trio
    import trio.testing

    from kafkapy.replication.fetcher import FetcherSettings, FollowTarget, ReplicaFetcherManager

    from .test_fetcher import KEY, FakeLeader, Host, open_log, write

    def copied(throttled: str | None) -> int:
        leader_log = open_log(tmp_path / str(throttled), "leader")
        follower = open_log(tmp_path / str(throttled), "follower")
        leader_log.hw_follows_leo = follower.hw_follows_leo = False
        for i in range(20):
            write(leader_log, 0, b"%d" % i + b"x" * 500)
        leader_log.update_high_watermark(leader_log.log_end_offset)
        host = Host(follower, {1: FakeLeader(leader_log)})
        quota = host.follower_quota = ReplicationQuota(2, samples=11, window_ms=1000)
        quota.set_bound(100)
        quota.set_topics({"t": throttled})
        # One batch per fetch, so the quota is checked between batches.
        manager = ReplicaFetcherManager(host, FetcherSettings(backoff_ms=100, partition_max_bytes=1),
                                        lambda: int(trio.current_time() * 1000))

        async def main() -> None:
            async with trio.open_nursery() as nursery:
                await nursery.start(manager.run)
                manager.follow({KEY: FollowTarget(1, 0)})
                await trio.sleep(3)
                nursery.cancel_scope.cancel()
        trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
        return follower.log_end_offset

    assert copied(None) == 20
    # Over 500 bytes a batch, counted over ten seconds at first: two batches pass 100 B/s, and
    # the rate stays above it until the first sample leaves the window.
    assert copied("0:2") == 2
    assert copied("*") == 2
    assert copied("0:1") == 20, "throttled on another broker only"
