"""ApiKey, the message-class registry, our own JSON schemas, and ApiVersionsTable."""

from __future__ import annotations

import pytest

from kafkapy.protocol import (
    ApiKey,
    ApiVersionRange,
    ApiVersionsTable,
    ErrorCode,
    is_flexible,
    load_schema_class,
    request_class,
    response_class,
    valid_api_versions_request,
)
from kafkapy.protocol import messages as m


def test_api_keys_have_kafka_and_message_names() -> None:
    assert ApiKey.API_VERSIONS == ApiKey.ApiVersions == 18
    assert ApiKey(18).name == "API_VERSIONS" and ApiKey(18).message_name == "ApiVersions"
    assert ApiKey.BROKER_HEARTBEAT == 63 and ApiKey.DELETE_SHARE_GROUP_OFFSETS == 92
    assert ApiKey.VOTE == 52 and ApiKey.FETCH_SNAPSHOT == 59 and ApiKey.ADD_RAFT_VOTER == 80
    # Kafka's 93, and kafkapy's own five (cluster links, never advertised).
    assert len(ApiKey) == 98 and ApiKey.CREATE_CLUSTER_LINKS == ApiKey.CreateClusterLinks == 20000
    assert ApiKey.name_of(500) == "ApiKey(500)"


def test_registry_has_request_and_response_for_every_known_schema() -> None:
    assert request_class(ApiKey.PRODUCE) is m.ProduceRequest
    assert response_class(ApiKey.FETCH) is m.FetchResponse
    assert request_class(ApiKey.CREATE_DELEGATION_TOKEN) is None  # no schema
    assert request_class(ApiKey.ENVELOPE).__name__ == "EnvelopeRequest"  # ours (forwarding, KIP-590)
    assert request_class(ApiKey.BROKER_HEARTBEAT).__name__ == "BrokerHeartbeatRequest"
    for key in range(93):
        assert (request_class(key) is None) == (response_class(key) is None)


def test_own_schema_loader_builds_kafka_python_style_classes() -> None:
    cls = load_schema_class("BrokerHeartbeatResponse")
    assert cls.API_KEY == 63 and cls.valid_versions == (0, 1)
    resp = cls(throttle_time_ms=0, error_code=0, is_caught_up=True, should_shut_down=False)
    data = resp.encode(version=1)
    back = cls.decode(data, version=1)
    assert back.is_caught_up is True and back.is_fenced is True  # schema default "true"
    assert is_flexible(ApiKey.BROKER_HEARTBEAT, 0)


def test_is_flexible_follows_schema_including_unknown_future_versions() -> None:
    assert not is_flexible(ApiKey.PRODUCE, 8) and is_flexible(ApiKey.PRODUCE, 9)
    assert is_flexible(ApiKey.API_VERSIONS, 99)  # Kafka reads a too-new ApiVersions header as v2
    assert not is_flexible(ApiKey.API_VERSIONS, -1)


def test_table_validates_against_schemas() -> None:
    table = ApiVersionsTable()
    table.register(ApiKey.PRODUCE, 3, 11)
    assert table.supports(ApiKey.PRODUCE, 3) and not table.supports(ApiKey.PRODUCE, 12)
    with pytest.raises(ValueError):
        table.register(ApiKey.PRODUCE, 0, 11)  # below the schema's baseline (Kafka 4 dropped v0-2)
    with pytest.raises(ValueError):
        table.register(ApiKey.PRODUCE, 3, 99)
    with pytest.raises(ValueError):
        table.register(ApiKey.CREATE_DELEGATION_TOKEN, 0, 1)  # no schema
    table.remove(ApiKey.PRODUCE)
    assert ApiKey.PRODUCE not in table and len(table) == 0


def test_table_response_and_negotiation() -> None:
    table = ApiVersionsTable([(ApiKey.API_VERSIONS, 0, 4), (ApiKey.FETCH, 4, 16), (ApiKey.METADATA, 0, 12)])
    resp = table.response(3, finalized_features_epoch=5)
    assert resp.version == 3 and resp.error_code == 0 and resp.finalized_features_epoch == 5
    assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == [(1, 4, 16), (3, 0, 12), (18, 0, 4)]
    unsupported = table.response(7)
    assert unsupported.version == 0 and unsupported.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert [(k.api_key, k.min_version, k.max_version) for k in unsupported.api_keys] == [(18, 0, 4)]
    theirs = [ApiVersionRange(1, 0, 12), ApiVersionRange(3, 13, 13), ApiVersionRange(18, 0, 3), ApiVersionRange(0, 3, 9)]
    assert table.negotiate(theirs) == {1: 12, 18: 3}


def test_api_versions_request_validity() -> None:
    ok = m.ApiVersionsRequest(client_software_name="librdkafka", client_software_version="2.6.1")
    bad = m.ApiVersionsRequest(client_software_name="bad name!", client_software_version="1")
    assert valid_api_versions_request(ok, 3) and not valid_api_versions_request(bad, 3)
    assert valid_api_versions_request(bad, 2)
