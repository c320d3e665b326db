"""KRaft with separate roles: three controllers and three brokers as real processes.

The cluster comes from ``kafkapy cluster up --controllers 3 --brokers 3`` (through
``kafkapy.testing.cluster.LocalCluster``) with shortened timeouts, and the tests do to it what
issue 6's acceptance asks:

* kill -9 the active controller: a new one is elected, metadata writes succeed again, no
  committed topic is lost, and the old controller rejoins as a follower;
* cut a broker off from the controllers (a TCP proxy between it and them, then cut): the
  controller fences it and moves its partitions' leadership; the broker fences itself (its
  produce answers NOT_LEADER_OR_FOLLOWER); healed, it registers again;
* restart a broker: it replays its own copy of the metadata log and fetches only the delta.

How long the failover takes is a benchmark's business (``benchmarks/kraft_failover.py``); here
every wait is bounded generously and the times are printed.
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio

from helpers import batch, create_topics, metadata, partition_response, produce
from kafkapy.net.client import KafkaClient
from kafkapy.protocol import ErrorCode, messages as m
from kafkapy.testing.cluster import LocalCluster, eventually
from kafkapy.testing.tcp_proxy import TcpProxy

ELECTION_TIMEOUT_MS = 1000
OVERRIDES = {
    "controller.quorum.election.timeout.ms": ELECTION_TIMEOUT_MS,
    "controller.quorum.fetch.timeout.ms": 2000,
    "broker.heartbeat.interval.ms": 500,
    "broker.session.timeout.ms": 3000,
}
CONTROLLERS = (1, 2, 3)
BROKERS = (4, 5, 6)


def call(address: tuple[str, int], fn: Callable[[KafkaClient], Awaitable[Any]], *,
         timeout: float = 15.0) -> Any:
    async def main() -> Any:
        with trio.fail_after(timeout):
            async with await KafkaClient.connect(*address, client_id="kraft-roles-it") as client:
                return await fn(client)
    return trio.run(main)


def send(address: tuple[str, int], request: Any, *, timeout: float = 15.0) -> Any:
    return call(address, lambda c: c.send(request), timeout=timeout)


def topic_view(cluster: LocalCluster, via: int, topic: str) -> Any:
    """The topic as broker ``via`` reports it (None if unknown there)."""
    meta = send(cluster.broker_address(via), metadata(topic, allow_auto_create=False))
    t = meta.topics[0]
    return None if t.error_code != ErrorCode.NONE else (meta, t)


def live_brokers(cluster: LocalCluster, via: int) -> list[int]:
    meta = send(cluster.broker_address(via), metadata(allow_auto_create=False))
    return sorted(b.node_id for b in meta.brokers)


def create(cluster: LocalCluster, via: int, topic: str, partitions: int, rf: int) -> int:
    return send(cluster.broker_address(via), create_topics((topic, partitions, rf))).topics[0].error_code


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with LocalCluster(tmp_path_factory.mktemp("kraft-roles"), controllers=3, brokers=3,
                      overrides=OVERRIDES) as c:
        c.up()
        eventually(lambda: c.active_controller(), timeout=30, what="an active controller")
        for b in BROKERS:
            eventually(lambda b=b: live_brokers(c, b) == list(BROKERS), timeout=30,
                       what=f"broker {b} to list every broker")
        yield c


def test_broker_restart_replays_only_the_delta(cluster):
    assert create(cluster, 4, "delta-before", 3, 3) == ErrorCode.NONE
    victim = 5
    eventually(lambda: topic_view(cluster, victim, "delta-before"), timeout=10,
               what="broker 5 to see delta-before")
    leader = eventually(lambda: cluster.active_controller(), timeout=10, what="the active controller")
    observers = {o.replica_id: o for o in describe_quorum(cluster, leader).observers}
    had = observers[victim].log_end_offset  # what the leader knows the broker has fetched
    cluster.kill9(victim)
    # Metadata moves on while the broker is away.
    for i in range(3):
        assert create(cluster, 4, f"delta-while-away-{i}", 2, 2) == ErrorCode.NONE
    cluster.up()
    eventually(lambda: topic_view(cluster, victim, "delta-while-away-2"), timeout=30,
               what="the restarted broker to see what was created while it was away")
    eventually(lambda: victim in live_brokers(cluster, 4), timeout=30,
               what="the restarted broker to be unfenced")

    def load_line() -> tuple[str, ...] | None:
        found = re.findall(r"metadata_load local_offsets=(\d+) fetched_offsets=(\d+) elapsed_ms=(\d+)",
                           cluster.log(victim))
        return found[-1] if len(found) >= 2 else None  # the first start's line, then the restart's

    local, fetched, elapsed = map(int, eventually(load_line, timeout=30, what="the catch-up log line"))
    print(f"restarted broker: {local} offsets from its local copy, {fetched} fetched, {elapsed} ms")
    # Everything it had fetched before it was killed came back from its own disk; only what
    # happened since came over the wire.
    assert had > 0 and local >= had
    assert fetched > 0


def test_cut_off_broker_is_fenced_and_fences_itself(cluster):
    victim = 6
    proxies = {cid: TcpProxy(*cluster.controller_address(cid)) for cid in CONTROLLERS}
    direct = next(l for l in cluster.properties_path(victim).read_text().splitlines()
                  if l.startswith("controller.quorum.voters=")).split("=", 1)[1]
    try:
        # The victim reaches the controllers only through the proxies (its next start).
        cluster.set_property(victim, "controller.quorum.voters",
                             ",".join(f"{cid}@127.0.0.1:{p.port}" for cid, p in proxies.items()))
        cluster.kill9(victim)
        cluster.up()
        eventually(lambda: live_brokers(cluster, 4) == list(BROKERS), timeout=30,
                   what="the victim to register through the proxies")
        assert create(cluster, 4, "cut-off", 6, 3) == ErrorCode.NONE
        _, topic = eventually(lambda: topic_view(cluster, victim, "cut-off"), timeout=10,
                              what="the victim to see the topic")
        led = [p.partition_index for p in topic.partitions if p.leader_id == victim]
        assert led, "placement gives every broker some leaderships"

        cut_at = time.monotonic()
        for proxy in proxies.values():
            proxy.cut()

        def moved() -> bool:
            if victim in live_brokers(cluster, 4):
                return False
            _, t = topic_view(cluster, 4, "cut-off")
            return all(p.leader_id != victim and victim not in p.isr_nodes for p in t.partitions)

        eventually(moved, timeout=30, what="the controller to fence the victim and move its leaderships")
        print(f"fenced, leadership moved {time.monotonic() - cut_at:.1f}s after the cut")

        # The victim cannot hear about that, but after a session without heartbeats it stops
        # acting as leader on its own.
        def refused() -> bool:
            resp = send(cluster.broker_address(victim), produce("cut-off", led[0], batch([b"x"]), acks=1))
            return partition_response(resp).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER

        eventually(refused, timeout=30, what="the cut-off broker to refuse produce as leader")
        print(f"victim refuses to lead {time.monotonic() - cut_at:.1f}s after the cut")

        for proxy in proxies.values():
            proxy.heal()
        eventually(lambda: victim in live_brokers(cluster, 4), timeout=30,
                   what="the healed broker to be unfenced again")
    finally:
        # The victim goes back to reaching the controllers directly (the next test kills one).
        cluster.set_property(victim, "controller.quorum.voters", direct)
        cluster.kill9(victim)
        for proxy in proxies.values():
            proxy.close()
        cluster.up()
        eventually(lambda: victim in live_brokers(cluster, 4), timeout=30,
                   what="the victim back on direct connections")


def test_kill_active_controller_new_leader_writes_resume_old_rejoins(cluster):
    assert create(cluster, 4, "failover-before", 4, 3) == ErrorCode.NONE
    old = eventually(lambda: cluster.active_controller(), timeout=10, what="the active controller")
    killed_at = time.monotonic()
    cluster.kill9(old)

    new = eventually(lambda: (a := cluster.active_controller()) not in (None, old) and a,
                     timeout=30, what="a new active controller")
    elected = time.monotonic() - killed_at
    codes: list[int] = []

    def created() -> bool:
        codes.append(create(cluster, 5, "failover-after", 2, 3))
        # A try whose answer was lost (the connection to the dead controller) may have
        # created it: the next one then finds it there.
        return codes[-1] in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS)

    try:
        eventually(created, timeout=30, what="a metadata write through the new active controller")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; CreateTopics answered {[ErrorCode(c).name for c in codes]}") from None
    writable = time.monotonic() - killed_at
    print(f"controller {old} killed: {new} active after {elected:.2f}s, writes succeed after "
          f"{writable:.2f}s (election timeout {ELECTION_TIMEOUT_MS} ms)")
    for b in BROKERS:
        eventually(lambda b=b: topic_view(cluster, b, "failover-before")
                   and topic_view(cluster, b, "failover-after"), timeout=15,
                   what=f"broker {b} to have both topics")

    cluster.up()  # brings the killed controller back

    def rejoined() -> bool:
        nodes = cluster.nodes()
        if not nodes[old]["running"] or nodes[old]["active_controller"]:
            return False
        part = describe_quorum(cluster, new)
        voters = {v.replica_id: v for v in part.current_voters}
        return part.leader_id == new and voters[old].log_end_offset >= part.high_watermark > 0

    eventually(rejoined, timeout=30, what=f"controller {old} to rejoin as a follower")


def describe_quorum(cluster: LocalCluster, leader: int) -> Any:
    r = m.DescribeQuorumRequest
    request = r(topics=[r.TopicData(topic_name="__cluster_metadata",
                                    partitions=[r.TopicData.PartitionData(partition_index=0)])])
    return send(cluster.controller_address(leader), request).topics[0].partitions[0]
