"""Replication's promises on a three-broker cluster, one failure at a time.

* Two of three replicas down: ``acks=all`` fails with NOT_ENOUGH_REPLICAS and nothing is
  appended; once they are back the ISR grows to three again and produce succeeds.
* Unclean leader election off: a partition whose whole ISR is gone stays offline; turned on
  (IncrementalAlterConfigs), an out-of-sync replica leads and exactly the records acknowledged
  after it left the ISR are lost; the old leader comes back, truncates its divergent tail, and
  both copies agree.
* Group coordinator failover: the broker leading the group's ``__consumer_offsets`` partition is
  killed; the group goes on with another coordinator and its committed offsets.

Clusters come from ``kafkapy cluster up`` with short timeouts; every wait is bounded.
"""

from __future__ import annotations

import time

import pytest
import trio
from confluent_kafka import Consumer, TopicPartition

from helpers import FAST_FAILOVER, batch, create_topics, list_offsets, metadata, partition_response, produce
from kafkapy.net.client import KafkaClient
from kafkapy.protocol import ErrorCode, messages as m
from kafkapy.testing.cluster import LocalCluster, eventually
from kafkapy.testing.ledger import read_replica

BROKERS = (4, 5, 6)
OVERRIDES = {**FAST_FAILOVER, "offsets.topic.num.partitions": 3}
LATEST = -1


def send(cluster: LocalCluster, via: int, request, timeout: float = 15.0):
    async def main():
        with trio.fail_after(timeout):
            async with await KafkaClient.connect(*cluster.broker_address(via), client_id="replication-it") as c:
                return await c.send(request)
    return trio.run(main)


def partition_state(cluster: LocalCluster, topic: str, via: list[int], index: int = 0) -> tuple[int, tuple[int, ...]]:
    """(leader, sorted ISR) of one partition, as the first live broker in ``via`` reports it."""
    for b in via:
        try:
            meta = send(cluster, b, metadata(topic, allow_auto_create=False), timeout=5)
        except Exception:  # noqa: BLE001 - a broker that is down or restarting
            continue
        t = meta.topics[0]
        if t.error_code == ErrorCode.NONE:
            p = next(p for p in t.partitions if p.partition_index == index)
            return p.leader_id, tuple(sorted(p.isr_nodes))
    raise AssertionError(f"no broker of {via} knows {topic}")


def produce_code(cluster: LocalCluster, via: int, topic: str, values: list[bytes], acks: int = -1) -> int:
    resp = send(cluster, via, produce(topic, 0, batch(values), acks=acks))
    return partition_response(resp).error_code


def latest_offset(cluster: LocalCluster, via: int, topic: str) -> int:
    resp = send(cluster, via, list_offsets(topic, 0, LATEST))
    return resp.topics[0].partitions[0].offset


def whole_isrs(cluster: LocalCluster, topic: str, replicas: tuple[int, ...]) -> None:
    eventually(lambda: partition_state(cluster, topic, list(BROKERS))[1] == tuple(sorted(replicas)),
               timeout=60, what=f"{topic}'s ISR to be {sorted(replicas)} again")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with LocalCluster(tmp_path_factory.mktemp("replication"), controllers=3, brokers=3,
                      overrides=OVERRIDES) as c:
        c.up()
        eventually(lambda: len(send(c, 4, metadata(allow_auto_create=False)).brokers) == 3,
                   timeout=60, what="all three brokers to be unfenced")
        yield c


