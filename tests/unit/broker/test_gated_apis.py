"""Gated APIs (KIP-584): served, advertised and answered only while their feature is finalized.

A fake gated API stands in for the group and share handlers: ApiVersions lists it whatever the
features (as Kafka 4.4 does); while its feature is off a request for it gets its error response with
UNSUPPORTED_VERSION, as Kafka's KafkaApis answers ConsumerGroupHeartbeat with group.version 0; once
the feature's level reaches the API's minimum its handler runs.
"""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import trio

from kafkapy.broker.dispatcher import BrokerDispatcher
from kafkapy.broker.gated_apis import GROUP_VERSION_FEATURE, SHARE_VERSION_FEATURE, GatedApi
from kafkapy.metadata.image import FeaturesImage, MetadataImage
from kafkapy.protocol import messages
from kafkapy.protocol.apis import ApiKey, request_class
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.events import Request, RequestHeader

CALLS: list[str] = []


async def _heartbeat(ctx: Any, request: Request) -> object:
    CALLS.append(request.body.group_id)
    return messages.ConsumerGroupHeartbeatResponse(version=request.api_version, error_code=0, member_epoch=1)


FAKE_GROUP = GatedApi(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, 1, _heartbeat, GROUP_VERSION_FEATURE, 1)
FAKE_SHARE = GatedApi(ApiKey.SHARE_GROUP_HEARTBEAT, 1, 1, _heartbeat, SHARE_VERSION_FEATURE, 1)
FAKE_DESCRIBE = GatedApi(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 1, _heartbeat, GROUP_VERSION_FEATURE, 1)


def _dispatcher(levels: dict[str, int], protocols: str | None = None) -> BrokerDispatcher:
    image = MetadataImage(offset=7, features=FeaturesImage(levels={"metadata.version": 26, **levels}))
    # What dispatch reads on the way to a handler: no quotas, no authorizer, no controller.
    ctx = SimpleNamespace(image=lambda: image, client_quotas=None, authorizer=None, controller_request=None,
                          clock=SimpleNamespace(now_ms=lambda: 0))
    if protocols is not None:
        ctx.config = SimpleNamespace(get_list=lambda name: protocols.split(","))
    return BrokerDispatcher(ctx, apis=[], gated=[FAKE_GROUP, FAKE_SHARE, FAKE_DESCRIBE])  # type: ignore[arg-type]


def _advertised(dispatcher: BrokerDispatcher, version: int) -> dict[int, tuple[int, int]]:
    request = SimpleNamespace(api_key=ApiKey.API_VERSIONS, api_version=version)
    body = trio.run(dispatcher.handle, request, None)
    answer = messages.ApiVersionsResponse.decode(bytes(body.encode(version=version)), version=version)
    return {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}


def _heartbeat_request(version: int = 1) -> Request:
    cls = request_class(ApiKey.CONSUMER_GROUP_HEARTBEAT)
    assert cls is not None
    body = cls(version=version, group_id="g", member_id="m", member_epoch=0, rebalance_timeout_ms=-1,
               subscribed_topic_names=None, topic_partitions=None)
    header = RequestHeader(ApiKey.CONSUMER_GROUP_HEARTBEAT, version, 3, "client", 2)
    return Request(ApiKey.CONSUMER_GROUP_HEARTBEAT, version, 3, "client", header, body, 0)


def test_a_gated_api_is_advertised_whatever_its_feature() -> None:
    for levels in ({}, {GROUP_VERSION_FEATURE: 1}, {GROUP_VERSION_FEATURE: 1, SHARE_VERSION_FEATURE: 1}):
        dispatcher = _dispatcher(levels)
        for version in (0, 1, 2, 3, 4):
            advertised = _advertised(dispatcher, version)
            assert advertised[ApiKey.CONSUMER_GROUP_HEARTBEAT] == (0, 1)
            assert advertised[ApiKey.SHARE_GROUP_HEARTBEAT] == (1, 1)
            assert ApiKey.API_VERSIONS in advertised


def test_a_request_while_off_gets_unsupported_version_and_never_reaches_the_handler(caplog) -> None:
    caplog.set_level(logging.INFO, logger="kafkapy.broker.dispatcher")
    CALLS.clear()
    response = trio.run(_dispatcher({}).handle, _heartbeat_request(), None)
    assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert response.error_message == "The version of API is not supported."
    assert CALLS == []
    assert "group.version is 0, it needs 1" in caplog.text


def test_a_request_while_on_runs_the_handler() -> None:
    CALLS.clear()
    response = trio.run(_dispatcher({GROUP_VERSION_FEATURE: 1}).handle, _heartbeat_request(), None)
    assert response.error_code == 0 and CALLS == ["g"]


def test_consumer_group_apis_need_the_consumer_rebalance_protocol() -> None:
    # Kafka: group.version 1 and `consumer` in group.coordinator.rebalance.protocols.
    dispatcher = _dispatcher({GROUP_VERSION_FEATURE: 1, SHARE_VERSION_FEATURE: 1}, protocols="classic")
    response = trio.run(dispatcher.handle, _heartbeat_request(), None)
    assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
    CALLS.clear()
    on = _dispatcher({GROUP_VERSION_FEATURE: 1}, protocols="classic,consumer")
    assert trio.run(on.handle, _heartbeat_request(), None).error_code == 0 and CALLS == ["g"]


def test_a_describe_while_off_fails_each_group() -> None:
    # Kafka's ConsumerGroupDescribe error response: every asked-for group carries the code.
    cls = request_class(ApiKey.CONSUMER_GROUP_DESCRIBE)
    assert cls is not None
    body = cls(version=1, group_ids=["a", "b"], include_authorized_operations=False)
    header = RequestHeader(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, 4, "client", 2)
    request = Request(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, 4, "client", header, body, 0)
    response = trio.run(_dispatcher({}).handle, request, None)
    assert [(g.group_id, g.error_code) for g in response.groups] == [
        ("a", ErrorCode.UNSUPPORTED_VERSION), ("b", ErrorCode.UNSUPPORTED_VERSION)]
