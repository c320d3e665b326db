"""A kafkapy node: storage, metadata quorum, controller and broker, wired and run under Trio.

Start-up follows a KRaft combined node: check the storage format, open the metadata log, start
the metadata quorum (``quorum.QuorumDriver`` running a ``raft.RaftReplica`` over the on-disk
``__cluster_metadata-0``, served on the controller listener by ``quorum.QuorumDispatcher``), and
replay what it commits into the controller and the broker image. The node whose replica leads
the quorum, once it has replayed everything committed before its epoch, is the *active
controller*: it bootstraps a fresh cluster, registers this broker, gets it unfenced, heartbeats
and fences stale brokers. A single voter elects itself at once, so a one-node cluster starts as
before: registered and unfenced before the broker listener opens. SIGTERM or SIGINT shuts down
cleanly: listeners stop, logs are flushed and the clean-shutdown marker is written so the next
start skips recovery.

Phase 1 of the multi-node quorum: controller operations run only on the active controller's
node; elsewhere they fail with NOT_CONTROLLER (brokers forwarding them to the active controller
is phase 2), and Metadata/DescribeCluster name the active controller so clients go there. For
the same reason a node registers its broker only while its own controller is active: a standby
cannot reach the active controller's registration API yet (BrokerRegistration/BrokerHeartbeat
over the controller listener is phase 2), so brokers on standby nodes stay unregistered.
"""

from __future__ import annotations

import logging
import os
import random
import shutil
import signal
import uuid
from collections.abc import Callable
from typing import Any

import trio

from kafkapy.broker.context import BrokerContext, Clock, SystemClock
from kafkapy.broker.dispatcher import BrokerDispatcher
from kafkapy.broker.metadata_publisher import BrokerMetadata
from kafkapy.broker.producer_id_manager import ProducerIdManager
from kafkapy.broker.replica_manager import ReplicaManager, topic_log_config
from kafkapy.config import BrokerConfig, Listener, TOPIC_SYNONYMS
from kafkapy.coordinator.service import GroupCoordinator
from kafkapy.log.cleaner import CLEANER_TMP_DIR, LogCleaner, apply_clean, plan_clean
from kafkapy.controller import (
    BrokerHeartbeatRequest, BrokerRegistrationRequest, QuorumController, TopicDefaults,
)
from kafkapy.log import files as log_files
from kafkapy.log.config import LogConfig
from kafkapy.log.log_manager import LogManager
from kafkapy.log.partition_log import PartitionLog
from kafkapy.controller.quorum_controller import LATEST_PRODUCTION_METADATA_VERSION, MINIMUM_KRAFT_METADATA_VERSION
from kafkapy.metadata.image import METADATA_VERSION_FEATURE
from kafkapy.metadata.snapshot import image_from_snapshot
from kafkapy.metadata.records import BrokerEndpoint, BrokerFeature
from kafkapy.net.server import serve
from kafkapy.node.metadata_log import METADATA_PARTITION_DIR, PartitionLogStore
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.quorum import CommitLost, QuorumDispatcher, QuorumDriver
from kafkapy.raft.core import RaftReplica
from kafkapy.raft.events import CommitEvent, CommittedBatch, SnapshotLoad
from kafkapy.raft.file_snapshots import FileSnapshotStore
from kafkapy.raft.local import MetadataRecordCodec, NotLeaderError
from kafkapy.raft.quorum_state import FileQuorumStateStore
from kafkapy.records.reader import iter_batches, iter_records
from kafkapy.storage import MetaProperties, ensure_formatted, kafka_uuid_to_uuid

log = logging.getLogger("kafkapy.node")

