"""`kafkapy cluster up|status|down`: a local multi-node KRaft cluster for development and tests.

Everything lives under one directory: ``cluster.json`` (the state: cluster id, layout, each node's
roles, ports and pid), and per node ``node-<id>/server.properties``, ``node-<id>/data`` and
``node-<id>/node.log``. Ports are chosen once, when the directory is created, because every
node's ``controller.quorum.voters`` names the controllers' ports and clients keep the brokers'
ports: a node brought back after ``kill -9`` must come back where it was.

The layout and configuration parts are pure (unit-tested without processes); the process parts
start nodes detached (their own session, output appended to ``node.log``) so they outlive the
``up`` command, and recognise them later by pid *and* command line, since pids get reused.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STATE_FILE = "cluster.json"
LOCK_FILE = ".cluster.lock"
STATE_VERSION = 1
HOST = "127.0.0.1"
BROKER_LISTENER = "PLAINTEXT"
CONTROLLER_LISTENER = "CONTROLLER"
DEFAULT_CONTROLLERS = 3
DEFAULT_BROKERS = 3
DEFAULT_UP_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
PROBE_TIMEOUT_S = 2.0
LOG_TAIL_LINES = 30
#: offsets.topic / transaction.state.log replication factor of launched clusters (Kafka's
#: default; fewer when the cluster has fewer brokers).
INTERNAL_TOPIC_REPLICATION = 3


class ClusterError(Exception):
    """The cluster directory cannot be used as asked; the message is meant for the user."""


# -- layout and configuration (pure) --------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """How many nodes of which kind: separate controllers and brokers, or combined nodes.

    ``combined > 0`` means that many ``broker,controller`` nodes and nothing else; otherwise
    controllers take node ids 1..C and brokers C+1..C+B (as Kafka's own examples number them).
    """

    controllers: int = 0
    brokers: int = 0
    combined: int = 0

    def __post_init__(self) -> None:
        if self.combined < 0 or self.controllers < 0 or self.brokers < 0:
            raise ClusterError("node counts cannot be negative")
        if self.combined and (self.controllers or self.brokers):
            raise ClusterError("--combined cannot be mixed with --controllers/--brokers")
        if not self.combined and self.controllers < 1:
            raise ClusterError("a cluster needs at least one controller")

    def roles(self) -> list[tuple[int, tuple[str, ...]]]:
        """(node id, process roles) for every node, in node id order."""
        if self.combined:
            return [(i, ("broker", "controller")) for i in range(1, self.combined + 1)]
        controllers = [(i, ("controller",)) for i in range(1, self.controllers + 1)]
        brokers = [(self.controllers + i, ("broker",)) for i in range(1, self.brokers + 1)]
        return controllers + brokers

    def broker_count(self) -> int:
        return self.combined or self.brokers

    def describe(self) -> str:
        if self.combined:
            return f"--combined {self.combined}"
        return f"--controllers {self.controllers} --brokers {self.brokers}"

    def to_json(self) -> dict[str, int]:
        return {"controllers": self.controllers, "brokers": self.brokers, "combined": self.combined}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Layout:
        return cls(int(data.get("controllers", 0)), int(data.get("brokers", 0)), int(data.get("combined", 0)))


@dataclass
class NodeState:
    """One node as the state file records it: roles, listener ports (fixed) and last pid."""

    id: int
    roles: tuple[str, ...]
    ports: dict[str, int]
    pid: int | None = None

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles

    def address(self, listener: str) -> str:
        return f"{HOST}:{self.ports[listener]}"

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "roles": list(self.roles), "ports": dict(self.ports), "pid": self.pid}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> NodeState:
        pid = data.get("pid")
        return cls(int(data["id"]), tuple(data["roles"]), {k: int(v) for k, v in data["ports"].items()},
                   int(pid) if pid is not None else None)


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
                 overrides: Sequence[tuple[str, str]] = ()) -> ClusterState:
    """A new cluster's state: each node gets its listeners' ports from ``ports`` (distinct)."""
    nodes = []
    for node_id, roles in layout.roles():
        listeners = {}
        if "broker" in roles:
            listeners[BROKER_LISTENER] = next(ports)
        if "controller" in roles:
            listeners[CONTROLLER_LISTENER] = next(ports)
        nodes.append(NodeState(node_id, roles, listeners))
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
    props.update({
        "log.dirs": str(node_dir / "data"),
        "offsets.topic.replication.factor": str(replication),
        "transaction.state.log.replication.factor": str(replication),
        "transaction.state.log.min.isr": str(min(2, replication)),
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


def requested_layout(controllers: int | None, brokers: int | None, combined: int | None) -> Layout | None:
    """The layout the command line asks for, or None when it names no counts at all."""
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


# -- state file ------------------------------------------------------------------------------------


def load_state(directory: Path) -> ClusterState | None:
    path = directory / STATE_FILE
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    try:
        return ClusterState.from_json(json.loads(text))
    except (ValueError, KeyError, TypeError) as exc:
        raise ClusterError(f"{path} is not a kafkapy cluster state file: {exc}") from None


def save_state(directory: Path, state: ClusterState) -> None:
    # Written whole and renamed into place: a crash never leaves half a state file.
    path = directory / STATE_FILE
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(state.to_json(), indent=2) + "\n")
    os.replace(tmp, path)


@contextlib.contextmanager
def locked(directory: Path) -> Iterator[None]:
    """One `up`/`down` at a time per directory (two `up`s would start every node twice)."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / LOCK_FILE, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def node_dir(directory: Path, node: NodeState) -> Path:
    return directory / f"node-{node.id}"


def config_path(directory: Path, node: NodeState) -> Path:
    return node_dir(directory, node) / "server.properties"


def log_path(directory: Path, node: NodeState) -> Path:
    return node_dir(directory, node) / "node.log"


# -- processes -------------------------------------------------------------------------------------


def free_ports() -> Iterator[int]:
    """Distinct free ports: each is held open until the next is chosen, then all are released."""
    held: list[socket.socket] = []
    try:
        while True:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            held.append(s)
            s.bind((HOST, 0))
            yield s.getsockname()[1]
    finally:
        for s in held:
            s.close()


def is_running(pid: int | None, config: Path) -> bool:
    """The process exists and is the node started with ``config`` (not a reused pid)."""
    if not pid:
        return False
    deadline = time.monotonic() + 0.5
    while True:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read()
            with open(f"/proc/{pid}/stat", "rb") as f:
                state = f.read().rpartition(b")")[2].split()[:1]
        except OSError:
            return False
        if args:
            return os.fsencode(str(config)) in args.split(b"\0")
        # An empty command line: a zombie (exited, not yet reaped), or a process a few
        # milliseconds into exec whose arguments are not readable yet. Only the latter may run.
        if state == [b"Z"] or time.monotonic() > deadline:
            return False
        time.sleep(0.01)


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            text = f.read().decode("utf-8", "replace")
    except OSError as exc:
        return f"<no log: {exc}>"
    return "\n".join(text.splitlines()[-lines:])


def prepare_node(directory: Path, state: ClusterState, node: NodeState) -> Path:
    """Write the node's configuration if missing and format its storage with the cluster id.

    Without the explicit format each node would format itself on first start with a random
    cluster id of its own, and the quorum would refuse them as strangers to each other.
    """
    from kafkapy.config import parse_properties
    from kafkapy.storage import StorageError, format_storage

    ndir = node_dir(directory, node)
    (ndir / "data").mkdir(parents=True, exist_ok=True)
    config = config_path(directory, node)
    if not config.exists():
        header = (f"node {node.id} of the local kafkapy cluster {state.cluster_id}, written by "
                  "`kafkapy cluster up`;\nedits are kept (the file is only written when missing).")
        config.write_text(render_properties(node_properties(state, node, ndir.resolve()), header=header))
    checked = checked_config(parse_properties(config.read_text()), f"{config}")
    try:
        format_storage(checked, state.cluster_id, ignore_formatted=True)
    except StorageError as exc:
        raise ClusterError(f"node {node.id}: {exc}") from None
    return config


def checked_config(props: Mapping[str, str], where: str) -> Any:
    """``props`` as a validated ``BrokerConfig``; a bad setting is the user's error, not a crash."""
    from kafkapy.config import BrokerConfig
    from kafkapy.protocol import KafkaError

    try:
        config = BrokerConfig.from_sources(props)
        config.listeners  # parsed lazily: a malformed listener shows here, not in the node's log
    except (ValueError, KafkaError) as exc:
        raise ClusterError(f"invalid configuration in {where}: {exc}") from None
    return config


def start_node(directory: Path, node: NodeState, env: Mapping[str, str] | None = None) -> subprocess.Popen:
    """Start the node detached: its own session (a terminal's Ctrl-C or the launcher's exit does
    not reach it), output appended to its node.log."""
    config = config_path(directory, node)
    cmd = [sys.executable, "-m", "kafkapy", "server", "--config", str(config)]
    with open(log_path(directory, node), "ab") as log:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        log.write(f"\n===== {stamp} kafkapy cluster up: {' '.join(cmd)}\n".encode())
        log.flush()
        return subprocess.Popen(cmd, cwd=node_dir(directory, node), stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, **(env or {})})