def test_acks_all_needs_min_insync_replicas(cluster):
    topic = "min-isr"
    created = send(cluster, 4, create_topics((topic, 1, 3), configs={"min.insync.replicas": "2"}))
    assert created.topics[0].error_code == ErrorCode.NONE
    whole_isrs(cluster, topic, BROKERS)
    leader, _ = partition_state(cluster, topic, list(BROKERS))
    # Sent to a follower: turned away with the leader's id, epoch and address (KIP-951).
    follower = next(b for b in BROKERS if b != leader)
    resp = send(cluster, follower, produce(topic, 0, batch([b"misrouted"])))
    turned = partition_response(resp)
    assert turned.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert turned.current_leader.leader_id == leader
    assert [(e.node_id, e.port) for e in resp.node_endpoints] == [(leader, cluster.broker_address(leader)[1])]
    assert produce_code(cluster, leader, topic, [b"a", b"b"]) == ErrorCode.NONE
    before = latest_offset(cluster, leader, topic)
    assert before == 2

    others = [b for b in BROKERS if b != leader]
    for b in others:
        cluster.kill9(b)
    # Fenced after their sessions, they leave the ISR; the leader is alone.
    eventually(lambda: partition_state(cluster, topic, [leader]) == (leader, (leader,)),
               timeout=30, what="the ISR to shrink to the leader")
    assert produce_code(cluster, leader, topic, [b"lost?"]) == ErrorCode.NOT_ENOUGH_REPLICAS
    assert latest_offset(cluster, leader, topic) == before, "nothing was appended"
    # acks=1 does not ask for replicas, as in Kafka.
    assert produce_code(cluster, leader, topic, [b"one"], acks=1) == ErrorCode.NONE

    cluster.up()
    whole_isrs(cluster, topic, BROKERS)
    assert produce_code(cluster, leader, topic, [b"c"]) == ErrorCode.NONE
    assert latest_offset(cluster, leader, topic) == before + 2


def _create_on(cluster: LocalCluster, topic: str, replicas: list[int], configs: dict[str, str]) -> None:
    Req = m.CreateTopicsRequest
    T = Req.CreatableTopic
    req = Req(topics=[T(name=topic, num_partitions=-1, replication_factor=-1,
                        assignments=[T.CreatableReplicaAssignment(partition_index=0, broker_ids=replicas)],
                        configs=[T.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])],
              timeout_ms=10000, validate_only=False)
    assert send(cluster, 6, req).topics[0].error_code == ErrorCode.NONE


def _set_unclean(cluster: LocalCluster, topic: str, value: str) -> None:
    Req = m.IncrementalAlterConfigsRequest
    R = Req.AlterConfigsResource
    req = Req(resources=[R(resource_type=2, resource_name=topic, configs=[
        R.AlterableConfig(name="unclean.leader.election.enable", config_operation=0, value=value)])],
        validate_only=False)
    assert send(cluster, 6, req).responses[0].error_code == ErrorCode.NONE


def test_unclean_election_off_keeps_the_partition_offline_and_on_loses_the_window(cluster):
    topic = "unclean"
    old_leader, follower, bystander = 4, 5, 6
    _create_on(cluster, topic, [old_leader, follower], {"min.insync.replicas": "1"})
    whole_isrs(cluster, topic, (old_leader, follower))
    before = [b"before-%d" % i for i in range(5)]
    assert produce_code(cluster, old_leader, topic, before) == ErrorCode.NONE

    cluster.kill9(follower)
    eventually(lambda: partition_state(cluster, topic, [bystander])[1] == (old_leader,),
               timeout=30, what="the follower to leave the ISR")
    # Acknowledged with only the leader in sync: the data-loss window of an unclean election.
    window = [b"window-%d" % i for i in range(4)]
    assert produce_code(cluster, old_leader, topic, window) == ErrorCode.NONE
    cluster.kill9(old_leader)
    eventually(lambda: partition_state(cluster, topic, [bystander])[0] == -1,
               timeout=30, what="the partition to go offline")

    cluster.start(follower)
    eventually(lambda: follower in [b.node_id for b in send(cluster, bystander, metadata(allow_auto_create=False)).brokers],
               timeout=30, what="the out-of-sync replica to be back")
    time.sleep(7)  # longer than the controller's unclean-election check interval (5 s)
    assert partition_state(cluster, topic, [bystander])[0] == -1, \
        "with unclean.leader.election.enable=false the partition waits for its ISR"
    assert produce_code(cluster, follower, topic, [b"x"]) == ErrorCode.NOT_LEADER_OR_FOLLOWER

    _set_unclean(cluster, topic, "true")
    eventually(lambda: partition_state(cluster, topic, [bystander])[0] == follower,
               timeout=30, what="the unclean election")
    # Exactly the window is gone: the new leader never had it.
    assert latest_offset(cluster, follower, topic) == len(before)
    after = [b"after-%d" % i for i in range(2)]
    assert produce_code(cluster, follower, topic, after) == ErrorCode.NONE

    cluster.start(old_leader)
    whole_isrs(cluster, topic, (old_leader, follower))
    assert "Truncating unclean-0" in cluster.log(old_leader)
    eventually(lambda: [v for _, v in read_replica(cluster.node_dir(old_leader) / "data", topic, 0).records]
               == before + after, timeout=30, what="the old leader to hold the new leader's log")
    assert [v for _, v in read_replica(cluster.node_dir(follower) / "data", topic, 0).records] == before + after


