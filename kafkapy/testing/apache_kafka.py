"""Apache Kafka itself, as the reference broker for differential tests, CLI-tool checks and benchmarks.

`scripts/install-test-tools.sh` fetches a pinned Kafka 4.x with Maven (scripts/apache-kafka/pom.xml)
into ``.tools/apache-kafka/libs``. These helpers run it the way an operator does, without the
distribution's shell scripts:

    with ApacheKafkaNode() as node:        # combined mode, one node, free ports
        run_client(node.bootstrap)
    with ApacheKafkaCluster(3) as cluster: # three combined nodes, one quorum
        run_client(cluster.bootstrap)

Storage is formatted with Kafka's own StorageTool (as `kafka-storage.sh format`), the node runs
`kafka.Kafka server.properties`, and every start and stop is bounded; the node lives in its own
process group so nothing outlives a test (see `kafkapy.testing.node`).
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from kafkapy.testing.node import (
    REPO_ROOT,
    SINGLE_NODE_DEFAULTS,
    NodeError,
    StartedInWith,
    _ProcessNode,
    free_port,
    wait_answering,
)

KAFKA_HOME = REPO_ROOT / ".tools" / "apache-kafka"
# A JVM and Kafka's start take ~5 s on a quiet 2-core machine; shared CI machines are slower.
KAFKA_STARTUP_TIMEOUT = 90.0
# Tests run many small brokers side by side; the distribution's 1 GiB heap is for `make bench`.
TEST_HEAP = "-Xmx512m -Xms256m"
BENCH_HEAP = "-Xmx1G -Xms1G"
# kafka-run-class.sh's JVM flags (Kafka 4.x), less the heap, which callers choose.
KAFKA_JVM_FLAGS = ("-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 "
                   "-XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true")
LOG4J2_CONFIG = """\
Configuration:
  Appenders:
    Console:
      name: STDOUT
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: {level}
      AppenderRef:
        - ref: STDOUT
"""


def kafka_home() -> Path:
    """Where the fetched Kafka lives (``KAFKAPY_APACHE_KAFKA_HOME`` overrides it)."""
    return Path(os.environ.get("KAFKAPY_APACHE_KAFKA_HOME") or KAFKA_HOME)


def kafka_version() -> str:
    """The fetched Kafka's version, from its stamp file."""
    stamp = kafka_home() / "VERSION"
    if not stamp.exists():
        raise NodeError(f"Apache Kafka is not installed in {kafka_home()}: run `make tools`")
    return stamp.read_text().strip()


def java_binary() -> str:
    """``$JAVA_HOME/bin/java`` when set (Kafka 4.x needs Java 17 or newer), else `java` on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise NodeError("no `java` on PATH: Apache Kafka needs Java 17 or newer")
    return found


def kafka_classpath() -> str:
    libs = kafka_home() / "libs"
    if not libs.is_dir():
        raise NodeError(f"Apache Kafka is not installed in {kafka_home()}: run `make tools`")
    return f"{libs}/*"


def java_command(main_class: str, *args: str, heap: str = "-Xmx256m",
                 log4j_config: Path | None = None, extra_jvm: Iterable[str] = ()) -> list[str]:
    """A JVM command line running one of Kafka's main classes (a tool or the broker) from the
    fetched jars, as `kafka-run-class.sh` does."""
    cmd = [java_binary(), *heap.split(), *extra_jvm]
    if log4j_config is not None:
        cmd.append(f"-Dlog4j2.configurationFile={log4j_config}")
    return [*cmd, "-cp", kafka_classpath(), main_class, *args]


def random_cluster_id() -> str:
    """A cluster id in Kafka's form: a random UUID in URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def write_properties(path: Path, settings: Mapping[str, object]) -> None:
    path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))


