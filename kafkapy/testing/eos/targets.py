"""The clusters an exactly-once run can point at, behind one small interface.

``start_target(name, workdir)`` starts one of `TARGETS` and returns a `Target`: its bootstrap, the
replication its topics take, and kill -9 / start of one broker by node id. `Roles` finds the
brokers that matter to a transaction (the transaction coordinator of a transactional id, through
FindCoordinator key type 1, and a partition's leader, through Metadata) with our own admin client,
so a chaos schedule can kill exactly those.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from kafkapy.cli.admin import Admin
from kafkapy.cli.output import CliError
from kafkapy.protocol import messages as m
from kafkapy.testing.node import api_versions_round_trip

#: Broker settings for every target: a new group's first rebalance at once (Kafka waits 3 s for
#: more members by default, and every service incarnation would pay it).
BROKER_OVERRIDES: dict[str, str] = {"group.initial.rebalance.delay.ms": "0"}
#: A 3-voter cluster's internal topics replicated as issue 21's acceptance asks (RF 3, min.insync 2).
REPLICATED: dict[str, str] = {"offsets.topic.replication.factor": "3",
                              "transaction.state.log.replication.factor": "3",
                              "transaction.state.log.min.isr": "2"}

TARGETS = ("apache-kafka", "apache-kafka-cluster", "kafkapy", "kafkapy-cluster")
GROUP_COORDINATOR_KEY = 0  # FindCoordinator key_type for a consumer group
TXN_COORDINATOR_KEY = 1  # ... and for a transactional id


@dataclass
class Target:
    """A running cluster: ``kill9(node_id)``/``start(node_id)`` act on one broker; ``close()``
    stops everything."""

    name: str
    bootstrap: str
    replication: int
    min_isr: int
    broker_ids: list[int]
    kill9: Callable[[int], object]
    start: Callable[[int], object]
    log_tail: Callable[[], str]
    close: Callable[[], None]
    address: Callable[[int], tuple[str, int]]
    handle: Any = field(repr=False, default=None)

    def kill_and_restart(self, node_id: int, *, down_s: float = 0.0, timeout: float = 90.0) -> None:
        """kill -9 one broker, leave it down ``down_s`` seconds, start it again and wait until it
        answers ApiVersions (bounded)."""
        self.kill9(node_id)
        time.sleep(down_s)
        self.start(node_id)
        host, port = self.address(node_id)
        deadline = time.monotonic() + timeout
        while not api_versions_round_trip(host, port, timeout=1.0):
            if time.monotonic() > deadline:
                raise TimeoutError(f"broker {node_id} did not answer within {timeout}s of its restart")
            time.sleep(0.2)


def start_target(name: str, workdir: str | os.PathLike[str], *,
                 overrides: dict[str, str] | None = None) -> Target:
    """Start target ``name`` (one of `TARGETS`) under ``workdir``, with ``overrides`` on top of
    `BROKER_OVERRIDES` on every node; the caller closes it."""
    extra = overrides or {}
    if name == "apache-kafka":
        from kafkapy.testing.apache_kafka import ApacheKafkaNode
        return _single(name, ApacheKafkaNode(workdir, overrides={**BROKER_OVERRIDES, **extra}))
    if name == "kafkapy":
        from kafkapy.testing.node import KafkaNode
        return _single(name, KafkaNode(workdir, overrides={**BROKER_OVERRIDES, **extra}))
    if name == "apache-kafka-cluster":
        from kafkapy.testing.apache_kafka import ApacheKafkaCluster
        cluster = ApacheKafkaCluster(3, workdir, overrides={**BROKER_OVERRIDES, **REPLICATED, **extra})
        _start(cluster)
        nodes = {n.node_id: n for n in cluster.nodes}
        return Target(name, cluster.bootstrap, 3, 2, sorted(nodes),
                      kill9=lambda i: nodes[i].kill9(), start=lambda i: nodes[i].start(),
                      log_tail=cluster.log_tail, close=cluster.cleanup,
                      address=lambda i: (nodes[i].host, nodes[i].port), handle=cluster)
    if name == "kafkapy-cluster":
        from kafkapy.testing.cluster import KafkaClusterNode
        node = KafkaClusterNode(workdir, overrides={**BROKER_OVERRIDES, **REPLICATED, **extra})
        _start(node)
        local = node.cluster
        return Target(name, node.bootstrap, 3, 2, local.broker_ids(), kill9=local.kill9,
                      start=local.start, log_tail=node.log_tail, close=node.cleanup,
                      address=local.broker_address, handle=node)
    raise ValueError(f"unknown target {name!r}; expected one of {TARGETS}")


def _start(thing: Any) -> None:
    try:
        thing.start()
    except BaseException:
        thing.cleanup()
        raise


def _single(name: str, node: Any) -> Target:
    _start(node)
    node_id = getattr(node, "node_id", 1)
    return Target(name, node.bootstrap, 1, 1, [node_id], kill9=lambda _: node.kill9(),
                  start=lambda _: node.start(), log_tail=node.log_tail, close=node.cleanup,
                  address=lambda _: (node.host, node.port), handle=node)


class Roles:
    """Which broker plays which part for a transaction right now (bounded retries while the
    cluster elects or loads)."""

    def __init__(self, bootstrap: str, *, timeout: float = 30.0) -> None:
        self.bootstrap = bootstrap
        self.timeout = timeout

    def _retry(self, what: str, ask: Callable[[Admin], int]) -> int:
        deadline = time.monotonic() + self.timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                with Admin(self.bootstrap, timeout=10.0) as admin:
                    node = ask(admin)
                if node >= 0:
                    return node
            except (CliError, OSError) as exc:
                last = exc
            time.sleep(0.3)
        raise TimeoutError(f"no {what} within {self.timeout}s: {last}")

    def _coordinator(self, key: str, key_type: int) -> int:
        def ask(admin: Admin) -> int:
            resp = admin.send(m.FindCoordinatorRequest(key=key, key_type=key_type))
            return int(resp.node_id) if resp.error_code == 0 else -1
        return self._retry(f"coordinator (key type {key_type}) for {key}", ask)

    def transaction_coordinator(self, transactional_id: str) -> int:
        """The broker leading ``transactional_id``'s ``__transaction_state`` partition."""
        return self._coordinator(transactional_id, TXN_COORDINATOR_KEY)

    def group_coordinator(self, group: str) -> int:
        """The broker leading ``group``'s ``__consumer_offsets`` partition."""
        return self._coordinator(group, GROUP_COORDINATOR_KEY)

    def partition_leader(self, topic: str, partition: int) -> int:
        return self._retry(f"leader of {topic}-{partition}",
                           lambda admin: admin.leaders([topic]).get((topic, partition), -1))
