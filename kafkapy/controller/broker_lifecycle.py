"""What broker events do to the cluster: heartbeats, fencing, controlled shutdown, unregistering.

Each event changes a broker's registration (the cluster manager's records) and the partitions
it leads or follows in sync (the leader elections' records). Kafka does this in
ReplicationControlManager (processBrokerHeartbeat, maybeFenceOneStaleBroker, unregisterBroker)
with the ClusterControlManager's heartbeat manager; here it is its own small module over both,
so neither manager needs the other.
"""

from __future__ import annotations

from kafkapy.controller.cluster_control import ClusterControlManager
from kafkapy.controller.leader_election import LeaderElections
from kafkapy.controller.types import (
    BrokerHeartbeatReply,
    BrokerHeartbeatRequest,
    BrokerRegistrationReply,
    BrokerRegistrationRequest,
    ControllerResult,
)
from kafkapy.metadata.records import MetadataRecord, UnregisterBrokerRecord
from kafkapy.protocol.errors import ErrorCode


class BrokerLifecycle:
    """Heartbeats, session expiry and unregistration, with their partition moves."""

    def __init__(self, *, cluster: ClusterControlManager, elections: LeaderElections) -> None:
        self._cluster = cluster
        self._elections = elections

    def _fence_records(self, broker_id: int, epoch: int) -> list[MetadataRecord]:
        # Kafka's order: leave the ISRs first, then mark the broker fenced.
        records: list[MetadataRecord] = list(self._elections.leadership_removal(broker_id))
        records.append(self._cluster.fence_record(broker_id, epoch))
        return records

    def register_broker(self, req: BrokerRegistrationRequest, *, now_ms: int,
                        next_offset: int | None = None) -> ControllerResult[BrokerRegistrationReply]:
        """BrokerRegistration. A new incarnation (another incarnation id) first cleans up after
        the previous one, as Kafka 4.x's registerBroker does: the shutdown was clean when the
        broker names, as its previous broker epoch (BrokerRegistration v3+, from its clean
        shutdown file), the epoch we hold for it. The records come before the registration
        (the new epoch is still the offset of the first record)."""
        existing = self._cluster.cluster.brokers.get(req.broker_id)
        result = self._cluster.register_broker(req, now_ms=now_ms, next_offset=next_offset)
        if result.response.error_code or (
                existing is not None and existing.incarnation_id == req.incarnation_id):
            return result
        clean = existing is not None and existing.epoch == req.previous_broker_epoch
        cleanup = self._elections.broker_restarted(req.broker_id, clean=clean)
        return ControllerResult(tuple(cleanup) + tuple(result.records), result.response)

    def broker_heartbeat(self, req: BrokerHeartbeatRequest, *, now_ms: int
                         ) -> ControllerResult[BrokerHeartbeatReply]:
        """BrokerHeartbeat: keeps the session alive, unfences a caught-up broker, fences on
        request, starts a controlled shutdown. The reply describes the state after the records."""
        reg, stale = self._cluster.check_broker_epoch(req.broker_id, req.broker_epoch)
        if reg is None:
            return ControllerResult((), BrokerHeartbeatReply(ErrorCode.STALE_BROKER_EPOCH, stale))
        self._cluster.touch(req.broker_id, now_ms)
        caught_up = self._cluster.is_caught_up(req.broker_id, req.current_metadata_offset)
        records: list[MetadataRecord] = []
        if req.offline_log_dirs:
            records.extend(self._elections.directories_offline(reg, req.offline_log_dirs))
        fenced = reg.fenced
        should_shut_down = False
        if req.want_shut_down:
            if reg.fenced:
                should_shut_down = True
            elif not reg.in_controlled_shutdown:
                records.append(self._cluster.controlled_shutdown_record(reg.id, reg.epoch))
                records.extend(self._elections.leadership_removal(reg.id))
            else:
                should_shut_down = not self._elections.leads_any(reg.id)
        elif reg.fenced:
            if caught_up and not req.want_fence:
                records.append(self._cluster.unfence_record(reg.id, reg.epoch))
                records.extend(self._elections.leadership_gain(reg.id))
                fenced = False
        elif req.want_fence:
            records.extend(self._fence_records(reg.id, reg.epoch))
            fenced = True
        return ControllerResult(tuple(records), BrokerHeartbeatReply(
            is_caught_up=caught_up, is_fenced=fenced, should_shut_down=should_shut_down))

    def fence_stale_brokers(self, now_ms: int) -> ControllerResult[list[int]]:
        """Fence the unfenced broker whose session expired longest ago (``[]`` if none).

        As Kafka's controller, one broker per call, so the leadership moves of fencing one are
        committed before the next is chosen (a new leader is never a broker being fenced in the
        same batch). The node calls this periodically on the active controller.
        """
        reg = self._cluster.stalest_expired(now_ms)
        if reg is None:
            return ControllerResult((), [])
        return ControllerResult(tuple(self._fence_records(reg.id, reg.epoch)), [reg.id])

    def unregister_broker(self, broker_id: int) -> ControllerResult[BrokerRegistrationReply]:
        """UnregisterBroker: leaderships and ISR memberships go, then the registration."""
        reg = self._cluster.cluster.brokers.get(broker_id)
        if reg is None:
            return ControllerResult((), BrokerRegistrationReply(
                ErrorCode.BROKER_ID_NOT_REGISTERED,
                f"Broker ID {broker_id} is not currently registered"))
        records: list[MetadataRecord] = list(self._elections.leadership_removal(broker_id))
        records.append(UnregisterBrokerRecord(broker_id, reg.epoch))
        self._cluster.forget(broker_id)
        return ControllerResult(tuple(records), BrokerRegistrationReply(broker_epoch=reg.epoch))


__all__ = ["BrokerLifecycle"]
