"""``kafka.server`` client quota metrics: each quota sensor's rate and its throttling.

Kafka registers, per quota type (Produce, Fetch, Request) and per sensor (user and client-id
tags as the quota level that applies chose them, "" for a part not used), ``byte-rate`` (for
Request: ``request-time``) and ``throttle-time``. Here, in the JMX exporter's naming:
``kafka_server_produce_byte_rate{user,client_id}`` (a gauge, bytes per second over the quota
window), ``..._throttle_time_ms_total`` and ``..._throttled_total`` (running totals: their
``rate()`` ratio is Kafka's average throttle time). Only clients seen while a quota of that type
was in use have series, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from kafkapy.metrics.collectors import SnapshotCollector

_TYPES = (("produce", "byte_rate", "Bytes per second produced"),
          ("fetch", "byte_rate", "Bytes per second fetched"),
          ("request", "request_time", "Share of the event loop's time (percent) used by requests"))


class ClientQuotaCollector(SnapshotCollector):
    """Reads the broker's ``ClientQuotas`` (via ``context()``, a BrokerContext or None)."""

    def __init__(self, context: Callable[[], Any]) -> None:
        self.context = context

    def snapshot(self) -> list[tuple[str, list[tuple[str, str, float, int, int]]]] | None:
        ctx = self.context()
        quotas = None if ctx is None else getattr(ctx, "client_quotas", None)
        if quotas is None:
            return None
        now_ms = ctx.clock.now_ms()
        return [(kind, getattr(quotas, kind).usage(now_ms)) for kind, _, _ in _TYPES]

    def families(self, snap: Any) -> Iterator[Any]:
        if snap is None:
            return
        for (kind, rate_name, rate_help), (_, rows) in zip(_TYPES, snap):
            prefix = f"kafka_server_{kind}_"
            rate = GaugeMetricFamily(prefix + rate_name, f"{rate_help}, per quota sensor.",
                                     labels=["user", "client_id"])
            total = CounterMetricFamily(prefix + "throttle_time_ms", "Throttle time given, in ms.",
                                        labels=["user", "client_id"])
            count = CounterMetricFamily(prefix + "throttled", "Responses throttled.",
                                        labels=["user", "client_id"])
            for user, client, value, times, ms in rows:
                rate.add_metric([user, client], value)
                total.add_metric([user, client], ms)
                count.add_metric([user, client], times)
            yield rate
            yield total
            yield count


__all__ = ["ClientQuotaCollector"]
