"""AlterPartition: a partition leader's proposed ISR, checked and turned into a record.

Kafka keeps this in ReplicationControlManager (alterPartition); ours sits over that manager and
makes the change with its ``partition_change``, so an ISR that completes a reassignment in
progress completes it here too.
"""

from __future__ import annotations

from collections.abc import Sequence

from kafkapy.controller.cluster_control import ClusterControlManager
from kafkapy.controller.configuration_control import ConfigurationControlManager
from kafkapy.controller.control_manager import ImageSource
from kafkapy.controller.partition_change import LEADER_RECOVERED, LEADER_RECOVERING
from kafkapy.controller.replication_control import ReplicationControlManager
from kafkapy.controller.types import (
    AlterPartitionPartition,
    AlterPartitionPartitionResult,
    AlterPartitionReply,
    AlterPartitionTopic,
    AlterPartitionTopicResult,
    ControllerResult,
)
from kafkapy.metadata.image import PartitionRegistration
from kafkapy.metadata.placement_constraints import observer_may_join
from kafkapy.metadata.records import MetadataRecord, PartitionChangeRecord
from kafkapy.protocol.errors import ErrorCode


class AlterPartitionControl:
    """Serves AlterPartition over the replication manager's partitions."""

    def __init__(self, *, image: ImageSource, cluster: ClusterControlManager,
                 replication: ReplicationControlManager, configs: ConfigurationControlManager) -> None:
        self._image = image
        self._cluster = cluster
        self._replication = replication
        self._configs = configs

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
        cluster = self._image().cluster
        reg, refusal = self._cluster.check_broker_epoch(broker_id, broker_epoch)
        if reg is not None and reg.fenced:
            refusal = f"Broker {broker_id} is fenced"
        if refusal is not None:
            return ControllerResult((), AlterPartitionReply(ErrorCode.STALE_BROKER_EPOCH,
                                                            error_message=refusal))
        unclean = self._configs.unclean_by_topic()
        records: list[MetadataRecord] = []
        out_topics = []
        for t in topics:
            if version >= 2:
                topic = self._image().topics.by_id.get(t.topic_id) if t.topic_id is not None else None
            else:
                topic = self._image().topics.by_name.get(t.name or "")
            if topic is None:
                missing = ErrorCode.UNKNOWN_TOPIC_ID if version >= 2 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                out_topics.append(AlterPartitionTopicResult(t.topic_id, t.name, tuple(
                    AlterPartitionPartitionResult(req.partition_index, missing) for req in t.partitions)))
                continue
            results = []
            for req in t.partitions:
                p = topic.partitions.get(req.partition_index)
                code = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if p is None
                        else self._error_for(broker_id, p, req, version)
                        or self._observer_error(topic.name, p, req, version))
                if code != ErrorCode.NONE:
                    results.append(AlterPartitionPartitionResult(req.partition_index, code))
                    continue
                assert p is not None
                change = self._replication.partition_change(
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

    def _error_for(self, broker_id: int, p: PartitionRegistration,
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
            reg = self._image().brokers.get(r)
            if (reg is None or reg.in_controlled_shutdown or reg.fenced
                    or epochs.get(r, -1) not in (-1, reg.epoch)):
                return ErrorCode.INELIGIBLE_REPLICA if version > 1 else ErrorCode.OPERATION_NOT_ATTEMPTED
        return ErrorCode.NONE

    def _observer_error(self, topic: str, p: PartitionRegistration, req: AlterPartitionPartition,
                        version: int) -> int:
        """An observer may join the ISR only as its topic's promotion policy allows, judged one
        joining observer at a time against the ISR before it (the leader proposes them so)."""
        joining = [r for r in req.new_isr if r in p.observers and r not in p.isr]
        if not joining:
            return ErrorCode.NONE
        constraints = self._configs.placement_constraints(topic=topic)
        policy = constraints.promotion_policy if constraints is not None else None
        min_insync = self._configs.min_insync_replicas(topic)
        isr = [r for r in req.new_isr if r not in joining]
        for r in joining:
            if not observer_may_join(policy, isr=isr, observers=p.observers, replicas=p.replicas,
                                     leader=p.leader, min_insync=min_insync):
                return ErrorCode.INELIGIBLE_REPLICA if version > 1 else ErrorCode.OPERATION_NOT_ATTEMPTED
            isr.append(r)
        return ErrorCode.NONE


__all__ = ["AlterPartitionControl"]
