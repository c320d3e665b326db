"""UpdateFeatures on a cluster with separate controller and broker nodes: a broker forwards it to
the active controller, which checks every registered broker's supported range; the new level
reaches every broker's ApiVersions (finalized features)."""

from __future__ import annotations

import pytest
from helpers import send_to, split_cluster

from kafkapy.protocol import ErrorCode
from kafkapy.protocol import messages as m
from kafkapy.testing.cluster import LocalCluster, eventually

Update = m.UpdateFeaturesRequest
SAFE_DOWNGRADE, UPGRADE = 2, 1


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with split_cluster(tmp_path_factory.mktemp("features-cluster")) as c:
        yield c


def update(name: str, level: int, kind: int, *, validate_only: bool = False) -> Update:
    return Update(timeout_ms=30000, validate_only=validate_only, feature_updates=[
        Update.FeatureUpdateKey(feature=name, max_version_level=level, allow_downgrade=False, upgrade_type=kind)])


def finalized(cluster: LocalCluster, broker: int) -> dict[str, int]:
    resp = send_to(cluster.broker_address(broker), m.ApiVersionsRequest(
        client_software_name="t", client_software_version="1"))
    return {f.name: f.max_version_level for f in resp.finalized_features or ()}


def test_a_forwarded_downgrade_and_upgrade_reach_every_broker(cluster) -> None:
    first, second = cluster.broker_ids()[:2]
    assert finalized(cluster, first)["group.version"] == 1  # a new cluster's default

    checked = send_to(cluster.broker_address(first), update("group.version", 0, SAFE_DOWNGRADE, validate_only=True))
    assert (checked.error_code, checked.error_message) == (ErrorCode.NONE, None)
    assert finalized(cluster, first)["group.version"] == 1

    down = send_to(cluster.broker_address(first), update("group.version", 0, SAFE_DOWNGRADE))
    assert (down.error_code, down.error_message) == (ErrorCode.NONE, None)
    for broker in (first, second):
        eventually(lambda b=broker: "group.version" not in finalized(cluster, b), timeout=30,
                   what=f"broker {broker} to see group.version 0")

    up = send_to(cluster.broker_address(second), update("group.version", 1, UPGRADE))
    assert (up.error_code, up.error_message) == (ErrorCode.NONE, None)
    for broker in (first, second):
        eventually(lambda b=broker: finalized(cluster, b).get("group.version") == 1, timeout=30,
                   what=f"broker {broker} to see group.version 1")

    refused = send_to(cluster.broker_address(second), update("share.version", 2, UPGRADE))
    assert refused.error_code == ErrorCode.INVALID_UPDATE_VERSION
    assert refused.error_message.endswith(
        "Invalid update version 2 for feature share.version. Local controller "
        f"{cluster.active_controller()} only supports versions 0-1"), refused.error_message