def _signal_group(pid: int, sig: int) -> None:
    # start_new_session made the node a group leader: the group reaches any child it spawned.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def stop_nodes(directory: Path, nodes: Sequence[NodeState], timeout: float = STOP_TIMEOUT_S,
               say: Callable[[str], None] = print) -> None:
    """Stop every running node: broker-only nodes first, then the controllers, each group with
    SIGTERM, a bounded wait and SIGKILL for what is left.

    Brokers go first because a broker's clean shutdown asks the active controller to move its
    partition leaderships away (controlled shutdown); with the controllers gone it would wait
    for them in vain (Kafka's operators stop brokers before controllers for the same reason).
    """
    brokers_only = [n for n in nodes if not n.is_controller]
    for group in (brokers_only, [n for n in nodes if n.is_controller]):
        _stop_group(directory, group, timeout, say)


def _stop_group(directory: Path, nodes: Sequence[NodeState], timeout: float,
                say: Callable[[str], None]) -> None:
    running = {n.id: n for n in nodes if is_running(n.pid, config_path(directory, n))}
    for node in running.values():
        assert node.pid is not None
        _signal_group(node.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while running and time.monotonic() < deadline:
        for node_id in [i for i, n in running.items() if not is_running(n.pid, config_path(directory, n))]:
            say(f"stopped node {node_id} (pid {running.pop(node_id).pid})")
        if running:
            time.sleep(0.1)
    for node in running.values():
        assert node.pid is not None
        _signal_group(node.pid, signal.SIGKILL)
        say(f"killed node {node.id} (pid {node.pid}): still running {timeout:.0f}s after SIGTERM")
    kill_deadline = time.monotonic() + 10
    while any(is_running(n.pid, config_path(directory, n)) for n in running.values()):
        if time.monotonic() > kill_deadline:
            raise ClusterError("nodes still running after SIGKILL: "
                               + ", ".join(str(n.pid) for n in running.values()))
        time.sleep(0.05)


# -- talking to the nodes --------------------------------------------------------------------------


def _describe_quorum_request() -> Any:
    from kafkapy.protocol import messages

    r = messages.DescribeQuorumRequest
    return r(topics=[r.TopicData(topic_name="__cluster_metadata",
                                 partitions=[r.TopicData.PartitionData(partition_index=0)])])


async def _request(address: str, request: Any | None, timeout: float) -> Any:
    """Connect (ApiVersions), then send ``request`` if any; everything within ``timeout``."""
    import trio

    from kafkapy.net.client import KafkaClient

    host, _, port = address.rpartition(":")
    with trio.fail_after(timeout):
        async with await KafkaClient.connect(host, int(port), client_id="kafkapy-cluster",
                                             timeout=timeout) as client:
            return None if request is None else await client.send(request, timeout=timeout)


async def _answers(address: str, request: Any | None = None, timeout: float = PROBE_TIMEOUT_S) -> Any:
    """The response, or None when the node does not answer in time (still starting, down)."""
    import trio

    from kafkapy.net.client import KafkaClientError

    try:
        response = await _request(address, request, timeout)
    except (OSError, trio.TooSlowError, trio.BrokenResourceError, KafkaClientError, ValueError):
        return None
    return True if request is None else response


async def _registered_brokers(state: ClusterState, alive: Callable[[NodeState], bool]) -> set[int] | None:
    """Broker ids a running broker's Metadata lists (None if none answered)."""
    from kafkapy.protocol import messages

    for node in state.nodes:
        if not node.is_broker or not alive(node):
            continue
        request = messages.MetadataRequest(topics=[], allow_auto_topic_creation=False,
                                           include_topic_authorized_operations=False)
        response = await _answers(node.address(BROKER_LISTENER), request)
        if response is not None:
            return {b.node_id for b in response.brokers}
    return None


def active_controllers(state: ClusterState, running: Mapping[int, bool]) -> set[int]:
    """Ids of the controllers that answer DescribeQuorum as the quorum leader (Kafka answers it
    only on the leader; standbys say NOT_LEADER_OR_FOLLOWER). Each probe is bounded."""
    import trio

    from kafkapy.protocol import ErrorCode

    leaders: set[int] = set()

    async def probe(node: NodeState) -> None:
        response = await _answers(node.address(CONTROLLER_LISTENER), _describe_quorum_request())
        if response is None or not response.topics or not response.topics[0].partitions:
            return
        part = response.topics[0].partitions[0]
        if part.error_code == ErrorCode.NONE and part.leader_id == node.id:
            leaders.add(node.id)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            for node in state.nodes:
                if node.is_controller and running.get(node.id):
                    nursery.start_soon(probe, node)

    trio.run(main)
    return leaders


@dataclass
class _Waiting:
    """What `up` still waits for, and why it stopped waiting (for the error message)."""

    listeners: dict[int, list[str]]
    registered: set[int] = field(default_factory=set)
    exited: dict[int, int] = field(default_factory=dict)


def wait_ready(directory: Path, state: ClusterState, started: Mapping[int, subprocess.Popen],
               timeout: float) -> _Waiting:
    """Wait until every started node answers ApiVersions on each listener and (with brokers) a
    broker's Metadata lists every broker. Returns what was still missing at the deadline or when a
    started node exited (empty ``listeners`` and full ``registered`` mean ready)."""
    import trio

    waiting = _Waiting({n: list(state.node(n).ports) for n in started})
    expected = {n.id for n in state.nodes if n.is_broker}

    def alive(node: NodeState) -> bool:
        proc = started.get(node.id)
        if proc is not None:
            return proc.poll() is None
        return is_running(node.pid, config_path(directory, node))

    async def main() -> None:
        deadline = trio.current_time() + timeout
        while trio.current_time() < deadline:
            for node_id, proc in started.items():
                if proc.poll() is not None:
                    waiting.exited[node_id] = proc.returncode
            if waiting.exited:
                return
            for node_id, names in waiting.listeners.items():
                node = state.node(node_id)
                for name in list(names):
                    if await _answers(node.address(name)):
                        names.remove(name)
            waiting.listeners = {n: names for n, names in waiting.listeners.items() if names}
            if not waiting.listeners:
                if not expected:
                    return
                waiting.registered = await _registered_brokers(state, alive) or set()
                if expected <= waiting.registered:
                    return
            await trio.sleep(0.2)

    trio.run(main)
    return waiting


# -- the commands ----------------------------------------------------------------------------------


def _say(line: str) -> None:
    # Flushed: progress shows while `up` waits, even when stdout is a pipe.
    print(line, flush=True)


def cluster_up(directory: Path, layout: Layout | None, overrides: Sequence[tuple[str, str]],
               timeout: float = DEFAULT_UP_TIMEOUT_S) -> int:
    """Create the cluster in ``directory`` if it holds none, start every node that is not
    running and wait until they are ready. Prints the bootstrap servers last; returns the exit
    status (1 with the failing nodes' log tails on stderr). ``layout=None`` means "whatever the
    directory holds" (the defaults for a new one)."""
    from kafkapy.storage import random_kafka_uuid

    directory = directory.resolve()
    started: dict[int, subprocess.Popen] = {}
    with locked(directory):
        state = load_state(directory)
        if state is None:
            ports = free_ports()
            try:
                state = plan_cluster(layout or Layout(DEFAULT_CONTROLLERS, DEFAULT_BROKERS),
                                     random_kafka_uuid(), ports, overrides)
            finally:
                ports.close()
            # Checked before anything is written: the state file pins the overrides, so a bad
            # one saved there could only be undone by removing the directory.
            for node in state.nodes:
                checked_config(node_properties(state, node, node_dir(directory, node)),
                               f"the settings of node {node.id}")
            save_state(directory, state)
            _say(f"new cluster {state.cluster_id} ({state.layout.describe()}) in {directory}")
        else:
            check_reuse(state, layout, overrides)

        try:
            for node in state.nodes:
                if is_running(node.pid, config_path(directory, node)):
                    _say(f"node {node.id} ({','.join(node.roles)}) already running, pid {node.pid}")
                    continue
                prepare_node(directory, state, node)
                proc = start_node(directory, node)
                node.pid = proc.pid
                started[node.id] = proc
                _say(f"started node {node.id} ({','.join(node.roles)}) pid {proc.pid}, "
                     + ", ".join(f"{name} {node.address(name)}" for name in node.ports))
        finally:
            # Recorded before waiting, and even when a later node could not be prepared: the
            # nodes already started must stay findable by `status` and `down`.
            save_state(directory, state)

    waiting = wait_ready(directory, state, started, timeout)
    problems = _describe_problems(directory, state, waiting, timeout)
    if problems:
        print(problems, file=sys.stderr)
        print(f"nodes that started are left running: `kafkapy cluster down --dir {directory}` "
              "stops them", file=sys.stderr)
        return 1
    print(bootstrap_servers(state) if any(n.is_broker for n in state.nodes)
          else ",".join(n.address(CONTROLLER_LISTENER) for n in state.nodes))
    return 0


def _describe_problems(directory: Path, state: ClusterState, waiting: _Waiting, timeout: float) -> str:
    parts = []
    named: set[int] = set()
    for node_id, code in waiting.exited.items():
        parts.append(f"node {node_id} exited with code {code} while starting")
        named.add(node_id)
    if not waiting.exited:
        for node_id, names in waiting.listeners.items():
            node = state.node(node_id)
            listed = ", ".join(f"{n} {node.address(n)}" for n in names)
            parts.append(f"node {node_id} did not answer ApiVersions on {listed} within {timeout:g}s")
            named.add(node_id)
        expected = {n.id for n in state.nodes if n.is_broker}
        if not waiting.listeners and expected and not expected <= waiting.registered:
            missing = sorted(expected - waiting.registered)
            parts.append(f"brokers {missing} were not registered within {timeout:g}s "
                         f"(Metadata lists {sorted(waiting.registered)})")
            named.update(missing)
    for node_id in sorted(named):
        path = log_path(directory, state.node(node_id))
        parts.append(f"--- last lines of {path} ---\n{log_tail(path)}")
    return "\n".join(parts)


def cluster_status(directory: Path) -> dict[str, Any]:
    """The ``status`` document: every node's id, roles, pid, listeners and whether it is the
    active controller (asked over the network), plus the cluster id and bootstrap servers."""
    directory = directory.resolve()
    state = load_state(directory)
    if state is None:
        raise ClusterError(f"no cluster in {directory} (no {STATE_FILE}): `kafkapy cluster up` makes one")
    running = {n.id: is_running(n.pid, config_path(directory, n)) for n in state.nodes}
    leaders = active_controllers(state, running)
    return {
        "cluster_id": state.cluster_id,
        "nodes": [
            {
                "id": n.id,
                "roles": list(n.roles),
                "pid": n.pid if running[n.id] else None,
                "running": running[n.id],
                "listeners": {name: n.address(name) for name in n.ports},
                "active_controller": n.id in leaders,
            }
            for n in state.nodes
        ],
        "bootstrap_servers": bootstrap_servers(state),
    }


def cluster_down(directory: Path, timeout: float = STOP_TIMEOUT_S) -> int:
    """Stop every running node (see :func:`stop_nodes`) and clear the recorded pids."""
    directory = directory.resolve()
    if not (directory / STATE_FILE).exists():
        print(f"no cluster in {directory}: nothing to stop", file=sys.stderr)
        return 0
    with locked(directory):
        state = load_state(directory)
        assert state is not None
        stop_nodes(directory, state.nodes, timeout)
        for node in state.nodes:
            node.pid = None
        save_state(directory, state)
    print(f"cluster {state.cluster_id} in {directory} is down")
    return 0


# -- command line ----------------------------------------------------------------------------------


def add_parser(sub: Any, override_type: Callable[[str], tuple[str, str]]) -> None:
    """Add `cluster up|status|down` to the `kafkapy` command's subparsers."""
    cluster = sub.add_parser("cluster", help="run a local multi-node cluster (development and tests)")
    commands = cluster.add_subparsers(dest="cluster_command", required=True)
    up = commands.add_parser("up", help="start the nodes that are not running; prints the bootstrap servers last")
    up.add_argument("--dir", "-d", required=True, type=Path, help="the cluster's directory")
    up.add_argument("--controllers", type=int, metavar="C", help=f"controller-only nodes (default {DEFAULT_CONTROLLERS})")
    up.add_argument("--brokers", type=int, metavar="B", help=f"broker-only nodes (default {DEFAULT_BROKERS})")
    up.add_argument("--combined", type=int, metavar="N", help="N combined (broker,controller) nodes instead")
    up.add_argument("--timeout", type=float, default=DEFAULT_UP_TIMEOUT_S, metavar="SECONDS",
                    help="seconds to wait for the nodes to answer (default %(default)s)")
    up.add_argument("--override", "-o", action="append", type=override_type, default=[], metavar="KEY=VALUE",
                    help="a setting for every node (repeatable)")
    status = commands.add_parser("status", help="print the nodes as JSON")
    status.add_argument("--dir", "-d", required=True, type=Path)
    down = commands.add_parser("down", help="stop every node (SIGTERM, then SIGKILL after 30 s)")
    down.add_argument("--dir", "-d", required=True, type=Path)


def run(args: argparse.Namespace) -> int:
    try:
        if args.cluster_command == "up":
            layout = requested_layout(args.controllers, args.brokers, args.combined)
            return cluster_up(args.dir, layout, args.override, args.timeout)
        if args.cluster_command == "status":
            print(json.dumps(cluster_status(args.dir), indent=2))
            return 0
        if args.cluster_command == "down":
            return cluster_down(args.dir)
    except ClusterError as exc:
        print(f"kafkapy cluster: {exc}", file=sys.stderr)
        return 1
    return 2
