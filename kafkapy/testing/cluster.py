"""``LocalCluster``: a multi-node cluster for tests and benchmarks, driven through the CLI.

It runs ``kafkapy cluster up/status/down`` as a user would (each command bounded), and on exit
stops every node it started, SIGKILLing any that outlive ``down``, so a failing test leaves no
process behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from kafkapy.cli.cluster import (
    BROKER_LISTENER,
    CONTROLLER_LISTENER,
    HOST,
    ClusterState,
    load_state,
    locked,
    prepare_node,
    save_state,
    start_node,
)

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[2]


class ClusterCommandError(AssertionError):
    """A ``kafkapy cluster`` command failed; the message carries its output."""


class LocalCluster:
    """Nodes under ``directory``: ``controllers`` voters and ``brokers`` broker-only nodes
    (or ``combined`` broker,controller nodes, or ``sites`` as ``kafkapy cluster up --sites``
    takes them), with ``overrides`` on every node."""

    def __init__(self, directory: str | os.PathLike[str], *, controllers: int = 3, brokers: int = 3,
                 combined: int = 0, overrides: Mapping[str, object] | None = None,
                 up_timeout: float = 90.0, sites: str | None = None) -> None:
        self.directory = Path(directory)
        if sites:
            self.layout = ["--sites", sites]
        else:
            self.layout = (["--combined", str(combined)] if combined
                           else ["--controllers", str(controllers), "--brokers", str(brokers)])
        self.overrides = [f"{k}={v}" for k, v in (overrides or {}).items()]
        self.up_timeout = up_timeout
        self.bootstrap = ""

    # -- commands --------------------------------------------------------------------------------

    def _cli(self, *args: str, timeout: float) -> str:
        try:
            done = subprocess.run([sys.executable, "-m", "kafkapy", "cluster", *args], cwd=REPO,
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise ClusterCommandError(f"`kafkapy cluster {' '.join(args)}` took over {timeout}s") from exc
        if done.returncode != 0:
            raise ClusterCommandError(f"`kafkapy cluster {' '.join(args)}` exited {done.returncode}\n"
                                      f"{done.stdout}\n{done.stderr}")
        return done.stdout

    def up(self) -> str:
        """Start every node that is not running; the bootstrap servers."""
        args = ["up", *self.layout, "--dir", str(self.directory), "--timeout", str(self.up_timeout)]
        for override in self.overrides:
            args += ["--override", override]
        out = self._cli(*args, timeout=self.up_timeout + 30)
        self.bootstrap = out.strip().splitlines()[-1]
        return self.bootstrap

    def status(self) -> dict[str, Any]:
        return json.loads(self._cli("status", "--dir", str(self.directory), timeout=60))

    def down(self) -> None:
        self._cli("down", "--dir", str(self.directory), timeout=120)

    # -- nodes -----------------------------------------------------------------------------------

    def nodes(self) -> dict[int, dict[str, Any]]:
        return {n["id"]: n for n in self.status()["nodes"]}

    def active_controller(self) -> int | None:
        active = [i for i, n in self.nodes().items() if n["active_controller"]]
        return active[0] if len(active) == 1 else None

    def state(self) -> ClusterState:
        """``cluster.json`` as the launcher wrote it: roles, fixed ports, last pids. Reading it
        costs no subprocess (``status`` also asks every controller who leads)."""
        state = load_state(self.directory)
        if state is None:
            raise ClusterCommandError(f"no cluster in {self.directory} (run up first)")
        return state

    def broker_ids(self) -> list[int]:
        return sorted(n.id for n in self.state().nodes if n.is_broker)

    def node_dir(self, node_id: int) -> Path:
        return self.directory / f"node-{node_id}"

    def properties_path(self, node_id: int) -> Path:
        return self.node_dir(node_id) / "server.properties"

    def log(self, node_id: int) -> str:
        try:
            return (self.node_dir(node_id) / "node.log").read_text(errors="replace")
        except OSError:
            return ""

    def broker_address(self, node_id: int) -> tuple[str, int]:
        return HOST, self.state().node(node_id).ports[BROKER_LISTENER]

    def controller_address(self, node_id: int) -> tuple[str, int]:
        return HOST, self.state().node(node_id).ports[CONTROLLER_LISTENER]

    def pids(self) -> list[int]:
        """The recorded pids of the nodes that run."""
        return [n.pid for n in self.state().nodes if n.pid is not None and process_alive(n.pid)]

    def kill9(self, node_id: int) -> None:
        """kill -9 a node and wait (bounded) until it is gone."""
        pid = self.state().node(node_id).pid
        if pid is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        eventually(lambda: not process_alive(pid), timeout=10, what=f"node {node_id} (pid {pid}) to exit")

    def stop(self, node_id: int, timeout: float = 60.0) -> None:
        """Stop a node cleanly (SIGTERM: a controlled shutdown, then the clean-shutdown marker)
        and wait (bounded) until it is gone."""
        pid = self.state().node(node_id).pid
        if pid is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
        eventually(lambda: not process_alive(pid), timeout=timeout,
                   what=f"node {node_id} (pid {pid}) to shut down")

    def start(self, node_id: int) -> None:
        """Start one stopped node (``up`` starts every stopped node): for tests that keep others
        down meanwhile. Its pid is recorded, so ``down`` stops it. Returns once it runs; wait
        for what you need (registration, unfencing) yourself."""
        with locked(self.directory):
            state = self.state()
            node = state.node(node_id)
            prepare_node(self.directory, state, node)
            node.pid = start_node(self.directory, node).pid
            save_state(self.directory, state)

    def set_property(self, node_id: int, key: str, value: str) -> None:
        """Rewrite one setting in a node's server.properties (it applies at the next start)."""
        path = self.properties_path(node_id)
        lines = [line for line in path.read_text().splitlines() if not line.startswith(f"{key}=")]
        lines.append(f"{key}={value}")
        path.write_text("\n".join(lines) + "\n")

    # -- cleanup ---------------------------------------------------------------------------------

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            self.down()
        except ClusterCommandError:
            pass
        finally:
            self._kill_leftovers()

    def _kill_leftovers(self) -> None:
        state = load_state(self.directory)
        if state is None:
            return
        for node in state.nodes:
            if node.pid is None or not process_alive(node.pid):
                continue
            config = str(self.properties_path(node.id)).encode()
            with contextlib.suppress(OSError), open(f"/proc/{node.pid}/cmdline", "rb") as f:
                if config in f.read().split(b"\0"):
                    os.killpg(node.pid, signal.SIGKILL)


