"""Partition reassignments: AlterPartitionReassignments and ListPartitionReassignments.

Kafka keeps these in ReplicationControlManager; ours sit over that manager. The replica-set
arithmetic is in ``reassignment``; every change is made by the manager's ``partition_change``,
and a reassignment completes there once its target replicas are all in sync.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from kafkapy.controller import reassignment
from kafkapy.controller.configuration_control import ConfigurationControlManager
from kafkapy.controller.control_manager import ImageSource, code_message, error
from kafkapy.controller.partition_change import reassignment_of
from kafkapy.controller.replication_control import ReplicationControlManager
from kafkapy.controller.types import ControllerResult, PartitionResult
from kafkapy.metadata.image import PartitionRegistration
from kafkapy.metadata.records import MetadataRecord, PartitionChangeRecord
from kafkapy.protocol.errors import ErrorCode, KafkaError


class ReassignmentControl:
    """Starts, replaces, cancels and lists reassignments of the replication manager's
    partitions."""

    def __init__(self, *, image: ImageSource, replication: ReplicationControlManager,
                 configs: ConfigurationControlManager) -> None:
        self._image = image
        self._replication = replication
        self._configs = configs

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
        unclean = self._configs.unclean_by_topic()
        # Several entries may name the same partition: each builds on the one before.
        staged: dict[tuple[str, int], PartitionRegistration] = {}
        for name, index, replicas in targets:
            topic = self._image().topics.by_name.get(name)
            p = staged.get((name, index)) or (topic.partitions.get(index) if topic is not None else None)
            try:
                if topic is None or p is None:
                    raise error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {name}-{index}.")
                if replicas is None:
                    change = self._cancel_reassignment(topic.id, name, index, p, unclean(name))
                else:
                    self._replication.validate_manual_assignment(replicas, None)
                    change = self._replication.partition_change(
                        topic.id, index, p, acceptable=self._image().cluster.is_active,
                        target_replicas=reassignment.start(p.replicas, replicas))
                if change is not None:
                    records.append(change)
                    staged[(name, index)] = p.merge(change)
                results.append(PartitionResult(name, index))
            except KafkaError as e:
                code, msg = code_message(e)
                results.append(PartitionResult(name, index, code, msg))
        return ControllerResult(tuple(records), results)

    def _cancel_reassignment(self, topic_id: uuid.UUID, name: str, index: int, p: PartitionRegistration,
                             unclean_allowed: bool) -> PartitionChangeRecord | None:
        if not reassignment_of(p).in_progress:
            raise error(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, f"No ongoing reassignment for {name}-{index}.")
        back = reassignment.revert(p.replicas, p.isr, p.adding_replicas)
        if back.unclean and not unclean_allowed:
            raise error(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                        f"Unable to revert partition assignment for {name}-{index} because it "
                        "would require an unclean leader election.")
        return self._replication.partition_change(
            topic_id, index, p, acceptable=self._image().cluster.is_active, target_isr=back.isr,
            unclean=back.unclean, target_replicas=reassignment.ReassignmentReplicas(back.replicas))

    def list_partition_reassignments(
            self, partitions: Sequence[tuple[str, int]] | None
    ) -> ControllerResult[list[tuple[str, int, PartitionRegistration]]]:
        """ListPartitionReassignments: (topic, partition, registration) of every reassignment
        in progress among ``partitions`` (None: all of them), sorted; unknown partitions are
        skipped, as Kafka does."""
        found: list[tuple[str, int, PartitionRegistration]] = []
        if partitions is None:
            for topic, index, p in self._replication.partitions():
                if reassignment_of(p).in_progress:
                    found.append((topic.name, index, p))
        else:
            for name, index in partitions:
                named = self._image().topics.by_name.get(name)
                wanted = named.partitions.get(index) if named is not None else None
                if wanted is not None and reassignment_of(wanted).in_progress:
                    found.append((name, index, wanted))
        found.sort(key=lambda e: (e[0], e[1]))
        return ControllerResult((), found)


__all__ = ["ReassignmentControl"]
