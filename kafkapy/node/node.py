"""A kafkapy node: the wiring of storage, the metadata quorum, a ``MetadataLoader`` and the
runtimes that ``process.roles`` asks for, run under Trio.

``process.roles`` decides what runs, as in KRaft:

* ``controller``: a voter of the metadata quorum (``quorum.QuorumDriver`` running a
  ``raft.RaftReplica`` over the on-disk ``__cluster_metadata-0``), and a ``ControllerRuntime``:
  the ``QuorumController`` the loader replays committed records into, and, on the *active*
  controller (the quorum leader, once it has replayed everything committed before its epoch),
  the brokers' requests (``node.controller_apis``) and the controller's timers (bootstrap,
  session expiry, unclean elections, preferred-leader balancing).
* ``broker``: an observer of the quorum: it fetches the metadata log into its own on-disk copy
  (a restart replays that copy and fetches only what it lacks), loads it into its image and
  serves clients through a ``BrokerRuntime``, which registers and heartbeats with the active
  controller over the controller listener and forwards admin requests there, exactly as when
  the controller is in the same process (combined mode, ``broker,controller``).

Every part reads the time and sleeps through one ``NodeClock`` made here, so under Trio's
``MockClock`` all of the node's timers run in virtual time.

A single voter elects itself at once, so a one-node cluster is registered and unfenced before its
broker listener opens. SIGTERM or SIGINT shuts down cleanly: the broker asks the controller to
move its leaderships away (controlled shutdown), a leading controller resigns, listeners stop,
logs are flushed and the clean-shutdown marker is written so the next start skips recovery.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import random
import signal
import uuid
from typing import Any

import trio

from kafkapy.broker.lifecycle import BrokerLifecycleManager
from kafkapy.broker.partition import Partition
from kafkapy.broker.replica_manager import ReplicaManager
from kafkapy.config import BrokerConfig, Listener
from kafkapy.config_views import BrokerSettings, ControllerSettings, NodeSettings
from kafkapy.controller import QuorumController
from kafkapy.coordinator.service import GroupCoordinator
from kafkapy.link.manager import ClusterLinkManager
from kafkapy.log import files as log_files
from kafkapy.log.config import LogConfig
from kafkapy.log.dir_lock import lock_dirs
from kafkapy.log.log_manager import LogManager
from kafkapy.log.partition_log import PartitionLog
from kafkapy.metadata.feature_bootstrap import read_bootstrap_features
from kafkapy.metadata.loader import MetadataLoader
from kafkapy.metadata.records import MetadataRecordCodec
from kafkapy.metadata.scram_bootstrap import read_bootstrap_scram
from kafkapy.metrics import NodeMetrics
from kafkapy.net.controller_channel import ControllerChannel
from kafkapy.net.server import serve
from kafkapy.node.broker_runtime import BrokerRuntime
from kafkapy.node.controller_apis import ControllerApis
from kafkapy.node.controller_runtime import (
    COMMIT_TIMEOUT_S,
    ControllerRuntime,
    new_quorum_controller,
)
from kafkapy.node.listener_security import NodeSecurity
from kafkapy.node.metadata_log import METADATA_PARTITION_DIR, PartitionLogStore
from kafkapy.node.sasl_settings import listener_sasl
from kafkapy.node.snapshots import MetadataSnapshotter, SnapshotJob, encode_in_thread
from kafkapy.protocol.errors import KafkaError
from kafkapy.quorum import QuorumDispatcher, QuorumDriver
from kafkapy.quorum.bootstrap import parse_bootstrap_servers
from kafkapy.quorum.clock import NodeClock
from kafkapy.raft.core import RaftReplica
from kafkapy.raft.file_snapshots import FileSnapshotStore
from kafkapy.raft.local import NotLeaderError
from kafkapy.raft.quorum_state import FileQuorumStateStore
from kafkapy.raft.voters import Voter
from kafkapy.security.sasl.scram import ScramCredential
from kafkapy.storage import (
    MetaProperties,
    ensure_formatted,
    kafka_uuid_to_uuid,
    storage_dirs,
)
from kafkapy.tiered.manager import RemoteLogManager

log = logging.getLogger("kafkapy.node")

#: How often a starting broker looks whether it has caught up with the metadata quorum.
CATCH_UP_POLL_S = 0.01
#: The bound on a controlled shutdown (the controller moving this broker's leaderships away).
CONTROLLED_SHUTDOWN_TIMEOUT_S = 5.0


def parse_voters(entries: list[str]) -> dict[int, tuple[str, int]]:
    """``controller.quorum.voters`` (``id@host:port`` each) as {id: (host, port)}."""
    voters: dict[int, tuple[str, int]] = {}
    for entry in entries:
        entry = entry.strip()
        if not entry:
            continue
        try:
            vid, address = entry.split("@", 1)
            host, port = address.rsplit(":", 1)
            voters[int(vid)] = (host.strip("[]"), int(port))
        except ValueError:
            raise ValueError(f"controller.quorum.voters: {entry!r} is not id@host:port") from None
    return voters


class Node:
    """One process with ``process.roles`` broker, controller or both (see the module docstring)."""

    def __init__(self, config: BrokerConfig, *, clock: NodeClock | None = None) -> None:
        self.config = config
        self.settings = NodeSettings.from_config(config)
        self.clock = clock or NodeClock()
        self.node_id = self.settings.node_id
        self.is_broker = self.settings.is_broker
        self.is_controller = self.settings.is_controller
        self.controller_listener_names = set(self.settings.controller_listener_names)
        self.security = NodeSecurity.from_config(config, is_broker=self.is_broker,
                                                 is_controller=self.is_controller)
        self.bound_ports: dict[str, int] = {}
        self.broker_epoch = -1
        self.controller_runtime: ControllerRuntime | None = None
        self.broker_runtime: BrokerRuntime | None = None
        self._nursery: trio.Nursery | None = None
        self._closed = False
        #: This controller as a KIP-853 voter, once its listeners are bound (dynamic quorums).
        self._voter: Voter | None = None
        self.metadata_log: PartitionLog | None = None
        self._dir_locks: Any = None
        self._started = trio.Event()
        self.metrics = NodeMetrics(self)
        #: The bound port of the metrics and health endpoint (None while it is off).
        self.metrics_port: int | None = None

    # -- what other parts read (metrics, tests) -------------------------------------------------

    @property
    def controller(self) -> QuorumController | None:
        return None if self.controller_runtime is None else self.controller_runtime.controller

    @property
    def lifecycle(self) -> BrokerLifecycleManager | None:
        return None if self.broker_runtime is None else self.broker_runtime.lifecycle

    @property
    def replicas(self) -> ReplicaManager | None:
        return None if self.broker_runtime is None else self.broker_runtime.replicas

    @property
    def log_manager(self) -> LogManager | None:
        return None if self.broker_runtime is None else self.broker_runtime.log_manager

    @property
    def groups(self) -> GroupCoordinator[Partition] | None:
        return None if self.broker_runtime is None else self.broker_runtime.groups

    @property
    def links(self) -> ClusterLinkManager | None:
        return None if self.broker_runtime is None else self.broker_runtime.links

    @property
    def remote_log_manager(self) -> RemoteLogManager | None:
        return None if self.broker_runtime is None else self.broker_runtime.remote_log_manager

    def is_active_controller(self) -> bool:
        return self.controller_runtime is not None and self.controller_runtime.is_active_controller()

    def active_controller_id(self) -> int:
        """The active controller's id as far as this node knows (the quorum leader), or -1."""
        return self.driver.leader_id if self.driver.running else -1

    # -- start-up -------------------------------------------------------------------------------

    def _open_metadata(self, cluster_id: str, now_ms: int) -> None:
        """Open the metadata log and build the quorum, the loader and the controller (all empty:
        the driver replays the log into them once it knows what is committed)."""
        settings = self.settings
        meta_root = self.config.metadata_log_dir
        meta_dir = os.path.join(meta_root, METADATA_PARTITION_DIR)
        # The marker belongs to the log dir; read it before the LogManager consumes it.
        clean = os.path.exists(os.path.join(meta_root, log_files.CLEAN_SHUTDOWN_FILE))
        metadata_log = self.metadata_log = PartitionLog.open(meta_dir, LogConfig(), now_ms=now_ms,
                                                             recover=not clean)
        self.recovered_metadata_end = metadata_log.log_end_offset
        self.voters = parse_voters(list(settings.quorum_voters))
        # KIP-853: no static voters, but bootstrap servers: the voters are in the metadata log.
        dynamic = not self.voters and bool(settings.quorum_bootstrap_servers)
        if dynamic:
            self.voters = parse_bootstrap_servers(list(settings.quorum_bootstrap_servers))
        if not self.voters:
            raise ValueError("controller.quorum.voters (or controller.quorum.bootstrap.servers) must "
                             "name the metadata quorum's voters")
        if not dynamic and self.is_controller and self.node_id not in self.voters:
            raise ValueError(f"controller.quorum.voters does not name this node ({self.node_id}): "
                             "a controller is a voter of the metadata quorum")
        if not self.is_controller and self.node_id in self.voters:
            raise ValueError(f"node {self.node_id} has process.roles=broker but is one of "
                             "controller.quorum.voters: a voter must have the controller role")
        single = self._lone_voter = self.is_controller and len(self.voters) == 1 and not dynamic
        election_ms = settings.election_timeout_ms
        self.replica = RaftReplica(
            self.node_id, None if dynamic else frozenset(self.voters), PartitionLogStore(metadata_log),
            FileQuorumStateStore(os.path.join(meta_dir, "quorum-state")),
            FileSnapshotStore(meta_dir), random.Random(),
            cluster_id=cluster_id,
            # Kafka's only voter becomes candidate (and leader) at once, without waiting out an
            # election timeout; the core waits for its (random) timeout first, so a lone voter
            # gets a 1 ms one: nobody else can be leader, there is nothing to wait for.
            election_timeout_ms=1 if single else election_ms,
            election_backoff_max_ms=1 if single else election_ms,
            fetch_timeout_ms=settings.fetch_timeout_ms,
            bootstrap_ids=tuple(self.voters) if dynamic else (),
        )
        self.codec = MetadataRecordCodec()
        controller_settings = ControllerSettings.from_config(self.config)
        controller = (new_quorum_controller(self.config, controller_settings, cluster_id,
                                            sorted(v for v in self.voters if v >= 0))
                      if self.is_controller else None)
        # A controller-only node keeps no image of its own: its controller's stands in.
        self.loader = MetadataLoader(
            cluster_id, self.codec.decode, keep_image=self.is_broker,
            image_source=None if controller is None else (lambda: controller.image))
        clock = self.clock
        self.driver = QuorumDriver(
            self.replica, self.node_id, self.voters, cluster_id, clock.raft,
            on_commit=lambda event: self.loader.handle(event, clock.now_ms()),
            listener_name=min(self.controller_listener_names),
            own_voter=lambda: self._voter,
            security=self.security.controller_client,
        )
        # Every node snapshots its own metadata (KIP-630): the log before a snapshot goes, and
        # a restart loads the newest snapshot and replays only the tail.
        self.snapshotter = MetadataSnapshotter.from_config(self.config, self.driver.snapshot_written,
                                                           now_ms=now_ms, schedule=self._schedule_snapshot)
        self.loader.add_observer(self.snapshotter)
        if controller is not None:
            self.controller_runtime = ControllerRuntime(
                node_id=self.node_id, cluster_id=cluster_id, controller=controller,
                settings=controller_settings, driver=self.driver,
                loader=self.loader, codec=self.codec, clock=clock,
                bootstrap_records=read_bootstrap_scram(self.config.metadata_log_dir),
                bootstrap_features=read_bootstrap_features(self.config.metadata_log_dir))

    def _schedule_snapshot(self, job: SnapshotJob) -> None:
        """Snapshots are encoded on a worker thread (seconds at 100k partitions)."""
        assert self._nursery is not None
        self._nursery.start_soon(encode_in_thread, self.snapshotter, job,
                                 functools.partial(trio.to_thread.run_sync, abandon_on_cancel=True))

    def _make_broker(self, cluster_id: str, client_listeners: list[Listener]) -> BrokerRuntime:
        single = self.is_controller and len(self.voters) == 1
        driver = self.driver
        return BrokerRuntime(
            node_id=self.node_id, cluster_id=cluster_id, config=self.config,
            settings=BrokerSettings.from_config(self.config), clock=self.clock, loader=self.loader,
            channel=ControllerChannel(self.voters, leader_hint=self.active_controller_id,
                                      client_id=f"broker-{self.node_id}-to-controller",
                                      monotonic=self.clock.monotonic,
                                      security=self.security.controller_client),
            advertised=self.config.advertised_listeners or client_listeners,
            client_listeners=client_listeners, serve_listener=self._listen,
            metadata_offset=lambda: driver.committed_end - 1,
            previous_epoch=_clean_shutdown_epoch(self.config.log_dirs),
            topic_stats=self.metrics.topics, lone_voter=self._lone_voter,
            disk_full=lambda: driver.disk_full if single else None,
            client_security=self.security.clients,
        )

    async def _listen(self, nursery: trio.Nursery, listener: Listener, target: Any) -> None:
        host = listener.host or None
        protocol, tls = self.security.listener(listener.name)
        sasl = (listener_sasl(self.config, listener.name, self._scram_credential)
                if protocol in ("SASL_PLAINTEXT", "SASL_SSL") else None)
        port = await nursery.start(
            lambda task_status: serve(
                self.metrics.metered(target), host, listener.port, task_status=task_status,
                max_request_bytes=self.settings.socket_request_max_bytes,
                listener_name=listener.name,
                on_connection=self.metrics.connections.tracker(listener.name),
                security_protocol=protocol, tls=tls, sasl=sasl,
            )
        )
        self.bound_ports[listener.name] = port
        log.info("Listening for %s on %s:%d", listener.name, listener.host or "0.0.0.0", port)

    def _scram_credential(self, mechanism: str, user: str) -> ScramCredential | None:
        """A user's SCRAM credential, from the metadata this node has applied."""
        loader = getattr(self, "loader", None)
        return None if loader is None else loader.image.scram.credential(mechanism, user)

    def _own_voter(self, controller_listeners: list[Listener]) -> Voter | None:
        """This controller as a KIP-853 voter: its metadata dir's id and the endpoints it
        listens on (None when a wildcard host could not be advertised)."""
        meta = MetaProperties.read(self.config.metadata_log_dir)
        endpoints = {lst.name: (lst.host, self.bound_ports.get(lst.name, lst.port)) for lst in controller_listeners}
        if meta is None or any(h in ("", "0.0.0.0", "::") for h, _ in endpoints.values()):
            return None
        directory = kafka_uuid_to_uuid(meta.directory_id) if meta.directory_id else uuid.UUID(int=0)
        return Voter(self.node_id, directory, endpoints)

    async def _report_catch_up(self, started: float) -> None:
        """Say, once, how this broker's metadata came to be current: how much it had on its own
        disk (snapshot and metadata log) and how much it fetched from the quorum (a restart
        fetches only the delta), and how long loading took — until it had replayed up to the
        high watermark the leader reported, registration and unfencing aside."""
        # The leader's own high watermark on a combined node that leads the quorum: waiting for
        # a leader to report one would poll forever.
        while not (self.replica.catch_up_target > 0
                   and self.driver.committed_end >= self.replica.catch_up_target):
            await self.clock.sleep(CATCH_UP_POLL_S)
        end = self.driver.committed_end
        local = self.recovered_metadata_end
        fetched = max(0, end - self.recovered_metadata_end)
        log.info("Broker %d caught up with the metadata quorum at offset %d: offsets 0..%d from "
                 "its local snapshot and metadata log (log from %d), %d fetched from the quorum "
                 "(metadata_load local_offsets=%d fetched_offsets=%d elapsed_ms=%d)",
                 self.node_id, end, local, self.recovered_metadata_start, fetched, local, fetched,
                 round((self.clock.monotonic() - started) * 1000))

    # -- running --------------------------------------------------------------------------------

    def _listeners(self) -> tuple[list[Listener], list[Listener]]:
        """The (broker, controller) listeners, checked against the roles."""
        listeners = self.config.listeners
        client_listeners = [lst for lst in listeners if lst.name not in self.controller_listener_names]
        controller_listeners = [lst for lst in listeners if lst.name in self.controller_listener_names]
        if self.is_broker and not client_listeners:
            raise ValueError("listeners has no broker listener (only controller.listener.names)")
        if self.is_controller and not controller_listeners:
            raise ValueError("listeners has no controller listener (controller.listener.names)")
        if not self.is_broker and client_listeners:
            raise ValueError(f"listeners names {', '.join(lst.name for lst in client_listeners)}, but a "
                             "controller-only node serves only controller.listener.names")
        return client_listeners, controller_listeners

    async def run(self, *, task_status: trio.TaskStatus[dict[str, int]] = trio.TASK_STATUS_IGNORED) -> None:
        now_ms = self.clock.now_ms()
        # Each dir's .lock before anything in it is read or written: a second process on the same
        # dirs stops here, having touched nothing (its shutdown() never runs).
        self._dir_locks = lock_dirs(storage_dirs(self.config))
        cluster_id = ensure_formatted(self.config)
        self.cluster_id = cluster_id
        self._open_metadata(cluster_id, now_ms)
        client_listeners, controller_listeners = self._listeners()
        metrics_listener = self.metrics.listener()
        if self.is_broker:
            self.broker_runtime = self._make_broker(cluster_id, client_listeners)
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                if metrics_listener is not None:
                    # First, so /health answers and /ready says why not while the node starts.
                    self.metrics_port = await nursery.start(self.metrics.serve, metrics_listener)
                if self.controller_runtime is not None:
                    await self._serve_controller(nursery, controller_listeners)
                quorum_started = self.clock.monotonic()
                await nursery.start(self.driver.run)
                if self.is_broker:
                    nursery.start_soon(self._report_catch_up, quorum_started)
                self.recovered_metadata_start = self.replica.log_start_offset
                log.info("Metadata log recovered from disk: offsets %d..%d; following the quorum",
                         self.recovered_metadata_start, self.recovered_metadata_end)
                async with contextlib.AsyncExitStack() as runtimes:
                    if self.controller_runtime is not None:
                        await runtimes.enter_async_context(self.controller_runtime)
                    if self.broker_runtime is not None:
                        await runtimes.enter_async_context(self.broker_runtime)
                        self.broker_epoch = self.broker_runtime.broker_epoch
                        log.info("Metadata quorum: applied up to offset %d (epoch %d, leader %d)",
                                 self.driver.committed_end, self.driver.epoch, self.driver.leader_id)
                    log.info("[KafkaRaftServer nodeId=%d] Kafka Server started (cluster %s, roles %s)",
                             self.node_id, cluster_id, ",".join(self._roles()))
                    self._started.set()
                    task_status.started(dict(self.bound_ports))
                    await trio.sleep_forever()
        finally:
            self.shutdown()

    async def _serve_controller(self, nursery: trio.Nursery, controller_listeners: list[Listener]) -> None:
        """The controller listener first: the other voters reach the quorum through it."""
        runtime = self.controller_runtime
        assert runtime is not None
        controller_apis = ControllerApis(QuorumDispatcher(self.driver), runtime,
                                         runtime.admin_context(self.config))
        for listener in controller_listeners:
            await self._listen(nursery, listener, controller_apis)
            if listener.port == 0 and self.node_id in self.voters:
                # An ephemeral port (tests): our own entry in the voter set must name the
                # port we got, for this node's broker to reach us.
                host = self.voters[self.node_id][0]
                self.voters[self.node_id] = (host, self.bound_ports[listener.name])
        if self.replica.is_dynamic:
            self._voter = self._own_voter(controller_listeners)

    def _roles(self) -> list[str]:
        return [r for r, on in (("broker", self.is_broker), ("controller", self.is_controller)) if on]

    async def stop_gracefully(self, timeout_s: float = CONTROLLED_SHUTDOWN_TIMEOUT_S) -> None:
        """Kafka's controlled shutdown: the broker asks the controller to move its leaderships
        away (bounded: an unreachable controller must not keep the process up), then a leading
        controller resigns so the others elect a successor at once instead of timing out."""
        lifecycle = self.lifecycle
        if lifecycle is not None and lifecycle.broker_epoch >= 0:
            with trio.move_on_after(timeout_s):
                if await lifecycle.controlled_shutdown(timeout_s):
                    log.info("Controlled shutdown of broker %d complete", self.node_id)
        if self.controller_runtime is not None and self.driver.is_leader:
            try:
                self.driver.resign()
                # Let EndQuorumEpoch go out before the nursery is cancelled.
                await self.clock.sleep(0.05)
            except NotLeaderError:
                pass

    def shutdown(self) -> None:
        """Flush and close every log and write the clean-shutdown markers."""
        if self._closed:
            return
        self._closed = True
        # The metadata log closes first: the partition logs' markers also cover its directory.
        meta = self.metadata_log
        clean = True
        try:
            if meta is not None and not meta.closed:
                meta.flush()
                meta.close()
        except (OSError, KafkaError) as exc:
            # A full or failed disk: no clean-shutdown marker, so the next start recovers.
            log.error("Could not close the metadata log cleanly: %s", exc)
            clean = False
        if self.broker_runtime is not None and not self.broker_runtime.close():
            clean = False
        if not clean:
            log.info("[KafkaRaftServer nodeId=%d] shut down (the next start recovers the logs)",
                     self.node_id)
            return
        root = os.path.abspath(self.config.metadata_log_dir)
        if meta is not None and (not self.is_broker or root not in [os.path.abspath(d) for d in self.config.log_dirs]):
            with open(os.path.join(root, log_files.CLEAN_SHUTDOWN_FILE), "w") as f:
                f.write(f'{{"version":0,"brokerEpoch":{self.broker_epoch}}}')
        log.info("[KafkaRaftServer nodeId=%d] shut down cleanly", self.node_id)
        if self._dir_locks is not None:
            self._dir_locks.release()  # the last write is done: the dirs may have their next owner


def _clean_shutdown_epoch(log_dirs: list[str]) -> int:
    """The broker epoch a clean shutdown recorded in its marker (Kafka sends it as
    PreviousBrokerEpoch so the controller can tell a clean restart), or -1."""
    for d in log_dirs:
        try:
            with open(os.path.join(d, log_files.CLEAN_SHUTDOWN_FILE)) as f:
                return int(json.load(f).get("brokerEpoch", -1))
        except (OSError, ValueError, AttributeError):
            continue
    return -1


async def run_until_signalled(node: Node) -> None:
    """Run ``node`` until SIGTERM or SIGINT, then shut it down cleanly (controlled shutdown
    first)."""
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(node.run)

            async def watch() -> None:
                async for signum in signals:
                    log.info("Received %s, shutting down", signal.Signals(signum).name)
                    if node._started.is_set():
                        await node.stop_gracefully()
                    nursery.cancel_scope.cancel()
                    return

            nursery.start_soon(watch)


__all__ = ["COMMIT_TIMEOUT_S", "Node", "parse_voters", "run_until_signalled"]
