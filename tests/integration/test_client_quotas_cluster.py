"""Client quotas on a cluster with separate controller and broker nodes: AlterClientQuotas sent to
a broker is forwarded to the controller, the broker answers once its own image shows the quota,
and every broker describes it."""

from __future__ import annotations

import pytest
from helpers import send_to, split_cluster

from kafkapy.protocol import ErrorCode
from kafkapy.protocol import messages as m
from kafkapy.testing.cluster import LocalCluster, eventually

Alter = m.AlterClientQuotasRequest
Describe = m.DescribeClientQuotasRequest


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with split_cluster(tmp_path_factory.mktemp("quota-cluster")) as c:
        yield c


def alter(client_id: str | None, key: str, value: float, remove: bool = False) -> Alter:
    return Alter(validate_only=False, entries=[Alter.EntryData(
        entity=[Alter.EntryData.EntityData(entity_type="client-id", entity_name=client_id)],
        ops=[Alter.EntryData.OpData(key=key, value=value, remove=remove)])])


def described(cluster: LocalCluster, broker: int) -> dict[str | None, dict[str, float]]:
    resp = send_to(cluster.broker_address(broker), Describe(strict=True, components=[
        Describe.ComponentData(entity_type="client-id", match_type=2, match=None)]))
    assert resp.error_code == ErrorCode.NONE, resp
    return {e.entity[0].entity_name: {v.key: v.value for v in e.values} for e in resp.entries}


def test_alter_on_one_broker_is_seen_by_every_broker(cluster) -> None:
    first, second = cluster.broker_ids()[:2]
    resp = send_to(cluster.broker_address(first), alter("app", "producer_byte_rate", 4096.0))
    assert [(e.error_code, e.error_message) for e in resp.entries] == [(ErrorCode.NONE, None)]
    # The forwarding broker answers once its image has the quota: no waiting here.
    assert described(cluster, first) == {"app": {"producer_byte_rate": 4096.0}}
    eventually(lambda: described(cluster, second) == {"app": {"producer_byte_rate": 4096.0}},
               timeout=30, what="the other broker to learn the quota")

    refused = send_to(cluster.broker_address(second), alter(None, "producer_byte_rate", 0.5))
    assert [(e.error_code, e.error_message) for e in refused.entries] == [
        (ErrorCode.INVALID_REQUEST, "producer_byte_rate cannot be a fractional value.")]

    send_to(cluster.broker_address(second), alter("app", "producer_byte_rate", 0.0, remove=True))
    assert described(cluster, second) == {}
    eventually(lambda: described(cluster, first) == {}, timeout=30, what="the removal to reach every broker")
