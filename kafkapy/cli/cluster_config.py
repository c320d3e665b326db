"""The layout and configuration of a ``kafkapy cluster`` directory (pure: no files, no processes).

How many nodes of which kind, each node's roles and fixed listener ports, the ``cluster.json``
document they are kept in, and each node's ``server.properties``. Unit-tested without processes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STATE_FILE = "cluster.json"
STATE_VERSION = 1
HOST = "127.0.0.1"
BROKER_LISTENER = "PLAINTEXT"
CONTROLLER_LISTENER = "CONTROLLER"
DEFAULT_CONTROLLERS = 3
DEFAULT_BROKERS = 3
#: offsets.topic / transaction.state.log replication factor of launched clusters (Kafka's
#: default; fewer when the cluster has fewer brokers).
INTERNAL_TOPIC_REPLICATION = 3


class ClusterError(Exception):
    """The cluster directory cannot be used as asked; the message is meant for the user."""



@dataclass(frozen=True)
class Site:
    """One site of a stretch cluster: its name (every node's ``broker.rack``) and its nodes:
    controller-only, broker-only and ``combined`` (broker,controller) ones."""

    name: str
    controllers: int
    brokers: int
    combined: int = 0

    def describe(self) -> str:
        extra = f":{self.combined}" if self.combined else ""
        return f"{self.name}:{self.controllers}:{self.brokers}{extra}"


def parse_sites(text: str) -> tuple[Site, ...]:
    """``west:2:2,east:2:2,tie:1:0`` (NAME:CONTROLLERS:BROKERS[:COMBINED] per site) as sites."""
    sites = []
    for part in text.split(","):
        fields = part.strip().split(":")
        if len(fields) not in (3, 4) or not fields[0]:
            raise ClusterError(f"--sites takes NAME:CONTROLLERS:BROKERS[:COMBINED] per site, not {part!r}")
        try:
            controllers, brokers, combined = (int(f) for f in (*fields[1:], "0")[:3])
        except ValueError:
            raise ClusterError(f"--sites: counts must be numbers in {part!r}") from None
        if min(controllers, brokers, combined) < 0 or controllers + brokers + combined == 0:
            raise ClusterError(f"--sites: site {fields[0]!r} needs at least one node")
        sites.append(Site(fields[0], controllers, brokers, combined))
    if len({s.name for s in sites}) != len(sites):
        raise ClusterError("--sites names a site twice")
    return tuple(sites)


@dataclass(frozen=True)
class Layout:
    """How many nodes of which kind: separate controllers and brokers, or combined nodes.

    ``combined > 0`` means that many ``broker,controller`` nodes and nothing else; otherwise
    controllers take node ids 1..C and brokers C+1..C+B (as Kafka's own examples number them).
    With ``sites``, ``controllers`` and ``brokers`` count the nodes with each role (a combined
    node counts in both); the nodes with the controller role come first, site by site (each
    site's combined nodes before its controller-only ones), then the broker-only nodes, site by
    site; every node's ``broker.rack`` is its site's name.
    """

    controllers: int = 0
    brokers: int = 0
    combined: int = 0
    sites: tuple[Site, ...] = ()

    @classmethod
    def of_sites(cls, sites: Sequence[Site]) -> Layout:
        return cls(sum(s.controllers + s.combined for s in sites),
                   sum(s.brokers + s.combined for s in sites), 0, tuple(sites))

    def _site_nodes(self) -> list[tuple[int, tuple[str, ...], str]]:
        """(node id, roles, site) of every node of a layout with sites, in node id order."""
        kinds: list[tuple[tuple[str, ...], str]] = []
        for site in self.sites:
            kinds += [(("broker", "controller"), site.name)] * site.combined
            kinds += [(("controller",), site.name)] * site.controllers
        for site in self.sites:
            kinds += [(("broker",), site.name)] * site.brokers
        return [(i, roles, name) for i, (roles, name) in enumerate(kinds, start=1)]

    def site_of(self, node_id: int) -> str | None:
        """The site (rack) of ``node_id``, or None in a layout without sites."""
        return next((site for i, _, site in self._site_nodes() if i == node_id), None)

    def __post_init__(self) -> None:
        if self.combined < 0 or self.controllers < 0 or self.brokers < 0:
            raise ClusterError("node counts cannot be negative")
        if self.combined and (self.controllers or self.brokers):
            raise ClusterError("--combined cannot be mixed with --controllers/--brokers")
        if not self.combined and self.controllers < 1:
            raise ClusterError("a cluster needs at least one controller")

    def roles(self) -> list[tuple[int, tuple[str, ...]]]:
        """(node id, process roles) for every node, in node id order."""
        if self.sites:
            return [(i, roles) for i, roles, _ in self._site_nodes()]
        if self.combined:
            return [(i, ("broker", "controller")) for i in range(1, self.combined + 1)]
        controllers: list[tuple[int, tuple[str, ...]]] = [
            (i, ("controller",)) for i in range(1, self.controllers + 1)]
        brokers: list[tuple[int, tuple[str, ...]]] = [
            (self.controllers + i, ("broker",)) for i in range(1, self.brokers + 1)]
        return controllers + brokers

    def broker_count(self) -> int:
        return self.combined or self.brokers

    def describe(self) -> str:
        if self.combined:
            return f"--combined {self.combined}"
        if self.sites:
            return "--sites " + ",".join(s.describe() for s in self.sites)
        return f"--controllers {self.controllers} --brokers {self.brokers}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"controllers": self.controllers, "brokers": self.brokers,
                               "combined": self.combined}
        if self.sites:
            out["sites"] = [[s.name, s.controllers, s.brokers] + ([s.combined] if s.combined else [])
                            for s in self.sites]
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Layout:
        sites = tuple(Site(str(n), *(int(k) for k in counts)) for n, *counts in data.get("sites", []))
        return cls(int(data.get("controllers", 0)), int(data.get("brokers", 0)),
                   int(data.get("combined", 0)), sites)


@dataclass
class NodeState:
    """One node as the state file records it: roles, listener ports (fixed), last pid, and the
    address it listens on (loopback, or its site's host in a stretch test cluster)."""

    id: int
    roles: tuple[str, ...]
    ports: dict[str, int]
    pid: int | None = None
    host: str = HOST

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles

    def address(self, listener: str) -> str:
        return f"{self.host}:{self.ports[listener]}"

    def to_json(self) -> dict[str, Any]:
        out = {"id": self.id, "roles": list(self.roles), "ports": dict(self.ports), "pid": self.pid}
        if self.host != HOST:  # loopback clusters' state files stay as they were
            out["host"] = self.host
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> NodeState:
        pid = data.get("pid")
        return cls(int(data["id"]), tuple(data["roles"]), {k: int(v) for k, v in data["ports"].items()},
                   int(pid) if pid is not None else None, str(data.get("host", HOST)))


@dataclass
class ClusterState:
    """The contents of ``cluster.json``."""

    cluster_id: str
    layout: Layout
    nodes: list[NodeState]
    overrides: list[tuple[str, str]] = field(default_factory=list)

    def node(self, node_id: int) -> NodeState:
        return next(n for n in self.nodes if n.id == node_id)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "cluster_id": self.cluster_id,
            "layout": self.layout.to_json(),
            "overrides": [list(kv) for kv in self.overrides],
            "nodes": [n.to_json() for n in self.nodes],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ClusterState:
        if data.get("version") != STATE_VERSION:
            raise ClusterError(f"unknown {STATE_FILE} version {data.get('version')!r}")
        return cls(
            cluster_id=str(data["cluster_id"]),
            layout=Layout.from_json(data["layout"]),
            nodes=[NodeState.from_json(n) for n in data["nodes"]],
            overrides=[(str(k), str(v)) for k, v in data.get("overrides", [])],
        )


def plan_cluster(layout: Layout, cluster_id: str, ports: Iterator[int],
                 overrides: Sequence[tuple[str, str]] = (),
                 hosts: Mapping[str, str] | None = None) -> ClusterState:
    """A new cluster's state: each node gets its listeners' ports from ``ports`` (distinct) and
    listens on its site's address in ``hosts`` (site name -> address; loopback by default)."""
    nodes = []
    for node_id, roles in layout.roles():
        listeners = {}
        if "broker" in roles:
            listeners[BROKER_LISTENER] = next(ports)
        if "controller" in roles:
            listeners[CONTROLLER_LISTENER] = next(ports)
        site = layout.site_of(node_id)
        host = (hosts or {}).get(site, HOST) if site is not None else HOST
        nodes.append(NodeState(node_id, roles, listeners, host=host))
    return ClusterState(cluster_id, layout, nodes, list(overrides))


def node_properties(state: ClusterState, node: NodeState, node_dir: Path) -> dict[str, str]:
    """The ``server.properties`` settings of one node (Kafka's names; Apache Kafka reads them too)."""
    voters = ",".join(f"{n.id}@{n.address(CONTROLLER_LISTENER)}" for n in state.nodes if n.is_controller)
    listeners = [f"{name}://{node.address(name)}" for name in (BROKER_LISTENER, CONTROLLER_LISTENER)
                 if name in node.ports]
    # Group offsets survive the loss of a broker only with replicas on others.
    replication = min(INTERNAL_TOPIC_REPLICATION, sum(1 for n in state.nodes if n.is_broker))
    props = {
        "process.roles": ",".join(node.roles),
        "node.id": str(node.id),
        "listeners": ",".join(listeners),
        "controller.listener.names": CONTROLLER_LISTENER,
        "controller.quorum.voters": voters,
        "listener.security.protocol.map": f"{BROKER_LISTENER}:PLAINTEXT,{CONTROLLER_LISTENER}:PLAINTEXT",
    }
    if node.is_broker:
        props["inter.broker.listener.name"] = BROKER_LISTENER
    site = state.layout.site_of(node.id)
    if site is not None and node.is_broker:
        props["broker.rack"] = site
    props.update({
        "log.dirs": str(node_dir / "data"),
        "offsets.topic.replication.factor": str(replication),
        "transaction.state.log.replication.factor": str(replication),
        "transaction.state.log.min.isr": str(min(2, replication)),
        "share.coordinator.state.topic.replication.factor": str(replication),
        "share.coordinator.state.topic.min.isr": str(min(2, replication)),
        "group.initial.rebalance.delay.ms": "0",
    })
    props.update(dict(state.overrides))
    return props


def render_properties(props: Mapping[str, str], *, header: str = "") -> str:
    lines = [f"# {line}" for line in header.splitlines()]
    lines += [f"{key}={value}" for key, value in props.items()]
    return "\n".join(lines) + "\n"


def bootstrap_servers(state: ClusterState) -> str:
    return ",".join(n.address(BROKER_LISTENER) for n in state.nodes if n.is_broker)


def requested_layout(controllers: int | None, brokers: int | None, combined: int | None,
                     sites: str | None = None) -> Layout | None:
    """The layout the command line asks for, or None when it names no counts at all."""
    if sites is not None:
        if controllers is not None or brokers is not None or combined is not None:
            raise ClusterError("--sites cannot be mixed with --controllers/--brokers/--combined")
        return Layout.of_sites(parse_sites(sites))
    if combined is not None:
        if controllers is not None or brokers is not None:
            raise ClusterError("--combined cannot be mixed with --controllers/--brokers")
        if combined < 1:
            raise ClusterError("--combined needs at least one node")
        return Layout(combined=combined)
    if controllers is None and brokers is None:
        return None
    return Layout(controllers=DEFAULT_CONTROLLERS if controllers is None else controllers,
                  brokers=DEFAULT_BROKERS if brokers is None else brokers)


def check_reuse(state: ClusterState, layout: Layout | None, overrides: Sequence[tuple[str, str]]) -> None:
    """Refuse an ``up`` on an existing directory whose layout or overrides differ from the
    command line: the ports and voters are fixed, so growing or reshaping needs a new DIR."""
    if layout is not None and layout != state.layout:
        raise ClusterError(
            f"this directory holds a cluster made with {state.layout.describe()}, not "
            f"{layout.describe()}: use another --dir (or `cluster down` and remove it)")
    if overrides and list(overrides) != state.overrides:
        shown = " ".join(f"--override {k}={v}" for k, v in state.overrides) or "no --override"
        raise ClusterError(f"this directory's cluster was made with {shown}; run `up` with the "
                           "same overrides or none")
