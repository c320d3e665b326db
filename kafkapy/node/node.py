"""A kafkapy node: storage, metadata quorum, controller and/or broker, wired and run under Trio.

``process.roles`` decides what runs, as in KRaft:

* ``controller``: a voter of the metadata quorum (``quorum.QuorumDriver`` running a
  ``raft.RaftReplica`` over the on-disk ``__cluster_metadata-0``), replaying what it commits into
  a ``QuorumController``. Its controller listener serves the quorum's RPCs and, on the *active*
  controller (the quorum leader, once it has replayed everything committed before its epoch),
  the brokers' requests (``node.controller_apis``): registrations, heartbeats, producer-id
  blocks and forwarded admin requests. The active controller bootstraps a fresh cluster and
  fences brokers whose sessions expire.
* ``broker``: an observer of the quorum: it fetches the metadata log into its own on-disk copy
  (a restart replays that copy and fetches only what it lacks), replays it into its image and
  serves clients. It registers and heartbeats with the active controller over the controller
  listener (``broker.lifecycle``) and forwards admin requests there (``net.controller_channel``),
  exactly as when the controller is in the same process (combined mode, ``broker,controller``).

A single voter elects itself at once, so a one-node cluster is registered and unfenced before its
broker listener opens. SIGTERM or SIGINT shuts down cleanly: the broker asks the controller to
move its leaderships away (controlled shutdown), a leading controller resigns, listeners stop,
logs are flushed and the clean-shutdown marker is written so the next start skips recovery.
"""

from __future__ import annotations

import functools
import json
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
from kafkapy.broker.producer_expiration import ProducerExpiration
from kafkapy.broker.producer_id_manager import ProducerIdManager
from kafkapy.broker.config_view import BrokerLayers
from kafkapy.broker.replica_manager import ReplicaManager, topic_log_config
from kafkapy.config import BrokerConfig, Listener, TOPIC_SYNONYMS
from kafkapy.coordinator.schema import OFFSETS_TOPIC
from kafkapy.coordinator.service import GroupCoordinator
from kafkapy.log.cleaner import CLEANER_TMP_DIR, LogCleaner, apply_clean, plan_clean
from kafkapy.broker.lifecycle import BrokerLifecycleManager
from kafkapy.broker.log_creation import LogCreator
from kafkapy.broker.log_deletion import LogDeleter
from kafkapy.broker.handlers.topics import create_topics_internal
from kafkapy.controller import BrokerHeartbeatRequest, NewTopic, QuorumController, TopicDefaults
from kafkapy.log import files as log_files
from kafkapy.log.config import LogConfig
from kafkapy.log.dir_lock import lock_dirs
from kafkapy.log.log_manager import LogManager
from kafkapy.log.partition_log import PartitionLog
from kafkapy.controller.quorum_controller import LATEST_PRODUCTION_METADATA_VERSION, MINIMUM_KRAFT_METADATA_VERSION
from kafkapy.metadata.image import METADATA_VERSION_FEATURE
from kafkapy.metadata.snapshot import image_from_snapshot
from kafkapy.metadata.update import MetadataUpdate
from kafkapy.metrics import NodeMetrics
from kafkapy.net.controller_channel import ControllerChannel
from kafkapy.net.server import serve
from kafkapy.node.controller_apis import ControllerApis
from kafkapy.node.metadata_log import METADATA_PARTITION_DIR, PartitionLogStore
from kafkapy.node.snapshots import MetadataSnapshotter, encode_in_thread
from kafkapy.net.client import KafkaClient
from kafkapy.replication.alter_partition import AlterPartitionManager
from kafkapy.replication.fetcher import FetcherSettings, ReplicaFetcherManager
from kafkapy.protocol import ApiKey, messages as m
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.quorum import CommitLost, QuorumDispatcher, QuorumDriver
from kafkapy.quorum.bootstrap import parse_bootstrap_servers
from kafkapy.raft.voters import Voter
from kafkapy.raft.core import RaftReplica
from kafkapy.raft.events import CommitEvent, CommittedBatch, SnapshotLoad
from kafkapy.raft.file_snapshots import FileSnapshotStore
from kafkapy.metadata.records import MetadataRecordCodec
from kafkapy.raft.local import NotLeaderError
from kafkapy.raft.quorum_state import FileQuorumStateStore
from kafkapy.records import format as fmt
from kafkapy.records.reader import iter_batches, iter_records
from kafkapy.storage import MetaProperties, StorageError, ensure_formatted, kafka_uuid_to_uuid, storage_dirs
from kafkapy.tiered.manager import RemoteLogManager
from kafkapy.tiered.metadata_log import MetadataLog
from kafkapy.tiered.storage import remote_storage_from_config

log = logging.getLogger("kafkapy.node")

