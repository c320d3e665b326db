"""Per-broker config changes on a cluster with separate controller and broker nodes.

One controller and two brokers from ``kafkapy cluster up``. A change of broker N's own entry
sent to broker N is checked there and forwarded to the controller, and broker N then reports it
as DYNAMIC_BROKER_CONFIG; the same change sent to another broker is refused with
INVALID_REQUEST, as Kafka's brokers do.
"""

from __future__ import annotations

import pytest

from helpers import send_to, split_cluster
from kafkapy.config import ConfigSource
from kafkapy.protocol import ErrorCode, messages as m
from kafkapy.testing.cluster import LocalCluster, eventually

RESOURCE_BROKER = 4
OP_SET = 0
# A per-broker dynamic config whose value DescribeConfigs shows (the throttle rates are unknown
# to the broker config definitions, so, as in Kafka, they are described as sensitive).
KEY = "log.cleaner.backoff.ms"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with split_cluster(tmp_path_factory.mktemp("config-forward")) as c:
        yield c


def incremental(broker: str, value: str):
    Req = m.IncrementalAlterConfigsRequest
    R = Req.AlterConfigsResource
    return Req(validate_only=False, resources=[R(resource_type=RESOURCE_BROKER, resource_name=broker, configs=[
        R.AlterableConfig(name=KEY, config_operation=OP_SET, value=value)])])


def legacy(broker: str, value: str):
    Req = m.AlterConfigsRequest
    R = Req.AlterConfigsResource
    return Req(validate_only=False, resources=[R(resource_type=RESOURCE_BROKER, resource_name=broker, configs=[
        R.AlterableConfig(name=KEY, value=value)])])


def described(cluster: LocalCluster, broker: int) -> tuple[str | None, int]:
    """(value, config source) of KEY as ``broker`` reports its own entry."""
    Req = m.DescribeConfigsRequest
    resp = send_to(cluster.broker_address(broker), Req(
        resources=[Req.DescribeConfigsResource(resource_type=RESOURCE_BROKER, resource_name=str(broker),
                                               configuration_keys=[KEY])],
        include_synonyms=False, include_documentation=False))
    [result] = resp.results
    assert result.error_code == ErrorCode.NONE, result
    [entry] = result.configs
    return entry.value, entry.config_source


@pytest.mark.parametrize("request_of", [incremental, legacy], ids=["incremental", "legacy"])
def test_broker_entry_changes_through_its_own_broker_only(cluster: LocalCluster, request_of) -> None:
    controller = cluster.active_controller()
    a, b = cluster.broker_ids()
    assert controller is not None and controller not in (a, b)
    value = "16000" if request_of is incremental else "17000"
    for target in (a, b):
        [answer] = send_to(cluster.broker_address(target), request_of(str(target), value)).responses
        assert (answer.resource_name, answer.error_code, answer.error_message) == (str(target), ErrorCode.NONE, None)
        eventually(lambda: described(cluster, target) == (value, int(ConfigSource.DYNAMIC_BROKER_CONFIG)),
                   timeout=30, what=f"broker {target} to report its new {KEY}")

    [refused] = send_to(cluster.broker_address(a), request_of(str(b), "1")).responses
    assert (refused.error_code, refused.error_message) == (
        ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {a}, but received {b}")
    assert described(cluster, b) == (value, int(ConfigSource.DYNAMIC_BROKER_CONFIG))
