"""The pure rules of cluster links: link configs, group filters, mirrored configs, offset clamping,
and kafkapy's own APIs staying out of ApiVersions."""

from __future__ import annotations

import json

import pytest

from kafkapy.link.cluster_requests import CommittedOffset
from kafkapy.link.offset_sync import clamp
from kafkapy.link.topic_sync import mirrored_configs
from kafkapy.metadata.link_configs import GroupFilter, LinkSettings, validate_link_configs
from kafkapy.protocol import ApiKey
from kafkapy.protocol.apis import OWN_API_KEYS, ApiVersionsTable, request_class


@pytest.mark.parametrize("configs, problem", [
    ({"bootstrap.servers": "a:9092,b:9093"}, None),
    ({}, "bootstrap.servers is required"),
    ({"bootstrap.servers": "nohost"}, "host:port expected"),
    ({"bootstrap.servers": "a:1", "colour": "blue"}, "Unknown cluster link config 'colour'"),
    ({"bootstrap.servers": "a:1", "consumer.offset.sync.ms": "-5"}, "non-negative integer"),
    ({"bootstrap.servers": "a:1", "consumer.offset.sync.enable": "yes"}, "true or false"),
    ({"bootstrap.servers": "a:1", "consumer.offset.group.filters": "{"}, "not JSON"),
])
def test_link_configs_are_checked(configs, problem) -> None:
    found = validate_link_configs(configs)
    assert (found is None) if problem is None else (problem in (found or "")), found


def test_settings_fill_in_the_defaults() -> None:
    s = LinkSettings.of({"bootstrap.servers": "a:9092, b:9093", "consumer.offset.sync.enable": "TRUE"})
    assert s.bootstrap == (("a", 9092), ("b", 9093))
    assert s.offset_sync_enable and s.offset_sync_ms == 30000 and s.topic_config_sync_ms == 5000


def test_group_filters_include_then_exclude() -> None:
    f = GroupFilter.parse(json.dumps({"groupFilters": [
        {"name": "*", "patternType": "LITERAL", "filterType": "INCLUDE"},
        {"name": "tmp-", "patternType": "PREFIXED", "filterType": "EXCLUDE"},
        {"name": "audit", "filterType": "EXCLUDE"}]}))
    assert f("billing") and not f("tmp-1") and not f("audit") and f("auditors")
    assert not GroupFilter.parse("")("billing")  # no filter syncs nothing
    only = GroupFilter.parse('{"groupFilters": [{"name": "app-", "patternType": "PREFIXED"}]}')
    assert only("app-1") and not only("other")


def test_a_mirror_takes_only_the_sources_own_settings_of_data_configs() -> None:
    described = {"retention.ms": ("3600000", 1), "segment.bytes": ("1048576", 5),  # 5: a default
                 "min.insync.replicas": ("2", 1), "cleanup.policy": ("compact", 1), "message.downconversion": (None, 1)}
    assert mirrored_configs(described) == {"retention.ms": "3600000", "cleanup.policy": "compact"}


def test_synced_offsets_never_pass_the_mirrors_high_watermark() -> None:
    offsets = {("t", 0): CommittedOffset(50, 3, "m"), ("t", 1): CommittedOffset(80, 3, None),
               ("t", 2): CommittedOffset(5, 3, None)}
    out = clamp(offsets, {("t", 0): 60, ("t", 1): 70})
    assert out == {("t", 0): CommittedOffset(50, 3, "m"), ("t", 1): CommittedOffset(70, -1, None)}


def test_kafkapys_own_apis_are_served_but_not_advertised() -> None:
    table = ApiVersionsTable()
    table.register(ApiKey.API_VERSIONS, 0, 4)
    for key in OWN_API_KEYS:
        assert request_class(key) is not None
        table.register(key, 0, 0)
    assert all(table.supports(key, 0) for key in OWN_API_KEYS)
    advertised = {k.api_key for k in table.response(3).api_keys}
    assert advertised == {ApiKey.API_VERSIONS}


def test_link_metrics_show_reachability_and_lag_per_mirror_partition() -> None:
    from types import SimpleNamespace

    from kafkapy.link.mirror_fetcher import MirrorLag
    from kafkapy.metrics.collectors import ClusterLinkCollector

    manager = SimpleNamespace(states=lambda: {"from-tokyo": "ACTIVE", "from-kafka": "UNAVAILABLE"},
                              lags=lambda: {"from-tokyo": {("orders", 0): MirrorLag(90, 100, None),
                                                           ("orders", 1): MirrorLag(5, 5, "epoch ceiling")}})
    families = {f.name: f for f in ClusterLinkCollector(lambda: manager).collect()}
    samples = {(f, tuple(s.labels.values())): s.value for f, fam in families.items() for s in fam.samples}
    assert samples[("kafkapy_cluster_link_available", ("from-tokyo",))] == 1
    assert samples[("kafkapy_cluster_link_available", ("from-kafka",))] == 0
    assert samples[("kafkapy_cluster_link_mirror_lag", ("from-tokyo", "orders", "0"))] == 10
    assert samples[("kafkapy_cluster_link_mirror_stopped", ("from-tokyo", "orders", "1"))] == 1
    assert list(ClusterLinkCollector(lambda: None).collect()) == []