class ApacheKafkaNode(_ProcessNode):
    """One Apache Kafka node in KRaft combined mode (process.roles=broker,controller).

    ``overrides`` are server.properties entries on top of the single-node defaults Kafka's own
    quickstart uses. ``voters``/``cluster_id`` let `ApacheKafkaCluster` put several nodes in one
    quorum; alone, the node is its own single voter.
    """

    name = "apache-kafka"

    def __init__(
        self,
        workdir: str | os.PathLike | None = None,
        *,
        overrides: Mapping[str, object] | Iterable[tuple[str, object]] = (),
        node_id: int = 1,
        controller_port: int | None = None,
        voters: str | None = None,
        cluster_id: str | None = None,
        heap: str = TEST_HEAP,
        log_level: str = "INFO",
        startup_timeout: float = KAFKA_STARTUP_TIMEOUT,
        **kwargs,
    ) -> None:
        super().__init__(workdir, startup_timeout=startup_timeout, **kwargs)
        self.node_id = node_id
        self._fixed_controller_port = controller_port is not None
        self.controller_port = controller_port if controller_port is not None else free_port()
        while self.port == self.controller_port:
            self.port = free_port()
        self.voters = voters
        self.cluster_id = cluster_id or random_cluster_id()
        self.heap = heap
        self.overrides = dict(SINGLE_NODE_DEFAULTS)
        self.overrides.update(dict(overrides))
        self.data_dir = self.workdir / "data"
        self.properties_path = self.workdir / "server.properties"
        self.log4j_path = self.workdir / "log4j2.yaml"
        self.log4j_path.write_text(LOG4J2_CONFIG.format(level=log_level))
        kafka_version()  # fail early, with the install hint, when Kafka was never fetched

    # -- ports -----------------------------------------------------------------------------------
    def _ports(self) -> list[int]:
        return [self.port, self.controller_port]

    def _repick_ports(self) -> None:
        super()._repick_ports()
        if not self._fixed_controller_port:
            self.controller_port = free_port()
        while self.port == self.controller_port:
            self.port = free_port()

    # -- configuration -----------------------------------------------------------------------------
    def settings(self) -> dict[str, str]:
        """The server.properties this node runs with."""
        base = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": self.voters or f"{self.node_id}@{self.host}:{self.controller_port}",
            "listeners": f"PLAINTEXT://{self.host}:{self.port},CONTROLLER://{self.host}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(self.data_dir),
        }
        base.update({k: str(v) for k, v in self.overrides.items()})
        return base

    def prepare(self) -> None:
        """Write server.properties and format the storage if it never was."""
        write_properties(self.properties_path, self.settings())
        if not (self.data_dir / "meta.properties").exists():
            self._format()

    def _start_once(self) -> "ApacheKafkaNode":
        # Ports may be re-picked on a first start, so the properties are written for each attempt.
        self.prepare()
        return super()._start_once()

    def _format(self) -> None:
        """`kafka-storage.sh format -t <cluster id> -c server.properties`, bounded."""
        cmd = java_command("kafka.tools.StorageTool", "format", "--ignore-formatted",
                           # One argument: an id that starts with "-" (base64 of a random
                           # UUID can) would otherwise be read as an option.
                           f"--cluster-id={self.cluster_id}", "-c", str(self.properties_path),
                           log4j_config=self.log4j_path)
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== format: {' '.join(cmd)}\n".encode())
            log.flush()
            try:
                done = subprocess.run(cmd, cwd=self.workdir, stdin=subprocess.DEVNULL, stdout=log,
                                      stderr=subprocess.STDOUT, timeout=120,
                                      env={**os.environ, **self.env})
            except subprocess.TimeoutExpired:
                raise NodeError(f"Kafka's StorageTool took over 120s\n{self.log_tail()}") from None
        if done.returncode != 0:
            raise NodeError(f"Kafka's StorageTool exited {done.returncode}\n{self.log_tail()}")

    def command(self) -> list[str]:
        return java_command("kafka.Kafka", str(self.properties_path), heap=self.heap,
                            log4j_config=self.log4j_path, extra_jvm=KAFKA_JVM_FLAGS.split())


class ApacheKafkaCluster(StartedInWith):
    """``size`` combined-mode Apache Kafka nodes forming one quorum, on free ports.

    The same small interface as a node: ``bootstrap``, ``start``/``stop``/``cleanup``,
    ``log_tail``, and ``nodes`` for per-node control (kill one, restart it).
    """

    name = "apache-kafka-cluster"
    durable = True

    def __init__(self, size: int = 3, workdir: str | os.PathLike | None = None, *,
                 overrides: Mapping[str, object] | None = None,
                 hosts: Sequence[str] | None = None, wraps: Sequence[Sequence[str]] | None = None,
                 **node_kwargs) -> None:
        """``hosts``/``wraps``: per node, its address and the command it runs under (network
        sites); all on 127.0.0.1, unwrapped, by default."""
        self._own_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="apache-kafka-cluster-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        cluster_id = random_cluster_id()
        controller_ports = [free_port() for _ in range(size)]
        hosts = list(hosts or ["127.0.0.1"] * size)
        wraps = list(wraps or [()] * size)
        voters = ",".join(f"{i + 1}@{hosts[i]}:{port}" for i, port in enumerate(controller_ports))
        replicated = {"offsets.topic.replication.factor": str(min(3, size)),
                      "transaction.state.log.replication.factor": str(min(3, size)),
                      "transaction.state.log.min.isr": str(min(2, size))}
        self.nodes = [
            ApacheKafkaNode(self.workdir / f"node-{i + 1}", node_id=i + 1,
                            controller_port=controller_ports[i], voters=voters,
                            cluster_id=cluster_id, overrides={**replicated, **(overrides or {})},
                            host=hosts[i], wrap=wraps[i], **node_kwargs)
            for i in range(size)
        ]
        self.log_path = self.nodes[0].log_path

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes)

    def running(self) -> bool:
        return all(node.running() for node in self.nodes)

    def start(self) -> "ApacheKafkaCluster":
        """Format each node's storage (a JVM each, in turn), then start them together: a quorum of
        three elects no leader until two are up, so waiting for each in turn would deadlock."""
        for node in self.nodes:
            node.prepare()
        try:
            for node in self.nodes:
                node._launch()
            wait_answering(self.nodes, max(node.startup_timeout for node in self.nodes),
                           "Apache Kafka")
        except BaseException:
            self.stop(timeout=5.0)
            raise
        return self

    def stop(self, timeout: float = 30.0) -> None:
        for node in self.nodes:
            node.stop(timeout=timeout)

    def cleanup(self) -> None:
        for node in self.nodes:
            node.cleanup()
        if self._own_workdir and not os.environ.get("KAFKAPY_KEEP_NODE_DIRS"):
            shutil.rmtree(self.workdir, ignore_errors=True)

    def log_tail(self, max_bytes: int = 20_000) -> str:
        share = max_bytes // len(self.nodes)
        return "\n".join(f"--- node {n.node_id} ---\n{n.log_tail(share)}" for n in self.nodes)
