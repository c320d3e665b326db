"""A mirror follows its source through an unclean leader election there.

The source is a cluster of one controller and two brokers; its topic's follower is killed, the
leader takes records alone (acknowledged, and mirrored), the leader is killed too, and the
out-of-sync follower comes back and is elected uncleanly: the source lost the window. The mirror
must lose the same records (its tail past the new leader's history is cut, and the log says so),
then take the new leader's records, so that both logs are the same bytes at the same offsets.
"""

from __future__ import annotations

import json

import pytest
from helpers import FAST_FAILOVER, batch, list_offsets, metadata, produce, wait_for
from test_cluster_links import call, kafkapy, raw_log

from kafkapy.protocol import ErrorCode
from kafkapy.protocol import messages as m
from kafkapy.testing.cluster import LocalCluster, eventually
from kafkapy.testing.node import KafkaNode

TOPIC = "unclean"


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    with LocalCluster(tmp_path_factory.mktemp("unclean-source"), controllers=1, brokers=2,
                      overrides=FAST_FAILOVER) as c:
        c.up()
        yield c


@pytest.fixture(scope="module")
def dest(tmp_path_factory):
    with KafkaNode(tmp_path_factory.mktemp("unclean-dest")) as n:
        yield n


class Broker:
    """One source broker, addressed as the helpers address a node."""

    def __init__(self, cluster: LocalCluster, node_id: int) -> None:
        self.host, self.port = cluster.broker_address(node_id)


def state(cluster: LocalCluster) -> tuple[int, tuple[int, ...]]:
    for b in cluster.broker_ids():
        try:
            t = call(Broker(cluster, b), metadata(TOPIC, allow_auto_create=False), timeout=5).topics[0]
        except Exception:  # noqa: BLE001 - a broker that is down
            continue
        if t.error_code == ErrorCode.NONE:
            p = t.partitions[0]
            return p.leader_id, tuple(sorted(p.isr_nodes))
    raise AssertionError("no source broker answers")


def write(cluster: LocalCluster, via: int, values: list[bytes], acks: int = 1) -> int:
    resp = call(Broker(cluster, via), produce(TOPIC, 0, batch(values), acks=acks))
    return resp.responses[0].partition_responses[0].error_code


def end(node: object) -> int:
    p = call(node, list_offsets(TOPIC, 0, -1)).topics[0].partitions[0]
    return p.offset if p.error_code == 0 else -1


def test_a_mirror_loses_what_its_source_lost_in_an_unclean_election(source: LocalCluster, dest: KafkaNode) -> None:
    leader, follower = source.broker_ids()
    Req = m.CreateTopicsRequest
    T = Req.CreatableTopic
    created = call(Broker(source, leader), Req(topics=[T(
        name=TOPIC, num_partitions=-1, replication_factor=-1,
        assignments=[T.CreatableReplicaAssignment(partition_index=0, broker_ids=[leader, follower])],
        configs=[T.CreatableTopicConfig(name="unclean.leader.election.enable", value="true"),
                 T.CreatableTopicConfig(name="min.insync.replicas", value="1")])],
        timeout_ms=10000, validate_only=False))
    assert created.topics[0].error_code == 0
    eventually(lambda: state(source) == (leader, (leader, follower)), timeout=60, what="both replicas in sync")
    before = [b"before-%d" % i for i in range(6)]
    assert write(source, leader, before, acks=-1) == 0

    bootstrap = ",".join("%s:%d" % source.broker_address(b) for b in (leader, follower))
    kafkapy("link", "create", "from-source", "--source-bootstrap-server", bootstrap,
            "--config", "replica.fetch.backoff.ms=200", "--bootstrap-server", dest.bootstrap)
    kafkapy("mirror", "create", TOPIC, "--link", "from-source", "--bootstrap-server", dest.bootstrap)
    wait_for("the mirror to hold the first records", lambda: end(dest) == len(before), timeout=30)

    source.kill9(follower)
    eventually(lambda: state(source)[1] == (leader,), timeout=30, what="the follower to leave the ISR")
    window = [b"window-%d" % i for i in range(4)]
    assert write(source, leader, window) == 0  # acknowledged by the leader alone
    wait_for("the window mirrored", lambda: end(dest) == len(before) + len(window), timeout=30)

    source.kill9(leader)
    source.start(follower)
    eventually(lambda: state(source)[0] == follower, timeout=60, what="the unclean election")
    after = [b"after-%d" % i for i in range(3)]
    assert write(source, follower, after) == 0
    new_leader = Broker(source, follower)

    def same() -> bool:
        return end(dest) == end(new_leader) == len(before) + len(after) and \
            raw_log(dest, TOPIC, 0) == raw_log(new_leader, TOPIC, 0)
    wait_for("the mirror to follow the new leader's history", same, timeout=60, interval=0.5)
    mirrored = b"".join(raw_log(dest, TOPIC, 0))
    assert b"window" not in mirrored and mirrored.count(b"after-") == len(after)
    assert f"Mirror {TOPIC}-0 truncated from 10 to 6 (4 records dropped" in dest.log_tail(200_000)
    described = json.loads(kafkapy("mirror", "describe", TOPIC, "--bootstrap-server", dest.bootstrap,
                                   "--json").stdout)
    assert described["state"] == "ACTIVE"
