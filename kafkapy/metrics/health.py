"""Readiness: whether a node should get traffic, and if not, why.

A broker is ready once it is registered with the active controller, unfenced, in contact with
the controllers and has caught up with the metadata log (replayed up to the high watermark the
quorum leader reported, once: later records in flight do not make it unready again). A
controller is ready once the metadata quorum has a known leader. A combined node needs both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafkapy.broker.lifecycle import BrokerState


@dataclass
class ReadinessReport:
    """What ``/ready`` answers: ready or not, and the reasons it is not."""

    ready: bool
    reasons: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {"ready": self.ready, "reasons": self.reasons, **self.details}


class Readiness:
    """Computes a node's :class:`ReadinessReport` from its live parts (each a zero-argument
    function, since the parts appear while the node starts)."""

    def __init__(self, *, node_id: int, is_broker: bool, is_controller: bool,
                 started: Callable[[], bool], lifecycle: Callable[[], Any],
                 quorum: Callable[[], Any], applied_end: Callable[[], int],
                 all_log_dirs_offline: Callable[[], bool] = lambda: False) -> None:
        self.node_id = node_id
        self.is_broker = is_broker
        self.is_controller = is_controller
        self.started = started
        self.lifecycle = lifecycle
        self.quorum = quorum
        self.applied_end = applied_end
        self.all_log_dirs_offline = all_log_dirs_offline
        self._caught_up = False

    def report(self) -> ReadinessReport:
        reasons: list[str] = []
        details: dict[str, Any] = {"node_id": self.node_id}
        if not self.started():
            reasons.append("the node is starting")
        replica = self.quorum()
        if replica is None:
            reasons.append("the metadata log is not open yet")
        else:
            details["metadata_leader"] = replica.leader_id
            if replica.leader_id < 0:
                reasons.append("no active controller (metadata quorum leader) is known")
        if self.is_broker:
            reasons.extend(self._broker_reasons(replica, details))
        return ReadinessReport(not reasons, reasons, details)

    def _broker_reasons(self, replica: Any, details: dict[str, Any]) -> list[str]:
        reasons = []
        lifecycle = self.lifecycle()
        if lifecycle is None:
            return ["the broker has not started registering"]
        details["broker_state"] = lifecycle.state.name
        details["broker_epoch"] = lifecycle.broker_epoch
        if lifecycle.broker_epoch < 0:
            reasons.append("the broker is not registered with the controller")
        elif lifecycle.state in (BrokerState.PENDING_CONTROLLED_SHUTDOWN, BrokerState.SHUTTING_DOWN):
            reasons.append("the broker is shutting down")
        elif lifecycle.fenced:
            reasons.append("the broker is fenced")
        if lifecycle.contact_lost:
            reasons.append("the broker has lost contact with the controllers")
        if replica is not None and not self._caught_up:
            target = replica.catch_up_target
            applied = self.applied_end()
            if target > 0 and applied >= target:
                self._caught_up = True
            else:
                reasons.append(f"the metadata log is behind: applied up to offset {applied} of "
                               f"{max(target, 0)}")
        if self.all_log_dirs_offline():
            reasons.append("every log dir is offline")
        return reasons


__all__ = ["Readiness", "ReadinessReport"]
