"""The quorum controller: admin and broker-lifecycle requests in, metadata records out.

Every operation reads the latest image and returns a ``ControllerResult(records, response)``;
it never changes the controller's state itself. State changes only in ``replay``, which the node
calls for each committed record, so the active controller and its followers run the same code
and end up with the same image. (Kafka's controller also applies its own uncommitted writes
to speculative state; we keep it simpler: a caller must let one operation's records commit and
replay before it starts the next. With the single-voter ``LocalQuorum`` that is immediate.)

Soft state that is not in the log — broker heartbeat sessions — lives here as plain fields and
is driven by ``now_ms`` arguments; a newly active controller starts every session afresh.

Validation follows Apache Kafka 3.9's ``ReplicationControlManager``, ``ControllerApis``,
``ConfigurationControlManager``, ``ClusterControlManager`` and ``ProducerIdControlManager``:
same error codes, messages worded as Kafka words them.
"""

from __future__ import annotations

import base64
import re
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence

from kafkapy import config as kconfig
from kafkapy.controller.config_validation import check_broker_configs, check_tiered_topic_configs, list_op_error
from kafkapy.controller import reassignment
from kafkapy.controller.placement import RandomSource, StripedReplicaPlacer, UsableBroker
from kafkapy.controller.types import (
    AlterConfigsResource,
    AlterConfigsResult,
    AlterPartitionPartition,
    AlterPartitionPartitionResult,
    AlterPartitionReply,
    AlterPartitionTopic,
    AlterPartitionTopicResult,
    BrokerHeartbeatReply,
    BrokerHeartbeatRequest,
    BrokerRegistrationReply,
    BrokerRegistrationRequest,
    ControllerResult,
    CreatePartitionsResult,
    CreatePartitionsTopic,
    DeleteTopicResult,
    ElectionType,
    NewTopic,
    PartitionResult,
    OpType,
    ProducerIdsBlock,
    TopicConfigEntry,
    TopicDefaults,
    TopicResult,
)
from kafkapy.metadata.delta import MetadataDelta
from kafkapy.metadata.image import (
    METADATA_VERSION_FEATURE,
    NO_LEADER,
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    BrokerRegistration,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
)
from kafkapy.metadata.records import (
    ZERO_UUID,
    BrokerFeature,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FeatureLevelRecord,
    MetadataRecord,
    PartitionChangeRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnregisterBrokerRecord,
)
from kafkapy.protocol.errors import ErrorCode, KafkaError

# metadata.version 21 is IBP_3_9_IV0, Kafka 3.9's latest production level. At this level
# Kafka writes RegisterBrokerRecord v3, PartitionRecord v1 and PartitionChangeRecord v1 (both
# with directories, KIP-858).
METADATA_VERSION_3_9_IV0 = 21
LATEST_PRODUCTION_METADATA_VERSION = METADATA_VERSION_3_9_IV0
# IBP_3_7_IV2: from here brokers register their log directories (KIP-858).
METADATA_VERSION_3_7_IV2 = 17
# The oldest KRaft metadata.version (IBP_3_0_IV1): assumed for brokers that send no range.
MINIMUM_KRAFT_METADATA_VERSION = 1
REGISTER_BROKER_RECORD_VERSION = 3
PARTITION_RECORD_VERSION = 1
PARTITION_CHANGE_RECORD_VERSION = 1
UNCLEAN_ELECTION = "unclean.leader.election.enable"
# LeaderRecoveryState (KIP-704): RECOVERING after an unclean election, until the new leader
# tells the controller (AlterPartition) that it leads normally.
LEADER_RECOVERED = 0
LEADER_RECOVERING = 1
# Kafka writes (un)fencing BrokerRegistrationChangeRecords as version 0 and the controlled
# shutdown one as version 1.
FENCING_CHANGE_RECORD_VERSION = 0
CONTROLLED_SHUTDOWN_RECORD_VERSION = 1
# ... and the one dropping offline log dirs (LogDirs, KIP-858) as version 2.
OFFLINE_DIRS_CHANGE_RECORD_VERSION = 2

PRODUCER_ID_BLOCK_SIZE = 1000
# Kafka's QuorumController.MAX_RECORDS_PER_USER_OP: an operation needing more records fails
# as a whole with POLICY_VIOLATION.
MAX_RECORDS_PER_USER_OP = 10000
_TOO_LARGE_MESSAGE = "Unable to perform excessively large batch operation."
MAX_TOPIC_NAME_LENGTH = 249
CLUSTER_METADATA_TOPIC = "__cluster_metadata"
DEFAULT_BROKER_SESSION_TIMEOUT_MS = 9000
LONG_MAX = (1 << 63) - 1

# Kafka's DirectoryId constants (KIP-858): reserved ids with the high 64 bits zero.
DIRECTORY_MIGRATING = uuid.UUID(int=0)
DIRECTORY_UNASSIGNED = uuid.UUID(int=1)
DIRECTORY_LOST = uuid.UUID(int=2)
# Uuid.METADATA_TOPIC_ID (== Uuid.ONE_UUID): never handed out as a topic id.
METADATA_TOPIC_ID = uuid.UUID(int=1)

# ConfigResource.Type names by id, for error messages.
_RESOURCE_TYPE_NAMES = {0: "UNKNOWN", 2: "TOPIC", 4: "BROKER", 8: "BROKER_LOGGER",
                        16: "CLIENT_METRICS", 32: "GROUP"}

_LEGAL_TOPIC_CHARS = re.compile(r"[a-zA-Z0-9._-]+")


# --------------------------------------------------------------------------------------------
# Helpers shared with the broker (topic names, Kafka's UUID text form)

def topic_name_error(name: str) -> str | None:
    """Why ``name`` is not a legal topic name (Kafka's ``Topic.validate`` wording), or None."""
    if not name:
        reason = "the empty string is not allowed"
    elif name == ".":
        reason = "'.' is not allowed"
    elif name == "..":
        reason = "'..' is not allowed"
    elif len(name) > MAX_TOPIC_NAME_LENGTH:
        reason = (f"the length of '{name}' is longer than the max allowed length "
                  f"{MAX_TOPIC_NAME_LENGTH}")
    elif not _LEGAL_TOPIC_CHARS.fullmatch(name):
        reason = (f"'{name}' contains one or more characters other than ASCII alphanumerics, "
                  "'.', '_' and '-'")
    else:
        return None
    return "Topic name is invalid: " + reason


def unify_collision_chars(name: str) -> str:
    """'.' and '_' collide in metric names, so Kafka treats them as the same character."""
    return name.replace(".", "_")


