"""Metrics and health checks of a node: Prometheus collectors over the node's state, the
counters its request path keeps, readiness, and the HTTP endpoint serving them."""

from kafkapy.metrics.registry import LISTENER_CONFIG, NodeMetrics

__all__ = ["LISTENER_CONFIG", "NodeMetrics"]
