"""``StretchCluster``: a recipe's nodes running inside the sites of a ``SiteNetwork``.

The cluster is planned by the same pure functions as ``kafkapy cluster up --sites`` (each node
listening on its site's address instead of loopback), its directory has the same shape
(``cluster.json``, ``node-<id>/server.properties``, ``data``, ``node.log``), and each node is
started inside its site (``site.popen``), so its traffic to other sites crosses the emulated WAN.
The test process itself reaches every node directly, so admin requests sent from here are
neither delayed nor cut.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from kafkapy.cli.cluster import (
    BROKER_LISTENER,
    CONTROLLER_LISTENER,
    ClusterState,
    NodeState,
    node_properties,
    plan_cluster,
    prepare_node,
    render_properties,
    save_state,
)
from kafkapy.cli.cluster_probe import wait_ready
from kafkapy.cli.cluster_processes import config_path, log_path, log_tail, node_dir
from kafkapy.testing.cluster import eventually
from kafkapy.testing.sites.network import Site, SiteNetwork
from kafkapy.testing.stretch.recipes import Recipe

#: Listener ports: every site has its own network stack, so fixed ones cannot collide.
FIRST_PORT = 19092
READY_TIMEOUT_S = 90.0
REQUEST_TIMEOUT_S = 5.0
REPO = Path(__file__).resolve().parents[3]


class StretchError(AssertionError):
    """The stretch cluster did not do what a step waited for; the message says what and why."""


class StretchCluster:
    """A recipe's cluster in a site network: start, site loss and restart, split and heal.

    ``with StretchCluster(net, recipe, directory) as cluster:`` adds the recipe's sites to
    ``net`` (those it lacks), sets their delays, starts every node and waits until every broker
    is registered and unfenced; on exit every node is killed, whatever happened.
    """

    def __init__(self, net: SiteNetwork, recipe: Recipe, directory: str | os.PathLike[str],
                 *, ready_timeout: float = READY_TIMEOUT_S) -> None:
        self.net = net
        self.recipe = recipe
        self.directory = Path(directory).resolve()
        self.ready_timeout = ready_timeout
        self.state: ClusterState | None = None
        self.processes: dict[int, subprocess.Popen[bytes]] = {}
        #: Controllers' metadata directory ids (a dynamic quorum names voters by them).
        self.directory_ids: dict[int, str] = {}

    def __enter__(self) -> StretchCluster:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- lifetime -----------------------------------------------------------------------------

    def start(self) -> None:
        from kafkapy.storage import random_kafka_uuid

        for site in self.recipe.sites:
            if site.name not in self.net.sites:
                self.net.add_site(site.name)
        for (a, b), ms in self.recipe.delays_ms.items():
            self.net.set_delay(a, b, ms)
        hosts = {s.name: self.net.sites[s.name].address(1) for s in self.recipe.sites}
        self.state = plan_cluster(self.recipe.layout, random_kafka_uuid(),
                                  itertools.count(FIRST_PORT), self.recipe.overrides, hosts)
        self.directory.mkdir(parents=True, exist_ok=True)
        for node in self.state.nodes:
            if self.recipe.dynamic_quorum:
                self._prepare_dynamic(node)
            else:
                prepare_node(self.directory, self.state, node)
        self._start_nodes(self.state.nodes)

    def _prepare_dynamic(self, node: NodeState) -> None:
        """A KIP-853 node: ``controller.quorum.bootstrap.servers`` instead of the voters, and
        storage formatted with the initial voters (``--no-initial-controllers`` for a spare)."""
        from kafkapy.storage import random_kafka_uuid

        state = self._state()
        controllers = [n for n in state.nodes if n.is_controller]
        if not self.directory_ids:
            self.directory_ids = {n.id: random_kafka_uuid() for n in controllers}
        ndir = node_dir(self.directory, node)
        (ndir / "data").mkdir(parents=True, exist_ok=True)
        props = node_properties(state, node, ndir)
        del props["controller.quorum.voters"]
        props["controller.quorum.bootstrap.servers"] = ",".join(
            n.address(CONTROLLER_LISTENER) for n in controllers)
        config = config_path(self.directory, node)
        config.write_text(render_properties(props, header=f"node {node.id}, dynamic quorum"))
        flags: list[str] = []
        if node.id in self.recipe.spare_controllers:
            flags = ["--no-initial-controllers"]
        elif node.is_controller:
            flags = ["--initial-controllers", ",".join(
                f"{n.id}@{n.address(CONTROLLER_LISTENER)}:{self.directory_ids[n.id]}"
                for n in controllers if n.id not in self.recipe.spare_controllers)]
        done = subprocess.run([sys.executable, "-m", "kafkapy", "storage", "format", "--cluster-id",
                               state.cluster_id, "--config", str(config), *flags],
                              capture_output=True, text=True, timeout=60, cwd=REPO,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
        if done.returncode != 0:
            raise StretchError(f"formatting node {node.id}: {done.stderr}")

    def close(self) -> None:
        """Kill every node (and every client) in the recipe's sites; reap what was started here."""
        for site in self.recipe.sites:
            if site.name in self.net.sites:
                self.net.sites[site.name].kill_all()
        for proc in self.processes.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
        self.processes.clear()

    def _start_nodes(self, nodes: Sequence[NodeState]) -> None:
        state = self._state()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        started = {}
        for node in nodes:
            cmd = [sys.executable, "-m", "kafkapy", "server", "--config",
                   str(config_path(self.directory, node))]
            with open(log_path(self.directory, node), "ab") as log:
                log.write(f"\n===== {time.strftime('%H:%M:%S')} stretch start in site "
                          f"{self.site_of(node.id)}\n".encode())
                log.flush()
                proc = self.site(self.site_of(node.id)).popen(
                    cmd, cwd=node_dir(self.directory, node), stdin=subprocess.DEVNULL,
                    stdout=log, stderr=subprocess.STDOUT, env=env)
            node.pid = proc.pid
            started[node.id] = self.processes[node.id] = proc
        save_state(self.directory, state)
        waiting = wait_ready(self.directory, state, started, self.ready_timeout)
        if waiting.exited or waiting.listeners or not {
                n.id for n in state.nodes if n.is_broker} <= waiting.registered:
            tails = "\n".join(f"--- node {n.id}:\n{log_tail(log_path(self.directory, n), 15)}"
                              for n in nodes)
            raise StretchError(f"nodes {[n.id for n in nodes]} not ready in {self.ready_timeout:.0f}s: "
                               f"exited {waiting.exited}, listeners not answering "
                               f"{waiting.listeners}, brokers registered "
                               f"{sorted(waiting.registered)}\n{tails}")

    # -- faults -------------------------------------------------------------------------------

    def kill_site(self, name: str) -> None:
        """Site loss: every process in the site (nodes and clients) killed with SIGKILL."""
        self.site(name).kill_all()
        for node in self.nodes_in(name):
            self.processes.pop(node.id, None)

    def restart_site(self, name: str) -> None:
        """Start the site's nodes again (same data, same addresses); returns once every broker
        of the cluster is registered and unfenced."""
        self._start_nodes(self.nodes_in(name))

    def split(self, a: str, b: str) -> None:
        """Cut the WAN between two sites; both keep running (a third may reach both)."""
        self.net.cut(a, b)

    def heal(self, a: str, b: str) -> None:
        self.net.heal(a, b)

    # -- the voters (KIP-853, dynamic quorums only) -------------------------------------------

    def _controller_addresses(self) -> list[tuple[str, int]]:
        return [(n.host, n.ports[CONTROLLER_LISTENER]) for n in self._state().nodes
                if n.is_controller and self.running(n.id)]

    def quorum(self) -> Any:
        """DescribeQuorum from the leader (``kafkapy.quorum.admin.QuorumInfo``)."""
        import trio

        from kafkapy.quorum.admin import describe_quorum

        return trio.run(lambda: describe_quorum(self._controller_addresses(), timeout=10))

    def add_voter(self, node_id: int, timeout: float = 60.0) -> None:
        """AddRaftVoter for a running spare controller, once it has caught up as an observer."""
        import trio

        from kafkapy.cli.cluster_processes import checked_config
        from kafkapy.config import parse_properties
        from kafkapy.quorum.admin import add_controller, controller_identity

        node = self._state().node(node_id)
        eventually(lambda: any(o.replica_id == node_id and o.log_end_offset >= q.high_watermark > 0
                               for q in [self.quorum()] for o in q.observers),
                   timeout=timeout, what=f"controller {node_id} to catch up as an observer")
        config = checked_config(parse_properties(config_path(self.directory, node).read_text()),
                                f"node {node_id}")
        voter = controller_identity(config)
        trio.run(lambda: add_controller(self._controller_addresses(), voter,
                                        cluster_id=self._state().cluster_id, timeout=timeout))

    def remove_voter(self, node_id: int, timeout: float = 60.0) -> None:
        """RemoveRaftVoter: ``node_id`` keeps running, as an observer of the quorum."""
        import trio

        from kafkapy.quorum.admin import remove_controller
        from kafkapy.storage import kafka_uuid_to_uuid

        directory = kafka_uuid_to_uuid(self.directory_ids[node_id])
        trio.run(lambda: remove_controller(self._controller_addresses(), node_id, directory,
                                           cluster_id=self._state().cluster_id, timeout=timeout))

    # -- the cluster's shape ------------------------------------------------------------------

    def _state(self) -> ClusterState:
        if self.state is None:
            raise StretchError("the stretch cluster has not been started")
        return self.state

    def site(self, name: str) -> Site:
        return self.net.sites[name]

    def site_of(self, node_id: int) -> str:
        site = self.recipe.layout.site_of(node_id)
        assert site is not None
        return site

    def nodes_in(self, site: str) -> list[NodeState]:
        return [n for n in self._state().nodes if self.site_of(n.id) == site]

    def brokers(self, site: str | None = None) -> list[int]:
        return [n.id for n in self._state().nodes
                if n.is_broker and (site is None or self.site_of(n.id) == site)]

    def bootstrap(self, site: str) -> str:
        """The bootstrap servers a client in ``site`` uses: the site's own brokers."""
        return ",".join(self._state().node(b).address(BROKER_LISTENER) for b in self.brokers(site))

    def all_bootstrap(self) -> str:
        return ",".join(self._state().node(b).address(BROKER_LISTENER) for b in self.brokers())

    def broker_address(self, node_id: int) -> tuple[str, int]:
        node = self._state().node(node_id)
        return node.host, node.ports[BROKER_LISTENER]

    def running(self, node_id: int) -> bool:
        proc = self.processes.get(node_id)
        return proc is not None and proc.poll() is None

    def data_dir(self, node_id: int) -> Path:
        return node_dir(self.directory, self._state().node(node_id)) / "data"

    def log(self, node_id: int) -> str:
        return log_tail(log_path(self.directory, self._state().node(node_id)), 40)

    # -- admin requests (from the test process: no WAN) ----------------------------------------

    def request(self, node_id: int, request: Any, timeout: float = REQUEST_TIMEOUT_S) -> Any:
        import trio

        from kafkapy.net.client import KafkaClient

        async def main() -> Any:
            with trio.fail_after(timeout):
                async with await KafkaClient.connect(*self.broker_address(node_id),
                                                     client_id="stretch-admin") as client:
                    return await client.send(request)
        return trio.run(main)

    def partitions(self, topic: str, via: Sequence[int] | None = None
                   ) -> dict[int, tuple[int, tuple[int, ...], tuple[int, ...]]]:
        """partition -> (leader, replicas, ISR) as the first answering broker of ``via``
        (default: every running broker) sees it; {} when none knows the topic."""
        from kafkapy.protocol import ErrorCode
        from kafkapy.protocol import messages as m

        ask = m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=topic)],
                                allow_auto_topic_creation=False,
                                include_topic_authorized_operations=False)
        for broker in via if via is not None else self.brokers():
            if not self.running(broker):
                continue
            try:
                answer = self.request(broker, ask).topics[0]
            except Exception:  # noqa: BLE001 - a node that is restarting or cut off
                continue
            if answer.error_code == ErrorCode.NONE and answer.partitions:
                return {p.partition_index: (p.leader_id, tuple(p.replica_nodes), tuple(p.isr_nodes))
                        for p in answer.partitions}
        return {}

    def create_topic(self, topic: str, partitions: int, timeout: float = 30.0) -> None:
        """Create ``topic`` with the recipe's configs (replicas placed by its constraints) and
        wait until every partition has a leader."""
        from kafkapy.protocol import ErrorCode
        from kafkapy.protocol import messages as m

        req = m.CreateTopicsRequest
        creatable = req.CreatableTopic(
            name=topic, num_partitions=partitions, replication_factor=-1, assignments=[],
            configs=[req.CreatableTopic.CreatableTopicConfig(name=k, value=v)
                     for k, v in self.recipe.topic_configs.items()])
        request = req(topics=[creatable], timeout_ms=10000, validate_only=False)

        def created() -> bool:
            broker = next(b for b in self.brokers() if self.running(b))
            result = self.request(broker, request, timeout=15).topics[0]
            if result.error_code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                raise StretchError(f"CreateTopics {topic}: {result.error_code} {result.error_message}")
            return True
        eventually(created, timeout=timeout, what=f"topic {topic} to be created")
        eventually(lambda: (len(parts := self.partitions(topic)) == partitions
                            and all(leader >= 0 for leader, _, _ in parts.values())),
                   timeout=timeout, what=f"every partition of {topic} to have a leader")
