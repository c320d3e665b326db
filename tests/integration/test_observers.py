"""Observers on a two-site cluster: placed by ``confluent.placement.constraints``, kept out of
the ISR, promoted when a site's synchronous replica is lost, demoted when it returns.

Sites are racks here (one host, loopback); tests/integration/test_stretch_*.py run the same
roles in network namespaces. Layout (``kafkapy cluster up --sites west:1:2,east:0:2``): the
controller 1 and brokers 2, 3 in ``west``, brokers 4, 5 in ``east``. The topic has one
synchronous replica and one observer per site, ``min.insync.replicas=2`` and the
``under-min-isr`` promotion policy.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from helpers import FAST_FAILOVER, batch, create_topics, metadata, partition_response, produce
from kafkapy.metadata import placement_constraints as pc
from kafkapy.net.client import KafkaClient
from kafkapy.protocol import ErrorCode
from kafkapy.testing.cluster import LocalCluster, eventually

REPO = Path(__file__).resolve().parents[2]
BROKERS = (2, 3, 4, 5)
RACK = {2: "west", 3: "west", 4: "east", 5: "east"}
CONSTRAINTS = ('{"version":2,"replicas":[{"count":1,"constraints":{"rack":"west"}},'
               '{"count":1,"constraints":{"rack":"east"}}],'
               '"observers":[{"count":1,"constraints":{"rack":"west"}},'
               '{"count":1,"constraints":{"rack":"east"}}],'
               '"observerPromotionPolicy":"under-min-isr"}')


def send(cluster: LocalCluster, via: int, request, timeout: float = 15.0):
    async def main():
        with trio.fail_after(timeout):
            async with await KafkaClient.connect(*cluster.broker_address(via), client_id="observers-it") as c:
                return await c.send(request)
    return trio.run(main)


def state(cluster: LocalCluster, topic: str, live: list[int]) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """(leader, replicas, ISR) of partition 0 as the first answering live broker sees it."""
    for b in live:
        try:
            t = send(cluster, b, metadata(topic, allow_auto_create=False), timeout=5).topics[0]
        except Exception:  # noqa: BLE001 - a broker that is restarting
            continue
        if t.error_code == ErrorCode.NONE:
            p = t.partitions[0]
            return p.leader_id, tuple(p.replica_nodes), tuple(p.isr_nodes)
    raise AssertionError(f"no broker of {live} knows {topic}")


def cli_observers(cluster: LocalCluster, topic: str) -> list[int]:
    """Partition 0's observers as ``kafkapy topics describe --json`` shows them."""
    done = subprocess.run(
        [sys.executable, "-m", "kafkapy", "topics", "describe", "--topic", topic, "--json",
         "--bootstrap-server", "%s:%d" % cluster.broker_address(2)],
        capture_output=True, text=True, timeout=60, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)}, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    [described] = json.loads(done.stdout)
    return described["partitions"][0]["observers"]


def produce_ok(cluster: LocalCluster, topic: str, live: list[int], values: list[bytes]) -> bool:
    leader = state(cluster, topic, live)[0]
    if leader not in live:
        return False
    try:
        resp = send(cluster, leader, produce(topic, 0, batch(values)), timeout=12)
    except Exception:  # noqa: BLE001 - leadership moving
        return False
    return partition_response(resp).error_code == ErrorCode.NONE


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with LocalCluster(tmp_path_factory.mktemp("observers"), sites="west:1:2,east:0:2",
                      overrides=FAST_FAILOVER) as c:
        c.up()
        eventually(lambda: len(send(c, 2, metadata(allow_auto_create=False)).brokers) == 4,
                   timeout=60, what="all four brokers to be unfenced")
        yield c


def test_observers_are_placed_per_site_and_promoted_only_while_a_site_is_away(cluster):
    topic = "stretch"
    resp = send(cluster, 2, create_topics((topic, 1, -1), configs={
        pc.CONFIG_NAME: CONSTRAINTS, "min.insync.replicas": "2"}))
    assert resp.topics[0].error_code == ErrorCode.NONE, resp.topics[0].error_message
    live = list(BROKERS)
    leader, replicas, isr = eventually(lambda: state(cluster, topic, live), timeout=20,
                                       what="the topic's metadata")
    sync, observers = replicas[:2], replicas[2:]
    assert sorted(RACK[b] for b in sync) == ["east", "west"]
    assert sorted(RACK[b] for b in observers) == ["east", "west"]
    assert sorted(isr) == sorted(sync), "observers stay out of the ISR"
    assert sorted(cli_observers(cluster, topic)) == sorted(observers)
    assert produce_ok(cluster, topic, live, [b"before"] * 10)

    # The east site's synchronous replica is lost: the ISR falls below min.insync.replicas,
    # and the leader promotes a caught-up observer so acks=all writes go on.
    east_sync = next(b for b in sync if RACK[b] == "east")
    cluster.kill9(east_sync)
    live.remove(east_sync)
    eventually(lambda: produce_ok(cluster, topic, live, [b"during"] * 10), timeout=60,
               what="acks=all produce to succeed again without the east replica")
    _, _, isr = state(cluster, topic, live)
    assert east_sync not in isr
    assert set(isr) & set(observers), f"an observer was promoted into the ISR {isr}"

    # The replica comes back, catches up and rejoins; the observers leave the ISR again.
    cluster.start(east_sync)
    live.append(east_sync)
    eventually(lambda: sorted(state(cluster, topic, live)[2]) == sorted(sync), timeout=90,
               what=f"the ISR to be the synchronous replicas {sorted(sync)} again")
    assert produce_ok(cluster, topic, live, [b"after"] * 10)