PLAINTEXT = 0  # SecurityProtocol id of PLAINTEXT in RegisterBrokerRecord endpoints
CHECKPOINT_INTERVAL_S = 60.0
#: How long a controller operation waits for its records to commit before failing with
#: REQUEST_TIMED_OUT (a single voter commits on its next flush; a quorum needs a majority).
COMMIT_TIMEOUT_S = 30.0
#: How often the active-controller task looks at the quorum's leadership.
LEADERSHIP_POLL_S = 0.05
#: How often the active controller looks for leaderless partitions it may elect an unclean
#: leader for (a walk over every partition, so not on every heartbeat interval).
UNCLEAN_ELECTION_CHECK_S = 5.0
#: How long a single-voter node waits to elect itself and register before giving up.
SINGLE_VOTER_STARTUP_TIMEOUT_S = 60.0
#: How long a broker in a larger cluster waits to be unfenced before opening its listeners.
CLUSTER_STARTUP_WAIT_S = 5.0
#: How long a forwarded CreateTopics & co. waits for this broker's image to show its effect.
FORWARD_VISIBILITY_TIMEOUT_S = 5.0
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

    def __init__(self, config: BrokerConfig, *, clock: Clock | None = None) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self.node_id = config.node_id
        roles = set(config.get("process.roles") or [])  # type: ignore[arg-type]
        if not roles or not roles <= {"broker", "controller"}:
            raise ValueError(f"process.roles={','.join(sorted(roles)) or '(unset)'}: expected broker, "
                             "controller or broker,controller")
        self.is_broker = "broker" in roles
        self.is_controller = "controller" in roles
        if self.node_id < 0:
            raise ValueError("node.id must be set")
        self.controller_listener_names = set(config.get("controller.listener.names") or [])  # type: ignore[arg-type]
        if not self.controller_listener_names:
            raise ValueError("controller.listener.names must name the controller listener")
        self.bound_ports: dict[str, int] = {}
        self.broker_epoch = -1
        self.controller: QuorumController | None = None
        self.broker_metadata: BrokerMetadata | None = None
        self.lifecycle: BrokerLifecycleManager | None = None
        self.channel: ControllerChannel | None = None
        self._activated_epoch = -1
        self._started = trio.Event()
        self.metrics = NodeMetrics(self)
        #: The bound port of the metrics and health endpoint (None while it is off).
        self.metrics_port: int | None = None

    # -- start-up -------------------------------------------------------------------------------

    def _open_metadata(self, cluster_id: str, now_ms: int) -> None:
        """Open the metadata log and build the quorum, controller and broker image (all empty:
        the driver replays the log into them once it knows what is committed)."""
        meta_root = self.config.metadata_log_dir
        meta_dir = os.path.join(meta_root, METADATA_PARTITION_DIR)
        # The marker belongs to the log dir; read it before the LogManager consumes it.
        clean = os.path.exists(os.path.join(meta_root, log_files.CLEAN_SHUTDOWN_FILE))
        self.metadata_log = PartitionLog.open(meta_dir, LogConfig(), now_ms=now_ms, recover=not clean)
        self.recovered_metadata_end = self.metadata_log.log_end_offset
        self.voters = parse_voters(list(self.config.get("controller.quorum.voters") or []))  # type: ignore[arg-type]
        # KIP-853: no static voters, but bootstrap servers: the voters are in the metadata log.
        dynamic = not self.voters and bool(self.config.get("controller.quorum.bootstrap.servers"))
        if dynamic:
            self.voters = parse_bootstrap_servers(list(self.config.get("controller.quorum.bootstrap.servers")))  # type: ignore[arg-type]
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
        election_ms = int(self.config.get("controller.quorum.election.timeout.ms"))  # type: ignore[arg-type]
        fetch_ms = int(self.config.get("controller.quorum.fetch.timeout.ms"))  # type: ignore[arg-type]
        self.replica = RaftReplica(
            self.node_id, None if dynamic else frozenset(self.voters), PartitionLogStore(self.metadata_log),
            FileQuorumStateStore(os.path.join(meta_dir, "quorum-state")),
            FileSnapshotStore(meta_dir), random.Random(),
            cluster_id=cluster_id,
            # Kafka's only voter becomes candidate (and leader) at once, without waiting out an
            # election timeout; the core waits for its (random) timeout first, so a lone voter
            # gets a 1 ms one: nobody else can be leader, there is nothing to wait for.
            election_timeout_ms=1 if single else election_ms,
            election_backoff_max_ms=1 if single else election_ms,
            fetch_timeout_ms=fetch_ms,
            bootstrap_ids=tuple(self.voters) if dynamic else (),
        )
        self.codec = MetadataRecordCodec()
        self.driver = QuorumDriver(
            self.replica, self.node_id, self.voters, cluster_id, on_commit=self._on_commit,
            listener_name=sorted(self.controller_listener_names)[0],
        )
        # Every node snapshots its own metadata (KIP-630): the log before a snapshot goes, and
        # a restart loads the newest snapshot and replays only the tail.
        self.snapshotter = MetadataSnapshotter.from_config(self.config, self.driver.snapshot_written,
                                                           now_ms=now_ms)
        if self.is_controller:
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
                controller_ids=sorted(v for v in self.voters if v >= 0),
                leader_imbalance_percentage=int(self.config.get("leader.imbalance.per.broker.percentage")),  # type: ignore[arg-type]
                remote_storage_system_enable=bool(self.config.get("remote.log.storage.system.enable")),
            )
        if self.is_broker:
            self.broker_metadata = BrokerMetadata(cluster_id)
        # One controller operation at a time, from computing its records to their replay: the
        # controller's state changes only on replay, so the next operation must see it.
        self._controller_lock = trio.Lock()
        self._metadata_changed = trio.Event()
        # Records this controller appended, already decoded on a worker thread, by base offset
        # (with the epoch they were appended in): their commit replays these instead of
        # decoding 10,000 records on the event loop.
        self._predecoded: dict[int, tuple[int, list[Any]]] = {}
        # (last offset, epoch) of records appended by an operation whose commit wait timed out.
        # They may still commit, so no later operation may compute on an image without them:
        # a retried CreateTopics would write a second TopicRecord for the same name, which no
        # replica could replay. Kafka avoids this with speculative in-memory state.
        self._uncommitted: tuple[int, int] | None = None

    # -- the metadata quorum ------------------------------------------------------------------

    def _on_commit(self, event: CommitEvent) -> None:
        """The driver's commit callback: replay a committed batch, or load a snapshot, into the
        controller and the broker image (in the driver's task, before any commit waiter wakes)."""
        if isinstance(event, SnapshotLoad):
            image = image_from_snapshot(event.data, event.snapshot_id, cluster_id=self.cluster_id)
            if self.controller is not None:
                self.controller.load_snapshot(image)
            if self.broker_metadata is not None:
                self.broker_metadata.load_image(image)
            log.info("Loaded metadata snapshot %s", event.snapshot_id)
            self.snapshotter.snapshot_loaded(event.snapshot_id, self.clock.now_ms())
        else:
            assert isinstance(event, CommittedBatch)
            records = self._own_records(event)
            if records is None:
                records = []
                for header, view in iter_batches(event.batch):
                    if header.is_control:
                        continue  # LeaderChange and the like: the quorum's business
                    records.extend((self.codec.decode(r.value), r.offset)
                                   for r in iter_records(view) if r.value is not None)
            if records:
                if self.controller is not None:
                    self.controller.replay_batch(records)
                if self.broker_metadata is not None:
                    self.broker_metadata.on_commit(records)
            image = (self.broker_metadata.image if self.broker_metadata is not None
                     else self.controller.image if self.controller is not None else None)
            if image is not None:
                self.snapshotter.observe_batch(image, event.batch, self.clock.now_ms())
        self._metadata_changed.set()
        self._metadata_changed = trio.Event()

    def _own_records(self, event: CommittedBatch) -> list[tuple[Any, int]] | None:
        """The decoded records of a batch this node's controller appended (same base offset,
        epoch and count: Raft's offset and epoch name one entry), else None."""
        own = self._predecoded.pop(event.base_offset, None)
        if own is None:
            return None
        epoch, decoded = own
        header = fmt.parse_header(memoryview(event.batch))
        if (header.partition_leader_epoch != epoch or header.attributes & fmt.CONTROL_MASK
                or header.next_offset - header.base_offset != len(decoded)):
            return None
        return [(record, event.base_offset + i) for i, record in enumerate(decoded)]

    def is_active_controller(self) -> bool:
        """Kafka's active controller: the quorum leader, once it has replayed every entry of
        earlier epochs (its epoch's LeaderChange has been delivered), so it acts on the whole
        committed state."""
        return (self.is_controller and self.driver.running and self.replica.is_leader
                and self.driver.committed_end > self.replica.leader_epoch_start_offset)

    def active_controller_id(self) -> int:
        """The active controller's id as far as this node knows (the quorum leader), or -1."""
        return self.driver.leader_id if self.driver.running else -1

    async def _commit(self, result: Any, encoded: list[bytes] | None = None,
                      decoded: list[Any] | None = None) -> Any:
        """Commit a ControllerResult's records (``encoded``: already encoded) and return its
        response.

        The records go to the quorum as one batch; this returns once they are committed and
        replayed into the controller and this broker's image (``_on_commit`` runs before the
        waiter wakes), so the caller's next read sees them. Callers hold ``_controller_lock``.
        """
        if result.records:
            if encoded is None:
                encoded = [self.codec.encode(r) for r in result.records]
            epoch = self.driver.epoch
            base = -1
            try:
                last = self.driver.append(encoded)
                if decoded is not None:
                    base = last - len(encoded) + 1
                    self._predecoded[base] = (epoch, decoded)
                await self.driver.wait_committed(last, COMMIT_TIMEOUT_S, epoch=epoch)
            except (NotLeaderError, CommitLost) as exc:
                raise KafkaError(ErrorCode.NOT_CONTROLLER, f"node {self.node_id} lost the "
                                 f"controller role: {exc}") from exc
            except trio.TooSlowError:
                self._uncommitted = (last, epoch)
                raise KafkaError(ErrorCode.REQUEST_TIMED_OUT,
                                 "the metadata quorum did not commit in time") from None
            finally:
                self._predecoded.pop(base, None)  # normally taken by _on_commit already
        return result.response

    async def _run(self, operation: Callable[[QuorumController], Any]) -> Any:
        """Compute a controller operation and encode its records on a worker thread, then
        commit them.

        Fencing a broker that leads 30k partitions, or creating 5k partitions, is seconds of
        Python; on the event loop it would starve the quorum's fetches and heartbeats until the
        followers think the leader dead. On a thread, the interpreter's switch interval keeps
        handing the loop its turn. The controller changes only on replay, on the loop, and the
        lock keeps every other operation out, so the thread reads a stable controller.
        """
        controller, codec = self.controller, self.codec
        assert controller is not None
        await self._settle_uncommitted()

        def compute() -> tuple[Any, list[bytes], list[Any]]:
            result = operation(controller)
            encoded = [codec.encode(r) for r in result.records]
            # Decoded here, off the loop, exactly as _on_commit would decode the committed batch.
            return result, encoded, [codec.decode(e) for e in encoded]

        result, encoded, decoded = await trio.to_thread.run_sync(compute)
        return await self._commit(result, encoded, decoded)

    async def _settle_uncommitted(self) -> None:
        """Wait for the records of an earlier timed-out commit before computing on the image.

        In another epoch they were either committed (and replayed) or truncated, and the new
        leader's bootstrap replayed the log either way; in this one they are waited for again,
        and a second timeout refuses the operation without computing anything."""
        if self._uncommitted is None:
            return
        last, epoch = self._uncommitted
        if epoch == self.driver.epoch:
            try:
                await self.driver.wait_committed(last, COMMIT_TIMEOUT_S, epoch=epoch)
            except (NotLeaderError, CommitLost) as exc:
                raise KafkaError(ErrorCode.NOT_CONTROLLER, f"node {self.node_id} lost the "
                                 f"controller role: {exc}") from exc
            except trio.TooSlowError:
                raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, "an earlier metadata write is "
                                 "still not committed") from None
        self._uncommitted = None

    async def controller_call(self, operation: Callable[[QuorumController], Any]) -> Any:
        """Run ``operation`` on this node's controller and commit its records (the controller
        listener's door to it). Only the active controller, once it has bootstrapped in its
        epoch, runs operations; elsewhere they fail with NOT_CONTROLLER and the sender (a
        broker's controller channel) looks for the active one."""
        async with self._controller_lock:
            if not self.is_active_controller() or self._activated_epoch != self.driver.epoch:
                raise KafkaError(ErrorCode.NOT_CONTROLLER,
                                 f"node {self.node_id} is not the active controller "
                                 f"(leader {self.active_controller_id()})")
            return await self._run(operation)

    async def broker_heartbeat(self, req: BrokerHeartbeatRequest) -> Any:
        """A broker's heartbeat, on the active controller.

        A steady heartbeat (one that writes nothing, nearly all of them) is answered at once on
        the event loop from the controller's current state: not queued behind another operation
        holding the controller (a CreateTopics of 10,000 partitions computes and commits for
        seconds), nor sent to a worker thread for microseconds of work. As Kafka's controller
        records a heartbeat's contact before queueing it, a busy controller must neither fence
        a broker nor leave it unanswered until it fences itself. A heartbeat that would write
        (unfence, fence, controlled shutdown) takes its turn through ``controller_call``.

        It may run while an operation computes on a worker thread, without the controller lock:
        a steady heartbeat reads the image (replaced whole, never mutated in place; records are
        replayed only on the loop, and not while an operation holds the lock, since its commit
        is awaited under it) and writes one key of the contact-time dict, which the worker side
        only reads key by key (placement's session check). Each is a single atomic operation:
        the controller applies each batch when it replays it, so reading its image is a plain read.
        """
        controller = self.controller
        if (controller is not None and not (req.want_fence or req.want_shut_down)
                and self.is_active_controller() and self._activated_epoch == self.driver.epoch):
            result = controller.broker_heartbeat(req, now_ms=self.clock.now_ms())
            if not result.records:
                return result.response
        return await self.controller_call(
            lambda c: c.broker_heartbeat(req, now_ms=self.clock.now_ms()))

    def next_metadata_offset(self) -> int:
        return self.replica.log_end_offset

    def now_ms(self) -> int:
        return self.clock.now_ms()

    async def _become_active(self) -> None:
        """This node's controller just became active (in a new epoch): bootstrap a fresh
        cluster. Kafka's new active controller gives every broker a full session (soft state
        starts afresh), so heartbeat times from an earlier term go."""
        assert self.controller is not None
        log.info("Node %d is the active controller (epoch %d)", self.node_id, self.driver.epoch)
        self.controller.reset_sessions()
        boot = self.controller.bootstrap()
        if boot.records:
            await self._commit(boot)
            log.info("Bootstrapped a new cluster %s", self.cluster_id)

    async def _active_controller_loop(self) -> None:
        """Follow the quorum's leadership: on becoming active, bootstrap; while active, fence
        brokers whose sessions expired, every heartbeat interval."""
        assert self.controller is not None
        interval = int(self.config.get("broker.heartbeat.interval.ms")) / 1000.0  # type: ignore[arg-type]
        next_check = 0.0
        rebalance_every = float(self.config.get("leader.imbalance.check.interval.seconds")) \
            if self.config.get("auto.leader.rebalance.enable") else 0.0  # type: ignore[arg-type]
        next_rebalance = trio.current_time() + rebalance_every
        next_unclean = 0.0
        while True:
            try:
                if not self.is_active_controller():
                    self._activated_epoch = -1
                elif self.driver.epoch != self._activated_epoch:
                    epoch = self.driver.epoch
                    async with self._controller_lock:
                        if self.is_active_controller() and self.driver.epoch == epoch:
                            await self._become_active()
                            self._activated_epoch = epoch
                            next_check = trio.current_time() + interval
                elif trio.current_time() >= next_check:
                    next_check = trio.current_time() + interval
                    async with self._controller_lock:
                        if self.is_active_controller() and self._activated_epoch == self.driver.epoch:
                            now_ms = self.clock.now_ms()
                            fenced = await self._run(lambda c: c.fence_stale_brokers(now_ms))
                            for broker_id in fenced:
                                log.info("Fenced broker %d: its session expired", broker_id)
                            # Leaderless partitions whose topic allows unclean election (the
                            # setting may have just changed) get a live out-of-sync leader.
                            elected = 0
                            if trio.current_time() >= next_unclean:
                                next_unclean = trio.current_time() + UNCLEAN_ELECTION_CHECK_S
                                elected = await self._run(lambda c: c.elect_unclean_leaders())
                            if elected:
                                log.warning("Elected %d unclean leader(s): records the old ISR had "
                                            "and the new leader lacks are lost", elected)
                            if rebalance_every > 0 and trio.current_time() >= next_rebalance:
                                next_rebalance = trio.current_time() + rebalance_every
                                moved = await self._run(lambda c: c.balance_leaders())
                                if moved:
                                    log.info("Moved %d partition leadership(s) back to preferred "
                                             "replicas", moved)
            except KafkaError as exc:
                # Leadership moved under us (NOT_CONTROLLER) or the quorum is slow: look again.
                log.info("Controller work on node %d interrupted: %s", self.node_id, exc)
                self._activated_epoch = -1
            await trio.sleep(LEADERSHIP_POLL_S)

    # -- the broker's side ----------------------------------------------------------------------

    def _broker_image(self) -> Any:
        assert self.broker_metadata is not None
        return self.broker_metadata.image

    def _make_lifecycle(self, advertised: list[Listener], previous_epoch: int) -> None:
        assert self.broker_metadata is not None
        self.channel = ControllerChannel(
            self.voters, leader_hint=self.active_controller_id,
            client_id=f"broker-{self.node_id}-to-controller")
        self.lifecycle = BrokerLifecycleManager(
            self.channel.call,
            broker_id=self.node_id,
            cluster_id=self.cluster_id,
            incarnation_id=uuid.uuid4(),
            listeners=[(l.name, l.host, l.port, PLAINTEXT) for l in advertised],
            rack=self.config.get("broker.rack"),  # type: ignore[arg-type]
            features=[(METADATA_VERSION_FEATURE, MINIMUM_KRAFT_METADATA_VERSION,
                       LATEST_PRODUCTION_METADATA_VERSION)],
            log_dirs=self._directory_ids(),
            # What this broker has replayed (Kafka: the broker's last applied offset).
            metadata_offset=lambda: self.driver.committed_end - 1,
            heartbeat_interval_s=int(self.config.get("broker.heartbeat.interval.ms")) / 1000.0,  # type: ignore[arg-type]
            session_timeout_s=int(self.config.get("broker.session.timeout.ms")) / 1000.0,  # type: ignore[arg-type]
            previous_broker_epoch=previous_epoch,
            on_contact_lost=self._contact_lost,
            on_contact_restored=self._contact_restored,
        )
        for d in getattr(getattr(self, "log_manager", None), "offline_dirs", {}):
            self._log_dir_offline(d)  # failed before there was a lifecycle to tell

    def _contact_lost(self) -> None:
        # Kafka: a broker that cannot reach the controller for a whole session has been fenced
        # by now; serving as leader could only split the brain.
        log.warning("Broker %d lost contact with the controllers: it stops serving as leader",
                    self.node_id)
        replicas = getattr(self, "replicas", None)
        if replicas is not None:
            replicas.leadership_suspended = True

    def _contact_restored(self) -> None:
        log.info("Broker %d is in contact with the controllers again", self.node_id)
        replicas = getattr(self, "replicas", None)
        if replicas is not None:
            replicas.leadership_suspended = False

    def _own_voter(self, controller_listeners: list[Listener]) -> Voter | None:
        """This controller as a KIP-853 voter: its metadata dir's id and the endpoints it
        listens on (None when a wildcard host could not be advertised)."""
        meta = MetaProperties.read(self.config.metadata_log_dir)
        endpoints = {l.name: (l.host, self.bound_ports.get(l.name, l.port)) for l in controller_listeners}
        if meta is None or any(h in ("", "0.0.0.0", "::") for h, _ in endpoints.values()):
            return None
        directory = kafka_uuid_to_uuid(meta.directory_id) if meta.directory_id else uuid.UUID(int=0)
        return Voter(self.node_id, directory, endpoints)

    def _directory_ids(self) -> list[uuid.UUID]:
        ids = []
        self._dir_ids: dict[str, uuid.UUID] = {}
        for d in self.config.log_dirs:
            meta = MetaProperties.read(d)
            if meta is not None and meta.directory_id:
                ids.append(kafka_uuid_to_uuid(meta.directory_id))
                self._dir_ids[os.path.abspath(d)] = ids[-1]
        return ids

    def _log_dir_offline(self, d: str) -> None:
        # The next heartbeat names the dir (by its directory id) in OfflineLogDirs.
        dir_id = getattr(self, "_dir_ids", {}).get(d)
        if self.lifecycle is not None and dir_id is not None:
            self.lifecycle.report_offline_dir(dir_id)

    async def controller_request(self, body: Any, version: int | None = None) -> Any:
        """Send a request to the active controller (forwarding, internal topic creation) and
        return its answer once this broker's image shows the topics it created or deleted, so a
        client that creates a topic and asks for metadata next sees it (the same order a
        combined node gives for free)."""
        assert self.channel is not None
        response = await self.channel.call(body, version=version, timeout=COMMIT_TIMEOUT_S)
        wanted = _visible_effects(body, response)
        if wanted is not None:
            with trio.move_on_after(FORWARD_VISIBILITY_TIMEOUT_S):
                while not wanted(self._broker_image()):
                    await self._metadata_changed.wait()
        return response

    async def _allocate_producer_ids(self) -> tuple[int, int]:
        assert self.channel is not None and self.lifecycle is not None
        response = await self.channel.call(
            m.AllocateProducerIdsRequest(broker_id=self.node_id, broker_epoch=self.lifecycle.broker_epoch),
            timeout=COMMIT_TIMEOUT_S)
        if response.error_code != ErrorCode.NONE:
            raise KafkaError(ErrorCode(response.error_code), "AllocateProducerIds failed")
        return response.producer_id_start, response.producer_id_len

    # -- background work ------------------------------------------------------------------------

    async def _maintenance_loop(self) -> None:
        """Periodic log work: time-based flushes (flush.ms), offset checkpoints and the
        high-watermark checkpoint (replica.high.watermark.checkpoint.interval.ms)."""
        # Kafka's recovery-point and log-start checkpoints first run after the log tasks'
        # initial delay too.
        next_checkpoint = trio.current_time() + self._initial_log_task_delay_ms() / 1000.0
        hw_interval = int(self.config.get("replica.high.watermark.checkpoint.interval.ms")) / 1000.0  # type: ignore[arg-type]
        next_hw_checkpoint = trio.current_time() + hw_interval
        while True:
            await trio.sleep(min(1.0, hw_interval))
            now_ms = self.clock.now_ms()
            self.log_manager.flush_due(now_ms)
            # Checkpoints write a line per log and fsync (seconds at 10k partitions on a busy
            # disk): on a worker thread, which LogManager allows for them.
            if trio.current_time() >= next_checkpoint:
                await trio.to_thread.run_sync(self.log_manager.checkpoint)
                next_checkpoint = trio.current_time() + CHECKPOINT_INTERVAL_S
                next_hw_checkpoint = trio.current_time() + hw_interval
            elif trio.current_time() >= next_hw_checkpoint:
                await trio.to_thread.run_sync(self.log_manager.checkpoint_high_watermarks)
                next_hw_checkpoint = trio.current_time() + hw_interval

    def _producer_id_expiration_ms(self) -> int:
        """producer.id.expiration.ms in force: a dynamic broker config, as in Kafka."""
        config = self.config if self.broker_metadata is None else \
            BrokerLayers.of(self.config, self.broker_metadata.image, self.node_id).effective
        return int(config.get("producer.id.expiration.ms"))  # type: ignore[arg-type]

    def _initial_log_task_delay_ms(self) -> int:
        return int(self.config.get("log.initial.task.delay.ms"))  # type: ignore[arg-type]

    async def _retention_loop(self) -> None:
        """Kafka's log-retention task, first after log.initial.task.delay.ms, then every
        log.retention.check.interval.ms, on every replica's
        own log (leaders and followers alike); between passes it unlinks the retired segment
        files whose file.delete.delay.ms has run out.

        The pass itself changes segment lists, so it runs here like appends do (renames, no
        fsync); the checkpoint it calls for and the unlinks run on a worker thread.
        """
        lm = self.log_manager
        interval_ms = int(self.config.get("log.retention.check.interval.ms"))  # type: ignore[arg-type]
        # As Kafka's LogManager: the first pass after log.initial.task.delay.ms, not an interval.
        next_check = self.clock.now_ms() + self._initial_log_task_delay_ms()
        while True:
            now_ms = self.clock.now_ms()
            due = lm.next_file_delete_ms()
            wake = next_check if due is None else min(next_check, due)
            # Capped so a clock step cannot stall the task for a whole interval.
            await trio.sleep(min(max(0, wake - now_ms), 1000) / 1000.0)
            now_ms = self.clock.now_ms()
            try:
                if now_ms >= next_check:
                    next_check = now_ms + interval_ms
                    if lm.cleanup_logs(now_ms, checkpoint=False):
                        await trio.to_thread.run_sync(lm.checkpoint)
                due = lm.next_file_delete_ms()
                if due is not None and due <= now_ms:
                    await trio.to_thread.run_sync(lm.delete_due_files, now_ms)
            except Exception:  # a failing disk must not stop the node's other work
                log.exception("Log retention pass failed")

    async def _isr_loop(self) -> None:
        """Kafka's isr-expiration task: every half replica.lag.time.max.ms, followers that fell
        behind for longer than that leave the ISRs of the partitions this broker leads."""
        interval = int(self.config.get("replica.lag.time.max.ms")) / 2000.0  # type: ignore[arg-type]
        while True:
            await trio.sleep(interval)
            self.replicas.check_isr(self.clock.now_ms())

    async def _connect_to_broker(self, broker_id: int) -> KafkaClient:
        """A connection to another broker's inter-broker listener, for its replica fetcher."""
        image = self._broker_image()
        reg = image.cluster.brokers.get(broker_id)
        if reg is None:
            raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, f"broker {broker_id} is not registered")
        wanted = self.config.get("inter.broker.listener.name")
        endpoint = next((e for e in reg.listeners if e.name == wanted), None) if wanted else None
        if endpoint is None:
            endpoint = next((e for e in reg.listeners if e.name not in self.controller_listener_names), None)
        if endpoint is None:
            raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, f"broker {broker_id} has no broker listener")
        client = await KafkaClient.connect(endpoint.host, endpoint.port,
                                           client_id=f"broker-{self.node_id}-fetcher-{broker_id}")
        try:
            await client.negotiate()
        except BaseException:
            await client.aclose()
            raise
        return client

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
        cleaner = LogCleaner()
        while True:
            # A dynamic config (kafka-configs --alter ... log.cleaner.backoff.ms) applies from
            # the next wait on.
            image = self.broker_metadata.image if self.broker_metadata is not None else None
            config = self.config if image is None else self.replicas.dynamic_config(image)
            await trio.sleep(int(config.get("log.cleaner.backoff.ms")) / 1000.0)  # type: ignore[arg-type]
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

    def _publish(self, update: MetadataUpdate) -> None:
        """Apply one metadata change to the hosted logs: only what it touched (a snapshot
        load is one full update)."""
        try:
            self.replicas.apply_update(update, now_ms=self.clock.now_ms())
        except (KafkaError, OSError) as exc:
            # A log that cannot be opened must not take the broker down with it.
            log.error("Applying metadata offset %d failed: %s", update.image.offset, exc)
        rlm = getattr(self, "remote_log_manager", None)
        if rlm is not None:
            try:
                rlm.on_metadata_update(update)
            except Exception:  # tiering must not stop the broker following its metadata
                log.exception("Tiered storage could not follow metadata offset %d", update.image.offset)
        for name in update.deleted_topics.values():
            self.metrics.topics.forget(name)  # a deleted topic's series go with it
        groups = getattr(self, "groups", None)
        if groups is not None and update.topic_touched(OFFSETS_TOPIC):
            groups.on_image(update.image)

    def _on_hosted(self, topics: set[str]) -> None:
        """Logs made in the background are served now: tell those that follow the hosted
        partitions, as ``_publish`` does after a metadata step."""
        image = self._broker_image()
        rlm = getattr(self, "remote_log_manager", None)
        if rlm is not None:
            try:
                rlm.on_metadata_update(MetadataUpdate.whole(image))
            except Exception:  # tiering must not stop the broker following its metadata
                log.exception("Tiered storage could not follow newly hosted partitions")
        groups = getattr(self, "groups", None)
        if groups is not None and OFFSETS_TOPIC in topics:
            groups.on_image(image)

    # -- running --------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[dict[str, int]] = trio.TASK_STATUS_IGNORED) -> None:
        now_ms = self.clock.now_ms()
        # Each dir's .lock before anything in it is read or written: a second process on the same
        # dirs stops here, having touched nothing (its shutdown() never runs).
        self._dir_locks = lock_dirs(storage_dirs(self.config))
        cluster_id = ensure_formatted(self.config)
        self.cluster_id = cluster_id
        self._open_metadata(cluster_id, now_ms)

        listeners = self.config.listeners
        client_listeners = [l for l in listeners if l.name not in self.controller_listener_names]
        controller_listeners = [l for l in listeners if l.name in self.controller_listener_names]
        if self.is_broker and not client_listeners:
            raise ValueError("listeners has no broker listener (only controller.listener.names)")
        if self.is_controller and not controller_listeners:
            raise ValueError("listeners has no controller listener (controller.listener.names)")
        if not self.is_broker and client_listeners:
            raise ValueError(f"listeners names {', '.join(l.name for l in client_listeners)}, but a "
                             "controller-only node serves only controller.listener.names")
        max_request = int(self.config.get("socket.request.max.bytes"))  # type: ignore[arg-type]

        async def listen(nursery: trio.Nursery, listener: Listener, target: Any) -> None:
            host = listener.host or None
            port = await nursery.start(
                lambda task_status: serve(
                    self.metrics.metered(target), host, listener.port, task_status=task_status,
                    max_request_bytes=max_request, listener_name=listener.name,
                    on_connection=self.metrics.connections.tracker(listener.name),
                )
            )
            self.bound_ports[listener.name] = port
            log.info("Listening for %s on %s:%d", listener.name, listener.host or "0.0.0.0", port)

        metrics_listener = self.metrics.listener()
        if self.is_broker:
            previous_epoch = _clean_shutdown_epoch(self.config.log_dirs)
            self.advertised = self.config.advertised_listeners or client_listeners
            self._make_broker(cluster_id, now_ms)
        try:
            async with trio.open_nursery() as nursery:
                if metrics_listener is not None:
                    # First, so /health answers and /ready says why not while the node starts.
                    self.metrics_port = await nursery.start(self.metrics.serve, metrics_listener)
                # Snapshots are encoded on a worker thread (seconds at 100k partitions).
                self.snapshotter.schedule = lambda job: nursery.start_soon(
                    encode_in_thread, self.snapshotter, job,
                    functools.partial(trio.to_thread.run_sync, abandon_on_cancel=True))
                if self.is_controller:
                    # The controller listener first: the other voters reach the quorum through it.
                    controller_apis = ControllerApis(QuorumDispatcher(self.driver), self,
                                                     self._admin_context())
                    for listener in controller_listeners:
                        await listen(nursery, listener, controller_apis)
                        if listener.port == 0 and self.node_id in self.voters:
                            # An ephemeral port (tests): our own entry in the voter set must
                            # name the port we got, for this node's broker to reach us.
                            host = self.voters[self.node_id][0]
                            self.voters[self.node_id] = (host, self.bound_ports[listener.name])
                if self.is_controller and self.replica.is_dynamic:
                    self.driver.own_voter = self._own_voter(controller_listeners)
                quorum_started = trio.current_time()
                await nursery.start(self.driver.run)
                if self.is_broker:
                    nursery.start_soon(self._report_catch_up, quorum_started)
                self.recovered_metadata_start = self.replica.log_start_offset
                log.info("Metadata log recovered from disk: offsets %d..%d; following the quorum",
                         self.recovered_metadata_start, self.recovered_metadata_end)
                if self.is_controller:
                    nursery.start_soon(self._active_controller_loop)
                if self.is_broker:
                    await self._start_broker(nursery, client_listeners, listen, previous_epoch)
                log.info("[KafkaRaftServer nodeId=%d] Kafka Server started (cluster %s, roles %s)",
                         self.node_id, cluster_id, ",".join(self._roles()))
                self._started.set()
                task_status.started(dict(self.bound_ports))
        finally:
            self.shutdown()

    def _roles(self) -> list[str]:
        return [r for r, on in (("broker", self.is_broker), ("controller", self.is_controller)) if on]

    def _admin_context(self) -> BrokerContext:
        """The context the controller listener's admin handlers run in: the controller's image
        and config, and this node's controller as their door."""
        assert self.controller is not None
        controller = self.controller
        return BrokerContext(
            node_id=self.node_id, cluster_id=self.cluster_id, config=self.config, clock=self.clock,
            replicas=None,  # type: ignore[arg-type]  (admin handlers touch no logs)
            image=lambda: controller.image, controller=self.controller_call, advertised=[],
        )

    def _make_broker(self, cluster_id: str, now_ms: int) -> None:
        assert self.broker_metadata is not None
        broker_metadata = self.broker_metadata
        default_log_config = LogConfig.from_props(self.config.topic_defaults(), ignore_unknown=True)
        self.log_manager = LogManager(
            self.config.log_dirs, default_log_config, now_ms=now_ms,
            topic_configs=lambda topic: topic_log_config(self.config, broker_metadata.image, topic),
            restore_high_watermarks=True,
            recovery_threads=int(self.config.get("num.recovery.threads.per.data.dir")),  # type: ignore[arg-type]
            clock_ms=self.clock.now_ms,
            producer_id_expiration_ms=self._producer_id_expiration_ms(),
        )
        self.replicas = ReplicaManager(self.log_manager, self.config, self.node_id)
        self.log_manager.dir_offline_listeners.append(self._log_dir_offline)
        ctx = BrokerContext(
            node_id=self.node_id, cluster_id=cluster_id, config=self.config, clock=self.clock,
            replicas=self.replicas, image=lambda: broker_metadata.image,
            controller=None, advertised=self.advertised, controller_request=self.controller_request,
        )
        ctx.producer_ids = ProducerIdManager(self._allocate_producer_ids)
        ctx.stats = self.metrics.topics
        self.groups = GroupCoordinator(self.config, self.replicas, self.clock, self.node_id)
        ctx.groups = self.groups
        self.context = ctx
        # Tiered storage only with remote.log.storage.system.enable=true (Kafka's switch).
        self.remote_log_manager: RemoteLogManager | None = None
        rsm = remote_storage_from_config(self.config.props, self.config.log_dirs)
        if rsm is not None:
            metadata_log = MetadataLog(self.replicas, self.node_id, lambda: broker_metadata.image,
                                       self._connect_to_broker, self.clock.now_ms)
            self.remote_log_manager = RemoteLogManager(
                self.config, rsm, self.replicas, self.node_id, self.clock.now_ms, metadata_log,
                self._create_internal_topic)
            ctx.remote = self.remote_log_manager

    async def _create_internal_topic(self, name: str, partitions: int, replication: int,
                                     configs: dict[str, str]) -> None:
        """Create an internal topic through the controller (as the coordinator creates
        ``__consumer_offsets``); one that already exists is fine."""
        results = await create_topics_internal(self.context, [NewTopic(name, partitions, replication,
                                                                       configs=configs)])
        for _, code, message in results:
            if code == ErrorCode.NONE:
                log.info("Created %s with %d partitions, replication factor %d", name, partitions,
                         replication)
            elif code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise KafkaError(code, message or f"creating {name}")

    async def _start_broker(self, nursery: trio.Nursery, client_listeners: list[Listener],
                            listen: Callable[..., Any], previous_epoch: int) -> None:
        """Register with the active controller, then serve clients.

        A lone voter (or any quorum already running) registers and is unfenced in moments, so
        the broker opens its listener with an image that includes itself, as a single Kafka node
        does. In a cluster that is still forming the wait is bounded: the listener opens anyway
        (the broker stays fenced, clients see it only once it is unfenced) rather than hold up
        the start of the other nodes it needs for a quorum.
        """
        assert self.broker_metadata is not None
        # Bound ports first: registration advertises them.
        self._make_lifecycle(self.advertised, previous_epoch)
        assert self.lifecycle is not None
        nursery.start_soon(self.lifecycle.run)
        wait = (SINGLE_VOTER_STARTUP_TIMEOUT_S if self._lone_voter
                else CLUSTER_STARTUP_WAIT_S)
        single = self.is_controller and len(self.voters) == 1
        with trio.move_on_after(wait) as waited:
            while self.lifecycle.fenced:
                if single and self.driver.disk_full is not None:
                    # A lone voter must write its LeaderChange before anything commits: on a
                    # full disk it cannot, so it refuses to start rather than wait in vain.
                    raise StorageError(f"the metadata log cannot be written: {self.driver.disk_full}")
                with trio.move_on_after(0.1):
                    await self.lifecycle.wait_unfenced()
        if waited.cancelled_caught:
            if self._lone_voter:
                raise RuntimeError("the broker was not unfenced by its own controller in time")
            log.info("Broker %d is not unfenced yet; opening its listeners while it catches up",
                     self.node_id)
        self.broker_epoch = self.lifecycle.broker_epoch
        log.info("Metadata quorum: applied up to offset %d (epoch %d, leader %d)",
                 self.driver.committed_end, self.driver.epoch, self.driver.leader_id)
        await self._start_replication(nursery)
        # Large metadata steps (a CreateTopics of thousands of partitions) make their logs in
        # the background rather than on the event loop.
        self.log_creator = LogCreator(self.replicas, self.clock.now_ms, on_hosted=self._on_hosted)
        self.replicas.log_creator = self.log_creator
        await nursery.start(self.log_creator.run)
        # Deleted topics' directories are removed, and checkpoints rewritten, off the loop.
        self.log_deleter = LogDeleter(self.log_manager, self.clock.now_ms)
        await nursery.start(self.log_deleter.run)
        self.broker_metadata.add_update_publisher(self._publish)
        self.log_manager.broker_epoch = self.broker_epoch
        dispatcher = BrokerDispatcher(self.context)
        for listener in client_listeners:
            await listen(nursery, listener, dispatcher)
        nursery.start_soon(self._maintenance_loop)
        nursery.start_soon(self._retention_loop)
        self.producer_expiration = ProducerExpiration(
            self.log_manager, self.clock.now_ms,
            interval_ms=int(self.config.get("producer.id.expiration.check.interval.ms")),  # type: ignore[arg-type]
            expiration_ms=self._producer_id_expiration_ms)
        await nursery.start(self.producer_expiration.run)
        await nursery.start(self.groups.run)
        nursery.start_soon(self._cleaner_loop)
        if self.remote_log_manager is not None:
            await nursery.start(self.remote_log_manager.run)

    async def _start_replication(self, nursery: trio.Nursery) -> None:
        """Followers' fetchers and the leader's ISR machinery, attached before the first image is
        applied so that every hosted partition starts as leader or follower."""
        assert self.channel is not None and self.lifecycle is not None
        lifecycle, channel = self.lifecycle, self.channel
        replicas = self.replicas
        # The replica manager is the fetchers' host; connecting to other brokers is the node's.
        replicas.connect = self._connect_to_broker

        def broker_epoch_of(broker_id: int) -> int:
            reg = self._broker_image().cluster.brokers.get(broker_id)
            return -1 if reg is None else reg.epoch

        fetchers = ReplicaFetcherManager(replicas, FetcherSettings.from_config(self.config),
                                         self.clock.now_ms)
        alter = AlterPartitionManager(
            lambda body: channel.call(body, timeout=COMMIT_TIMEOUT_S), node_id=self.node_id,
            broker_epoch=lambda: lifecycle.broker_epoch, broker_epoch_of=broker_epoch_of)
        replicas.fetchers, replicas.alter_partition = fetchers, alter
        await nursery.start(fetchers.run)
        await nursery.start(alter.run)
        nursery.start_soon(self._isr_loop)

    async def _report_catch_up(self, started: float) -> None:
        """Say, once, how this broker's metadata came to be current: how much it had on its own
        disk (snapshot and metadata log) and how much it fetched from the quorum (a restart
        fetches only the delta), and how long loading took — until it had replayed up to the
        high watermark the leader reported, registration and unfencing aside."""
        while not (self.replica.leader_high_watermark > 0
                   and self.driver.committed_end >= self.replica.leader_high_watermark):
            await trio.sleep(CATCH_UP_POLL_S)
        end = self.driver.committed_end
        local = self.recovered_metadata_end
        fetched = max(0, end - self.recovered_metadata_end)
        log.info("Broker %d caught up with the metadata quorum at offset %d: offsets 0..%d from "
                 "its local snapshot and metadata log (log from %d), %d fetched from the quorum "
                 "(metadata_load local_offsets=%d fetched_offsets=%d elapsed_ms=%d)",
                 self.node_id, end, local, self.recovered_metadata_start, fetched, local, fetched,
                 round((trio.current_time() - started) * 1000))

    async def stop_gracefully(self, timeout_s: float = CONTROLLED_SHUTDOWN_TIMEOUT_S) -> None:
        """Kafka's controlled shutdown: the broker asks the controller to move its leaderships
        away (bounded: an unreachable controller must not keep the process up), then a leading
        controller resigns so the others elect a successor at once instead of timing out."""
        if self.lifecycle is not None and self.lifecycle.broker_epoch >= 0:
            with trio.move_on_after(timeout_s):
                if await self.lifecycle.controlled_shutdown(timeout_s):
                    log.info("Controlled shutdown of broker %d complete", self.node_id)
        if self.is_controller and getattr(self, "driver", None) is not None and self.driver.is_leader:
            try:
                self.driver.resign()
                # Let EndQuorumEpoch go out before the nursery is cancelled.
                await trio.sleep(0.05)
            except NotLeaderError:
                pass

    def shutdown(self) -> None:
        """Flush and close every log and write the clean-shutdown markers."""
        # The metadata log closes first: the partition logs' markers also cover its directory.
        meta = getattr(self, "metadata_log", None)
        clean = True
        try:
            if meta is not None and not meta.closed:
                meta.flush()
                meta.close()
        except (OSError, KafkaError) as exc:
            # A full or failed disk: no clean-shutdown marker, so the next start recovers.
            log.error("Could not close the metadata log cleanly: %s", exc)
            clean = False
        rlm = getattr(self, "remote_log_manager", None)
        if rlm is not None:
            rlm.close()
        manager = getattr(self, "log_manager", None)
        if manager is not None:
            try:
                manager.shutdown()
            except (OSError, KafkaError) as exc:
                log.error("Could not close the logs cleanly: %s", exc)
                clean = False
            self.log_manager = None  # type: ignore[assignment]
        if not clean:
            log.info("[KafkaRaftServer nodeId=%d] shut down (the next start recovers the logs)",
                     self.node_id)
            return
        root = os.path.abspath(self.config.metadata_log_dir)
        if meta is not None and (not self.is_broker or root not in [os.path.abspath(d) for d in self.config.log_dirs]):
            with open(os.path.join(root, log_files.CLEAN_SHUTDOWN_FILE), "w") as f:
                f.write('{"version":0,"brokerEpoch":%d}' % self.broker_epoch)
        log.info("[KafkaRaftServer nodeId=%d] shut down cleanly", self.node_id)
        locks = getattr(self, "_dir_locks", None)
        if locks is not None:
            locks.release()  # the last write is done: the dirs may have their next owner


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


def _visible_effects(body: Any, response: Any) -> Callable[[Any], bool] | None:
    """For a CreateTopics/DeleteTopics/CreatePartitions answer: a test of a broker image that
    says the image shows what succeeded; None for other requests."""
    key = body.API_KEY
    if key == ApiKey.CREATE_TOPICS and not getattr(body, "validate_only", False):
        names = [t.name for t in response.topics if t.error_code == ErrorCode.NONE]
        return (lambda image: all(n in image.topics.by_name for n in names)) if names else None
    if key == ApiKey.DELETE_TOPICS:
        names = [r.name for r in response.responses if r.error_code == ErrorCode.NONE and r.name]
        return (lambda image: not any(n in image.topics.by_name for n in names)) if names else None
    if key == ApiKey.CREATE_PARTITIONS and not getattr(body, "validate_only", False):
        counts = {t.name: t.count for t in body.topics}
        done = [r.name for r in response.results if r.error_code == ErrorCode.NONE]

        def grown(image: Any) -> bool:
            for name in done:
                topic = image.topics.by_name.get(name)
                if topic is None or len(topic.partitions) < counts.get(name, 0):
                    return False
            return True
        return grown if done else None
    return None


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
