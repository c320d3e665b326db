"""Client quota metrics: each sensor's rate and throttling, as Prometheus series."""

from __future__ import annotations

from types import MappingProxyType, SimpleNamespace

from prometheus_client import CollectorRegistry, generate_latest

from kafkapy.broker.quota_managers import ClientQuotas
from kafkapy.metadata.client_quotas import ClientQuotasImage
from kafkapy.metrics.quotas import ClientQuotaCollector


def test_sensors_show_their_rate_and_throttle_totals() -> None:
    quotas = ClientQuotas()
    quotas.refresh(ClientQuotasImage(MappingProxyType({
        (("client-id", "app"),): MappingProxyType({"producer_byte_rate": 1000.0})})))
    quotas.produce.record_and_throttle("alice", "app", 15_000, 0)   # 5000 ms
    ctx = SimpleNamespace(client_quotas=quotas, clock=SimpleNamespace(now_ms=lambda: 0))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ClientQuotaCollector(lambda: ctx))
    text = generate_latest(registry).decode()
    assert 'kafka_server_produce_byte_rate{client_id="app",user=""} 1500.0' in text
    assert 'kafka_server_produce_throttle_time_ms_total{client_id="app",user=""} 5000.0' in text
    assert 'kafka_server_produce_throttled_total{client_id="app",user=""} 1.0' in text
    # No fetch or request quota: no series, only the (empty) families.
    assert 'kafka_server_fetch_byte_rate{' not in text


def test_a_node_without_a_broker_yields_nothing() -> None:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ClientQuotaCollector(lambda: None))
    assert generate_latest(registry) == b""
