"""Eligible leader replicas (KIP-966) on a loopback cluster: one controller, brokers 2, 3, 4,
a topic with three replicas and ``min.insync.replicas=2`` (a new cluster has ELR on).

* Clean path: two followers stop cleanly one after the other, so the ISR shrinks to the leader
  and the second follower is eligible (the first left while the ISR was still at two). The
  leader is then killed; the eligible follower comes back, is elected without an unclean
  election, and holds every record acknowledged with ``acks=all``; a record acknowledged with
  ``acks=1`` meanwhile was never committed (the high watermark did not move) and is gone.
* Unclean path: an eligible replica that restarts after kill -9 leaves the ELR and is not
  elected; the partition waits for the eligible one that stopped cleanly.

Every wait is bounded; the cluster is stopped by the fixture.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import FAST_FAILOVER, batch, list_offsets, metadata, partition_response, produce, send_to
from kafkapy.protocol import ErrorCode, messages as m
from kafkapy.testing.cluster import LocalCluster, eventually
from kafkapy.testing.ledger import read_replica

BROKERS = (2, 3, 4)
REPO = Path(__file__).resolve().parents[2]


def cli_describe(cluster: LocalCluster, via: int, topic: str) -> dict:
    """``kafkapy topics describe --json`` of ``topic``, through broker ``via``."""
    done = subprocess.run(
        [sys.executable, "-m", "kafkapy", "topics", "describe", "--topic", topic, "--json",
         "--bootstrap-server", "%s:%d" % cluster.broker_address(via)],
        capture_output=True, text=True, timeout=60, cwd=REPO, stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    [described] = json.loads(done.stdout)
    return described


def send(cluster: LocalCluster, via: int, request, timeout: float = 15.0):
    return send_to(cluster.broker_address(via), request, timeout=timeout)


def describe(cluster: LocalCluster, topic: str, via: list[int]):
    """(leader, ISR, ELR, last known ELR) of partition 0, from DescribeTopicPartitions."""
    Req = m.DescribeTopicPartitionsRequest
    for b in via:
        try:
            resp = send(cluster, b, Req(topics=[Req.TopicRequest(name=topic)],
                                        response_partition_limit=10, cursor=None), timeout=5)
        except Exception:  # noqa: BLE001 - a broker that is down or restarting
            continue
        p = resp.topics[0].partitions[0]
        return (p.leader_id, tuple(sorted(p.isr_nodes)), tuple(sorted(p.eligible_leader_replicas)),
                tuple(sorted(p.last_known_elr)))
    raise AssertionError(f"no broker of {via} answers")


def unfenced(cluster: LocalCluster, via: int) -> list[int]:
    return sorted(b.node_id for b in send(cluster, via, metadata(allow_auto_create=False)).brokers)


def create(cluster: LocalCluster, topic: str) -> None:
    Req = m.CreateTopicsRequest
    T = Req.CreatableTopic
    req = Req(topics=[T(name=topic, num_partitions=-1, replication_factor=-1,
                        assignments=[T.CreatableReplicaAssignment(partition_index=0, broker_ids=list(BROKERS))],
                        configs=[T.CreatableTopicConfig(name="min.insync.replicas", value="2")])],
              timeout_ms=10000, validate_only=False)
    assert send(cluster, 2, req).topics[0].error_code == ErrorCode.NONE
    eventually(lambda: describe(cluster, topic, [2]) == (2, BROKERS, (), ()), timeout=60,
               what=f"{topic} to be led by 2 with the whole ISR")


def produce_code(cluster: LocalCluster, via: int, topic: str, values: list[bytes], acks: int = -1) -> int:
    return partition_response(send(cluster, via, produce(topic, 0, batch(values), acks=acks))).error_code


def high_watermark(cluster: LocalCluster, via: int, topic: str) -> int:
    return send(cluster, via, list_offsets(topic, 0, -1)).topics[0].partitions[0].offset


def values(cluster: LocalCluster, node: int, topic: str) -> list[bytes | None]:
    return [v for _, v in read_replica(cluster.node_dir(node) / "data", topic, 0).records]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with LocalCluster(tmp_path_factory.mktemp("elr"), controllers=1, brokers=3,
                      overrides=FAST_FAILOVER) as c:
        c.up()
        eventually(lambda: unfenced(c, 2) == list(BROKERS), timeout=60,
                   what="all three brokers to be unfenced")
        yield c


def test_an_eligible_replica_takes_over_without_losing_an_acknowledged_record(cluster):
    topic = "elr-clean"
    create(cluster, topic)
    first = [b"a-%d" % i for i in range(5)]
    assert produce_code(cluster, 2, topic, first) == ErrorCode.NONE

    cluster.stop(4)
    eventually(lambda: describe(cluster, topic, [2]) == (2, (2, 3), (), ()), timeout=30,
               what="4 to leave the ISR (still at min.insync.replicas: not eligible)")
    second = [b"b-%d" % i for i in range(3)]
    assert produce_code(cluster, 2, topic, second) == ErrorCode.NONE
    committed = high_watermark(cluster, 2, topic)
    assert committed == len(first + second)

    cluster.stop(3)
    eventually(lambda: describe(cluster, topic, [2]) == (2, (2,), (3,), ()), timeout=30,
               what="3 to leave the ISR below min.insync.replicas and become eligible")
    assert produce_code(cluster, 2, topic, [b"refused"]) == ErrorCode.NOT_ENOUGH_REPLICAS
    assert produce_code(cluster, 2, topic, [b"acks-1"], acks=1) == ErrorCode.NONE
    assert high_watermark(cluster, 2, topic) == committed, "below min.insync.replicas nothing commits"
    [shown] = cli_describe(cluster, 2, topic)["partitions"]
    assert (shown["isr"], shown["elr"]) == ([2], [3]), "kafkapy topics describe shows the ELR"

    cluster.kill9(2)  # the last ISR member
    cluster.start(3)  # eligible, and it stopped cleanly
    eventually(lambda: describe(cluster, topic, [3])[0] == 3, timeout=60,
               what="the eligible replica to be elected")
    leader, isr, elr, last_known = describe(cluster, topic, [3])
    assert (isr, elr, last_known) == ((3,), (2,), ()), "2 stays eligible until it restarts uncleanly"
    assert values(cluster, 3, topic) == first + second, "every acks=all record, not the acks=1 one"

    cluster.start(2)  # after kill -9: out of the ELR, truncated to the new leader's log
    cluster.start(4)
    eventually(lambda: describe(cluster, topic, [3]) == (3, BROKERS, (), ()), timeout=60,
               what="the ISR to be whole again")
    third = [b"c-%d" % i for i in range(2)]
    assert produce_code(cluster, 3, topic, third) == ErrorCode.NONE
    for node in BROKERS:
        eventually(lambda node=node: values(cluster, node, topic) == first + second + third, timeout=30,
                   what=f"broker {node} to hold the leader's log")


def test_an_eligible_replica_restarted_after_kill_9_is_not_elected(cluster):
    topic = "elr-unclean"
    eventually(lambda: unfenced(cluster, 3) == list(BROKERS), timeout=60, what="every broker up")
    create(cluster, topic)
    records = [b"r-%d" % i for i in range(4)]
    assert produce_code(cluster, 2, topic, records) == ErrorCode.NONE

    cluster.kill9(4)
    eventually(lambda: describe(cluster, topic, [2])[1] == (2, 3), timeout=30, what="4 to be fenced")
    cluster.kill9(3)
    eventually(lambda: describe(cluster, topic, [2]) == (2, (2,), (3,), ()), timeout=30,
               what="3 to be fenced and eligible")
    cluster.stop(2)  # the leader stops cleanly: the ISR empties
    cluster.start(3)  # after kill -9: its log may lack what it acknowledged to the leader
    eventually(lambda: 3 in unfenced(cluster, 3), timeout=60, what="3 to be registered and unfenced")
    # Its registration removed it from the ELR in the same batch, before it was unfenced.
    assert describe(cluster, topic, [3]) == (-1, (), (2,), (2,))
    cluster.start(2)
    eventually(lambda: describe(cluster, topic, [3])[0] == 2, timeout=60,
               what="the eligible replica that stopped cleanly to be elected")
    assert values(cluster, 2, topic) == records
    cluster.start(4)
    eventually(lambda: describe(cluster, topic, [2]) == (2, BROKERS, (), ()), timeout=60,
               what="the ISR to be whole again")