def test_group_survives_the_loss_of_its_coordinator(cluster):
    topic, group = "grouped", "failover-group"
    assert send(cluster, 4, create_topics((topic, 1, 3))).topics[0].error_code == ErrorCode.NONE
    whole_isrs(cluster, topic, BROKERS)
    leader, _ = partition_state(cluster, topic, list(BROKERS))
    assert produce_code(cluster, leader, topic, [b"m%d" % i for i in range(10)]) == ErrorCode.NONE
    def consumer() -> Consumer:
        return Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "session.timeout.ms": 6000})

    first = consumer()
    try:
        first.subscribe([topic])
        got = []
        deadline = time.monotonic() + 60
        while len(got) < 5 and time.monotonic() < deadline:
            msg = first.poll(1.0)
            if msg is not None and not msg.error():
                got.append(msg.offset())
        assert got[:5] == [0, 1, 2, 3, 4]
        first.commit(offsets=[TopicPartition(topic, 0, 5)], asynchronous=False)
    finally:
        first.close()
    # The group's __consumer_offsets partition (created by the first FindCoordinator) has three
    # in-sync replicas, and the commit above waited for all of them.
    for p in range(3):
        eventually(lambda p=p: len(partition_state(cluster, "__consumer_offsets", list(BROKERS), p)[1]) == 3,
                   timeout=60, what=f"__consumer_offsets-{p} to have three in-sync replicas")

    coord = send(cluster, 4, m.FindCoordinatorRequest(key=group, key_type=0, coordinator_keys=[group]))
    coordinator = coord.coordinators[0].node_id if getattr(coord, "coordinators", None) else coord.node_id
    cluster.kill9(coordinator)
    try:
        second = consumer()
        try:
            committed = eventually(
                lambda: second.committed([TopicPartition(topic, 0)], timeout=5)[0].offset == 5,
                timeout=60, what="the committed offset from the new coordinator")
            assert committed
            second.subscribe([topic])
            msg = None
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                msg = second.poll(1.0)
                if msg is not None and not msg.error():
                    break
            assert msg is not None and not msg.error() and msg.offset() == 5, \
                "the group resumes from its committed offset"
        finally:
            second.close()
    finally:
        cluster.up()


def test_delete_records_reaches_every_replica_and_survives_failover(cluster):
    """DeleteRecords answers once every live replica's log starts at the offset (the low
    watermark), so whichever replica leads next keeps the records deleted."""
    topic = "delete-records-rf3"
    created = send(cluster, 4, create_topics((topic, 1, 3)))
    assert created.topics[0].error_code == ErrorCode.NONE
    whole_isrs(cluster, topic, BROKERS)
    leader, _ = partition_state(cluster, topic, list(BROKERS))
    assert produce_code(cluster, leader, topic, [b"r%d" % i for i in range(10)]) == ErrorCode.NONE

    Req = m.DeleteRecordsRequest
    T = Req.DeleteRecordsTopic
    resp = send(cluster, leader, Req(timeout_ms=15000, topics=[
        T(name=topic, partitions=[T.DeleteRecordsPartition(partition_index=0, offset=6)])]))
    part = resp.topics[0].partitions[0]
    assert (part.error_code, part.low_watermark) == (ErrorCode.NONE, 6)

    cluster.kill9(leader)
    survivors = [b for b in BROKERS if b != leader]
    eventually(lambda: partition_state(cluster, topic, survivors)[0] in survivors,
               timeout=30, what="a new leader")
    new_leader, _ = partition_state(cluster, topic, survivors)
    earliest = send(cluster, new_leader, list_offsets(topic, 0, -2)).topics[0].partitions[0].offset
    assert earliest == 6
    cluster.up()
    whole_isrs(cluster, topic, BROKERS)
