"""Leader elections: who leads each partition when brokers come and go, and on request.

Kafka keeps these in ReplicationControlManager; ours sit over that manager and make every change
with its ``partition_change``: the leaderships and ISR memberships a fenced, shutting-down or
failed-directory broker gives up, the leaders a newly unfenced broker lets leaderless
partitions have, ElectLeaders, the periodic unclean elections and leader balancing.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from kafkapy.controller.cluster_control import ClusterControlManager
from kafkapy.controller.configuration_control import ConfigurationControlManager
from kafkapy.controller.control_manager import ImageSource
from kafkapy.controller.feature_control import elr_enabled
from kafkapy.controller.replication_control import ReplicationControlManager
from kafkapy.controller.types import ControllerResult, ElectionType, PartitionResult
from kafkapy.metadata.image import (
    NO_LEADER,
    BrokerRegistration,
    PartitionRegistration,
    TopicImage,
)
from kafkapy.metadata.records import MetadataRecord, PartitionChangeRecord
from kafkapy.protocol.errors import ErrorCode


class LeaderElections:
    """Elections over the replication manager's partitions."""

    def __init__(self, *, image: ImageSource, replication: ReplicationControlManager,
                 configs: ConfigurationControlManager, leader_imbalance_percentage: int = 10) -> None:
        self._image = image
        self._replication = replication
        self._configs = configs
        self.leader_imbalance_percentage = leader_imbalance_percentage

    def leads_any(self, broker_id: int) -> bool:
        """Whether ``broker_id`` still leads some partition."""
        return any(p.leader == broker_id for t in self._image().topics.by_id.values()
                   for p in t.partitions.values())

    def leadership_removal(self, broker_id: int) -> list[PartitionChangeRecord]:
        """Partition changes that take ``broker_id`` out of every ISR and elect other leaders
        where it led (Kafka's handleBrokerFenced / InControlledShutdown). Without ELR an ISR is
        never emptied (the last member stays, leaderless unless the topic allows an unclean
        election); with ELR the members leaving an ISR below min.insync.replicas join its ELR,
        and the ISR may become empty."""
        return self._remove(broker_id, in_elr=False)

    def broker_restarted(self, broker_id: int, *, clean: bool) -> list[PartitionChangeRecord]:
        """Partition changes for a new incarnation of ``broker_id`` registering (Kafka 4.x's
        handleBrokerShutdown). After a clean shutdown, or without ELR, it is treated as fenced
        (``leadership_removal``). After an unclean one, with ELR on, its log may have lost
        records it had acknowledged to a leader, so it also leaves every ELR it is in and may
        not be elected; the other replicas' ELR memberships are judged as usual."""
        if clean or not elr_enabled(self._image().features):
            return self.leadership_removal(broker_id)
        return self._remove(broker_id, in_elr=True)

    def _remove(self, broker_id: int, *, in_elr: bool) -> list[PartitionChangeRecord]:
        """``broker_id`` out of the ISR (and leadership) of every partition it is in; with
        ``in_elr``, out of their ELRs too, as a replica that restarted uncleanly."""
        cluster = self._image().cluster
        unclean = self._configs.unclean_by_topic()
        unclean_shutdown = (broker_id,) if in_elr else ()

        def acceptable(r: int) -> bool:
            return r != broker_id and cluster.is_active(r)

        out = []
        for topic, index, p in self._replication.partitions():
            if broker_id not in p.isr and p.leader != broker_id and not (in_elr and broker_id in p.elr):
                continue
            change = self._replication.partition_change(
                topic.id, index, p, acceptable=acceptable,
                target_isr=tuple(r for r in p.isr if r != broker_id), unclean=unclean(topic.name),
                unclean_shutdown=unclean_shutdown)
            if change is not None:
                out.append(change)
        return out

    def leadership_gain(self, broker_id: int) -> list[PartitionChangeRecord]:
        """Leaders for leaderless partitions now that ``broker_id`` is unfenced (it still reads
        as fenced in the image while these records are made): an ISR member where one is
        acceptable, else an eligible leader replica (ELR) or the last known leader, else, where
        the topic allows it, an out-of-sync replica (Kafka's handleBrokerUnfenced)."""
        cluster = self._image().cluster
        unclean = self._configs.unclean_by_topic()

        def acceptable(r: int) -> bool:
            return r == broker_id or cluster.is_active(r)

        out = []
        for topic, index, p in self._replication.partitions():
            if p.leader != NO_LEADER:
                continue
            change = self._replication.partition_change(topic.id, index, p, acceptable=acceptable,
                                                        unclean=unclean(topic.name))
            if change is not None:
                out.append(change)
        return out

    def directories_offline(self, reg: BrokerRegistration, offline: Sequence[uuid.UUID]
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
        cluster = self._image().cluster
        unclean = self._configs.unclean_by_topic()

        def acceptable(r: int) -> bool:
            return r != reg.id and cluster.is_active(r)

        out: list[MetadataRecord] = []
        for topic, index, p in self._replication.partitions():
            if reg.id not in p.isr and p.leader != reg.id:
                continue
            if len(p.directories) != len(p.replicas) or reg.id not in p.replicas:
                continue
            if p.directories[p.replicas.index(reg.id)] not in gone:
                continue
            change = self._replication.partition_change(
                topic.id, index, p, acceptable=acceptable,
                target_isr=tuple(r for r in p.isr if r != reg.id), unclean=unclean(topic.name))
            if change is not None:
                out.append(change)
        online = tuple(d for d in reg.log_dirs if d not in gone)
        if online:
            # With no dir left the record could not say so (an empty list means "unchanged");
            # the partitions above are then looked at again on each heartbeat, a no-op.
            out.append(ClusterControlManager.log_dirs_record(reg.id, reg.epoch, online))
        return out

    def elect_leaders(self, partitions: Sequence[tuple[str, int]] | None,
                      election_type: ElectionType) -> ControllerResult[list[PartitionResult]]:
        """ElectLeaders: move leadership to the preferred replica, or elect an unclean leader for
        leaderless partitions (whatever the topic's ``unclean.leader.election.enable``: the
        request asks for it). ``partitions`` None means all of them, and then (as Kafka does)
        only the partitions where something happened or failed are reported."""
        cluster = self._image().cluster
        every = partitions is None
        if partitions is None:
            partitions = [(t.name, i) for t, i, _ in self._replication.partitions()]
        results: list[PartitionResult] = []
        records: list[MetadataRecord] = []
        for name, index in dict.fromkeys(partitions):
            topic = self._image().topics.by_name.get(name)
            p = topic.partitions.get(index) if topic is not None else None
            if topic is None or p is None:
                results.append(PartitionResult(name, index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                               f"No such topic partition {name}-{index}"))
                continue
            preferred = election_type == ElectionType.PREFERRED
            if (bool(p.replicas) and p.leader == p.replicas[0]) if preferred else p.leader != NO_LEADER:
                if not every:
                    results.append(PartitionResult(name, index, ErrorCode.ELECTION_NOT_NEEDED,
                                                   "Leader election not needed for topic partition."))
                continue
            change = self._replication.partition_change(topic.id, index, p, acceptable=cluster.is_active,
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
        cluster = self._image().cluster
        unclean = self._configs.unclean_by_topic()
        records: list[MetadataRecord] = []
        for topic, index, p in self._replication.partitions():
            if len(records) >= max_elections:
                break
            if p.leader != NO_LEADER or not unclean(topic.name):
                continue
            change = self._replication.partition_change(topic.id, index, p, acceptable=cluster.is_active,
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
        cluster = self._image().cluster
        preferred_count: dict[int, int] = {}
        candidates: dict[int, list[tuple[TopicImage, int, PartitionRegistration]]] = {}
        for topic, index, p in self._replication.partitions():
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
                change = self._replication.partition_change(topic.id, index, p, acceptable=cluster.is_active,
                                                            preferred=True)
                if change is not None:
                    records.append(change)
        return ControllerResult(tuple(records), len(records))


__all__ = ["LeaderElections"]
