"""ReplicationControlManager: topics and their partitions.

As Kafka's manager of that name, it owns the ``topics`` area of the image and replays
TopicRecord, PartitionRecord, PartitionChangeRecord and RemoveTopicRecord. Kafka's class also
holds elections, AlterPartition, reassignments and what broker events do to partitions; ours
keeps the topic lifecycle (CreateTopics, DeleteTopics, CreatePartitions) and the two primitives
every partition change shares (``partitions`` and ``partition_change``), and those operations
live in helpers over it: ``leader_election``, ``alter_partition``, ``reassignment_control`` and
``broker_lifecycle``.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterable, Sequence

from kafkapy.controller.cluster_control import ClusterControlManager
from kafkapy.controller.configuration_control import ConfigurationControlManager
from kafkapy.controller.constrained_placement import place_constrained
from kafkapy.controller.control_manager import (
    ControlManager,
    ImageSource,
    code_message,
    error,
)
from kafkapy.controller.feature_control import elr_enabled
from kafkapy.controller.names import (
    CLUSTER_METADATA_TOPIC,
    METADATA_TOPIC_ID,
    topic_name_error,
    unify_collision_chars,
    uuid_to_kafka_str,
)
from kafkapy.controller.partition_change import Elr, partition_change
from kafkapy.controller.placement import RandomSource, StripedReplicaPlacer
from kafkapy.controller.reassignment import ReassignmentReplicas
from kafkapy.controller.types import (
    ControllerResult,
    CreatePartitionsResult,
    CreatePartitionsTopic,
    DeleteTopicResult,
    NewTopic,
    TopicDefaults,
    TopicResult,
)
from kafkapy.metadata.image import (
    RESOURCE_TOPIC,
    PartitionRegistration,
    TopicImage,
    TopicsImage,
)
from kafkapy.metadata.placement_constraints import CONFIG_NAME as CONSTRAINTS
from kafkapy.metadata.placement_constraints import PlacementConstraints, derive_observers
from kafkapy.metadata.records import (
    ZERO_UUID,
    ClearElrRecord,
    ConfigRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from kafkapy.metadata.snapshot import partition_record_version
from kafkapy.protocol.errors import ErrorCode, KafkaError

# Kafka's QuorumController.MAX_RECORDS_PER_USER_OP: an operation needing more records fails
# as a whole with POLICY_VIOLATION.
MAX_RECORDS_PER_USER_OP = 10000
_TOO_LARGE_MESSAGE = "Unable to perform excessively large batch operation."
DEFAULT_TOPIC_DEFAULTS = TopicDefaults()


class _BatchTooLarge(Exception):
    """The operation would need more than MAX_RECORDS_PER_USER_OP records."""


def _check_budget(used: int, more: int) -> None:
    if used + more > MAX_RECORDS_PER_USER_OP:
        raise _BatchTooLarge()


class ReplicationControlManager(ControlManager):
    """Creates, grows and deletes topics; makes every partition change (``partition_change``).

    Effects come in as arguments: ``uuid_source`` makes topic ids, ``rng`` drives replica
    placement.
    """

    record_types = (TopicRecord, PartitionRecord, PartitionChangeRecord, RemoveTopicRecord,
                    ClearElrRecord)

    def __init__(self, *, image: ImageSource, cluster: ClusterControlManager,
                 configs: ConfigurationControlManager, uuid_source: Callable[[], uuid.UUID],
                 rng: RandomSource, defaults: TopicDefaults = DEFAULT_TOPIC_DEFAULTS,
                 delete_topic_enable: bool = True) -> None:
        self._image = image
        self._cluster = cluster
        self._configs = configs
        self._uuid_source = uuid_source
        self._placer = StripedReplicaPlacer(rng)
        self._rng = rng
        self.defaults = defaults
        self.delete_topic_enable = delete_topic_enable

    @property
    def topics(self) -> TopicsImage:
        return self._image().topics

    def partition_change(self, topic_id: uuid.UUID, index: int, p: PartitionRegistration, *,
                         acceptable: Callable[[int], bool], target_isr: Sequence[int] | None = None,
                         unclean: bool = False, preferred: bool = False,
                         target_recovery: int | None = None,
                         target_replicas: ReassignmentReplicas | None = None,
                         unclean_shutdown: Sequence[int] = ()
                         ) -> PartitionChangeRecord | None:
        """``partition_change.partition_change`` with new replicas placed in their broker's
        default log directory, the record version the metadata.version calls for, when
        eligible.leader.replicas.version is on the ELR rules with the topic's effective
        ``min.insync.replicas``, and, once a reassignment completes, the observers its topic's
        placement constraints make of the new replicas. ``unclean_shutdown``: replicas whose
        broker restarted after an unclean shutdown (they leave the ELR)."""
        change = partition_change(
            topic_id, index, p, default_dir=self._cluster.default_dir, acceptable=acceptable,
            target_isr=target_isr, unclean=unclean, preferred=preferred,
            target_recovery=target_recovery, target_replicas=target_replicas,
            elr=self.elr_settings(topic_id, unclean_shutdown),
            version=partition_record_version(self._image().metadata_version))
        if change is None or change.replicas is None:
            return change
        after = p.merge(change)
        if after.adding_replicas or after.removing_replicas:
            # While replicas move, every new one must join the ISR for the move to complete:
            # they count as synchronous until it does.
            return change
        topic = self._image().topics.by_id.get(topic_id)
        constraints = (self._configs.placement_constraints(topic=topic.name)
                       if topic is not None else None)
        if constraints is None:
            return change
        brokers = self._image().brokers
        observers = derive_observers(
            constraints, after.replicas,
            lambda b: brokers[b].rack if b in brokers else None)
        if observers == after.observers:
            return change
        return dataclasses.replace(change, observers=observers)

    def elr_settings(self, topic_id: uuid.UUID, unclean_shutdown: Sequence[int] = ()) -> Elr:
        """The ELR rules for a topic's partitions (off unless the feature is finalized)."""
        image = self._image()
        if not elr_enabled(image.features):
            return Elr()
        topic = image.topics.by_id[topic_id]
        # Kafka's getTopicEffectiveMinIsr: never more than the replication factor.
        min_isr = min(self._configs.min_insync_replicas(topic.name), topic.replication_factor)
        return Elr(True, min_isr, tuple(unclean_shutdown))

    def _partition_record_version(self) -> int:
        return partition_record_version(self._image().metadata_version)

    def partitions(self) -> Iterable[tuple[TopicImage, int, PartitionRegistration]]:
        """Every partition, topics by name, partitions by index (a stable record order)."""
        for topic in sorted(self._image().topics.by_id.values(), key=lambda t: t.name):
            for index in sorted(topic.partitions):
                yield topic, index, topic.partitions[index]

    def _new_topic_id(self, taken: set[uuid.UUID]) -> uuid.UUID:
        while True:
            u = self._uuid_source()
            # As Kafka's Uuid.randomUuid: never a reserved id, never one whose text starts
            # with '-' (it would read as a command-line flag).
            if u in (ZERO_UUID, METADATA_TOPIC_ID) or uuid_to_kafka_str(u).startswith("-"):
                continue
            if u in taken or u in self._image().topics.by_id:
                continue
            return u

    def _new_partition(self, replicas: Sequence[int], isr: Sequence[int],
                       observers: Sequence[int] = ()) -> PartitionRegistration:
        return PartitionRegistration(
            replicas=tuple(replicas), isr=tuple(isr), leader=isr[0], leader_epoch=0,
            partition_epoch=0, directories=tuple(self._cluster.default_dir(r) for r in replicas),
            observers=tuple(observers))

    def _place_constrained(self, constraints: PlacementConstraints, num_partitions: int,
                           first_partition: int) -> list[PartitionRegistration]:
        """New partitions under placement constraints: observers start outside the ISR."""
        out = []
        for a in place_constrained(self._cluster.usable_brokers(), constraints, num_partitions,
                                   first_partition=first_partition, rng=self._rng):
            isr = [r for r in a.replicas
                   if r not in a.observers and self._image().cluster.is_active(r)]
            if not isr:
                raise error(ErrorCode.INVALID_REPLICATION_FACTOR,
                            "Unable to place the partition: every broker for its replicas is "
                            "fenced or in controlled shutdown.")
            out.append(self._new_partition(a.replicas, isr, a.observers))
        return out

    def validate_manual_assignment(self, replicas: Sequence[int],
                                   replication_factor: int | None) -> None:
        if not replicas:
            raise error(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                        "The manual partition assignment includes an empty replica list.")
        prev = None
        for broker_id in sorted(replicas):
            if broker_id not in self._image().brokers:
                raise error(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                            f"The manual partition assignment includes broker {broker_id}, "
                            "but no such broker is registered.")
            if broker_id == prev:
                raise error(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                            f"The manual partition assignment includes the broker {prev} "
                            "more than once.")
            prev = broker_id
        if replication_factor is not None and len(replicas) != replication_factor:
            raise error(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                        f"The manual partition assignment includes a partition with "
                        f"{len(replicas)} replica(s), but this is not consistent with previous "
                        f"partitions, which have {replication_factor} replica(s).")

    def _place(self, num_partitions: int, replication_factor: int) -> list[list[int]]:
        try:
            return self._placer.place(self._cluster.usable_brokers(), num_partitions, replication_factor)
        except KafkaError as e:
            _, msg = code_message(e)
            raise error(ErrorCode.INVALID_REPLICATION_FACTOR,
                        f"Unable to replicate the partition {replication_factor} time(s): {msg}"
                        ) from None

    def _partitions_for_new_topic(self, topic: NewTopic, defaults: TopicDefaults
                                  ) -> dict[int, PartitionRegistration]:
        """Replica sets of a new topic, or KafkaError with Kafka's code and message."""
        parts: dict[int, PartitionRegistration] = {}
        if topic.assignments:
            if topic.replication_factor != -1:
                raise error(ErrorCode.INVALID_REQUEST,
                            "A manual partition assignment was specified, but replication "
                            "factor was not set to -1.")
            if topic.num_partitions != -1:
                raise error(ErrorCode.INVALID_REQUEST,
                            "A manual partition assignment was specified, but numPartitions "
                            "was not set to -1.")
            rf: int | None = None
            for index, replicas in topic.assignments.items():
                self.validate_manual_assignment(replicas, rf)
                rf = len(replicas)
                isr = [r for r in replicas if self._image().cluster.is_active(r)]
                if not isr:
                    raise error(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                                "All brokers specified in the manual partition assignment for "
                                f"partition {index} are fenced or in controlled shutdown.")
                parts[index] = self._new_partition(replicas, isr)
            for i in range(len(parts)):
                if i not in parts:
                    raise error(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                                "partitions should be a consecutive 0-based integer sequence")
            return parts
        if topic.replication_factor < -1 or topic.replication_factor == 0:
            raise error(ErrorCode.INVALID_REPLICATION_FACTOR,
                        "Replication factor must be larger than 0, or -1 to use the default "
                        "value.")
        if topic.num_partitions < -1 or topic.num_partitions == 0:
            raise error(ErrorCode.INVALID_PARTITIONS,
                        "Number of partitions was set to an invalid non-positive value.")
        num_partitions = defaults.num_partitions if topic.num_partitions == -1 else topic.num_partitions
        if topic.configs.get(CONSTRAINTS) and topic.replication_factor != -1:
            raise error(ErrorCode.INVALID_REQUEST,
                        "Both replicationFactor and confluent.placement.constraints are set. "
                        "Both cannot be used at the same time.")
        constraints = (self._configs.placement_constraints(overrides=topic.configs)
                       if topic.replication_factor == -1 else None)
        if constraints is not None:
            return dict(enumerate(self._place_constrained(constraints, num_partitions, 0)))
        rf = defaults.replication_factor if topic.replication_factor == -1 else topic.replication_factor
        for index, replicas in enumerate(self._place(num_partitions, rf)):
            isr = [r for r in replicas if self._image().cluster.is_active(r)]
            if not isr:
                raise error(ErrorCode.INVALID_REPLICATION_FACTOR,
                            f"Unable to replicate the partition {rf} time(s): All brokers "
                            "are currently fenced or in controlled shutdown.")
            parts[index] = self._new_partition(replicas, isr)
        return parts

    def create_topics(
        self,
        topics: Sequence[NewTopic],
        *,
        validate_only: bool = False,
        defaults: TopicDefaults | None = None,
    ) -> ControllerResult[list[TopicResult]]:
        """CreateTopics. One result per distinct name, in request order."""
        defaults = defaults or self.defaults
        image = self._image()
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
                self._configs.validate_new_topic_configs(configs)
                count = len(t.assignments) if t.assignments else (
                    defaults.num_partitions if t.num_partitions == -1 else t.num_partitions)
                _check_budget(len(records), 1 + len(configs) + max(count, 0))
                parts = self._partitions_for_new_topic(t, defaults)
            except KafkaError as e:
                errors[t.name] = code_message(e)
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
                configs=self._configs.effective_topic_configs(configs))
            # Kafka's order: the topic, its configs, then its partitions.
            records.append(TopicRecord(t.name, topic_id))
            records.extend(ConfigRecord(RESOURCE_TOPIC, t.name, k, v) for k, v in configs.items())
            records.extend(p.to_record(topic_id, i, self._partition_record_version())
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
        image = self._image()
        results: list[DeleteTopicResult] = []
        records: list[MetadataRecord] = []
        counts: dict[str | uuid.UUID, int] = {}
        for t in topics:
            counts[t] = counts.get(t, 0) + 1
        for t, count in counts.items():
            by_name = isinstance(t, str)
            name = t if isinstance(t, str) else None
            tid = ZERO_UUID if isinstance(t, str) else t
            if count > 1:
                results.append(DeleteTopicResult(name, tid, ErrorCode.INVALID_REQUEST,
                                                 "Duplicate topic name." if by_name else "Duplicate topic id."))
                continue
            if name is not None:
                topic = image.topics.by_name.get(name)
                if topic is None:
                    results.append(DeleteTopicResult(name, tid, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                     "This server does not host this topic-partition."))
                    continue
            else:
                if tid == ZERO_UUID:
                    results.append(DeleteTopicResult(None, tid, ErrorCode.INVALID_REQUEST,
                                                     "Neither topic name nor id were specified."))
                    continue
                topic = image.topics.by_id.get(tid)
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
                code, msg = code_message(e)
                results.append(CreatePartitionsResult(t.name, code, msg))
                continue
            except _BatchTooLarge:
                return ControllerResult((), [
                    CreatePartitionsResult(name, ErrorCode.POLICY_VIOLATION, _TOO_LARGE_MESSAGE)
                    for name in dict.fromkeys(x.name for x in topics)])
            results.append(CreatePartitionsResult(t.name))
        return ControllerResult(() if validate_only else tuple(records), results)

    def _current_partition_count(self, name: str) -> int:
        topic = self._image().topics.by_name.get(name)
        return topic.num_partitions if topic is not None else 0

    def _create_partitions_for(self, t: CreatePartitionsTopic) -> list[MetadataRecord]:
        topic = self._image().topics.by_name.get(t.name)
        if topic is None:
            raise error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        "This server does not host this topic-partition.")
        current = topic.num_partitions
        if t.count == current:
            raise error(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
        if t.count < current:
            raise error(ErrorCode.INVALID_PARTITIONS,
                        f"The topic {t.name} currently has {current} partition(s); {t.count} "
                        "would not be an increase.")
        additional = t.count - current
        if t.assignments is not None and len(t.assignments) != additional:
            raise error(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                        f"Attempted to add {additional} additional partition(s), but only "
                        f"{len(t.assignments)} assignment(s) were specified.")
        rf = topic.replication_factor
        assignments: list[list[int]]
        if t.assignments is not None:
            assignments = []
            for i, replicas in enumerate(t.assignments):
                self.validate_manual_assignment(replicas, rf)
                if not any(self._image().cluster.is_active(r) for r in replicas):
                    raise error(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                                "All brokers specified in the manual partition assignment for "
                                f"partition {current + i} are fenced or in controlled shutdown.")
                assignments.append(list(replicas))
        else:
            constraints = self._configs.placement_constraints(topic=t.name)
            if constraints is not None:
                return [p.to_record(topic.id, current + i, self._partition_record_version())
                        for i, p in enumerate(self._place_constrained(constraints, additional,
                                                                      current))]
            assignments = self._place(additional, rf)
        records: list[MetadataRecord] = []
        for i, replicas in enumerate(assignments):
            isr = [r for r in replicas if self._image().cluster.is_active(r)]
            if not isr:
                raise error(ErrorCode.INVALID_REPLICATION_FACTOR,
                            f"Unable to replicate the partition {rf} time(s): All brokers are "
                            "currently fenced or in controlled shutdown.")
            records.append(self._new_partition(replicas, isr).to_record(
                topic.id, current + i, self._partition_record_version()))
        return records


__all__ = ["DEFAULT_TOPIC_DEFAULTS", "MAX_RECORDS_PER_USER_OP", "ReplicationControlManager"]
