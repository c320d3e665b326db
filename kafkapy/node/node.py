"""A kafkapy node: storage, metadata quorum, controller and broker, wired and run under Trio.

Start-up follows a KRaft combined node: check the storage format, open the metadata log and
replay it (controller and broker each build their image from it), bootstrap a fresh cluster,
register this broker and get unfenced, open the partition logs, then listen. SIGTERM or SIGINT
shuts down cleanly: listeners stop, logs are flushed and the clean-shutdown marker is written so
the next start skips recovery.
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
from kafkapy.metadata.records import BrokerEndpoint, BrokerFeature
from kafkapy.net.server import serve
from kafkapy.node.metadata_log import METADATA_PARTITION_DIR, PartitionLogStore
from kafkapy.protocol.apis import ApiKey, ApiVersionsTable
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.raft.local import LocalQuorum
from kafkapy.raft.quorum_state import FileQuorumStateStore
from kafkapy.storage import MetaProperties, ensure_formatted, kafka_uuid_to_uuid

log = logging.getLogger("kafkapy.node")

PLAINTEXT = 0  # SecurityProtocol id of PLAINTEXT in RegisterBrokerRecord endpoints
CHECKPOINT_INTERVAL_S = 60.0


class ControllerListenerDispatcher:
    """The controller listener: only ApiVersions until the multi-voter Raft RPCs arrive."""

    def __init__(self) -> None:
        self.versions = ApiVersionsTable()
        self.versions.register(ApiKey.API_VERSIONS, 0, 4)

    async def handle(self, request: Any, conn: Any) -> Any:
        return self.versions.response(request.api_version)


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
        meta_root = self.config.metadata_log_dir
        meta_dir = os.path.join(meta_root, METADATA_PARTITION_DIR)
        # The marker belongs to the log dir; read it before the LogManager consumes it.
        clean = os.path.exists(os.path.join(meta_root, log_files.CLEAN_SHUTDOWN_FILE))
        self.metadata_log = PartitionLog.open(meta_dir, LogConfig(), now_ms=now_ms, recover=not clean)
        self.quorum = LocalQuorum(
            PartitionLogStore(self.metadata_log), self.node_id,
            state_store=FileQuorumStateStore(os.path.join(meta_dir, "quorum-state")),
            cluster_id=cluster_id,
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
            controller_ids=[self.node_id],
        )
        self.broker_metadata = BrokerMetadata(cluster_id)
        self.quorum.start()
        self.quorum.register_listener(self.controller.replay_batch)
        self.quorum.register_listener(self.broker_metadata.on_commit)
        log.info("Replayed the metadata log up to offset %d (epoch %d)", self.quorum.end_offset, self.quorum.epoch)

    def _commit(self, result: Any) -> Any:
        """Commit a ControllerResult's records and return its response.

        The records reach the controller and this broker (through the quorum's commit listeners)
        before this returns, so the caller's next read sees them.
        """
        if result.records:
            self.quorum.append(list(result.records), now_ms=self.clock.now_ms())
        return result.response

    async def controller_call(self, operation: Callable[[QuorumController], Any]) -> Any:
        """Run ``operation`` on the controller (the broker handlers' door to it) and commit it."""
        return self._commit(operation(self.controller))

    def _register_broker(self, cluster_id: str, advertised: list[Listener]) -> None:
        now_ms = self.clock.now_ms()
        request = BrokerRegistrationRequest(
            broker_id=self.node_id,
            cluster_id=cluster_id,
            incarnation_id=uuid.uuid4(),
            listeners=tuple(BrokerEndpoint(l.name, l.host, l.port, PLAINTEXT) for l in advertised),
            rack=self.config.get("broker.rack"),  # type: ignore[arg-type]
            features=(BrokerFeature(METADATA_VERSION_FEATURE, MINIMUM_KRAFT_METADATA_VERSION,
                                    LATEST_PRODUCTION_METADATA_VERSION),),
            log_dirs=tuple(self._directory_ids()),
            previous_broker_epoch=self.broker_epoch,
        )
        result = self.controller.register_broker(request, now_ms=now_ms, next_offset=self.quorum.end_offset)
        if result.response.error_code != ErrorCode.NONE:
            raise RuntimeError(f"Broker registration failed: {result.response.error_message}")
        self.broker_epoch = self._commit(result).broker_epoch
        self._heartbeat()

    def _directory_ids(self) -> list[uuid.UUID]:
        ids = []
        for d in self.config.log_dirs:
            meta = MetaProperties.read(d)
            if meta is not None and meta.directory_id:
                ids.append(kafka_uuid_to_uuid(meta.directory_id))
        return ids

    def _heartbeat(self) -> None:
        now_ms = self.clock.now_ms()
        request = BrokerHeartbeatRequest(
            broker_id=self.node_id, broker_epoch=self.broker_epoch,
            current_metadata_offset=self.quorum.high_watermark - 1,
        )
        reply = self._commit(self.controller.broker_heartbeat(request, now_ms=now_ms))
        if reply.error_code != ErrorCode.NONE:
            log.warning("Heartbeat refused: %s", reply.error_message or ErrorCode(reply.error_code).name)

    async def _heartbeat_loop(self) -> None:
        interval = int(self.config.get("broker.heartbeat.interval.ms")) / 1000.0  # type: ignore[arg-type]
        while True:
            await trio.sleep(interval)
            self._heartbeat()
            self._commit(self.controller.fence_stale_brokers(self.clock.now_ms()))

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
        boot = self.controller.bootstrap()
        if boot.records:
            self._commit(boot)
            log.info("Bootstrapped a new cluster %s", cluster_id)

        listeners = self.config.listeners
        client_listeners = [l for l in listeners if l.name not in self.controller_listener_names]
        if not client_listeners:
            raise ValueError("listeners has no broker listener (only controller.listener.names)")
        advertised = self.config.advertised_listeners or client_listeners

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
        )
        ctx.producer_ids = ProducerIdManager(self._allocate_producer_ids)
        self.groups = GroupCoordinator(self.config, self.replicas, self.clock, self.node_id)
        ctx.groups = self.groups
        self.context = ctx
        self._register_broker(cluster_id, advertised)
        self.broker_metadata.add_publisher(self._publish)
        self.log_manager.broker_epoch = self.broker_epoch

        dispatcher = BrokerDispatcher(ctx)
        max_request = int(self.config.get("socket.request.max.bytes"))  # type: ignore[arg-type]
        try:
            async with trio.open_nursery() as nursery:
                for listener in listeners:
                    target: Any = (
                        ControllerListenerDispatcher() if listener.name in self.controller_listener_names else dispatcher
                    )
                    host = listener.host or None
                    port = await nursery.start(
                        lambda task_status, t=target, h=host, lst=listener: serve(
                            t, h, lst.port, task_status=task_status, max_request_bytes=max_request,
                            listener_name=lst.name,
                        )
                    )
                    self.bound_ports[listener.name] = port
                    log.info("Listening for %s on %s:%d", listener.name, listener.host or "0.0.0.0", port)
                nursery.start_soon(self._heartbeat_loop)
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