PLAINTEXT = 0  # SecurityProtocol id of PLAINTEXT in RegisterBrokerRecord endpoints
CHECKPOINT_INTERVAL_S = 60.0
#: How long a controller operation waits for its records to commit before failing with
#: REQUEST_TIMED_OUT (a single voter commits on its next flush; a quorum needs a majority).
COMMIT_TIMEOUT_S = 30.0
#: How often the active-controller task looks at the quorum's leadership.
LEADERSHIP_POLL_S = 0.05
#: How long a single-voter node waits to elect itself and register before giving up.
SINGLE_VOTER_STARTUP_TIMEOUT_S = 60.0


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
    """One process with `process.roles` broker, controller or both (combined mode today)."""

    def __init__(self, config: BrokerConfig, *, clock: Clock | None = None) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self.node_id = config.node_id
        roles = set(config.get("process.roles") or [])  # type: ignore[arg-type]
        if roles != {"broker", "controller"}:
            raise ValueError(
                f"process.roles={','.join(sorted(roles)) or '(unset)'} is not supported yet: "
                "this version runs combined-mode nodes (process.roles=broker,controller)"
            )
        if self.node_id < 0:
            raise ValueError("node.id must be set")
        self.controller_listener_names = set(config.get("controller.listener.names") or [])  # type: ignore[arg-type]
        self.bound_ports: dict[str, int] = {}
        self.broker_epoch = -1
        self._started = trio.Event()

    # -- start-up -------------------------------------------------------------------------------

    def _open_metadata(self, cluster_id: str, now_ms: int) -> None:
        """Open the metadata log and build the quorum, controller and broker image (all empty:
        the driver replays the log into them once it knows what is committed)."""
        meta_root = self.config.metadata_log_dir
        meta_dir = os.path.join(meta_root, METADATA_PARTITION_DIR)
        # The marker belongs to the log dir; read it before the LogManager consumes it.
        clean = os.path.exists(os.path.join(meta_root, log_files.CLEAN_SHUTDOWN_FILE))
        self.metadata_log = PartitionLog.open(meta_dir, LogConfig(), now_ms=now_ms, recover=not clean)
        self.voters = parse_voters(list(self.config.get("controller.quorum.voters") or []))  # type: ignore[arg-type]
        if self.node_id not in self.voters:
            raise ValueError(
                f"controller.quorum.voters does not name this node ({self.node_id}): a combined "
                "node is a voter of the metadata quorum"
            )
        single = len(self.voters) == 1
        election_ms = int(self.config.get("controller.quorum.election.timeout.ms"))  # type: ignore[arg-type]
        fetch_ms = int(self.config.get("controller.quorum.fetch.timeout.ms"))  # type: ignore[arg-type]
        self.replica = RaftReplica(
            self.node_id, frozenset(self.voters), PartitionLogStore(self.metadata_log),
            FileQuorumStateStore(os.path.join(meta_dir, "quorum-state")),
            FileSnapshotStore(meta_dir), random.Random(),
            cluster_id=cluster_id,
            # Kafka's only voter becomes candidate (and leader) at once, without waiting out an
            # election timeout; the core waits for its (random) timeout first, so a lone voter
            # gets a 1 ms one: nobody else can be leader, there is nothing to wait for.
            election_timeout_ms=1 if single else election_ms,
            election_backoff_max_ms=1 if single else election_ms,
            fetch_timeout_ms=fetch_ms,
        )
        self.codec = MetadataRecordCodec()
        self.driver = QuorumDriver(
            self.replica, self.node_id, self.voters, cluster_id, on_commit=self._on_commit,
            listener_name=sorted(self.controller_listener_names)[0] if self.controller_listener_names else "CONTROLLER",
        )
        broker_topic_configs = {}
        for topic_key in TOPIC_SYNONYMS:
            inherited = self.config.broker_synonym_value(topic_key)
            if inherited is not None:
                broker_topic_configs[topic_key] = inherited[1]
        self.controller = QuorumController(
            cluster_id=cluster_id,
            uuid_source=uuid.uuid4,
            rng=random.Random(),
            defaults=TopicDefaults(
                num_partitions=int(self.config.get("num.partitions")),  # type: ignore[arg-type]
                replication_factor=int(self.config.get("default.replication.factor")),  # type: ignore[arg-type]
            ),
            broker_topic_configs=broker_topic_configs,
            session_timeout_ms=int(self.config.get("broker.session.timeout.ms")),  # type: ignore[arg-type]
            delete_topic_enable=bool(self.config.get("delete.topic.enable")),
            controller_ids=sorted(self.voters),
        )
        self.broker_metadata = BrokerMetadata(cluster_id)
        # One controller operation at a time, from computing its records to their replay: the
        # controller's state changes only on replay, so the next operation must see it.
        self._controller_lock = trio.Lock()
        self._registered = trio.Event()

    # -- the metadata quorum ------------------------------------------------------------------

    def _on_commit(self, event: CommitEvent) -> None:
        """The driver's commit callback: replay a committed batch, or load a snapshot, into the
        controller and the broker image (in the driver's task, before any commit waiter wakes)."""
        if isinstance(event, SnapshotLoad):
            image = image_from_snapshot(event.data, event.snapshot_id, cluster_id=self.cluster_id)
            self.controller.load_snapshot(image)
            self.broker_metadata.load_image(image)
            log.info("Loaded metadata snapshot %s", event.snapshot_id)
            return
        assert isinstance(event, CommittedBatch)
        records = []
        for header, view in iter_batches(event.batch):
            if header.is_control:
                continue  # LeaderChange and the like: the quorum's business
            records.extend((self.codec.decode(r.value), r.offset)
                           for r in iter_records(view) if r.value is not None)
        if records:
            self.controller.replay_batch(records)
            self.broker_metadata.on_commit(records)

    def is_active_controller(self) -> bool:
        """Kafka's active controller: the quorum leader, once it has replayed every entry of
        earlier epochs (its epoch's LeaderChange has been delivered), so it acts on the whole
        committed state."""
        return (self.driver.running and self.replica.is_leader
                and self.driver.committed_end > self.replica.leader_epoch_start_offset)

    def active_controller_id(self) -> int:
        """The active controller's id as far as this node knows (the quorum leader), or -1."""
        return self.driver.leader_id if self.driver.running else -1

    async def _commit(self, result: Any) -> Any:
        """Commit a ControllerResult's records and return its response.

        The records go to the quorum as one batch; this returns once they are committed and
        replayed into the controller and this broker's image (``_on_commit`` runs before the
        waiter wakes), so the caller's next read sees them. Callers hold ``_controller_lock``.
        """
        if result.records:
            epoch = self.driver.epoch
            try:
                last = self.driver.append([self.codec.encode(r) for r in result.records])
                await self.driver.wait_committed(last, COMMIT_TIMEOUT_S, epoch=epoch)
            except (NotLeaderError, CommitLost) as exc:
                raise KafkaError(ErrorCode.NOT_CONTROLLER, f"node {self.node_id} lost the "
                                 f"controller role: {exc}") from exc
            except trio.TooSlowError:
                raise KafkaError(ErrorCode.REQUEST_TIMED_OUT,
                                 "the metadata quorum did not commit in time") from None
        return result.response

    async def controller_call(self, operation: Callable[[QuorumController], Any]) -> Any:
        """Run ``operation`` on the controller (the broker handlers' door to it) and commit it.

        Only the active controller runs operations. Phase 1: a standby fails fast with
        NOT_CONTROLLER; forwarding the request to the active controller is the next phase (the
        Metadata response already names the active controller, so admin clients go there).
        """
        async with self._controller_lock:
            if not self.is_active_controller():
                raise KafkaError(ErrorCode.NOT_CONTROLLER,
                                 f"node {self.node_id} is not the active controller "
                                 f"(leader {self.active_controller_id()})")
            return await self._commit(operation(self.controller))

    async def _register_broker(self) -> None:
        """Register this broker with the (local, active) controller and heartbeat at once, so it
        is unfenced as soon as it has caught up (it has: it replayed the registration)."""
        now_ms = self.clock.now_ms()
        request = BrokerRegistrationRequest(
            broker_id=self.node_id,
            cluster_id=self.cluster_id,
            incarnation_id=self.incarnation_id,
            listeners=tuple(BrokerEndpoint(l.name, l.host, l.port, PLAINTEXT) for l in self.advertised),
            rack=self.config.get("broker.rack"),  # type: ignore[arg-type]
            features=(BrokerFeature(METADATA_VERSION_FEATURE, MINIMUM_KRAFT_METADATA_VERSION,
                                    LATEST_PRODUCTION_METADATA_VERSION),),
            log_dirs=tuple(self._directory_ids()),
            previous_broker_epoch=self.broker_epoch,
        )
        # The broker epoch is the offset of the registration record: the leader's log end (the
        # lock is held and everything appended before has committed).
        result = self.controller.register_broker(request, now_ms=now_ms,
                                                 next_offset=self.replica.log_end_offset)
        if result.response.error_code != ErrorCode.NONE:
            raise RuntimeError(f"Broker registration failed: {result.response.error_message}")
        self.broker_epoch = (await self._commit(result)).broker_epoch
        if getattr(self, "log_manager", None) is not None:
            self.log_manager.broker_epoch = self.broker_epoch
        await self._heartbeat()

    def _directory_ids(self) -> list[uuid.UUID]:
        ids = []
        for d in self.config.log_dirs:
            meta = MetaProperties.read(d)
            if meta is not None and meta.directory_id:
                ids.append(kafka_uuid_to_uuid(meta.directory_id))
        return ids

    async def _heartbeat(self) -> None:
        now_ms = self.clock.now_ms()
        request = BrokerHeartbeatRequest(
            broker_id=self.node_id, broker_epoch=self.broker_epoch,
            # What this broker has replayed (Kafka: the broker's last applied offset).
            current_metadata_offset=self.driver.committed_end - 1,
        )
        reply = await self._commit(self.controller.broker_heartbeat(request, now_ms=now_ms))
        if reply.error_code != ErrorCode.NONE:
            log.warning("Heartbeat refused: %s", reply.error_message or ErrorCode(reply.error_code).name)

    async def _become_active(self) -> None:
        """This node's controller just became active (in a new epoch): bootstrap a fresh
        cluster, then register this broker. Kafka's new active controller gives every broker a
        full session (soft state starts afresh), so heartbeat times from an earlier term go."""
        log.info("Node %d is the active controller (epoch %d)", self.node_id, self.driver.epoch)
        self.controller.reset_sessions()
        boot = self.controller.bootstrap()
        if boot.records:
            await self._commit(boot)
            log.info("Bootstrapped a new cluster %s", self.cluster_id)
        await self._register_broker()

    async def _active_controller_loop(self) -> None:
        """Follow the quorum's leadership: on becoming active, bootstrap and register; while
        active, heartbeat this broker and fence stale brokers every heartbeat interval.

        Phase 1: a node whose controller is not active does not register its broker (see the
        module docstring); when its controller becomes active later, it registers then.
        """
        interval = int(self.config.get("broker.heartbeat.interval.ms")) / 1000.0  # type: ignore[arg-type]
        active_epoch = -1
        next_beat = 0.0
        while True:
            try:
                if not self.is_active_controller():
                    active_epoch = -1
                elif self.driver.epoch != active_epoch:
                    epoch = self.driver.epoch
                    async with self._controller_lock:
                        if self.is_active_controller() and self.driver.epoch == epoch:
                            await self._become_active()
                            active_epoch = epoch
                            next_beat = trio.current_time() + interval
                            self._registered.set()
                elif trio.current_time() >= next_beat:
                    next_beat = trio.current_time() + interval
                    async with self._controller_lock:
                        if self.is_active_controller():
                            await self._heartbeat()
                            await self._commit(self.controller.fence_stale_brokers(self.clock.now_ms()))
            except KafkaError as exc:
                # Leadership moved under us (NOT_CONTROLLER) or the quorum is slow: look again.
                log.info("Controller work on node %d interrupted: %s", self.node_id, exc)
                active_epoch = -1
            await trio.sleep(LEADERSHIP_POLL_S)

    async def _maintenance_loop(self) -> None:
        """Periodic log work: time-based flushes (flush.ms) and offset checkpoints."""
        next_checkpoint = trio.current_time() + CHECKPOINT_INTERVAL_S
        while True:
            await trio.sleep(1.0)
            now_ms = self.clock.now_ms()
            self.log_manager.flush_due(now_ms)
            if trio.current_time() >= next_checkpoint:
                self.log_manager.checkpoint()
                next_checkpoint = trio.current_time() + CHECKPOINT_INTERVAL_S

    async def _cleaner_loop(self) -> None:
        """Compact logs with cleanup.policy=compact (``__consumer_offsets`` among them).

        The heavy part of a clean (reading segments, writing the cleaned ones) runs on a worker
        thread; the swap into the live log is quick and runs here, between requests, so it never
        interleaves with an append or a roll. Kafka's log.cleaner.backoff.ms paces it.
        """
        if not self.config.get("log.cleaner.enable"):
            return
        for d in self.config.log_dirs:
            shutil.rmtree(os.path.join(d, CLEANER_TMP_DIR), ignore_errors=True)  # a crash's leftovers
        interval = int(self.config.get("log.cleaner.backoff.ms")) / 1000.0  # type: ignore[arg-type]
        cleaner = LogCleaner()
        while True:
            await trio.sleep(interval)
            now_ms = self.clock.now_ms()
            for plog in cleaner.due([h.log for h in self.replicas.partitions()], now_ms=now_ms):
                end = plog.segments[-1].base_offset
                try:
                    plan = await trio.to_thread.run_sync(lambda p=plog: plan_clean(p, now_ms=now_ms))
                    result = apply_clean(plog, plan, now_ms=now_ms)
                except Exception:  # one bad log must not stop the cleaning of others
                    log.exception("Cleaning %s-%d failed", plog.topic, plog.partition)
                    result = None
                cleaner.cleaned(plog, end, result, now_ms=now_ms)

    def _publish(self, image: Any) -> None:
        try:
            self.replicas.apply_image(image, now_ms=self.clock.now_ms())
        except KafkaError as exc:
            # A log that cannot be opened must not take the broker down with it.
            log.error("Applying metadata offset %d failed: %s", image.offset, exc)
        groups = getattr(self, "groups", None)
        if groups is not None:
            groups.on_image(image)

    async def run(self, *, task_status: trio.TaskStatus[dict[str, int]] = trio.TASK_STATUS_IGNORED) -> None:
        now_ms = self.clock.now_ms()
        cluster_id = ensure_formatted(self.config)
        self.cluster_id = cluster_id
        self._open_metadata(cluster_id, now_ms)

        listeners = self.config.listeners
        client_listeners = [l for l in listeners if l.name not in self.controller_listener_names]
        if not client_listeners:
            raise ValueError("listeners has no broker listener (only controller.listener.names)")
        controller_listeners = [l for l in listeners if l.name in self.controller_listener_names]
        if not controller_listeners:
            raise ValueError("listeners has no controller listener (controller.listener.names)")
        advertised = self.config.advertised_listeners or client_listeners
        self.advertised = advertised
        self.incarnation_id = uuid.uuid4()

        default_log_config = LogConfig.from_props(self.config.topic_defaults(), ignore_unknown=True)
        self.log_manager = LogManager(
            self.config.log_dirs, default_log_config, now_ms=now_ms,
            topic_configs=lambda topic: topic_log_config(self.config, self.broker_metadata.image, topic),
        )
        self.replicas = ReplicaManager(self.log_manager, self.config, self.node_id)
        ctx = BrokerContext(
            node_id=self.node_id, cluster_id=cluster_id, config=self.config, clock=self.clock,
            replicas=self.replicas, image=lambda: self.broker_metadata.image,
            controller=self.controller_call, advertised=advertised,
            active_controller=self.active_controller_id,
        )
        ctx.producer_ids = ProducerIdManager(self._allocate_producer_ids)
        self.groups = GroupCoordinator(self.config, self.replicas, self.clock, self.node_id)
        ctx.groups = self.groups
        self.context = ctx

        dispatcher = BrokerDispatcher(ctx)
        quorum_dispatcher = QuorumDispatcher(self.driver)
        max_request = int(self.config.get("socket.request.max.bytes"))  # type: ignore[arg-type]

        async def listen(nursery: trio.Nursery, listener: Listener, target: Any) -> None:
            host = listener.host or None
            port = await nursery.start(
                lambda task_status: serve(
                    target, host, listener.port, task_status=task_status,
                    max_request_bytes=max_request, listener_name=listener.name,
                )
            )
            self.bound_ports[listener.name] = port
            log.info("Listening for %s on %s:%d", listener.name, listener.host or "0.0.0.0", port)

        try:
            async with trio.open_nursery() as nursery:
                # The controller listener first: the other voters reach the quorum through it.
                for listener in controller_listeners:
                    await listen(nursery, listener, quorum_dispatcher)
                await nursery.start(self.driver.run)
                nursery.start_soon(self._active_controller_loop)
                if len(self.voters) == 1:
                    # A lone voter elects itself at once: as before the quorum, the broker is
                    # registered and unfenced (and the cluster bootstrapped) before clients can
                    # connect, and its partitions open from an image that includes it.
                    with trio.fail_after(SINGLE_VOTER_STARTUP_TIMEOUT_S):
                        await self._registered.wait()
                # A lone voter has replayed its whole log by now; a member of a larger quorum
                # replays once the leader tells it the high watermark (in the background).
                log.info("Metadata quorum running: applied up to offset %d (epoch %d, leader %d)",
                         self.driver.committed_end, self.driver.epoch, self.driver.leader_id)
                self.broker_metadata.add_publisher(self._publish)
                self.log_manager.broker_epoch = self.broker_epoch
                for listener in client_listeners:
                    await listen(nursery, listener, dispatcher)
                nursery.start_soon(self._maintenance_loop)
                await nursery.start(self.groups.run)
                nursery.start_soon(self._cleaner_loop)
                log.info("[KafkaRaftServer nodeId=%d] Kafka Server started (cluster %s)", self.node_id, cluster_id)
                self._started.set()
                task_status.started(dict(self.bound_ports))
        finally:
            self.shutdown()

    async def _allocate_producer_ids(self) -> tuple[int, int]:
        block = await self.controller_call(lambda c: c.allocate_producer_ids(self.node_id, self.broker_epoch))
        if block.error_code != ErrorCode.NONE:
            raise KafkaError(ErrorCode(block.error_code), block.error_message)
        return block.first_producer_id, block.size

    def shutdown(self) -> None:
        """Flush and close every log and write the clean-shutdown markers."""
        # The metadata log closes first: the partition logs' markers also cover its directory.
        meta = getattr(self, "metadata_log", None)
        if meta is not None and not meta.closed:
            meta.flush()
            meta.close()
        manager = getattr(self, "log_manager", None)
        if manager is not None:
            manager.shutdown()
            self.log_manager = None  # type: ignore[assignment]
        root = os.path.abspath(self.config.metadata_log_dir)
        if meta is not None and root not in [os.path.abspath(d) for d in self.config.log_dirs]:
            with open(os.path.join(root, log_files.CLEAN_SHUTDOWN_FILE), "w") as f:
                f.write('{"version":0,"brokerEpoch":%d}' % self.broker_epoch)
        log.info("[KafkaRaftServer nodeId=%d] shut down cleanly", self.node_id)


async def run_until_signalled(node: Node) -> None:
    """Run ``node`` until SIGTERM or SIGINT, then shut it down cleanly."""
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(node.run)

            async def watch() -> None:
                async for signum in signals:
                    log.info("Received %s, shutting down", signal.Signals(signum).name)
                    nursery.cancel_scope.cancel()
                    return

            nursery.start_soon(watch)