def eventually(fn: Callable[[], T], *, timeout: float, what: str, interval: float = 0.1) -> T:
    """Call ``fn`` until it returns something truthy (exceptions count as "not yet")."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            result = fn()
        except Exception as exc:  # a node still starting, a connection refused...
            result, last = None, exc  # type: ignore[assignment]
        if result:
            return result
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last error: {last!r})")


def process_alive(pid: int) -> bool:
    """The process exists and is not a zombie waiting to be reaped."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False




class KafkaClusterNode:
    """A whole cluster as the compat suite's broker under test (``KAFKAPY_COMPAT_TARGET=
    kafkapy-cluster``): three controllers and three brokers from ``kafkapy cluster up``, with
    the node interface the suite uses (bootstrap, running, kill9/restart of every node, log
    tails). The stock clients then meet forwarding, several brokers and partition leaders spread
    over them."""

    name = "kafkapy-cluster"
    durable = True

    def __init__(self, workdir: str | os.PathLike[str] | None = None, *,
                 overrides: Mapping[str, object] | None = None, controllers: int = 3,
                 brokers: int = 3, **_: object) -> None:
        self._own_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="kafkapy-cluster-"))
        self.cluster = LocalCluster(self.workdir / "cluster", controllers=controllers,
                                    brokers=brokers, overrides=overrides)
        self.log_path = self.cluster.directory

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    def running(self) -> bool:
        state = load_state(self.cluster.directory)
        return state is not None and all(n.pid is not None and process_alive(n.pid) for n in state.nodes)

    def start(self) -> KafkaClusterNode:
        self.cluster.up()
        return self

    def stop(self, timeout: float = 60.0) -> int:
        """Stop every node as an operator would (SIGTERM, brokers first); 0 once done."""
        self.cluster.down()
        return 0

    def kill9(self) -> None:
        pids = self.cluster.pids()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        for pid in pids:
            eventually(lambda pid=pid: not process_alive(pid), timeout=10, what=f"pid {pid} to exit")

    def restart(self, *, kill: bool = False) -> KafkaClusterNode:
        self.kill9() if kill else self.stop()
        return self.start()

    def cleanup(self) -> None:
        self.cluster.__exit__(None, None, None)
        if self._own_workdir and not os.environ.get("KAFKAPY_KEEP_NODE_DIRS"):
            shutil.rmtree(self.workdir, ignore_errors=True)

    def log_tail(self, max_bytes: int = 20_000) -> str:
        parts = []
        for path in sorted(self.cluster.directory.glob("node-*/node.log")):
            text = path.read_text(errors="replace")
            parts.append(f"--- {path.parent.name} ---\n{text[-max_bytes // 6:]}")
        return "\n".join(parts)


__all__ = ["ClusterCommandError", "KafkaClusterNode", "LocalCluster", "eventually", "process_alive"]
