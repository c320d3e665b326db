"""Start a broker as a separate process for tests: a kafkapy node or, to check the tests themselves,
a Tansu broker. Both expose the same small interface.

    with KafkaNode() as node:          # or TansuNode(), or node_class_for_target()()
        run_client(node.bootstrap)
        node.kill9(); node.restart()   # same data dir, same ports

Every wait has a deadline. The node runs in its own process group; `stop()` sends SIGTERM to the
group, waits (bounded) and then SIGKILLs it, so nothing is left behind even when a test fails.
"""

from __future__ import annotations

import abc
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

if TYPE_CHECKING:
    from kafkapy.net.client_security import ClientSecurity

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_STARTUP_TIMEOUT = 30.0
DEFAULT_STOP_TIMEOUT = 10.0

# What Kafka's own single-node quickstart (config/kraft/server.properties) sets, so internal topics
# can be created on one node.
SINGLE_NODE_DEFAULTS: dict[str, str] = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
}


class NodeError(RuntimeError):
    """The node did not start or stop as asked; the message carries the tail of its log."""


ADDR_IN_USE = re.compile(r"(?i)address already in use|address in use|AddrInUse|errno 98")


def _port_taken(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
        return False


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def api_versions_round_trip(host: str, port: int, timeout: float = 2.0) -> bool:
    """Send ApiVersions v0 and read a well-formed answer with our correlation id.

    An error code of 0, or 35 (UNSUPPORTED_VERSION, which a broker answers in v0 format when it does
    not serve v0), both prove the broker is up and speaking Kafka.
    """
    correlation_id = 0x6B61_6670
    client_id = b"kafkapy-testing"
    body = struct.pack(">hhih", 18, 0, correlation_id, len(client_id)) + client_id
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(struct.pack(">i", len(body)) + body)
            size = struct.unpack(">i", recv_exactly(s, 4))[0]
            if not 6 <= size <= 1 << 20:
                return False
            payload = recv_exactly(s, size)
    except (OSError, ConnectionError, struct.error):
        return False
    got_id, error_code = struct.unpack(">ih", payload[:6])
    return got_id == correlation_id and error_code in (0, 35)


def secured_api_versions_round_trip(host: str, port: int, security: "ClientSecurity",
                                    timeout: float = 2.0) -> bool:
    """Whether a listener that speaks ``security`` (TLS and/or SASL) answers: connect as a
    client would (handshake, ApiVersions, SASL authentication when ``security.sasl`` is set).
    ApiVersions is answered before authentication, so TLS alone is enough to see a SASL_SSL
    listener up; with credentials, a refusal counts as not ready (SCRAM users arrive with the
    metadata, after the listener opens)."""
    import trio

    from kafkapy.net.client import KafkaClient, KafkaClientError
    from kafkapy.net.sasl_client import SaslAuthenticationFailed

    async def answers() -> None:
        with trio.fail_after(timeout):
            client = await KafkaClient.connect(host, port, client_id="kafkapy-testing",
                                               timeout=timeout, security=security)
            await client.aclose()

    try:
        trio.run(answers)
    except (OSError, trio.TooSlowError, trio.BrokenResourceError, KafkaClientError,
            SaslAuthenticationFailed, ValueError):
        return False
    return True


def recv_exactly(s: socket.socket, n: int) -> bytes:
    """Exactly ``n`` bytes from a blocking socket (ConnectionError if it closes first)."""
    chunks = []
    while n:
        chunk = s.recv(n)
        if not chunk:
            raise ConnectionError("connection closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def wait_answering(nodes: Sequence["_ProcessNode"], timeout: float, what: str = "nodes") -> None:
    """Wait (bounded) until every launched node answers ApiVersions: a quorum's nodes start
    together, as none is ready until a majority runs. NodeError with a log tail when one exits
    or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    pending = list(nodes)
    while pending and time.monotonic() < deadline:
        for node in list(pending):
            if not node.running():
                raise NodeError(f"{what}: {node.name} in {node.workdir} exited during startup\n"
                                f"{node.log_tail()}")
            if node.answers(timeout=1.0):
                pending.remove(node)
        time.sleep(0.2)
    if pending:
        raise NodeError(f"{what}: {[str(n.workdir) for n in pending]} did not answer within "
                        f"{timeout:.0f}s\n{pending[0].log_tail()}")


class StartedInWith(abc.ABC):
    """``with thing:`` starts it and always cleans it up, also when the start itself fails
    (a half-started node or cluster leaves no process or directory behind)."""

    @abc.abstractmethod
    def start(self): ...

    @abc.abstractmethod
    def cleanup(self) -> None: ...

    def __enter__(self):
        try:
            return self.start()
        except BaseException:
            self.cleanup()
            raise

    def __exit__(self, *exc) -> None:
        self.cleanup()


class _ProcessNode(StartedInWith):
    """A broker in a child process with its own process group, data dir and log file."""

    name = "node"
    #: whether data survives kill9() + restart() (Tansu's memory storage does not)
    durable = True

    def __init__(
        self,
        workdir: str | os.PathLike | None = None,
        *,
        startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
        env: Mapping[str, str] | None = None,
        host: str = "127.0.0.1",
        wrap: Sequence[str] = (),
        probe_security: "ClientSecurity | None" = None,
    ) -> None:
        """``host``: the address the node listens on and is reached at; ``wrap``: a command the
        node's command line runs under (``ip netns exec NS`` puts it in a network site);
        ``probe_security``: how to reach ``port`` when it is a TLS or SASL listener (None:
        PLAINTEXT). The readiness probe connects with it as a client does."""
        self._own_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix=f"{self.name}-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.workdir / f"{self.name}.log"
        self.startup_timeout = startup_timeout
        self.env = dict(env or {})
        self.port = free_port()
        self.host = host
        self.wrap = list(wrap)
        self.probe_security = probe_security
        self._proc: subprocess.Popen | None = None
        self._log_file = None
        self.starts = 0

    # -- what subclasses provide -------------------------------------------------------------------
    @abc.abstractmethod
    def command(self) -> list[str]:
        """The broker's command line."""

    # -- public interface --------------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def answers(self, timeout: float = 1.0) -> bool:
        """Whether ``port`` answers ApiVersions, in the listener's security (``probe_security``)."""
        security = self.probe_security
        if security is None or (security.ssl_context is None and security.sasl is None):
            return api_versions_round_trip(self.host, self.port, timeout=timeout)
        return secured_api_versions_round_trip(self.host, self.port, security, timeout=timeout)

    def start(self) -> "_ProcessNode":
        # Free ports are picked by binding port 0 and closing it, so another process can take one
        # before the node binds it. On a first start that is retried with new ports; a restart keeps
        # its ports (clients reconnect to them).
        attempts = 3 if self.starts == 0 else 1
        for attempt in range(attempts):
            try:
                return self._start_once()
            except NodeError:
                if attempt + 1 == attempts or not any(map(_port_taken, self._ports())):
                    raise
                self._repick_ports()
        raise AssertionError("unreachable")

    def _repick_ports(self) -> None:
        self.port = free_port()

    def _ports(self) -> list[int]:
        return [self.port]

    def _start_once(self) -> "_ProcessNode":
        self._launch()
        try:
            self._wait_ready()
        except BaseException:
            self._terminate(kill=True)
            raise
        return self

    def _launch(self) -> None:
        """Start the process without waiting for it to answer (a quorum's nodes start together)."""
        if self.running():
            raise NodeError(f"{self.name} already running (pid {self._proc.pid})")
        self._log_file = open(self.log_path, "ab", buffering=0)
        self._log_file.write(
            f"\n===== start #{self.starts + 1}: {' '.join(self.command())}\n".encode()
        )
        env = {**os.environ, **self.env}
        self._proc = subprocess.Popen(
            self.wrap + self.command(),
            cwd=self.workdir,
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # own process group: killpg reaches every child too
        )
        self.starts += 1

    def stop(self, timeout: float = DEFAULT_STOP_TIMEOUT) -> int | None:
        """SIGTERM, wait up to `timeout`, then SIGKILL. Returns the exit code (None if never ran)."""
        return self._terminate(kill=False, timeout=timeout)

    def kill9(self) -> int | None:
        return self._terminate(kill=True)

    def restart(self, *, kill: bool = False) -> "_ProcessNode":
        """Stop (or kill -9) and start again on the same data dir and the same ports."""
        self._terminate(kill=kill)
        return self.start()

    def cleanup(self) -> None:
        self._terminate(kill=True)
        if self._own_workdir and not os.environ.get("KAFKAPY_KEEP_NODE_DIRS"):
            shutil.rmtree(self.workdir, ignore_errors=True)

    def log_tail(self, max_bytes: int = 20_000) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - max_bytes))
                return f.read().decode("utf-8", "replace")
        except OSError as e:
            return f"<no log: {e}>"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.bootstrap} pid={self.pid} dir={self.workdir}>"

    # -- internals ---------------------------------------------------------------------------------
    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            code = self._proc.poll()
            if code is not None:
                raise NodeError(
                    f"{self.name} exited with code {code} during startup\n"
                    f"command: {' '.join(self.command())}\n--- log tail ---\n{self.log_tail()}"
                )
            if self.answers(timeout=1.0):
                return
            if ADDR_IN_USE.search(self.log_tail(4000)[-4000:].split("===== start")[-1]):
                raise NodeError(f"{self.name} could not bind its ports\n--- log tail ---\n{self.log_tail()}")
            time.sleep(0.1)
        raise NodeError(
            f"{self.name} did not answer ApiVersions on {self.bootstrap} within "
            f"{self.startup_timeout:.0f}s\ncommand: {' '.join(self.command())}\n"
            f"--- log tail ---\n{self.log_tail()}"
        )

    def _terminate(self, *, kill: bool, timeout: float = DEFAULT_STOP_TIMEOUT) -> int | None:
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        try:
            if proc.poll() is None:
                _signal_group(proc.pid, signal.SIGKILL if kill else signal.SIGTERM)
                try:
                    proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    _signal_group(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=10)
            # Children that outlived the leader (same group) go too.
            _signal_group(proc.pid, signal.SIGKILL)
            return proc.returncode
        finally:
            if self._log_file is not None:
                self._log_file.close()
                self._log_file = None


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class KafkaNode(_ProcessNode):
    """One kafkapy node with process.roles=broker,controller (KRaft combined mode)."""

    name = "kafkapy"

    def __init__(
        self,
        workdir: str | os.PathLike | None = None,
        *,
        overrides: Mapping[str, object] | Iterable[tuple[str, object]] = (),
        python: str | None = None,
        format_storage: bool = True,
        controller_port: int | None = None,
        cluster_id: str | None = None,
        **kwargs,
    ) -> None:
        super().__init__(workdir, **kwargs)
        self.format_storage = format_storage
        # The nodes of one multi-node cluster are formatted with the same cluster id (as
        # `kafka-storage.sh format -t` on each); by default each node makes its own.
        self.cluster_id = cluster_id
        # A fixed controller port (a multi-node quorum names every voter's port in each node's
        # controller.quorum.voters, so it must not change on a port-collision retry).
        self._fixed_controller_port = controller_port is not None
        if controller_port is not None:
            self.controller_port = controller_port
            while self.port == self.controller_port:
                self.port = free_port()
        else:
            self.controller_port = free_port()
            while self.controller_port == self.port:
                self.controller_port = free_port()
        self.python = python or _venv_python()
        # Listeners besides PLAINTEXT and CONTROLLER: name -> (security protocol, port). They are
        # part of the node's port set, so a port-collision retry picks them afresh too.
        self.extra_listeners: dict[str, tuple[str, int]] = {}
        # More arguments for `storage format` (``--add-scram`` users, say).
        self.format_args: list[str] = []
        self.overrides = dict(SINGLE_NODE_DEFAULTS)
        self.overrides.update(dict(overrides))
        self.data_dir = self.workdir / "data"
        self.data_dir.mkdir(exist_ok=True)

    def _ports(self) -> list[int]:
        return [self.port, self.controller_port, *(port for _, port in self.extra_listeners.values())]

    def add_listener(self, name: str, protocol: str) -> int:
        """Adds a listener on a free port of its own; returns the port."""
        taken = set(self._ports())
        port = free_port()
        while port in taken:
            port = free_port()
        self.extra_listeners[name] = (protocol, port)
        return port

    def _repick_ports(self) -> None:
        super()._repick_ports()
        for name, (protocol, _) in list(self.extra_listeners.items()):
            del self.extra_listeners[name]
            self.add_listener(name, protocol)
        if self._fixed_controller_port:
            while self.port == self.controller_port:
                self.port = free_port()
            return
        self.controller_port = free_port()
        while self.controller_port == self.port:
            self.controller_port = free_port()

    def start(self) -> "KafkaNode":
        if self.format_storage and not (self.data_dir / "meta.properties").exists():
            self._format()
        return super().start()

    def _format(self) -> None:
        """`kafkapy storage format` first, as a Kafka operator runs `kafka-storage.sh format`."""
        cmd = [self.python, "-m", "kafkapy", "storage", "format", "--ignore-formatted", *self.format_args]
        if self.cluster_id is not None:
            cmd += ["--cluster-id", self.cluster_id]
        for key, value in self._settings().items():
            cmd += ["--override", f"{key}={value}"]
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== format: {' '.join(cmd)}\n".encode())
            log.flush()
            try:
                subprocess.run(cmd, cwd=self.workdir, stdin=subprocess.DEVNULL, stdout=log,
                               stderr=subprocess.STDOUT, timeout=60, env={**os.environ, **self.env})
            except subprocess.TimeoutExpired:
                raise NodeError(f"`kafkapy storage format` took over 60s\n{self.log_tail()}") from None
        # A failure here shows up as a startup failure with this log.

    def _settings(self) -> dict[str, str]:
        # advertised.listeners stays unset, as in most Kafka test setups: the broker advertises
        # its non-controller listeners, and DescribeConfigs reports the key as a default.
        node_id = str(self.overrides.get("node.id", 1))
        extra = "".join(f"{name}://{self.host}:{port}," for name, (_, port) in self.extra_listeners.items())
        base = {
            "node.id": node_id,
            "process.roles": "broker,controller",
            "listeners": f"PLAINTEXT://{self.host}:{self.port},{extra}CONTROLLER://{self.host}:{self.controller_port}",
            "controller.listener.names": "CONTROLLER",
            "controller.quorum.voters": f"{node_id}@{self.host}:{self.controller_port}",
            "log.dirs": str(self.data_dir),
        }
        if self.extra_listeners:
            # Nodes talk among themselves, and the harness probes, on PLAINTEXT.
            base["listener.security.protocol.map"] = ",".join(
                ["PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT",
                 *(f"{name}:{protocol}" for name, (protocol, _) in self.extra_listeners.items())])
            base["inter.broker.listener.name"] = "PLAINTEXT"
        base.update({k: str(v) for k, v in self.overrides.items()})
        return base

    def command(self) -> list[str]:
        cmd = [self.python, "-m", "kafkapy", "server"]
        for key, value in self._settings().items():
            cmd += ["--override", f"{key}={value}"]
        return cmd


