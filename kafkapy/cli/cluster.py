"""`kafkapy cluster up|status|down`: a local multi-node KRaft cluster for development and tests.

Everything lives under one directory: ``cluster.json`` (the state: cluster id, layout, each node's
roles, ports and pid), and per node ``node-<id>/server.properties``, ``node-<id>/data`` and
``node-<id>/node.log``. Ports are chosen once, when the directory is created, because every
node's ``controller.quorum.voters`` names the controllers' ports and clients keep the brokers'
ports: a node brought back after ``kill -9`` must come back where it was.

The layout and configuration parts are pure (unit-tested without processes); the process parts
start nodes detached (their own session, output appended to ``node.log``) so they outlive the
``up`` command, and recognise them later by pid *and* command line, since pids get reused.

This module holds the three commands and their command line; the parts are in
``cluster_config`` (layout and ``server.properties``, pure), ``cluster_processes`` (the
directory, starting and stopping nodes) and ``cluster_probe`` (asking the nodes whether they
are up). Their public names are re-exported here: the test harness imports them from this module.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kafkapy.cli.cluster_config import (
    BROKER_LISTENER,
    CONTROLLER_LISTENER,
    DEFAULT_BROKERS,
    DEFAULT_CONTROLLERS,
    HOST,
    STATE_FILE,
    ClusterError,
    ClusterState,
    Layout,
    NodeState,
    bootstrap_servers,
    check_reuse,
    node_properties,
    plan_cluster,
    render_properties,
    requested_layout,
)
from kafkapy.cli.cluster_probe import Waiting, active_controllers, wait_ready
from kafkapy.cli.cluster_processes import (
    STOP_TIMEOUT_S,
    checked_config,
    config_path,
    free_ports,
    is_running,
    load_state,
    locked,
    log_path,
    log_tail,
    node_dir,
    prepare_node,
    save_state,
    start_node,
    stop_nodes,
)

__all__ = [
    "BROKER_LISTENER", "CONTROLLER_LISTENER", "HOST", "STATE_FILE", "ClusterError", "ClusterState",
    "Layout", "NodeState", "add_parser", "bootstrap_servers", "check_reuse", "cluster_down",
    "cluster_status", "cluster_up", "free_ports", "is_running", "load_state", "locked",
    "node_properties", "plan_cluster", "prepare_node", "render_properties", "requested_layout",
    "run", "save_state", "start_node", "stop_nodes",
]

DEFAULT_UP_TIMEOUT_S = 60.0


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
    started: dict[int, subprocess.Popen[bytes]] = {}
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


def _describe_problems(directory: Path, state: ClusterState, waiting: Waiting, timeout: float) -> str:
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
    leaders = active_controllers(directory, state, running)
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
    up.add_argument("--controllers", type=int, metavar="C",
                    help=f"controller-only nodes (default {DEFAULT_CONTROLLERS})")
    up.add_argument("--brokers", type=int, metavar="B", help=f"broker-only nodes (default {DEFAULT_BROKERS})")
    up.add_argument("--combined", type=int, metavar="N", help="N combined (broker,controller) nodes instead")
    up.add_argument("--sites", metavar="NAME:C:B[:N],...",
                    help="a stretch cluster: per site its name (the brokers' broker.rack), "
                         "controllers, brokers and optionally combined nodes, e.g. "
                         "west:2:2,east:2:2,tie:1:0 or west:0:0:2,east:0:1:1 (docs/multi-dc.md)")
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
            layout = requested_layout(args.controllers, args.brokers, args.combined, args.sites)
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
