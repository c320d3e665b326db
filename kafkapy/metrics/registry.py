"""``NodeMetrics``: one node's counters, Prometheus registry, readiness and HTTP endpoint.

Each node gets its own ``CollectorRegistry`` (never prometheus-client's global default), so
several nodes in one process, as in-process tests run them, keep their metrics apart.
"""

from __future__ import annotations

from typing import Any

import trio
from prometheus_client import CollectorRegistry

from kafkapy.metrics.collectors import (
    BrokerStateCollector,
    ClusterLinkCollector,
    ControllerCollector,
    GroupCoordinatorCollector,
    ProcessMetricsCollector,
    RaftCollector,
    ReplicaManagerCollector,
    RequestMetricsCollector,
    SnapshotCollector,
    SocketServerCollector,
    TopicMetricsCollector,
)
from kafkapy.metrics.health import Readiness
from kafkapy.metrics.http import HealthEndpoint, MetricsListener, serve_http
from kafkapy.metrics.quotas import ClientQuotaCollector
from kafkapy.metrics.requests import MeteredDispatcher
from kafkapy.metrics.stats import BrokerTopicStats, ConnectionStats, RequestStats

#: The config key naming the HTTP endpoint (unset or empty: no endpoint).
LISTENER_CONFIG = "kafkapy.metrics.listener"


class NodeMetrics:
    """The metrics of one ``kafkapy.node.Node``: what its request path counts
    (``topics``, ``requests``), and the collectors that read the rest of its state when
    scraped. ``node`` is read lazily: its parts appear while it starts."""

    def __init__(self, node: Any) -> None:
        self.node = node
        self.topics = BrokerTopicStats()
        self.requests = RequestStats()
        self.connections = ConnectionStats()
        collectors: list[SnapshotCollector] = [
            RequestMetricsCollector(self.requests),
            SocketServerCollector(self.connections),
            RaftCollector(lambda: getattr(node, "replica", None)),
            ProcessMetricsCollector(),
        ]
        if node.is_broker:
            collectors += [
                TopicMetricsCollector(self.topics, lambda: getattr(node, "remote_log_manager", None)),
                ReplicaManagerCollector(lambda: getattr(node, "replicas", None), node.node_id,
                                        self._offline_dirs),
                BrokerStateCollector(lambda: node.lifecycle, self._applied_offset),
                GroupCoordinatorCollector(lambda: getattr(node, "groups", None)),
                ClusterLinkCollector(lambda: getattr(node, "links", None)),
                ClientQuotaCollector(lambda: getattr(getattr(node, "broker_runtime", None), "context", None)),
            ]
        if node.is_controller:
            collectors.append(ControllerCollector(
                lambda: node.controller, node.is_active_controller,
                lambda: node.driver.high_watermark if hasattr(node, "driver") else 0))
        #: This node's registry (never the process-wide default one): generate_latest(registry)
        #: in-process; the HTTP endpoint renders the same collectors off the event loop.
        self.registry = CollectorRegistry(auto_describe=False)
        for collector in collectors:
            self.registry.register(collector)
        self.readiness = Readiness(
            node_id=node.node_id, is_broker=node.is_broker, is_controller=node.is_controller,
            started=node._started.is_set, lifecycle=lambda: node.lifecycle,
            quorum=lambda: getattr(node, "replica", None),
            applied_end=lambda: node.driver.committed_end if hasattr(node, "driver") else -1,
            all_log_dirs_offline=self._all_dirs_offline,
        )
        self.endpoint = HealthEndpoint(collectors, self.readiness.report)

    def listener(self) -> MetricsListener | None:
        """The configured HTTP listener, or None when the endpoint is off (raises ValueError
        for a malformed setting)."""
        text = self.node.config.props.get(LISTENER_CONFIG, "")
        return MetricsListener.parse(text) if text.strip() else None

    def metered(self, dispatcher: Any) -> MeteredDispatcher:
        """``dispatcher`` with its requests counted and timed."""
        return MeteredDispatcher(dispatcher, self.requests)

    async def serve(self, listener: MetricsListener, *,
                    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        await serve_http(self.endpoint, listener, task_status=task_status)

    # -- readings -------------------------------------------------------------------------------

    def _log_manager(self) -> Any:
        return getattr(self.node, "log_manager", None)

    def _offline_dirs(self) -> list[str]:
        manager = self._log_manager()
        return list(getattr(manager, "offline_dirs", {}) or {})

    def _all_dirs_offline(self) -> bool:
        manager = self._log_manager()
        offline = getattr(manager, "offline_dirs", None)
        if not offline:
            return False
        return len(offline) >= len(manager.log_dirs)

    def _applied_offset(self) -> int | None:
        driver = getattr(self.node, "driver", None)
        return None if driver is None else driver.committed_end - 1


__all__ = ["LISTENER_CONFIG", "NodeMetrics"]