class TansuNode(_ProcessNode):
    """A Tansu broker (Rust, memory storage) used to validate the compat tests themselves.

    Its memory storage does not survive a restart, so `durable` is False. Broker-level overrides are
    not supported (Tansu has no such flags); pass topic-level configs through the admin API instead.
    """

    name = "tansu"
    durable = False

    def __init__(
        self,
        workdir: str | os.PathLike | None = None,
        *,
        overrides: Mapping[str, object] | Iterable[tuple[str, object]] = (),
        binary: str | None = None,
        **kwargs,
    ) -> None:
        super().__init__(workdir, **kwargs)
        self.overrides = dict(overrides)
        self.binary = binary or os.environ.get("TANSU") or _find_tansu()

    def command(self) -> list[str]:
        url = f"tcp://127.0.0.1:{self.port}"
        return [
            self.binary,
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ]


def _venv_python() -> str:
    candidate = REPO_ROOT / ".venv" / "bin" / "python"
    return str(candidate) if candidate.exists() else sys.executable


def _find_tansu() -> str:
    candidate = REPO_ROOT / ".tools" / "bin" / "tansu"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("tansu")
    if not found:
        raise NodeError("tansu not found: run `make tools` (scripts/install-test-tools.sh)")
    return found


from kafkapy.testing.apache_kafka import ApacheKafkaNode  # noqa: E402  (imports only names above)
from kafkapy.testing.cluster import KafkaClusterNode  # noqa: E402  (it does not import this module)

TARGETS = {"kafkapy": KafkaNode, "tansu": TansuNode, "kafkapy-cluster": KafkaClusterNode,
           "apache-kafka": ApacheKafkaNode}


def compat_target() -> str:
    target = os.environ.get("KAFKAPY_COMPAT_TARGET", "kafkapy").strip().lower() or "kafkapy"
    if target not in TARGETS:
        raise NodeError(f"KAFKAPY_COMPAT_TARGET={target!r}: expected one of {sorted(TARGETS)}")
    return target


def node_class_for_target(target: str | None = None) -> type[_ProcessNode] | type[KafkaClusterNode]:
    return TARGETS[target or compat_target()]
