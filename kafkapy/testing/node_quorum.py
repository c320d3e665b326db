"""The nodes of one KRaft cluster as separate :class:`KafkaNode` processes, formatted with one
cluster id and started together, for tests that set each node's listeners themselves.

    quorum = NodeQuorum(tmp_path, "U2VjdXJlQ2x1c3RlcjAwMQ", controllers=(1, 2, 3), brokers=(4, 5, 6),
                        overrides=common, probe_security=tls_only)
    for i, node in quorum.brokers.items():
        node.overrides.update({...})      # this test's listeners and security
    with quorum:
        ...

A quorum's nodes start together because none is ready until a majority of the voters runs;
``start`` waits (bounded) for every node to answer ApiVersions, each on its ``port`` in its
``probe_security``. Leaving the ``with`` kills every node (nothing is checked after a test), so a
failing test leaves no process behind.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from kafkapy.testing.node import DEFAULT_STARTUP_TIMEOUT, KafkaNode, StartedInWith, free_port, wait_answering

if TYPE_CHECKING:
    from kafkapy.net.client_security import ClientSecurity


class NodeQuorum(StartedInWith):
    """Combined nodes (``broker,controller``) or controller-only and broker-only ones, in
    ``workdir/node<id>``, with ``controller.quorum.voters`` naming every controller.

    Each node starts with PLAINTEXT on ``port`` (broker or combined) and CONTROLLER on
    ``controller_port``; a controller-only node listens on CONTROLLER alone and is probed there.
    ``overrides`` go to every node; a test adds its own per node before ``start``.
    """

    def __init__(self, workdir: str | Path, cluster_id: str, *, combined: Iterable[int] = (),
                 controllers: Iterable[int] = (), brokers: Iterable[int] = (),
                 overrides: Mapping[str, object] | None = None, host: str = "127.0.0.1",
                 probe_security: ClientSecurity | None = None,
                 startup_timeout: float = DEFAULT_STARTUP_TIMEOUT) -> None:
        combined, controllers, brokers = tuple(combined), tuple(controllers), tuple(brokers)
        if not combined and not controllers:
            raise ValueError("a quorum needs combined or controller nodes")
        self.host = host
        self.startup_timeout = startup_timeout
        self.controller_ports = {i: free_port() for i in (*combined, *controllers)}
        self.voters = ",".join(f"{i}@{host}:{p}" for i, p in self.controller_ports.items())
        roles = {**{i: "broker,controller" for i in combined}, **{i: "controller" for i in controllers},
                 **{i: "broker" for i in brokers}}
        self.nodes: dict[int, KafkaNode] = {}
        workdir = Path(workdir)
        for node_id, role in roles.items():
            node = KafkaNode(workdir / f"node{node_id}", controller_port=self.controller_ports.get(node_id),
                             cluster_id=cluster_id, host=host, probe_security=probe_security,
                             startup_timeout=startup_timeout)
            node.overrides.update({"node.id": node_id, "process.roles": role,
                                   "controller.quorum.voters": self.voters})
            if role == "controller":
                node.port = node.controller_port  # its only listener: the one to probe
                node.overrides["listeners"] = f"CONTROLLER://{host}:{node.controller_port}"
            elif role == "broker":
                node.overrides["listeners"] = f"PLAINTEXT://{host}:{node.port}"
            node.overrides.update(overrides or {})
            self.nodes[node_id] = node

    @property
    def controllers(self) -> dict[int, KafkaNode]:
        return {i: n for i, n in self.nodes.items() if "controller" in str(n.overrides["process.roles"])}

    @property
    def brokers(self) -> dict[int, KafkaNode]:
        return {i: n for i, n in self.nodes.items() if "broker" in str(n.overrides["process.roles"])}

    def start(self) -> NodeQuorum:
        """Format every node (at once: each is mostly interpreter start-up), launch them all,
        then wait until each answers."""
        to_format = [n for n in self.nodes.values()
                     if n.format_storage and not (n.data_dir / "meta.properties").exists()]
        with ThreadPoolExecutor(max_workers=max(1, len(to_format))) as pool:
            list(pool.map(lambda n: n._format(), to_format))  # each bounded by its own timeout
        for node in self.nodes.values():
            node._launch()
        wait_answering(list(self.nodes.values()), self.startup_timeout, "quorum nodes")
        return self

    def cleanup(self) -> None:
        for node in self.nodes.values():
            node.cleanup()