def uuid_to_kafka_str(u: uuid.UUID) -> str:
    """Kafka's text form of a Uuid: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(u.bytes).decode("ascii").rstrip("=")


def uuid_from_kafka_str(s: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(s + "=" * (-len(s) % 4)))


def _is_reserved_directory(d: uuid.UUID) -> bool:
    return d.int >> 64 == 0 and (d.int & ((1 << 64) - 1)) < 100


def bootstrap_records(metadata_version: int = LATEST_PRODUCTION_METADATA_VERSION
                      ) -> list[MetadataRecord]:
    """The first records of a fresh cluster's metadata log (what ``kafka-storage format``
    bootstraps): the finalized metadata.version. Kafka 3.9 finalizes no other feature at a
    non-zero level by default."""
    return [FeatureLevelRecord(METADATA_VERSION_FEATURE, metadata_version)]


class _BatchTooLarge(Exception):
    """The operation would need more than MAX_RECORDS_PER_USER_OP records."""


def _check_budget(used: int, more: int) -> None:
    if used + more > MAX_RECORDS_PER_USER_OP:
        raise _BatchTooLarge()


_OP_TYPES = frozenset(OpType)


def _error(code: ErrorCode, message: str | None = None) -> KafkaError:
    return KafkaError(code, message)


def _code_message(e: KafkaError) -> tuple[int, str | None]:
    return int(e.code), e.message


def _elect(current: int, replicas: Sequence[int], isr: Sequence[int],
           acceptable: Callable[[int], bool], *, unclean: bool, preferred: bool
           ) -> tuple[int, bool]:
    """(leader, whether the election was unclean), as Kafka's PartitionChangeBuilder elects
    without ELR: the preferred replica first when asked, then the current leader if it may
    stay, then the first acceptable ISR member in replica order, then, if ``unclean``, the
    first acceptable replica at all."""
    def valid(r: int) -> bool:
        return r in isr and acceptable(r)

    if preferred and replicas and valid(replicas[0]):
        return replicas[0], False
    if current != NO_LEADER and valid(current):
        return current, False
    for r in replicas:
        if valid(r):
            return r, False
    if unclean:
        for r in replicas:
            if acceptable(r):
                return r, True
    return NO_LEADER, False


def _completed_reassignment(p: PartitionRegistration, isr: Sequence[int]
                            ) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """(replicas, ISR) after the reassignment in progress on ``p`` completes, if ``isr`` lets
    it: every replica that stays is in sync (Kafka's maybeCompleteReassignment)."""
    return reassignment.completed(_reassignment_of(p), isr)


def _reassignment_of(p: PartitionRegistration) -> reassignment.ReassignmentReplicas:
    return reassignment.ReassignmentReplicas(p.replicas, p.adding_replicas, p.removing_replicas)


# --------------------------------------------------------------------------------------------

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
        defaults: TopicDefaults = TopicDefaults(),
        broker_topic_configs: Mapping[str, str] | None = None,
        session_timeout_ms: int = DEFAULT_BROKER_SESSION_TIMEOUT_MS,
        delete_topic_enable: bool = True,
        place_on_fenced_brokers: bool = False,
        controller_ids: Iterable[int] = (),
        leader_imbalance_percentage: int = 10,
        remote_storage_system_enable: bool = False,
    ) -> None:
        """``broker_topic_configs``: topic config keys the node's static config sets (by topic
        name, e.g. ``retention.ms``), reported as STATIC_BROKER_CONFIG in CreateTopics results.
        ``place_on_fenced_brokers``: Kafka's placer may put fenced brokers in follower slots and
        counts them toward the replication factor; by default we place on unfenced brokers only,
        so a factor above the unfenced broker count fails with INVALID_REPLICATION_FACTOR.
        ``remote_storage_system_enable``: the node's ``remote.log.storage.system.enable``; without
        it topics may not set ``remote.storage.enable=true`` (Kafka's LogConfig.validate).
        """
        self.cluster_id = cluster_id
        self._uuid_source = uuid_source
        self._placer = StripedReplicaPlacer(rng)
        self._image = image if image is not None else MetadataImage.empty(cluster_id)
        self.defaults = defaults
        self._broker_topic_configs = dict(broker_topic_configs or {})
        self.remote_storage_system_enable = remote_storage_system_enable
        self.session_timeout_ms = session_timeout_ms
        self.delete_topic_enable = delete_topic_enable
        self.place_on_fenced_brokers = place_on_fenced_brokers
        # Controller node ids: BROKER config resources may name them even when unregistered.
        self.controller_ids = frozenset(controller_ids)
        self.leader_imbalance_percentage = leader_imbalance_percentage
        # Replay-derived: offset of each broker's latest RegisterBrokerRecord, used to decide
        # when a broker has caught up (its metadata offset reached its own registration).
        self._registration_offsets: dict[int, int] = {}
        # Soft state: last heartbeat (or registration) time of each broker.
        self._last_contact_ms: dict[int, int] = {}

    # -- state -----------------------------------------------------------------------------------

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

    def replay(self, record: MetadataRecord, offset: int) -> None:
        """Apply one committed record (a batch of one: see ``replay_batch``)."""
        self.replay_batch(((record, offset),))

    def replay_batch(self, records_with_offsets: Iterable[tuple[MetadataRecord, int]]) -> None:
        """Apply one committed batch and publish the resulting image.

        One apply per batch, not per record: applying copies the changed parts of the image, so
        a CreateTopics of 10,000 partitions applied record by record would copy its topic 10,000
        times. A batch that fails to replay publishes nothing: the image stays whole.
        """
        delta = MetadataDelta(self._image)
        registrations: dict[int, int] = {}
        for record, offset in records_with_offsets:
            delta.replay(record, offset)
            if isinstance(record, RegisterBrokerRecord):
                registrations[record.broker_id] = offset
        if delta.offset == self._image.offset:
            return  # an empty batch: nothing to publish
        image = delta.apply()
        # Offsets first: a reader between the two pairs the old image with a newer registration
        # offset, which can only make a broker look less caught up (never unfenced early).
        self._registration_offsets.update(registrations)
        self._image = image

    def load_snapshot(self, image: MetadataImage) -> None:
        """Start over from a snapshot's image (a standby that fell behind, or a restart).

        Kafka replays a snapshot's records at its last offset, so every broker registration it
        holds counts as made there; soft state (heartbeat times) starts afresh, giving each
        broker a full session, as after a failover.
        """
        self._image = image
        self._registration_offsets = {broker_id: image.offset for broker_id in image.brokers}
        self.reset_sessions()

    def reset_sessions(self) -> None:
        """Forget heartbeat times (soft state): a newly active controller gives every broker a
        full session before fencing it, as Kafka's does after a failover."""
        self._last_contact_ms.clear()

    def bootstrap(self, metadata_version: int = LATEST_PRODUCTION_METADATA_VERSION
                  ) -> ControllerResult[None]:
        """Records to write when the metadata log is empty (none otherwise)."""
        if self.image.metadata_version != 0:
            return ControllerResult((), None)
        return ControllerResult(tuple(bootstrap_records(metadata_version)), None)

    # -- topics ----------------------------------------------------------------------------------

    def _new_topic_id(self, taken: set[uuid.UUID]) -> uuid.UUID:
        while True:
            u = self._uuid_source()
            # As Kafka's Uuid.randomUuid: never a reserved id, never one whose text starts
            # with '-' (it would read as a command-line flag).
            if u in (ZERO_UUID, METADATA_TOPIC_ID) or uuid_to_kafka_str(u).startswith("-"):
                continue
            if u in taken or u in self.image.topics.by_id:
                continue
            return u

    def _usable_brokers(self) -> list[UsableBroker]:
        out = []
        for b in self.image.brokers.values():
            if b.in_controlled_shutdown:
                continue
            if b.fenced and not self.place_on_fenced_brokers:
                continue
            out.append(UsableBroker(b.id, b.rack, b.fenced))
        return out

    def _default_dir(self, broker_id: int) -> uuid.UUID:
        """The log directory a new replica on ``broker_id`` goes to (Kafka's defaultDir)."""
        reg = self.image.brokers.get(broker_id)
        if reg is None:
            return DIRECTORY_UNASSIGNED
        if not reg.log_dirs:
            return DIRECTORY_MIGRATING
        if len(reg.log_dirs) == 1:
            return reg.log_dirs[0]
        return DIRECTORY_UNASSIGNED

    def _new_partition(self, replicas: Sequence[int], isr: Sequence[int]) -> PartitionRegistration:
        return PartitionRegistration(
            replicas=tuple(replicas), isr=tuple(isr), leader=isr[0], leader_epoch=0,
            partition_epoch=0, directories=tuple(self._default_dir(r) for r in replicas))

    def _validate_manual_assignment(self, replicas: Sequence[int],
                                    replication_factor: int | None) -> None:
        if not replicas:
            raise _error(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                         "The manual partition assignment includes an empty replica list.")
        prev = None
        for broker_id in sorted(replicas):
            if broker_id not in self.image.brokers:
                raise _error(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                             f"The manual partition assignment includes broker {broker_id}, "
                             "but no such broker is registered.")
            if broker_id == prev:
                raise _error(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                             f"The manual partition assignment includes the broker {prev} "
                             "more than once.")
            prev = broker_id
        if replication_factor is not None and len(replicas) != replication_factor:
            raise _error(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                         f"The manual partition assignment includes a partition with "
                         f"{len(replicas)} replica(s), but this is not consistent with previous "
                         f"partitions, which have {replication_factor} replica(s).")

    def _place(self, num_partitions: int, replication_factor: int) -> list[list[int]]:
        try:
            return self._placer.place(self._usable_brokers(), num_partitions, replication_factor)
        except KafkaError as e:
            _, msg = _code_message(e)
            raise _error(ErrorCode.INVALID_REPLICATION_FACTOR,
                         f"Unable to replicate the partition {replication_factor} time(s): {msg}"
                         ) from None

    def _partitions_for_new_topic(self, topic: NewTopic, defaults: TopicDefaults
                                  ) -> dict[int, PartitionRegistration]:
        """Replica sets of a new topic, or KafkaError with Kafka's code and message."""
        parts: dict[int, PartitionRegistration] = {}
        if topic.assignments:
            if topic.replication_factor != -1:
                raise _error(ErrorCode.INVALID_REQUEST,
                             "A manual partition assignment was specified, but replication "
                             "factor was not set to -1.")
            if topic.num_partitions != -1:
                raise _error(ErrorCode.INVALID_REQUEST,
                             "A manual partition assignment was specified, but numPartitions "
                             "was not set to -1.")
            rf: int | None = None
            for index, replicas in topic.assignments.items():
                self._validate_manual_assignment(replicas, rf)
                rf = len(replicas)
                isr = [r for r in replicas if self.image.cluster.is_active(r)]
                if not isr:
                    raise _error(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                                 "All brokers specified in the manual partition assignment for "
                                 f"partition {index} are fenced or in controlled shutdown.")
                parts[index] = self._new_partition(replicas, isr)
            for i in range(len(parts)):
                if i not in parts:
                    raise _error(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                                 "partitions should be a consecutive 0-based integer sequence")
            return parts
        if topic.replication_factor < -1 or topic.replication_factor == 0:
            raise _error(ErrorCode.INVALID_REPLICATION_FACTOR,
                         "Replication factor must be larger than 0, or -1 to use the default "
                         "value.")
        if topic.num_partitions < -1 or topic.num_partitions == 0:
            raise _error(ErrorCode.INVALID_PARTITIONS,
                         "Number of partitions was set to an invalid non-positive value.")
        num_partitions = defaults.num_partitions if topic.num_partitions == -1 else topic.num_partitions
        rf = defaults.replication_factor if topic.replication_factor == -1 else topic.replication_factor
        for index, replicas in enumerate(self._place(num_partitions, rf)):
            isr = [r for r in replicas if self.image.cluster.is_active(r)]
            if not isr:
                raise _error(ErrorCode.INVALID_REPLICATION_FACTOR,
                             f"Unable to replicate the partition {rf} time(s): All brokers "
                             "are currently fenced or in controlled shutdown.")
            parts[index] = self._new_partition(replicas, isr)
        return parts

    def effective_topic_configs(self, overrides: Mapping[str, str]) -> tuple[TopicConfigEntry, ...]:
        """Every topic config with its value and source, sorted by name (CreateTopics v5+)."""
        # The cluster default counts; this controller's own per-broker entry is not known here
        # (Kafka would use it), so a per-broker override shows up only in DescribeConfigs.
        cluster_default = self.image.configs.get(RESOURCE_BROKER, "")
        entries = []
        for name in sorted(kconfig.TOPIC_CONFIGS):
            cdef = kconfig.TOPIC_CONFIGS[name]
            value, source = kconfig.resolve_topic_config(name, overrides, {}, cluster_default, {})
            if source == kconfig.ConfigSource.DEFAULT_CONFIG and name in self._broker_topic_configs:
                value, source = self._broker_topic_configs[name], kconfig.ConfigSource.STATIC_BROKER_CONFIG
            entries.append(TopicConfigEntry(
                name=name, value=None if cdef.sensitive else value, read_only=False,
                source=int(source), is_sensitive=cdef.sensitive))
        return tuple(entries)

    def create_topics(
        self,
        topics: Sequence[NewTopic],
        *,
        validate_only: bool = False,
        defaults: TopicDefaults | None = None,
    ) -> ControllerResult[list[TopicResult]]:
        """CreateTopics. One result per distinct name, in request order."""
        defaults = defaults or self.defaults
        image = self.image
        errors: dict[str, tuple[int, str | None]] = {}
        # ControllerApis: duplicates and the metadata topic are refused before anything else.
        seen: dict[str, int] = {}
        for t in topics:
            seen[t.name] = seen.get(t.name, 0) + 1
        for name, count in seen.items():
            if count > 1:
                errors[name] = (ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
            elif name == CLUSTER_METADATA_TOPIC:
                errors[name] = (ErrorCode.INVALID_REQUEST,
                                f"Creation of internal topic {CLUSTER_METADATA_TOPIC} is prohibited.")
        unique = []
        done: set[str] = set()
        for t in topics:
            if t.name not in done:
                done.add(t.name)
                unique.append(t)
        # Names: legal, and not colliding ('.' vs '_') with an existing topic.
        colliding: dict[str, str] = {}
        for name in image.topics.by_name:
            colliding.setdefault(unify_collision_chars(name), name)
        for t in unique:
            if t.name in errors:
                continue
            problem = topic_name_error(t.name)
            if problem is not None:
                errors[t.name] = (ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
            other = colliding.get(unify_collision_chars(t.name))
            if ("." in t.name or "_" in t.name) and other is not None:
                errors[t.name] = (ErrorCode.INVALID_TOPIC_EXCEPTION,
                                  f"Topic '{t.name}' collides with existing topic: {other}")
        for t in unique:
            if t.name in image.topics.by_name and seen[t.name] == 1:
                errors[t.name] = (ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.")
        for t in unique:
            if t.name in errors:
                continue
            nulls = [k for k, v in t.configs.items() if v is None]
            if nulls:
                errors[t.name] = (ErrorCode.INVALID_CONFIG,
                                  "Null value not supported for topic configs: " + ",".join(nulls))

        records: list[MetadataRecord] = []
        successes: dict[str, TopicResult] = {}
        taken_ids: set[uuid.UUID] = set()
        for t in unique:
            if t.name in errors:
                continue
            try:
                configs = {k: v for k, v in t.configs.items() if v is not None}
                kconfig.validate_topic_configs(configs)
                check_tiered_topic_configs(configs, None, system_enabled=self.remote_storage_system_enable,
                                           inherited=self._broker_topic_configs)
                count = len(t.assignments) if t.assignments else (
                    defaults.num_partitions if t.num_partitions == -1 else t.num_partitions)
                _check_budget(len(records), 1 + len(configs) + max(count, 0))
                parts = self._partitions_for_new_topic(t, defaults)
            except KafkaError as e:
                errors[t.name] = _code_message(e)
                continue
            except _BatchTooLarge:
                return ControllerResult((), [
                    TopicResult(u.name, *errors[u.name]) if u.name in errors
                    and errors[u.name][0] == ErrorCode.INVALID_REQUEST
                    else TopicResult(u.name, ErrorCode.POLICY_VIOLATION, _TOO_LARGE_MESSAGE)
                    for u in unique])
            topic_id = self._new_topic_id(taken_ids)
            taken_ids.add(topic_id)
            successes[t.name] = TopicResult(
                name=t.name, topic_id=topic_id, num_partitions=len(parts),
                replication_factor=len(next(iter(parts.values())).replicas),
                configs=self.effective_topic_configs(configs))
            # Kafka's order: the topic, its configs, then its partitions.
            records.append(TopicRecord(t.name, topic_id))
            records.extend(ConfigRecord(RESOURCE_TOPIC, t.name, k, v) for k, v in configs.items())
            records.extend(p.to_record(topic_id, i, PARTITION_RECORD_VERSION)
                           for i, p in sorted(parts.items()))

        results = []
        for t in unique:
            if t.name in errors:
                code, msg = errors[t.name]
                results.append(TopicResult(t.name, int(code), msg))
            else:
                results.append(successes[t.name])
        return ControllerResult(() if validate_only else tuple(records), results)

    def delete_topics(self, topics: Sequence[str | uuid.UUID]) -> ControllerResult[list[DeleteTopicResult]]:
        """DeleteTopics by name (str) or by id (UUID); one result per distinct entry."""
        image = self.image
        results: list[DeleteTopicResult] = []
        records: list[MetadataRecord] = []
        counts: dict[str | uuid.UUID, int] = {}
        for t in topics:
            counts[t] = counts.get(t, 0) + 1
        for t, count in counts.items():
            by_name = isinstance(t, str)
            name = t if by_name else None
            tid = ZERO_UUID if by_name else t
            if count > 1:
                results.append(DeleteTopicResult(name, tid, ErrorCode.INVALID_REQUEST,
                                                 "Duplicate topic name." if by_name else "Duplicate topic id."))
                continue
            if by_name:
                topic = image.topics.by_name.get(t)
                if topic is None:
                    results.append(DeleteTopicResult(name, tid, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                     "This server does not host this topic-partition."))
                    continue
            else:
                if t == ZERO_UUID:
                    results.append(DeleteTopicResult(None, tid, ErrorCode.INVALID_REQUEST,
                                                     "Neither topic name nor id were specified."))
                    continue
                topic = image.topics.by_id.get(t)
                if topic is None:
                    results.append(DeleteTopicResult(None, tid, ErrorCode.UNKNOWN_TOPIC_ID,
                                                     "This server does not host this topic ID."))
                    continue
            if not self.delete_topic_enable:
                results.append(DeleteTopicResult(topic.name, topic.id, ErrorCode.TOPIC_DELETION_DISABLED,
                                                 "Topic deletion is disabled."))
                continue
            records.append(RemoveTopicRecord(topic.id))
            results.append(DeleteTopicResult(topic.name, topic.id))
        return ControllerResult(tuple(records), results)

    def create_partitions(self, topics: Sequence[CreatePartitionsTopic], *,
                          validate_only: bool = False) -> ControllerResult[list[CreatePartitionsResult]]:
        """CreatePartitions: grow topics; one result per distinct name, in request order."""
        counts: dict[str, int] = {}
        for t in topics:
            counts[t.name] = counts.get(t.name, 0) + 1
        results: list[CreatePartitionsResult] = []
        records: list[MetadataRecord] = []
        done: set[str] = set()
        for t in topics:
            if t.name in done:
                continue
            done.add(t.name)
            if counts[t.name] > 1:
                results.append(CreatePartitionsResult(t.name, ErrorCode.INVALID_REQUEST,
                                                      "Duplicate topic name."))
                continue
            try:
                if t.count - self._current_partition_count(t.name) > 0:
                    _check_budget(len(records), t.count - self._current_partition_count(t.name))
                records.extend(self._create_partitions_for(t))
            except KafkaError as e:
                code, msg = _code_message(e)
                results.append(CreatePartitionsResult(t.name, code, msg))
                continue
            except _BatchTooLarge:
                return ControllerResult((), [
                    CreatePartitionsResult(name, ErrorCode.POLICY_VIOLATION, _TOO_LARGE_MESSAGE)
                    for name in dict.fromkeys(x.name for x in topics)])
            results.append(CreatePartitionsResult(t.name))
        return ControllerResult(() if validate_only else tuple(records), results)

    def _current_partition_count(self, name: str) -> int:
        topic = self.image.topics.by_name.get(name)
        return topic.num_partitions if topic is not None else 0

    def _create_partitions_for(self, t: CreatePartitionsTopic) -> list[MetadataRecord]:
        topic = self.image.topics.by_name.get(t.name)
        if topic is None:
            raise _error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                         "This server does not host this topic-partition.")
        current = topic.num_partitions
        if t.count == current:
            raise _error(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
        if t.count < current:
            raise _error(ErrorCode.INVALID_PARTITIONS,
                         f"The topic {t.name} currently has {current} partition(s); {t.count} "
                         "would not be an increase.")
        additional = t.count - current
        if t.assignments is not None and len(t.assignments) != additional:
            raise _error(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                         f"Attempted to add {additional} additional partition(s), but only "
                         f"{len(t.assignments)} assignment(s) were specified.")
        rf = topic.replication_factor
        assignments: list[list[int]]
        if t.assignments is not None:
            assignments = []
            for i, replicas in enumerate(t.assignments):
                self._validate_manual_assignment(replicas, rf)
                if not any(self.image.cluster.is_active(r) for r in replicas):
                    raise _error(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                                 "All brokers specified in the manual partition assignment for "
                                 f"partition {current + i} are fenced or in controlled shutdown.")
                assignments.append(list(replicas))
        else:
            assignments = self._place(additional, rf)
        records: list[MetadataRecord] = []
        for i, replicas in enumerate(assignments):
            isr = [r for r in replicas if self.image.cluster.is_active(r)]
            if not isr:
                raise _error(ErrorCode.INVALID_REPLICATION_FACTOR,
                             f"Unable to replicate the partition {rf} time(s): All brokers are "
                             "currently fenced or in controlled shutdown.")
            records.append(self._new_partition(replicas, isr).to_record(
                topic.id, current + i, PARTITION_RECORD_VERSION))
        return records

    # -- configs ---------------------------------------------------------------------------------

    def incremental_alter_configs(self, resources: Sequence[AlterConfigsResource], *,
                                  validate_only: bool = False
                                  ) -> ControllerResult[list[AlterConfigsResult]]:
        """IncrementalAlterConfigs for topic and broker resources; one result per distinct
        resource, in request order. BROKER_LOGGER changes are not metadata: the broker handles
        them itself and must not pass them here."""
        counts: dict[tuple[int, str], int] = {}
        for res in resources:
            key = (res.resource_type, res.resource_name)
            counts[key] = counts.get(key, 0) + 1
        results: list[AlterConfigsResult] = []
        records: list[MetadataRecord] = []
        done: set[tuple[int, str]] = set()
        for res in resources:
            key = (res.resource_type, res.resource_name)
            if key in done:
                continue
            done.add(key)
            if counts[key] > 1:
                results.append(AlterConfigsResult(*key, ErrorCode.INVALID_REQUEST,
                                                  "Each resource must appear at most once."))
                continue
            try:
                records.extend(self._alter_resource(res))
            except KafkaError as e:
                code, msg = _code_message(e)
                results.append(AlterConfigsResult(*key, code, msg))
                continue
            results.append(AlterConfigsResult(*key))
        return ControllerResult(() if validate_only else tuple(records), results)

    def _alter_resource(self, res: AlterConfigsResource) -> list[ConfigRecord]:
        rtype, rname = res.resource_type, res.resource_name
        # Request-shape checks (Kafka's ConfigAdminManager, before the controller).
        if not isinstance(rname, str) or any(not isinstance(op.name, str) for op in res.ops):
            # Kafka's parser refuses these nulls; none may reach a ConfigRecord.
            raise _error(ErrorCode.INVALID_REQUEST, "Resource and config names must not be null")
        names = [op.name for op in res.ops]
        if len(set(names)) != len(names):
            raise _error(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
        nulls = [op.name for op in res.ops if op.op != OpType.DELETE and op.value is None]
        if nulls:
            raise _error(ErrorCode.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls))
        unknown = [op for op in res.ops if op.op not in _OP_TYPES]
        if unknown:
            raise _error(ErrorCode.INVALID_REQUEST,
                         f"Unknown config operation type {int(unknown[0].op)} for config {unknown[0].name}")
        # Resource name checks (Kafka's ControllerConfigurationValidator).
        if rtype == RESOURCE_TOPIC:
            if not rname:
                raise _error(ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed.")
            problem = topic_name_error(rname)
            if problem is not None:
                raise _error(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
            defs: Mapping[str, kconfig.ConfigDef] = kconfig.TOPIC_CONFIGS
        elif rtype == RESOURCE_BROKER:
            node_id = None
            if rname:
                try:
                    node_id = int(rname, 10)
                except ValueError:
                    raise _error(ErrorCode.INVALID_REQUEST,
                                 "Unable to parse broker name as a base 10 number.") from None
                if node_id < 0:
                    raise _error(ErrorCode.INVALID_REQUEST, "Invalid negative broker ID.")
            defs = kconfig.BROKER_CONFIGS
        else:
            raise _error(ErrorCode.INVALID_REQUEST,
                         f"Unknown resource type {_RESOURCE_TYPE_NAMES.get(rtype, rtype)}")
        current = dict(self.image.configs.get(rtype, rname))
        new = dict(current)
        records = []
        for op in res.ops:
            cdef = defs.get(op.name)
            old = current.get(op.name)
            if op.op == OpType.SET:
                value = op.value
            elif op.op == OpType.DELETE:
                value = None
            elif op.op in (OpType.APPEND, OpType.SUBTRACT):
                if cdef is None or cdef.type != kconfig.ConfigType.LIST:
                    raise _error(ErrorCode.INVALID_CONFIG, list_op_error(rtype, op.op.name, op.name))
                # Start from the current value, else the default (Kafka's getParts).
                base = old if old is not None else (cdef.default or "")
                parts = [p for p in base.split(",") if p]
                for item in (op.value or "").split(","):
                    if op.op == OpType.APPEND:
                        if item not in parts:
                            parts.append(item)
                    elif item in parts:
                        parts.remove(item)
                value = ",".join(parts)
            else:
                raise _error(ErrorCode.INVALID_REQUEST, f"Unknown config operation {op.op}.")
            if value is None:
                new.pop(op.name, None)
            else:
                new[op.name] = value
            # Broker configs always get a record, so brokers reload even an unchanged value
            # (KAFKA-14136); an unchanged topic config writes nothing.
            if value != old or rtype == RESOURCE_BROKER:
                records.append(ConfigRecord(rtype, rname, op.name, value))
        # Validate the resulting configs, then that the resource exists (Kafka's order).
        if rtype == RESOURCE_TOPIC:
            kconfig.validate_topic_configs(new)
            check_tiered_topic_configs(new, current, system_enabled=self.remote_storage_system_enable,
                                       inherited=self._broker_topic_configs)
            if rname not in self.image.topics.by_name:
                raise _error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"The topic '{rname}' does not exist.")
        else:
            check_broker_configs(new, per_broker=node_id is not None)
            if node_id is not None and node_id not in self.image.brokers \
                    and node_id not in self.controller_ids:
                raise _error(ErrorCode.BROKER_ID_NOT_REGISTERED, f"No node with id {node_id} found.")
        return records

    # -- brokers ---------------------------------------------------------------------------------

    def _has_valid_session(self, broker_id: int, now_ms: int) -> bool:
        last = self._last_contact_ms.get(broker_id)
        return last is not None and now_ms - last < self.session_timeout_ms

    def register_broker(self, req: BrokerRegistrationRequest, *, now_ms: int,
                        next_offset: int | None = None) -> ControllerResult[BrokerRegistrationReply]:
        """BrokerRegistration. The new broker epoch is the log offset where this result's first
        record will land (``next_offset``; by default the offset after the last applied one,
        right for a quorum that writes nothing but these records)."""
        try:
            records, epoch = self._register(req, now_ms, next_offset)
        except KafkaError as e:
            code, msg = _code_message(e)
            return ControllerResult((), BrokerRegistrationReply(code, msg))
        return ControllerResult(tuple(records), BrokerRegistrationReply(broker_epoch=epoch))

    def _register(self, req: BrokerRegistrationRequest, now_ms: int,
                  next_offset: int | None) -> tuple[list[MetadataRecord], int]:
        image = self.image
        if req.cluster_id != self.cluster_id:
            raise _error(ErrorCode.INCONSISTENT_CLUSTER_ID,
                         f"Expected cluster ID {self.cluster_id}, but got cluster ID {req.cluster_id}")
        existing = image.brokers.get(req.broker_id)
        if existing is not None and self._has_valid_session(req.broker_id, now_ms) \
                and existing.incarnation_id != req.incarnation_id:
            raise _error(ErrorCode.DUPLICATE_BROKER_REGISTRATION,
                         "Another broker is registered with that broker id.")
        if req.is_migrating_zk_broker:
            raise _error(ErrorCode.BROKER_ID_NOT_REGISTERED,
                         "Controller does not support registering ZK brokers.")
        mv = image.metadata_version
        if mv >= METADATA_VERSION_3_7_IV2:  # directory assignment (KIP-858) is on
            if not req.log_dirs:
                raise _error(ErrorCode.INVALID_REGISTRATION, "No directories specified in request")
            if any(_is_reserved_directory(d) for d in req.log_dirs):
                raise _error(ErrorCode.INVALID_REGISTRATION, "Reserved directory ID in request")
            if len(set(req.log_dirs)) != len(req.log_dirs):
                raise _error(ErrorCode.INVALID_REGISTRATION, "Duplicate directory ID in request")
            for other in image.brokers.values():
                if other.id == req.broker_id:
                    continue
                for d in req.log_dirs:
                    if d in other.log_dirs:
                        raise _error(ErrorCode.INVALID_REGISTRATION,
                                     f"Broker {other.id} is already registered with directory "
                                     f"{uuid_to_kafka_str(d)}")
        features = list(req.features)
        if not any(f.name == METADATA_VERSION_FEATURE for f in features):
            features.append(BrokerFeature(METADATA_VERSION_FEATURE, MINIMUM_KRAFT_METADATA_VERSION,
                                          MINIMUM_KRAFT_METADATA_VERSION))
        finalized = dict(image.features.levels)
        for f in features:
            level = finalized.get(f.name, 0)
            if not f.min_supported_version <= level <= f.max_supported_version and level != 0:
                raise _error(ErrorCode.UNSUPPORTED_VERSION,
                             f"Unable to register because the broker does not support finalized "
                             f"version {level} of {f.name}. The broker wants a version between "
                             f"{f.min_supported_version} and {f.max_supported_version}, inclusive.")
        named = {f.name for f in features}
        for name, level in finalized.items():
            if level != 0 and name not in named:
                raise _error(ErrorCode.UNSUPPORTED_VERSION,
                             f"Unable to register because the broker does not support finalized "
                             f"version {level} of {name}. The broker wants a version between 0 "
                             "and 0, inclusive.")
        records: list[MetadataRecord] = []
        first_offset = next_offset if next_offset is not None else self.last_applied_offset + 1
        if existing is not None and existing.incarnation_id == req.incarnation_id:
            # The same process registering again: keep its epoch and state.
            epoch, fenced, ics = existing.epoch, existing.fenced, existing.in_controlled_shutdown
        else:
            # A new incarnation starts fenced with a new epoch. Its partitions keep their
            # leader until it is unfenced or its old session is fenced: Kafka 3.9 only cleans up
            # after an unclean shutdown when ELR (metadata.version 4.0) is on.
            epoch, fenced, ics = first_offset, True, False
        records.append(RegisterBrokerRecord(
            broker_id=req.broker_id, incarnation_id=req.incarnation_id, broker_epoch=epoch,
            end_points=tuple(req.listeners), features=tuple(features), rack=req.rack,
            fenced=fenced, in_controlled_shutdown=ics, log_dirs=tuple(req.log_dirs),
            version=REGISTER_BROKER_RECORD_VERSION))
        self._last_contact_ms[req.broker_id] = now_ms
        return records, epoch

    # -- replication: elections and ISR changes ---------------------------------------------------
    #
    # Every partition change below goes through ``_partition_change``, our cut of Kafka's
    # PartitionChangeBuilder (without ELR, which Kafka 3.9 leaves off): fencing, controlled
    # shutdown, unfencing, ElectLeaders, unclean elections, leader balancing and AlterPartition
    # all elect leaders the same way, so they cannot drift apart.

    def _partition_change(self, topic_id: uuid.UUID, index: int, p: PartitionRegistration, *,
                          acceptable: Callable[[int], bool], target_isr: Sequence[int] | None = None,
                          unclean: bool = False, preferred: bool = False,
                          target_recovery: int | None = None,
                          target_replicas: reassignment.ReassignmentReplicas | None = None
                          ) -> PartitionChangeRecord | None:
        """The record that moves ``p`` to ``target_isr`` (default: its ISR) and
        ``target_replicas`` (default: its replicas, adding and removing lists) with a leader
        elected among ``acceptable`` brokers, or None when nothing would change.

        ``unclean`` allows an out-of-sync leader when no ISR member is acceptable; ``preferred``
        tries the first replica before keeping the current leader. An empty target ISR keeps
        the old one (the last member stays, leaderless), as Kafka does without ELR.
        """
        isr = tuple(p.isr if target_isr is None else target_isr)
        target = _reassignment_of(p) if target_replicas is None else target_replicas
        replicas, adding, removing = target
        completed = reassignment.completed(target, isr)
        if completed is not None:
            replicas, isr = completed
            removing = adding = ()
        leader, was_unclean = _elect(p.leader, replicas, isr, acceptable,
                                     unclean=unclean, preferred=preferred)
        new_leader = PartitionChangeRecord.LEADER_UNCHANGED
        new_isr: tuple[int, ...] | None = None
        recovery = -1
        if leader != p.leader:
            new_leader = leader
            if was_unclean:
                # The out-of-sync leader's log becomes the truth (whatever only the lost ISR
                # had is gone) and the ISR restarts from it, RECOVERING (KIP-704) until it
                # leads normally.
                new_isr = (leader,)
                if p.leader_recovery_state != LEADER_RECOVERING:
                    recovery = LEADER_RECOVERING
        elif replicas != p.replicas and not set(p.replicas) <= set(replicas):
            # A replica left the assignment: a new leader epoch fences it out.
            new_leader = p.leader
        if new_isr is None and isr and isr != p.isr:
            new_isr = isr
        if target_recovery is not None and target_recovery != p.leader_recovery_state:
            recovery = target_recovery
        directories = self._directories_for(p, replicas) if replicas != p.replicas else None
        if (new_leader == PartitionChangeRecord.LEADER_UNCHANGED and new_isr is None
                and recovery == -1 and replicas == p.replicas and removing == p.removing_replicas
                and adding == p.adding_replicas):
            return None
        return PartitionChangeRecord(
            partition_id=index, topic_id=topic_id, isr=new_isr, leader=new_leader,
            replicas=replicas if replicas != p.replicas else None,
            removing_replicas=removing if removing != p.removing_replicas else None,
            adding_replicas=adding if adding != p.adding_replicas else None,
            leader_recovery_state=recovery, directories=directories,
            version=PARTITION_CHANGE_RECORD_VERSION)

    def _directories_for(self, p: PartitionRegistration, replicas: Sequence[int]
                         ) -> tuple[uuid.UUID, ...] | None:
        """Log directories for a new replica list: each kept replica keeps its own."""
        if len(p.directories) != len(p.replicas):
            return None  # a metadata.version without directory assignment
        current = dict(zip(p.replicas, p.directories))
        return tuple(current.get(r, self._default_dir(r)) for r in replicas)

    def unclean_election_enabled(self, topic: str) -> bool:
        """``unclean.leader.election.enable`` for ``topic``: its own config, else the cluster
        default (a BROKER config with the empty name), else the brokers' static setting, else
        false."""
        value = self.image.configs.topic(topic).get(UNCLEAN_ELECTION)
        if value is None:
            value = self.image.configs.get(RESOURCE_BROKER, "").get(UNCLEAN_ELECTION)
        if value is None:
            value = self._broker_topic_configs.get(UNCLEAN_ELECTION, "false")
        return str(value).strip().lower() == "true"

    def _unclean_by_topic(self) -> Callable[[str], bool]:
        """``unclean_election_enabled``, looked up once per topic of one operation."""
        cache: dict[str, bool] = {}

        def enabled(topic: str) -> bool:
            if topic not in cache:
                cache[topic] = self.unclean_election_enabled(topic)
            return cache[topic]
        return enabled

    def _partitions(self) -> Iterable[tuple[TopicImage, int, PartitionRegistration]]:
        """Every partition, topics by name, partitions by index (a stable record order)."""
        for topic in sorted(self.image.topics.by_id.values(), key=lambda t: t.name):
            for index in sorted(topic.partitions):
                yield topic, index, topic.partitions[index]

    def _leadership_removal(self, broker_id: int) -> list[PartitionChangeRecord]:
        """Partition changes that take ``broker_id`` out of every ISR (never emptying one: the
        last member stays, leaderless unless the topic allows an unclean election) and elect
        other leaders where it led (Kafka's handleBrokerFenced / InControlledShutdown)."""
        cluster = self.image.cluster
        unclean = self._unclean_by_topic()

        def acceptable(r: int) -> bool:
            return r != broker_id and cluster.is_active(r)

        out = []
        for topic, index, p in self._partitions():
            if broker_id not in p.isr and p.leader != broker_id:
                continue
            change = self._partition_change(
                topic.id, index, p, acceptable=acceptable,
                target_isr=tuple(r for r in p.isr if r != broker_id), unclean=unclean(topic.name))
            if change is not None:
                out.append(change)
        return out

    def _leadership_gain(self, broker_id: int) -> list[PartitionChangeRecord]:
        """Leaders for leaderless partitions now that ``broker_id`` is unfenced (it still reads
        as fenced in the image while these records are made): an ISR member where one is
        acceptable, else, where the topic allows it, an out-of-sync replica (Kafka's
        handleBrokerUnfenced)."""
        cluster = self.image.cluster
        unclean = self._unclean_by_topic()

        def acceptable(r: int) -> bool:
            return r == broker_id or cluster.is_active(r)

        out = []
        for topic, index, p in self._partitions():
            if p.leader != NO_LEADER:
                continue
            change = self._partition_change(topic.id, index, p, acceptable=acceptable,
                                            unclean=unclean(topic.name))
            if change is not None:
                out.append(change)
        return out

    def elect_leaders(self, partitions: Sequence[tuple[str, int]] | None,
                      election_type: ElectionType) -> ControllerResult[list[PartitionResult]]:
        """ElectLeaders: move leadership to the preferred replica, or elect an unclean leader for
        leaderless partitions (whatever the topic's ``unclean.leader.election.enable``: the
        request asks for it). ``partitions`` None means all of them, and then (as Kafka does)
        only the partitions where something happened or failed are reported."""
        cluster = self.image.cluster
        every = partitions is None
        if every:
            partitions = [(t.name, i) for t, i, _ in self._partitions()]
        results: list[PartitionResult] = []
        records: list[MetadataRecord] = []
        for name, index in dict.fromkeys(partitions):
            topic = self.image.topics.by_name.get(name)
            p = topic.partitions.get(index) if topic is not None else None
            if p is None:
                results.append(PartitionResult(name, index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                               f"No such topic partition {name}-{index}"))
                continue
            preferred = election_type == ElectionType.PREFERRED
            if (bool(p.replicas) and p.leader == p.replicas[0]) if preferred else p.leader != NO_LEADER:
                if not every:
                    results.append(PartitionResult(name, index, ErrorCode.ELECTION_NOT_NEEDED,
                                                   "Leader election not needed for topic partition."))
                continue
            change = self._partition_change(topic.id, index, p, acceptable=cluster.is_active,
                                            preferred=preferred, unclean=not preferred)
            if change is not None:
                records.append(change)
                results.append(PartitionResult(name, index))
            elif preferred:
                results.append(PartitionResult(
                    name, index, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                    f"Failed to elect leader for {name}-{index}: the preferred replica is not available."))
            else:
                results.append(PartitionResult(
                    name, index, ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                    f"Failed to elect leader for {name}-{index}: no live replica."))
        return ControllerResult(tuple(records), results)

    def elect_unclean_leaders(self, max_elections: int = 1000) -> ControllerResult[int]:
        """Elections for leaderless partitions whose topic allows unclean ones (Kafka's
        maybeElectUncleanLeaders): a live ISR member if there is one, else a live out-of-sync
        replica. The node calls this periodically and after config changes, so turning
        ``unclean.leader.election.enable`` on takes effect without a broker event. The response
        is the number of partitions given a leader; at most ``max_elections`` per call."""
        cluster = self.image.cluster
        unclean = self._unclean_by_topic()
        records: list[MetadataRecord] = []
        for topic, index, p in self._partitions():
            if len(records) >= max_elections:
                break
            if p.leader != NO_LEADER or not unclean(topic.name):
                continue
            change = self._partition_change(topic.id, index, p, acceptable=cluster.is_active,
                                            unclean=True)
            if change is not None:
                records.append(change)
        return ControllerResult(tuple(records), len(records))

    def balance_leaders(self, max_elections: int = 1000) -> ControllerResult[int]:
        """Move leadership back to preferred replicas (``auto.leader.rebalance.enable``); the
        response is the number of partitions moved, at most ``max_elections`` per call.

        Kafka 3.9's KRaft controller elects the preferred replica of every imbalanced
        partition. We keep the ZooKeeper-era controller's rule instead, which honours
        ``leader.imbalance.per.broker.percentage``: only a broker whose share of partitions
        where it is preferred but does not lead exceeds that percentage gets its leaderships
        back, so a few stragglers after a restart don't each cost an election. A partition
        moves only where its preferred replica is in the ISR, unfenced and not shutting down.
        """
        cluster = self.image.cluster
        preferred_count: dict[int, int] = {}
        candidates: dict[int, list[tuple[TopicImage, int, PartitionRegistration]]] = {}
        for topic, index, p in self._partitions():
            if not p.replicas:
                continue
            preferred = p.replicas[0]
            preferred_count[preferred] = preferred_count.get(preferred, 0) + 1
            if p.leader != preferred:
                candidates.setdefault(preferred, []).append((topic, index, p))
        records: list[MetadataRecord] = []
        for broker, parts in sorted(candidates.items()):
            if len(parts) * 100 <= self.leader_imbalance_percentage * preferred_count[broker]:
                continue
            if not cluster.is_active(broker):
                continue
            for topic, index, p in parts:
                if len(records) >= max_elections:
                    return ControllerResult(tuple(records), len(records))
                if broker not in p.isr:
                    continue
                change = self._partition_change(topic.id, index, p, acceptable=cluster.is_active,
                                                preferred=True)
                if change is not None:
                    records.append(change)
        return ControllerResult(tuple(records), len(records))

    def alter_partition(self, broker_id: int, broker_epoch: int,
                        topics: Sequence[AlterPartitionTopic], *,
                        version: int) -> ControllerResult[AlterPartitionReply]:
        """AlterPartition (API 56, ``version`` 0-3): a partition leader's proposed ISRs.

        As Kafka's ReplicationControlManager.alterPartition: a sender that is unknown, fenced
        or at another broker epoch is refused as a whole (STALE_BROKER_EPOCH); otherwise each
        partition is checked on its own (``_alter_partition_error``) and an accepted one gets
        one PartitionChangeRecord, or none when nothing changes. Each result carries the
        partition's state after the change. An ISR that holds every target replica of a
        reassignment in progress completes it; if that moves the leadership, the sender is
        told NEW_LEADER_ELECTED (FENCED_LEADER_EPOCH before v2) although the record is written.
        """
        cluster = self.image.cluster
        reg = cluster.brokers.get(broker_id)
        refusal = None
        if reg is None:
            refusal = f"No broker registration found for broker id {broker_id}"
        elif reg.epoch != broker_epoch:
            refusal = f"Expected broker epoch {reg.epoch}, but got broker epoch {broker_epoch}"
        elif reg.fenced:
            refusal = f"Broker {broker_id} is fenced"
        if refusal is not None:
            return ControllerResult((), AlterPartitionReply(ErrorCode.STALE_BROKER_EPOCH,
                                                            error_message=refusal))
        unclean = self._unclean_by_topic()
        records: list[MetadataRecord] = []
        out_topics = []
        for t in topics:
            if version >= 2:
                topic = self.image.topics.by_id.get(t.topic_id) if t.topic_id is not None else None
            else:
                topic = self.image.topics.by_name.get(t.name or "")
            if topic is None:
                code = ErrorCode.UNKNOWN_TOPIC_ID if version >= 2 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                out_topics.append(AlterPartitionTopicResult(t.topic_id, t.name, tuple(
                    AlterPartitionPartitionResult(req.partition_index, code) for req in t.partitions)))
                continue
            results = []
            for req in t.partitions:
                p = topic.partitions.get(req.partition_index)
                code = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if p is None
                        else self._alter_partition_error(broker_id, p, req, version))
                if code != ErrorCode.NONE:
                    results.append(AlterPartitionPartitionResult(req.partition_index, code))
                    continue
                assert p is not None
                change = self._partition_change(
                    topic.id, req.partition_index, p, acceptable=cluster.is_active,
                    target_isr=req.new_isr, unclean=unclean(topic.name),
                    target_recovery=req.leader_recovery_state)
                if change is None:
                    after, previous = p, None
                else:
                    records.append(change)
                    after, previous = p.merge(change), p.isr
                    if change.leader not in (PartitionChangeRecord.LEADER_UNCHANGED, broker_id):
                        results.append(AlterPartitionPartitionResult(
                            req.partition_index, ErrorCode.NEW_LEADER_ELECTED if version >= 2
                            else ErrorCode.FENCED_LEADER_EPOCH, previous_isr=previous))
                        continue
                results.append(AlterPartitionPartitionResult(
                    req.partition_index, ErrorCode.NONE, after.leader, after.leader_epoch,
                    after.isr, after.leader_recovery_state, after.partition_epoch, previous))
            out_topics.append(AlterPartitionTopicResult(topic.id, topic.name, tuple(results)))
        return ControllerResult(tuple(records), AlterPartitionReply(ErrorCode.NONE, tuple(out_topics)))

    def _alter_partition_error(self, broker_id: int, p: PartitionRegistration,
                               req: AlterPartitionPartition, version: int) -> int:
        """Why a proposed ISR is refused, checked in Kafka's order, or NONE."""
        if req.leader_epoch > p.leader_epoch or req.partition_epoch > p.partition_epoch:
            # The leader has seen a newer state than ours: we are probably no longer the
            # active controller, so the leader should go and find the one that is.
            return ErrorCode.NOT_CONTROLLER
        if req.leader_epoch < p.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if broker_id != p.leader:
            return ErrorCode.INVALID_REQUEST
        if req.partition_epoch < p.partition_epoch:
            return ErrorCode.INVALID_UPDATE_VERSION
        new_isr = tuple(req.new_isr)
        if any(r < 0 or r not in p.replicas for r in new_isr) or len(set(new_isr)) != len(new_isr):
            return ErrorCode.INVALID_REQUEST
        if p.leader not in new_isr:
            return ErrorCode.INVALID_REQUEST
        # Kafka fails other values while parsing; a request error is the closest answer.
        if req.leader_recovery_state not in (LEADER_RECOVERED, LEADER_RECOVERING):
            return ErrorCode.INVALID_REQUEST
        if req.leader_recovery_state == LEADER_RECOVERING and len(new_isr) > 1:
            return ErrorCode.INVALID_REQUEST  # a recovering leader may not have followers in sync yet
        if p.leader_recovery_state == LEADER_RECOVERED and req.leader_recovery_state == LEADER_RECOVERING:
            return ErrorCode.INVALID_REQUEST
        epochs = dict(req.new_isr_epochs or ())
        for r in new_isr:
            reg = self.image.brokers.get(r)
            if (reg is None or reg.in_controlled_shutdown or reg.fenced
                    or epochs.get(r, -1) not in (-1, reg.epoch)):
                return ErrorCode.INELIGIBLE_REPLICA if version > 1 else ErrorCode.OPERATION_NOT_ATTEMPTED
        return ErrorCode.NONE

    def alter_partition_reassignments(
            self, targets: Sequence[tuple[str, int, Sequence[int] | None]]
    ) -> ControllerResult[list[PartitionResult]]:
        """AlterPartitionReassignments: give partitions new replica lists (None cancels).

        As Kafka's KRaft controller: a target grows the replica set to the target plus the
        current replicas it drops, marking which are being added and removed; the new replicas
        copy the log as followers, and the reassignment completes when every target replica is
        in the ISR (at once when nothing needs copying, e.g. a new order or a smaller set). A
        target while another is in progress replaces it, starting from the whole replica set
        as it now is. A cancel goes back to the replicas from before the reassignment.
        """
        results: list[PartitionResult] = []
        records: list[MetadataRecord] = []
        unclean = self._unclean_by_topic()
        # Several entries may name the same partition: each builds on the one before.
        staged: dict[tuple[str, int], PartitionRegistration] = {}
        for name, index, replicas in targets:
            topic = self.image.topics.by_name.get(name)
            p = staged.get((name, index)) or (topic.partitions.get(index) if topic is not None else None)
            try:
                if topic is None or p is None:
                    raise _error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {name}-{index}.")
                if replicas is None:
                    change = self._cancel_reassignment(topic.id, name, index, p, unclean(name))
                else:
                    self._validate_manual_assignment(replicas, None)
                    change = self._partition_change(
                        topic.id, index, p, acceptable=self.image.cluster.is_active,
                        target_replicas=reassignment.start(p.replicas, replicas))
                if change is not None:
                    records.append(change)
                    staged[(name, index)] = p.merge(change)
                results.append(PartitionResult(name, index))
            except KafkaError as e:
                code, msg = _code_message(e)
                results.append(PartitionResult(name, index, code, msg))
        return ControllerResult(tuple(records), results)

    def _cancel_reassignment(self, topic_id: uuid.UUID, name: str, index: int, p: PartitionRegistration,
                             unclean_allowed: bool) -> PartitionChangeRecord | None:
        if not _reassignment_of(p).in_progress:
            raise _error(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, f"No ongoing reassignment for {name}-{index}.")
        back = reassignment.revert(p.replicas, p.isr, p.adding_replicas)
        if back.unclean and not unclean_allowed:
            raise _error(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                         f"Unable to revert partition assignment for {name}-{index} because it "
                         "would require an unclean leader election.")
        return self._partition_change(
            topic_id, index, p, acceptable=self.image.cluster.is_active, target_isr=back.isr,
            unclean=back.unclean, target_replicas=reassignment.ReassignmentReplicas(back.replicas))

    def list_partition_reassignments(
            self, partitions: Sequence[tuple[str, int]] | None
    ) -> ControllerResult[list[tuple[str, int, PartitionRegistration]]]:
        """ListPartitionReassignments: (topic, partition, registration) of every reassignment
        in progress among ``partitions`` (None: all of them), sorted; unknown partitions are
        skipped, as Kafka does."""
        found: list[tuple[str, int, PartitionRegistration]] = []
        if partitions is None:
            for topic, index, p in self._partitions():
                if _reassignment_of(p).in_progress:
                    found.append((topic.name, index, p))
        else:
            for name, index in partitions:
                topic = self.image.topics.by_name.get(name)
                p = topic.partitions.get(index) if topic is not None else None
                if p is not None and _reassignment_of(p).in_progress:
                    found.append((name, index, p))
        found.sort(key=lambda e: (e[0], e[1]))
        return ControllerResult((), found)

    def _fence_records(self, broker_id: int, epoch: int) -> list[MetadataRecord]:
        # Kafka's order: leave the ISRs first, then mark the broker fenced.
        records: list[MetadataRecord] = list(self._leadership_removal(broker_id))
        records.append(BrokerRegistrationChangeRecord(
            broker_id=broker_id, broker_epoch=epoch, fenced=BrokerRegistrationChangeRecord.FENCE,
            version=FENCING_CHANGE_RECORD_VERSION))
        return records

    def broker_heartbeat(self, req: BrokerHeartbeatRequest, *, now_ms: int
                         ) -> ControllerResult[BrokerHeartbeatReply]:
        """BrokerHeartbeat: keeps the session alive, unfences a caught-up broker, fences on
        request, starts a controlled shutdown. The reply describes the state after the records."""
        reg = self.image.brokers.get(req.broker_id)
        if reg is None:
            return ControllerResult((), BrokerHeartbeatReply(
                ErrorCode.STALE_BROKER_EPOCH, f"No broker registration found for broker id {req.broker_id}"))
        if reg.epoch != req.broker_epoch:
            return ControllerResult((), BrokerHeartbeatReply(
                ErrorCode.STALE_BROKER_EPOCH,
                f"Expected broker epoch {reg.epoch}, but got broker epoch {req.broker_epoch}"))
        self._last_contact_ms[req.broker_id] = now_ms
        # Caught up = the broker has applied its own registration. A controller that started
        # from a snapshot has not seen that record; then the broker must reach our offset.
        reg_offset = self._registration_offsets.get(req.broker_id, self.image.offset)
        caught_up = req.current_metadata_offset >= reg_offset
        records: list[MetadataRecord] = []
        if req.offline_log_dirs:
            records.extend(self._directories_offline(reg, req.offline_log_dirs))
        fenced = reg.fenced
        should_shut_down = False
        if req.want_shut_down:
            if reg.fenced:
                should_shut_down = True
            elif not reg.in_controlled_shutdown:
                records.append(BrokerRegistrationChangeRecord(
                    broker_id=reg.id, broker_epoch=reg.epoch, in_controlled_shutdown=1,
                    version=CONTROLLED_SHUTDOWN_RECORD_VERSION))
                records.extend(self._leadership_removal(reg.id))
            else:
                should_shut_down = not any(
                    p.leader == reg.id for t in self.image.topics.by_id.values()
                    for p in t.partitions.values())
        elif reg.fenced:
            if caught_up and not req.want_fence:
                records.append(BrokerRegistrationChangeRecord(
                    broker_id=reg.id, broker_epoch=reg.epoch,
                    fenced=BrokerRegistrationChangeRecord.UNFENCE,
                    version=FENCING_CHANGE_RECORD_VERSION))
                records.extend(self._leadership_gain(reg.id))
                fenced = False
        elif req.want_fence:
            records.extend(self._fence_records(reg.id, reg.epoch))
            fenced = True
        return ControllerResult(tuple(records), BrokerHeartbeatReply(
            is_caught_up=caught_up, is_fenced=fenced, should_shut_down=should_shut_down))

    def _directories_offline(self, reg: BrokerRegistration, offline: Sequence[uuid.UUID]
                             ) -> list[MetadataRecord]:
        """A heartbeat reported failed log dirs (Kafka's handleDirectoriesOffline): every
        partition whose replica on the broker lives in one leaves its ISR, and where the broker
        led, another in-sync replica leads (as when the broker is fenced, for those partitions
        only); the registration keeps only the dirs still online.

        Replicas whose directory is not assigned (a broker with several log dirs, which does
        not send AssignReplicasToDirs) cannot be told apart and are left as they are.
        """
        gone = set(offline) & set(reg.log_dirs)
        if not gone:
            return []
        cluster = self.image.cluster
        unclean = self._unclean_by_topic()

        def acceptable(r: int) -> bool:
            return r != reg.id and cluster.is_active(r)

        out: list[MetadataRecord] = []
        for topic, index, p in self._partitions():
            if reg.id not in p.isr and p.leader != reg.id:
                continue
            if len(p.directories) != len(p.replicas) or reg.id not in p.replicas:
                continue
            if p.directories[p.replicas.index(reg.id)] not in gone:
                continue
            change = self._partition_change(
                topic.id, index, p, acceptable=acceptable,
                target_isr=tuple(r for r in p.isr if r != reg.id), unclean=unclean(topic.name))
            if change is not None:
                out.append(change)
        online = tuple(d for d in reg.log_dirs if d not in gone)
        if online:
            # With no dir left the record could not say so (an empty list means "unchanged");
            # the partitions above are then looked at again on each heartbeat, a no-op.
            out.append(BrokerRegistrationChangeRecord(
                broker_id=reg.id, broker_epoch=reg.epoch, log_dirs=online,
                version=OFFLINE_DIRS_CHANGE_RECORD_VERSION))
        return out

    def fence_stale_brokers(self, now_ms: int) -> ControllerResult[list[int]]:
        """Fence the unfenced broker whose session expired longest ago (``[]`` if none).

        As Kafka's controller, one broker per call, so the leadership moves of fencing one are
        committed before the next is chosen (a new leader is never a broker being fenced in the
        same batch). The node calls this periodically on the active controller.
        """
        stale = []
        for reg in self.image.brokers.values():
            if reg.fenced:
                continue
            # A broker we have not heard from since we became active gets a full session.
            last = self._last_contact_ms.setdefault(reg.id, now_ms)
            if now_ms - last >= self.session_timeout_ms:
                stale.append((last, reg.id))
        if not stale:
            return ControllerResult((), [])
        _, broker_id = min(stale)
        reg = self.image.brokers[broker_id]
        return ControllerResult(tuple(self._fence_records(broker_id, reg.epoch)), [broker_id])

    def unregister_broker(self, broker_id: int) -> ControllerResult[BrokerRegistrationReply]:
        """UnregisterBroker: leaderships and ISR memberships go, then the registration."""
        reg = self.image.brokers.get(broker_id)
        if reg is None:
            return ControllerResult((), BrokerRegistrationReply(
                ErrorCode.BROKER_ID_NOT_REGISTERED,
                f"Broker ID {broker_id} is not currently registered"))
        records: list[MetadataRecord] = list(self._leadership_removal(broker_id))
        records.append(UnregisterBrokerRecord(broker_id, reg.epoch))
        self._last_contact_ms.pop(broker_id, None)
        return ControllerResult(tuple(records), BrokerRegistrationReply(broker_epoch=reg.epoch))

    # -- producer ids ------------------------------------------------------------------------------

    def allocate_producer_ids(self, broker_id: int, broker_epoch: int
                              ) -> ControllerResult[ProducerIdsBlock]:
        """AllocateProducerIds: the next block of 1000 ids (Kafka's block size)."""
        reg = self.image.brokers.get(broker_id)
        if reg is None:
            return ControllerResult((), ProducerIdsBlock(
                ErrorCode.STALE_BROKER_EPOCH, f"No broker registration found for broker id {broker_id}"))
        if reg.epoch != broker_epoch:
            return ControllerResult((), ProducerIdsBlock(
                ErrorCode.STALE_BROKER_EPOCH,
                f"Expected broker epoch {reg.epoch}, but got broker epoch {broker_epoch}"))
        current = self.image.producer_ids.next_producer_id
        first = current if current >= 0 else 0
        if first > LONG_MAX - PRODUCER_ID_BLOCK_SIZE:
            return ControllerResult((), ProducerIdsBlock(
                ErrorCode.UNKNOWN_SERVER_ERROR,
                "Exhausted all producerIds as the next block's end producerId has exceeded the "
                "int64 type limit"))
        rec = ProducerIdsRecord(broker_id=broker_id, broker_epoch=broker_epoch,
                                next_producer_id=first + PRODUCER_ID_BLOCK_SIZE)
        return ControllerResult((rec,), ProducerIdsBlock(first_producer_id=first,
                                                         size=PRODUCER_ID_BLOCK_SIZE))


__all__ = [
    "CLUSTER_METADATA_TOPIC", "DEFAULT_BROKER_SESSION_TIMEOUT_MS",
    "LATEST_PRODUCTION_METADATA_VERSION", "METADATA_VERSION_3_9_IV0", "PRODUCER_ID_BLOCK_SIZE",
    "QuorumController", "bootstrap_records", "topic_name_error", "unify_collision_chars",
    "uuid_from_kafka_str", "uuid_to_kafka_str",
]
