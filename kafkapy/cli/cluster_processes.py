"""The processes of a ``kafkapy cluster``: its directory (state file, lock, per-node paths),
formatting and starting nodes detached, recognising them later, and stopping them.

Nodes start detached (their own session, output appended to ``node.log``) so they outlive the
``up`` command; they are recognised later by pid *and* command line, since pids get reused.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from kafkapy.cli.cluster_config import (
    HOST,
    STATE_FILE,
    ClusterError,
    ClusterState,
    NodeState,
    node_properties,
    render_properties,
)

LOCK_FILE = ".cluster.lock"
STOP_TIMEOUT_S = 30.0
LOG_TAIL_LINES = 30


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


def free_ports() -> Generator[int, None, None]:
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


def start_node(directory: Path, node: NodeState, env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
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
