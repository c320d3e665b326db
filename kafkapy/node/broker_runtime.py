"""``BrokerRuntime``: the broker role of a node, as one ``async with`` resource.

Built (by its constructor) from the node's config, clock, metadata loader and controller
channel, it opens the partition logs (recovery runs here, before the quorum starts) and makes
everything that serves them: the replica manager, group coordinator, tiered storage, the
lifecycle manager that registers and heartbeats with the active controller, the replica
fetchers and the AlterPartition sender.

Entering it starts the broker: it registers and waits (bounded) to be unfenced, starts
replication, the background log creation and deletion, subscribes to the loader's metadata
updates, opens the client listeners and runs the periodic tasks. Leaving it stops them all.

A lone voter (or any quorum already running) registers and is unfenced in moments, so the
broker opens its listener with an image that includes itself, as a single Kafka node does. In a
cluster that is still forming the wait is bounded: the listener opens anyway (the broker stays
fenced, clients see it only once it is unfenced) rather than hold up the start of the other
nodes it needs for a quorum.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from kafkapy.broker.authorization import BrokerAuthorizer
from kafkapy.broker.config_view import BrokerLayers
from kafkapy.broker.context import BrokerContext
from kafkapy.broker.dispatcher import BrokerDispatcher
from kafkapy.broker.features import SUPPORTED_FEATURES
from kafkapy.broker.handlers.coordinator import ensure_share_state_topic
from kafkapy.broker.handlers.topics import create_topics_internal
from kafkapy.broker.lifecycle import BrokerLifecycleManager
from kafkapy.broker.log_creation import LogCreator
from kafkapy.broker.log_deletion import LogDeleter
from kafkapy.broker.producer_expiration import ProducerExpiration
from kafkapy.broker.producer_id_manager import ProducerIdManager
from kafkapy.broker.quota_managers import ClientQuotas
from kafkapy.broker.replica_manager import ReplicaManager, topic_log_config
from kafkapy.broker.share_partitions import SharePartitionManager, max_share_sessions, share_settings_of
from kafkapy.broker.txn_verification import TxnVerifier
from kafkapy.config import BrokerConfig, Listener
from kafkapy.config_views import BrokerSettings
from kafkapy.controller import NewTopic
from kafkapy.coordinator.schema import OFFSETS_TOPIC
from kafkapy.coordinator.service import GroupCoordinator, with_group_overrides
from kafkapy.coordinator.share_group_service import ShareGroupService
from kafkapy.coordinator.share_persister import ShareStatePersister
from kafkapy.coordinator.share_state_service import SHARE_STATE_TOPIC, ShareCoordinator
from kafkapy.coordinator.transaction import TRANSACTION_STATE_TOPIC
from kafkapy.coordinator.transaction_service import TransactionCoordinator
from kafkapy.link.manager import ClusterLinkManager
from kafkapy.log.config import LogConfig
from kafkapy.log.log_manager import LogManager
from kafkapy.metadata.group_configs import group_config
from kafkapy.metadata.image import MetadataImage
from kafkapy.metadata.loader import MetadataLoader
from kafkapy.metadata.update import MetadataUpdate
from kafkapy.net.client import KafkaClient
from kafkapy.net.client_security import NodeClientSecurity
from kafkapy.net.controller_channel import ControllerChannel
from kafkapy.node.envelope import ENVELOPE_VERSION
from kafkapy.node.envelope import unwrap as envelope_unwrap
from kafkapy.node.envelope import wrap as envelope_wrap
from kafkapy.node.forwarding import visible_effects
from kafkapy.node.log_tasks import LogTasks
from kafkapy.node.runtime import Runtime
from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.quorum.clock import NodeClock
from kafkapy.replication.alter_partition import AlterPartitionManager
from kafkapy.replication.fetcher import FetcherSettings, ReplicaFetcherManager
from kafkapy.security.listener_protocols import (
    SECURITY_PROTOCOL_IDS,
    inter_broker_listener_name,
    listener_protocol,
    own_listener,
)
from kafkapy.security.principal import KafkaPrincipal
from kafkapy.storage import MetaProperties, StorageError, kafka_uuid_to_uuid
from kafkapy.tiered.manager import RemoteLogManager
from kafkapy.tiered.metadata_log import MetadataLog
from kafkapy.tiered.storage import remote_storage_from_config

log = logging.getLogger("kafkapy.node")

#: How long a broker request to the active controller may take (its commit included).
CONTROLLER_REQUEST_TIMEOUT_S = 30.0
#: How long a single-voter node waits to elect itself and register before giving up.
SINGLE_VOTER_STARTUP_TIMEOUT_S = 60.0
#: How long a broker in a larger cluster waits to be unfenced before opening its listeners.
CLUSTER_STARTUP_WAIT_S = 5.0
#: How long a forwarded CreateTopics & co. waits for this broker's image to show its effect.
FORWARD_VISIBILITY_TIMEOUT_S = 5.0

#: Opens one listener: (nursery, listener, request handler).
ServeListener = Callable[[trio.Nursery, Listener, Any], Awaitable[None]]


class BrokerRuntime(Runtime):
    """The broker role (module docstring)."""

    def __init__(self, *, node_id: int, cluster_id: str, config: BrokerConfig,
                 settings: BrokerSettings, clock: NodeClock, loader: MetadataLoader,
                 channel: ControllerChannel, advertised: list[Listener],
                 client_listeners: list[Listener], serve_listener: ServeListener,
                 metadata_offset: Callable[[], int], previous_epoch: int, topic_stats: Any,
                 lone_voter: bool, disk_full: Callable[[], str | None],
                 client_security: NodeClientSecurity | None = None) -> None:
        self.node_id = node_id
        # TLS/SASL of connections to other brokers, per listener (None: all PLAINTEXT).
        self.client_security = client_security
        self.cluster_id = cluster_id
        self.config = config
        self.settings = settings
        self.clock = clock
        self.loader = loader
        self.channel = channel
        self.advertised = advertised
        self._client_listeners = client_listeners
        self._serve_listener = serve_listener
        self._topic_stats = topic_stats
        self._lone_voter = lone_voter
        self._disk_full = disk_full
        self._metadata_changed = trio.Event()
        loader.add_listener(self._on_metadata_loaded)
        now_ms = clock.now_ms()
        default_log_config = LogConfig.from_props(config.topic_defaults(), ignore_unknown=True)
        self.log_manager = LogManager(
            config.log_dirs, default_log_config, now_ms=now_ms,
            topic_configs=lambda topic: topic_log_config(config, loader.image, topic),
            restore_high_watermarks=True,
            recovery_threads=settings.recovery_threads,
            clock_ms=clock.now_ms, monotonic=clock.monotonic,
            producer_id_expiration_ms=self._producer_id_expiration_ms(),
        )
        self.alter_partition = AlterPartitionManager(
            lambda body: channel.call(body, timeout=CONTROLLER_REQUEST_TIMEOUT_S), node_id=node_id,
            broker_epoch=lambda: self.lifecycle.broker_epoch, broker_epoch_of=self._broker_epoch_of)
        fetcher_settings = FetcherSettings.from_config(config)
        # The fetchers and the background log creation act on the replica manager, which calls
        # on them in turn: it makes them at construction. Large metadata steps (a CreateTopics
        # of thousands of partitions) make their logs in the background, not on the event loop.
        self.replicas = ReplicaManager(
            self.log_manager, config, node_id, connect=self._connect_to_broker,
            alter_partition=self.alter_partition,
            fetchers=lambda host: ReplicaFetcherManager(host, fetcher_settings, clock.now_ms),
            log_creator=lambda host: LogCreator(host, clock.now_ms, on_hosted=self._on_hosted))
        assert self.replicas.fetchers is not None and self.replicas.log_creator is not None
        self.fetchers, self.log_creator = self.replicas.fetchers, self.replicas.log_creator
        self.groups = GroupCoordinator(config, self.replicas, clock, node_id)
        # A group's own consumer.session.timeout.ms / consumer.heartbeat.interval.ms (GROUP configs).
        self.groups.consumer_config_for = lambda group_id: with_group_overrides(
            self.groups.consumer_config, group_config(loader.image, config, group_id))
        # Tiered storage only with remote.log.storage.system.enable=true (Kafka's switch).
        self.remote_log_manager: RemoteLogManager | None = None
        rsm = remote_storage_from_config(config.props, config.log_dirs)
        if rsm is not None:
            metadata_log = MetadataLog(self.replicas, node_id, lambda: loader.image,
                                       self._connect_to_broker, clock.now_ms)
            self.remote_log_manager = RemoteLogManager(
                config, rsm, self.replicas, node_id, clock.now_ms, metadata_log,
                self._create_internal_topic)
        producer_ids = ProducerIdManager(self._allocate_producer_ids)
        self.transactions = TransactionCoordinator(
            config, self.replicas, clock, node_id, next_producer_id=producer_ids.next_id,
            image=lambda: loader.image, connect=self._connect_to_broker)
        # The share coordinator of the __share_group_state partitions led here, and the persister
        # share-partition leaders use (in-process for those, RPCs to the other brokers').
        self.share_state = ShareCoordinator(config, self.replicas, clock, node_id, image=lambda: loader.image)
        self.share_persister = ShareStatePersister(
            self.share_state, node_id, lambda: loader.image, self._connect_to_broker,
            ensure_topic=lambda: ensure_share_state_topic(self.context))
        # The share partitions this broker leads (ShareFetch/ShareAcknowledge), their state kept
        # through that persister.
        self.share_partitions = SharePartitionManager(
            self.replicas, self.share_persister, clock,
            settings=lambda group_id: share_settings_of(group_config(loader.image, config, group_id)),
            max_sessions=max_share_sessions(config), remote=self.remote_log_manager)
        # Share groups in the group coordinator; a member that leaves has its records here
        # released at once, and an emptied group's partitions are forgotten (Kafka's onGroupEmpty).
        self.share_groups = ShareGroupService(self.groups, self.share_persister, clock,
                                              lambda group_id: group_config(loader.image, config, group_id))
        self.share_groups.on_member_left.append(self.share_partitions.member_left)
        self.share_groups.on_group_empty.append(self.share_partitions.group_empty)
        self.txn_verifier = TxnVerifier(self._connect_to_broker, lambda: loader.image,
                                        self.transactions.request_timeout_ms / 1000.0)
        # Cluster links: mirror partitions led here are filled from their sources; the link's
        # admin-client work goes to this cluster through this broker's own listener.
        own = own_listener(advertised, config.props)
        self.links = ClusterLinkManager(
            node_id, self.replicas, clock.now_ms, image=lambda: loader.image,
            local_bootstrap=(own.host, own.port),
            local_security=client_security.for_listener(own.name) if client_security else None)
        self.context = BrokerContext(
            node_id=node_id, cluster_id=cluster_id, config=config, clock=clock,
            replicas=self.replicas, image=lambda: loader.image,
            controller=None, advertised=advertised, controller_request=self.controller_request,
            producer_ids=producer_ids, groups=self.groups,
            remote=self.remote_log_manager, stats=topic_stats, transactions=self.transactions,
            txn_verifier=self.txn_verifier, links=self.links, share_state=self.share_state,
            share_partitions=self.share_partitions,
            share_groups=self.share_groups,
            authorizer=BrokerAuthorizer.from_config(config.props, lambda: loader.image),
            client_quotas=ClientQuotas(
                samples=config.get_int("quota.window.num"),
                window_seconds=config.get_int("quota.window.size.seconds"),
                controller_samples=config.get_int("controller.quota.window.num"),
                controller_window_seconds=config.get_int("controller.quota.window.size.seconds")),
        )
        self._dir_ids = self._directory_ids()
        self.lifecycle = BrokerLifecycleManager(
            channel.call,
            broker_id=node_id,
            cluster_id=cluster_id,
            incarnation_id=uuid.uuid4(),
            listeners=[(lst.name, lst.host, lst.port,
                        SECURITY_PROTOCOL_IDS[listener_protocol(config.props, lst.name)]) for lst in advertised],
            rack=settings.rack,
            features=sorted((name, lo, hi) for name, (lo, hi) in SUPPORTED_FEATURES.items()),
            log_dirs=list(self._dir_ids.values()),
            # What this broker has replayed (Kafka: the broker's last applied offset).
            metadata_offset=metadata_offset,
            heartbeat_interval_s=settings.heartbeat_interval_ms / 1000.0,
            session_timeout_s=settings.session_timeout_ms / 1000.0,
            previous_broker_epoch=previous_epoch,
            on_contact_lost=self._contact_lost,
            on_contact_restored=self._contact_restored,
            monotonic=clock.monotonic,
        )
        self.log_manager.dir_offline_listeners.append(self._log_dir_offline)
        for d in self.log_manager.offline_dirs:
            self._log_dir_offline(d)  # failed while the logs were opened
        # Deleted topics' directories are removed, and checkpoints rewritten, off the loop.
        self.log_deleter = LogDeleter(self.log_manager, clock.now_ms)
        self.producer_expiration = ProducerExpiration(
            self.log_manager, clock.now_ms,
            interval_ms=settings.producer_id_expiration_check_interval_ms,
            expiration_ms=self._producer_id_expiration_ms)
        self.tasks = LogTasks(self.log_manager, self.replicas, settings, clock,
                              log_dirs=config.log_dirs, image=lambda: loader.image)
        self.broker_epoch = -1

    # -- running --------------------------------------------------------------------------------

    async def _start(self, nursery: trio.Nursery) -> None:
        """Register with the active controller, then serve clients (module docstring)."""
        lifecycle = self.lifecycle
        nursery.start_soon(lifecycle.run)
        wait = SINGLE_VOTER_STARTUP_TIMEOUT_S if self._lone_voter else CLUSTER_STARTUP_WAIT_S
        with trio.move_on_after(wait) as waited:
            while lifecycle.fenced:
                problem = self._disk_full()
                if problem is not None:
                    # A lone voter must write its LeaderChange before anything commits: on a
                    # full disk it cannot, so it refuses to start rather than wait in vain.
                    raise StorageError(f"the metadata log cannot be written: {problem}")
                with trio.move_on_after(0.1):
                    await lifecycle.wait_unfenced()
        if waited.cancelled_caught:
            if self._lone_voter:
                raise RuntimeError("the broker was not unfenced by its own controller in time")
            log.info("Broker %d is not unfenced yet; opening its listeners while it catches up",
                     self.node_id)
        self.broker_epoch = lifecycle.broker_epoch
        # Followers' fetchers and the leader's ISR machinery, attached before the first image is
        # applied so that every hosted partition starts as leader or follower.
        await nursery.start(self.fetchers.run)
        await nursery.start(self.alter_partition.run)
        nursery.start_soon(self.tasks.isr_loop)
        await nursery.start(self.log_creator.run)
        await nursery.start(self.log_deleter.run)
        self.loader.add_update_publisher(self.publish)
        self.log_manager.broker_epoch = self.broker_epoch
        dispatcher = BrokerDispatcher(self.context)
        for listener in self._client_listeners:
            await self._serve_listener(nursery, listener, dispatcher)
        nursery.start_soon(self.tasks.maintenance_loop)
        nursery.start_soon(self.tasks.retention_loop)
        await nursery.start(self.producer_expiration.run)
        await nursery.start(self.groups.run)
        await nursery.start(self.transactions.run)
        await nursery.start(self.share_state.run)
        await nursery.start(self.share_groups.serve)
        await nursery.start(self.txn_verifier.run)
        nursery.start_soon(self.tasks.cleaner_loop)
        if self.remote_log_manager is not None:
            await nursery.start(self.remote_log_manager.run)
        await nursery.start(self.links.run)
        await nursery.start(self.share_partitions.run)

    def close(self) -> bool:
        """Close tiered storage and every partition log; False when a log could not be closed
        cleanly (the next start then recovers)."""
        if self.remote_log_manager is not None:
            self.remote_log_manager.close()
        try:
            self.log_manager.shutdown()
        except (OSError, KafkaError) as exc:
            log.error("Could not close the logs cleanly: %s", exc)
            return False
        return True

    # -- metadata ---------------------------------------------------------------------------------

    def _on_metadata_loaded(self) -> None:
        self._metadata_changed.set()
        self._metadata_changed = trio.Event()

    def publish(self, update: MetadataUpdate) -> None:
        """Apply one metadata change to the hosted logs: only what it touched (a snapshot
        load is one full update)."""
        try:
            self.replicas.apply_update(update, now_ms=self.clock.now_ms())
        except (KafkaError, OSError) as exc:
            # A log that cannot be opened must not take the broker down with it.
            log.error("Applying metadata offset %d failed: %s", update.image.offset, exc)
        self._tiering_follow(update, f"metadata offset {update.image.offset}")
        try:
            self.links.on_update(update)
        except Exception:  # noqa: BLE001 - links must not stop the broker following its metadata
            log.exception("Cluster links could not follow metadata offset %d", update.image.offset)
        for name in update.deleted_topics.values():
            self._topic_stats.forget(name)  # a deleted topic's series go with it
        self.groups.on_topics(update)
        if update.topic_touched(OFFSETS_TOPIC):
            self.groups.on_image(update.image)
        if update.topic_touched(TRANSACTION_STATE_TOPIC):
            self.transactions.on_image(update.image)
        if update.topic_touched(SHARE_STATE_TOPIC):
            self.share_state.on_image(update.image)

    def _on_hosted(self, topics: set[str]) -> None:
        """Logs made in the background are served now: tell those that follow the hosted
        partitions, as ``publish`` does after a metadata step."""
        image = self.loader.image
        self._tiering_follow(MetadataUpdate.whole(image), "newly hosted partitions")
        if OFFSETS_TOPIC in topics:
            self.groups.on_image(image)
        if TRANSACTION_STATE_TOPIC in topics:
            self.transactions.on_image(image)
        if SHARE_STATE_TOPIC in topics:
            self.share_state.on_image(image)

    def _tiering_follow(self, update: MetadataUpdate, what: str) -> None:
        if self.remote_log_manager is not None:
            try:
                self.remote_log_manager.on_metadata_update(update)
            except Exception:  # tiering must not stop the broker following its metadata
                log.exception("Tiered storage could not follow %s", what)

    def _producer_id_expiration_ms(self) -> int:
        """producer.id.expiration.ms in force: a dynamic broker config, as in Kafka."""
        effective = BrokerLayers.of(self.config, self.loader.image, self.node_id).effective
        return effective.get_int("producer.id.expiration.ms")

    def _broker_epoch_of(self, broker_id: int) -> int:
        reg = self.loader.image.cluster.brokers.get(broker_id)
        return -1 if reg is None else reg.epoch

    # -- the controller -----------------------------------------------------------------------------

    async def controller_request(self, body: Any, version: int | None = None, *,
                                 caller: tuple[KafkaPrincipal, str | None] | None = None) -> Any:
        """Send a request to the active controller (forwarding, internal topic creation) and
        return its answer once this broker's image shows the topics it created or deleted, so a
        client that creates a topic and asks for metadata next sees it (the same order a
        combined node gives for free). ``caller`` (principal, address): forward in an Envelope
        so the controller authorizes that client."""
        if caller is not None and version is not None:
            envelope = envelope_wrap(body, version, caller[0], caller[1], self.channel.client_id)
            answer = await self.channel.call(envelope, version=ENVELOPE_VERSION, timeout=CONTROLLER_REQUEST_TIMEOUT_S)
            response = envelope_unwrap(body, version, answer)
        else:
            response = await self.channel.call(body, version=version, timeout=CONTROLLER_REQUEST_TIMEOUT_S)
        wanted = visible_effects(body, response)
        if wanted is not None:
            with trio.move_on_after(FORWARD_VISIBILITY_TIMEOUT_S):
                while not wanted(self.loader.image):
                    await self._metadata_changed.wait()
        return response

    async def _allocate_producer_ids(self) -> tuple[int, int]:
        response = await self.channel.call(
            m.AllocateProducerIdsRequest(broker_id=self.node_id,
                                         broker_epoch=self.lifecycle.broker_epoch),
            timeout=CONTROLLER_REQUEST_TIMEOUT_S)
        if response.error_code != ErrorCode.NONE:
            raise KafkaError(ErrorCode(response.error_code), "AllocateProducerIds failed")
        return response.producer_id_start, response.producer_id_len

    async def _create_internal_topic(self, name: str, partitions: int, replication: int,
                                     configs: dict[str, str]) -> None:
        """Create an internal topic through the controller (as the coordinator creates
        ``__consumer_offsets``); one that already exists is fine."""
        results = await create_topics_internal(self.context, [NewTopic(name, partitions, replication,
                                                                       configs=dict[str, str | None](configs))])
        for _, code, message in results:
            if code == ErrorCode.NONE:
                log.info("Created %s with %d partitions, replication factor %d", name, partitions,
                         replication)
            elif code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise KafkaError(ErrorCode(code), message or f"creating {name}")

    def _contact_lost(self) -> None:
        # Kafka: a broker that cannot reach the controller for a whole session has been fenced
        # by now; serving as leader could only split the brain.
        log.warning("Broker %d lost contact with the controllers: it stops serving as leader",
                    self.node_id)
        self.replicas.leadership_suspended = True

    def _contact_restored(self) -> None:
        log.info("Broker %d is in contact with the controllers again", self.node_id)
        self.replicas.leadership_suspended = False

    # -- other brokers and the log dirs ---------------------------------------------------------------

    async def _connect_to_broker(self, broker_id: int) -> KafkaClient:
        """A connection to another broker's inter-broker listener, for its replica fetcher."""
        image: MetadataImage = self.loader.image
        reg = image.cluster.brokers.get(broker_id)
        if reg is None:
            raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, f"broker {broker_id} is not registered")
        wanted = self.settings.inter_broker_listener_name or inter_broker_listener_name(self.config.props)
        endpoint = next((e for e in reg.listeners if e.name == wanted), None) if wanted else None
        if endpoint is None:
            controller_names = set(self.config.get_list("controller.listener.names"))
            endpoint = next((e for e in reg.listeners if e.name not in controller_names), None)
        if endpoint is None:
            raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, f"broker {broker_id} has no broker listener")
        try:
            security = (self.client_security.for_listener(endpoint.name)
                        if self.client_security is not None else None)
        except ValueError as exc:
            raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, f"broker {broker_id}: {exc}") from None
        client = await KafkaClient.connect(endpoint.host, endpoint.port,
                                           client_id=f"broker-{self.node_id}-fetcher-{broker_id}",
                                           api_versions=False, security=security)
        try:
            await client.negotiate()
        except BaseException:
            await client.aclose()
            raise
        return client

    def _directory_ids(self) -> dict[str, uuid.UUID]:
        """Each log dir's directory id (meta.properties), by absolute path."""
        ids: dict[str, uuid.UUID] = {}
        for d in self.config.log_dirs:
            meta = MetaProperties.read(d)
            if meta is not None and meta.directory_id:
                ids[os.path.abspath(d)] = kafka_uuid_to_uuid(meta.directory_id)
        return ids

    def _log_dir_offline(self, d: str) -> None:
        # The next heartbeat names the dir (by its directory id) in OfflineLogDirs.
        dir_id = self._dir_ids.get(d)
        if dir_id is not None:
            self.lifecycle.report_offline_dir(dir_id)


__all__ = ["CONTROLLER_REQUEST_TIMEOUT_S", "BrokerRuntime"]
