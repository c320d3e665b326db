"""The quorum controller: admin and broker-lifecycle requests in, metadata records out.

Every operation reads the latest image and returns a ``ControllerResult(records, response)``;
it never changes the controller's state itself. State changes only in ``replay``, which the node
calls for each committed record, so the active controller and its followers run the same code
and end up with the same image. (Kafka's controller also applies its own uncommitted writes
to speculative state; we keep it simpler: a caller must let one operation's records commit and
replay before it starts the next. With the single-voter ``LocalQuorum`` that is immediate.)

``QuorumController`` is a facade over Kafka's control managers, each owning one area of the
image and replaying its own record types: ``ClusterControlManager`` (brokers and their
sessions), ``ReplicationControlManager`` (topics and partitions, with the elections,
AlterPartition, reassignment and broker-event helpers over it), ``ConfigurationControlManager``,
``ProducerIdControlManager``, ``FeatureControlManager``, ``AclControlManager``,
``ClientQuotaControlManager`` and kafkapy's own ``ClusterLinkControlManager`` (cluster links and
mirror topics). Validation follows Apache Kafka 3.9:
same error codes, messages worded as Kafka words them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence

from kafkapy.controller.acl_control import AclControlManager, AclCreateResult, AclDeleteResult
from kafkapy.controller.alter_partition import AlterPartitionControl
from kafkapy.controller.broker_lifecycle import BrokerLifecycle
from kafkapy.controller.client_quota_control import (
    ClientQuotaControlManager,
    QuotaAlteration,
    QuotaAlterationResult,
)
from kafkapy.controller.cluster_control import (
    DEFAULT_BROKER_SESSION_TIMEOUT_MS,
    ClusterControlManager,
)
from kafkapy.controller.configuration_control import ConfigurationControlManager
from kafkapy.controller.control_manager import ControlManager, ReplayRegistry
from kafkapy.controller.feature_control import (
    ELR_FEATURE,
    LATEST_PRODUCTION_METADATA_VERSION,
    METADATA_VERSION_3_9_IV0,
    MINIMUM_KRAFT_METADATA_VERSION,
    FeatureControlManager,
    bootstrap_records,
)
from kafkapy.controller.leader_election import LeaderElections
from kafkapy.controller.link_control import ClusterLinkControlManager
from kafkapy.controller.names import (
    CLUSTER_METADATA_TOPIC,
    topic_name_error,
    unify_collision_chars,
    uuid_from_kafka_str,
    uuid_to_kafka_str,
)
from kafkapy.controller.placement import RandomSource
from kafkapy.controller.producer_id_control import (
    PRODUCER_ID_BLOCK_SIZE,
    ProducerIdControlManager,
)
from kafkapy.controller.reassignment_control import ReassignmentControl
from kafkapy.controller.replication_control import (
    DEFAULT_TOPIC_DEFAULTS,
    ReplicationControlManager,
)
from kafkapy.controller.scram_control import (
    ScramAlterResult,
    ScramControlManager,
    ScramDeletion,
    ScramUpsertion,
)
from kafkapy.controller.types import (
    AlterConfigsResource,
    AlterConfigsResult,
    AlterPartitionReply,
    AlterPartitionTopic,
    BrokerHeartbeatReply,
    BrokerHeartbeatRequest,
    BrokerRegistrationReply,
    BrokerRegistrationRequest,
    ClusterLinkResult,
    ControllerResult,
    CreatePartitionsResult,
    CreatePartitionsTopic,
    DeleteTopicResult,
    ElectionType,
    MirrorTopicResult,
    MirrorTopicSpec,
    NewTopic,
    PartitionResult,
    ProducerIdsBlock,
    TopicConfigEntry,
    TopicDefaults,
    TopicResult,
)
from kafkapy.metadata.delta import MetadataDelta
from kafkapy.metadata.image import MetadataImage, PartitionRegistration
from kafkapy.metadata.records import FeatureLevelRecord, MetadataRecord
from kafkapy.security.acl import AclBinding, AclBindingFilter


class QuorumController:
    """Turns requests into metadata records; learns the results only by replaying them.

    Effects come in as arguments: ``uuid_source`` makes topic ids, ``rng`` drives replica
    placement, ``now_ms`` arguments are the clock. Nothing here does I/O.
    """

    def __init__(
        self,
        *,
        cluster_id: str,
        uuid_source: Callable[[], uuid.UUID],
        rng: RandomSource,
        image: MetadataImage | None = None,
        defaults: TopicDefaults = DEFAULT_TOPIC_DEFAULTS,
        broker_topic_configs: Mapping[str, str] | None = None,
        session_timeout_ms: int = DEFAULT_BROKER_SESSION_TIMEOUT_MS,
        delete_topic_enable: bool = True,
        place_on_fenced_brokers: bool = False,
        controller_ids: Iterable[int] = (),
        leader_imbalance_percentage: int = 10,
        remote_storage_system_enable: bool = False,
        group_coordinator_props: Mapping[str, str] | None = None,
    ) -> None:
        """``broker_topic_configs``: topic config keys the node's static config sets (by topic
        name, e.g. ``retention.ms``), reported as STATIC_BROKER_CONFIG in CreateTopics results.
        ``place_on_fenced_brokers``: Kafka's placer may put fenced brokers in follower slots and
        counts them toward the replication factor; by default we place on unfenced brokers only,
        so a factor above the unfenced broker count fails with INVALID_REPLICATION_FACTOR.
        ``remote_storage_system_enable``: the node's ``remote.log.storage.system.enable``; without
        it topics may not set ``remote.storage.enable=true`` (Kafka's LogConfig.validate).
        ``group_coordinator_props``: the node's static settings, the bounds of group configs.
        """
        self.cluster_id = cluster_id
        self._image = image if image is not None else MetadataImage.empty(cluster_id)
        current = self._current_image
        self.feature_control = FeatureControlManager(current)
        self.cluster_control = ClusterControlManager(
            cluster_id=cluster_id, image=current, features=self.feature_control,
            session_timeout_ms=session_timeout_ms, place_on_fenced_brokers=place_on_fenced_brokers)
        self.configuration_control = ConfigurationControlManager(
            image=current, broker_topic_configs=broker_topic_configs,
            remote_storage_system_enable=remote_storage_system_enable, controller_ids=controller_ids,
            group_coordinator_props=group_coordinator_props)
        self.producer_id_control = ProducerIdControlManager(image=current, cluster=self.cluster_control)
        self.replication_control = ReplicationControlManager(
            image=current, cluster=self.cluster_control, configs=self.configuration_control,
            uuid_source=uuid_source, rng=rng, defaults=defaults,
            delete_topic_enable=delete_topic_enable)
        self._elections = LeaderElections(
            image=current, replication=self.replication_control, configs=self.configuration_control,
            leader_imbalance_percentage=leader_imbalance_percentage)
        self._alter_partition = AlterPartitionControl(
            image=current, cluster=self.cluster_control, replication=self.replication_control,
            configs=self.configuration_control)
        self._reassignments = ReassignmentControl(
            image=current, replication=self.replication_control, configs=self.configuration_control)
        self.link_control = ClusterLinkControlManager(
            image=current, replication=self.replication_control, uuid_source=uuid_source)
        self.acl_control = AclControlManager(image=current, uuid_source=uuid_source)
        self.client_quota_control = ClientQuotaControlManager(image=current)
        self._brokers = BrokerLifecycle(cluster=self.cluster_control, elections=self._elections)
        self.scram_control = ScramControlManager(image=current)
        self._replayers = ReplayRegistry((
            self.feature_control, self.cluster_control, self.configuration_control,
            self.producer_id_control, self.replication_control, self.link_control, self.acl_control,
            self.scram_control, self.client_quota_control))
        self._replay_by_type = self._replayers.replayers()

    # -- state -----------------------------------------------------------------------------------

    def _current_image(self) -> MetadataImage:
        return self._image

    @property
    def image(self) -> MetadataImage:
        """The image after every batch replayed so far: a plain read, safe from any thread.

        A node reads it from a worker thread (an operation computing) and from the event loop (a
        steady heartbeat, a replay) at once, so reading must change nothing: the delta is applied
        at replay, on the replaying thread, and the new image published with one assignment.
        """
        return self._image

    @property
    def last_applied_offset(self) -> int:
        return self._image.offset

    @property
    def defaults(self) -> TopicDefaults:
        """``num.partitions`` and ``default.replication.factor`` for CreateTopics."""
        return self.replication_control.defaults

    def manager_for(self, record_type: type[MetadataRecord]) -> ControlManager | None:
        """The manager that replays ``record_type`` (None: the controller's own, NoOpRecord)."""
        return self._replayers.manager_for(record_type)

    def replay(self, record: MetadataRecord, offset: int) -> None:
        """Apply one committed record (a batch of one: see ``replay_batch``)."""
        self.replay_batch(((record, offset),))

    def replay_batch(self, records_with_offsets: Iterable[tuple[MetadataRecord, int]]) -> None:
        """Apply one committed batch and publish the resulting image.

        Each record goes to the manager registered for its type. One apply per batch, not per
        record: applying copies the changed parts of the image, so a CreateTopics of 10,000
        partitions applied record by record would copy its topic 10,000 times. A batch that
        fails to replay publishes nothing: the image stays whole.
        """
        delta = MetadataDelta(self._image)
        managers = self._replayers.managers
        replayers = self._replay_by_type
        try:
            for record, offset in records_with_offsets:
                replay = replayers.get(type(record))
                if replay is None:
                    delta.replay(record, offset)  # NoOpRecord; the delta refuses unknown types
                else:
                    replay(record, offset, delta)
            image = delta.apply() if delta.offset != self._image.offset else None
        except BaseException:
            for m in managers:
                m.abort_batch()
            raise
        for m in managers:
            m.commit_batch()
        if image is not None:  # None: an empty batch, nothing to publish
            self._image = image

    def load_snapshot(self, image: MetadataImage) -> None:
        """Start over from a snapshot's image (a standby that fell behind, or a restart); each
        manager rebuilds what it keeps beside the image (broker sessions start afresh, as after
        a failover)."""
        self._image = image
        for m in self._replayers.managers:
            m.load_snapshot(image)

    def reset_sessions(self) -> None:
        """Forget heartbeat times (soft state): a newly active controller gives every broker a
        full session before fencing it, as Kafka's does after a failover."""
        self.cluster_control.reset_sessions()

    def bootstrap(self, metadata_version: int = LATEST_PRODUCTION_METADATA_VERSION, *,
                  elr_level: int | None = None, group_level: int | None = None,
                  share_level: int | None = None) -> ControllerResult[None]:
        """Records to write when the metadata log is empty (none otherwise): metadata.version,
        eligible.leader.replicas.version (``elr_level``, default Kafka 4.1's for that
        metadata.version), group.version and share.version (default 1 each) and, with ELR on,
        the cluster-level min.insync.replicas taken from the node's static config."""
        return self.feature_control.bootstrap(
            metadata_version, elr_level=elr_level,
            min_insync_replicas=self.configuration_control.static_min_insync_replicas(),
            group_level=group_level, share_level=share_level)

    def update_features(self, updates: Sequence[tuple[str, int, int]], *, validate_only: bool = False,
                        node_id: int = -1) -> ControllerResult[tuple[int, str | None]]:
        """UpdateFeatures (``kafka-features upgrade|downgrade``): (feature, level, upgrade type)
        entries, all carried out or none; the answer is (error code, message). Turning
        eligible.leader.replicas.version on also writes the cluster-level min.insync.replicas
        the ELR rules read, as Kafka's controller does."""
        result = self.feature_control.update_features(updates, validate_only=validate_only,
                                                      node_id=node_id)
        turns_elr_on = any(isinstance(r, FeatureLevelRecord) and r.name == ELR_FEATURE and r.feature_level > 0
                           for r in result.records)
        if not turns_elr_on:
            return result
        return ControllerResult(result.records + tuple(self.configuration_control.elr_safety_records()),
                                result.response)

    # -- topics and partitions (ReplicationControlManager) --------------------------------------

    def create_topics(self, topics: Sequence[NewTopic], *, validate_only: bool = False,
                      defaults: TopicDefaults | None = None) -> ControllerResult[list[TopicResult]]:
        """CreateTopics. One result per distinct name, in request order."""
        return self.replication_control.create_topics(topics, validate_only=validate_only,
                                                      defaults=defaults)

    def delete_topics(self, topics: Sequence[str | uuid.UUID]) -> ControllerResult[list[DeleteTopicResult]]:
        """DeleteTopics by name (str) or by id (UUID); one result per distinct entry."""
        return self.replication_control.delete_topics(topics)

    def create_partitions(self, topics: Sequence[CreatePartitionsTopic], *,
                          validate_only: bool = False) -> ControllerResult[list[CreatePartitionsResult]]:
        """CreatePartitions: grow topics; one result per distinct name, in request order."""
        return self.replication_control.create_partitions(topics, validate_only=validate_only)

    def elect_leaders(self, partitions: Sequence[tuple[str, int]] | None,
                      election_type: ElectionType) -> ControllerResult[list[PartitionResult]]:
        """ElectLeaders (see ``LeaderElections.elect_leaders``)."""
        return self._elections.elect_leaders(partitions, election_type)

    def elect_unclean_leaders(self, max_elections: int = 1000) -> ControllerResult[int]:
        """Periodic unclean elections where topics allow them; the number of leaders elected."""
        return self._elections.elect_unclean_leaders(max_elections)

    def balance_leaders(self, max_elections: int = 1000) -> ControllerResult[int]:
        """Leadership back to preferred replicas; the number of partitions moved."""
        return self._elections.balance_leaders(max_elections)

    def alter_partition(self, broker_id: int, broker_epoch: int,
                        topics: Sequence[AlterPartitionTopic], *,
                        version: int) -> ControllerResult[AlterPartitionReply]:
        """AlterPartition (API 56, ``version`` 0-3): a partition leader's proposed ISRs."""
        return self._alter_partition.alter_partition(broker_id, broker_epoch, topics,
                                                     version=version)

    def alter_partition_reassignments(
            self, targets: Sequence[tuple[str, int, Sequence[int] | None]]
    ) -> ControllerResult[list[PartitionResult]]:
        """AlterPartitionReassignments: give partitions new replica lists (None cancels)."""
        return self._reassignments.alter_partition_reassignments(targets)

    def list_partition_reassignments(
            self, partitions: Sequence[tuple[str, int]] | None
    ) -> ControllerResult[list[tuple[str, int, PartitionRegistration]]]:
        """ListPartitionReassignments: the reassignments in progress, sorted."""
        return self._reassignments.list_partition_reassignments(partitions)

    # -- configs (ConfigurationControlManager) -----------------------------------------------------

    def incremental_alter_configs(self, resources: Sequence[AlterConfigsResource], *,
                                  validate_only: bool = False
                                  ) -> ControllerResult[list[AlterConfigsResult]]:
        """IncrementalAlterConfigs for topic and broker resources."""
        return self.configuration_control.incremental_alter_configs(resources,
                                                                    validate_only=validate_only)

    def effective_topic_configs(self, overrides: Mapping[str, str]) -> tuple[TopicConfigEntry, ...]:
        """Every topic config with its value and source, sorted by name (CreateTopics v5+)."""
        return self.configuration_control.effective_topic_configs(overrides)

    def unclean_election_enabled(self, topic: str) -> bool:
        """``unclean.leader.election.enable`` as it applies to ``topic``."""
        return self.configuration_control.unclean_election_enabled(topic)

    # -- client quotas (ClientQuotaControlManager) -----------------------------------------------

    def alter_client_quotas(self, alterations: Sequence[QuotaAlteration], *,
                            validate_only: bool = False
                            ) -> ControllerResult[list[QuotaAlterationResult]]:
        """AlterClientQuotas: one result per distinct entity, in request order."""
        return self.client_quota_control.alter_client_quotas(alterations,
                                                             validate_only=validate_only)

    # -- brokers (ClusterControlManager) -----------------------------------------------------------

    def register_broker(self, req: BrokerRegistrationRequest, *, now_ms: int,
                        next_offset: int | None = None) -> ControllerResult[BrokerRegistrationReply]:
        """BrokerRegistration; the new epoch is ``next_offset`` (default: after the last applied
        offset)."""
        return self._brokers.register_broker(req, now_ms=now_ms, next_offset=next_offset)

    def broker_heartbeat(self, req: BrokerHeartbeatRequest, *, now_ms: int
                         ) -> ControllerResult[BrokerHeartbeatReply]:
        """BrokerHeartbeat: session, unfencing, fencing on request, controlled shutdown."""
        return self._brokers.broker_heartbeat(req, now_ms=now_ms)

    def fence_stale_brokers(self, now_ms: int) -> ControllerResult[list[int]]:
        """Fence the unfenced broker whose session expired longest ago (``[]`` if none)."""
        return self._brokers.fence_stale_brokers(now_ms)

    def unregister_broker(self, broker_id: int) -> ControllerResult[BrokerRegistrationReply]:
        """UnregisterBroker: leaderships and ISR memberships go, then the registration."""
        return self._brokers.unregister_broker(broker_id)

    # -- cluster links and mirror topics (ClusterLinkControlManager) ------------------------------

    def create_cluster_link(self, name: str, source_cluster_id: str, configs: Mapping[str, str],
                            *, validate_only: bool = False) -> ControllerResult[ClusterLinkResult]:
        """A new cluster link to the source cluster ``configs`` point at."""
        return self.link_control.create_cluster_link(name, source_cluster_id, configs,
                                                     validate_only=validate_only)

    def alter_cluster_link_configs(self, name: str, configs: Mapping[str, str], *,
                                   validate_only: bool = False) -> ControllerResult[ClusterLinkResult]:
        """Replace a link's configs."""
        return self.link_control.alter_cluster_link_configs(name, configs,
                                                            validate_only=validate_only)

    def delete_cluster_link(self, name: str, *, force: bool = False
                            ) -> ControllerResult[ClusterLinkResult]:
        """Delete a link (``force``: stopping its running mirrors first)."""
        return self.link_control.delete_cluster_link(name, force=force)

    def create_mirror_topics(self, specs: Sequence[MirrorTopicSpec], *, validate_only: bool = False
                             ) -> ControllerResult[list[MirrorTopicResult]]:
        """Create or restore mirror topics; one result per distinct name, in request order."""
        return self.link_control.create_mirror_topics(specs, validate_only=validate_only)

    def pause_mirrors(self, names: Sequence[str]) -> ControllerResult[list[MirrorTopicResult]]:
        """ACTIVE -> PAUSED."""
        return self.link_control.pause_mirrors(names)

    def resume_mirrors(self, names: Sequence[str]) -> ControllerResult[list[MirrorTopicResult]]:
        """PAUSED -> ACTIVE."""
        return self.link_control.resume_mirrors(names)

    def stop_mirrors(self, names: Sequence[str]) -> ControllerResult[list[MirrorTopicResult]]:
        """ACTIVE or PAUSED -> STOPPED: writable, leader epochs above the mirror's ceiling."""
        return self.link_control.stop_mirrors(names)

    # -- producer ids (ProducerIdControlManager) ---------------------------------------------------

    def allocate_producer_ids(self, broker_id: int, broker_epoch: int
                              ) -> ControllerResult[ProducerIdsBlock]:
        """AllocateProducerIds: the next block of 1000 ids (Kafka's block size)."""
        return self.producer_id_control.allocate_producer_ids(broker_id, broker_epoch)

    # -- ACLs (AclControlManager) ------------------------------------------------------------------

    def create_acls(self, acls: Sequence[AclBinding]) -> ControllerResult[list[AclCreateResult]]:
        """CreateAcls: one result per ACL; existing ACLs are kept and reported created."""
        return self.acl_control.create_acls(acls)

    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> ControllerResult[list[AclDeleteResult]]:
        """DeleteAcls: per filter, the ACLs it matched (each deleted once)."""
        return self.acl_control.delete_acls(filters)

    # -- SCRAM credentials (ScramControlManager) -----------------------------------------------

    def alter_user_scram_credentials(self, deletions: Sequence[ScramDeletion],
                                     upsertions: Sequence[ScramUpsertion]
                                     ) -> ControllerResult[list[ScramAlterResult]]:
        """AlterUserScramCredentials: a result per user named."""
        return self.scram_control.alter_credentials(deletions, upsertions)


__all__ = [
    "CLUSTER_METADATA_TOPIC", "DEFAULT_BROKER_SESSION_TIMEOUT_MS",
    "LATEST_PRODUCTION_METADATA_VERSION", "METADATA_VERSION_3_9_IV0",
    "MINIMUM_KRAFT_METADATA_VERSION", "PRODUCER_ID_BLOCK_SIZE", "QuorumController",
    "bootstrap_records", "topic_name_error", "unify_collision_chars", "uuid_from_kafka_str",
    "uuid_to_kafka_str",
]
