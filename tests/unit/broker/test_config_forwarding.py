"""Config changes on a broker of a multi-node cluster: the receiving broker refuses another
broker's entries, forwards the rest to the controller and answers in request order; the
controller accepts any broker's entry."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import trio

from kafkapy.broker.handlers.configs import (
    handle_alter_configs, handle_forwarded_alter_configs, handle_forwarded_incremental_alter_configs,
    handle_incremental_alter_configs,
)
from kafkapy.controller.types import AlterConfigsResult, AlterConfigsResource
from kafkapy.metadata.image import RESOURCE_BROKER, RESOURCE_TOPIC, MetadataImage
from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import ErrorCode

RATE = "leader.replication.throttled.rate"
Inc = m.IncrementalAlterConfigsRequest
Legacy = m.AlterConfigsRequest


def _incremental(*resources: tuple[int, str]) -> Any:
    return Inc(validate_only=False, resources=[
        Inc.AlterConfigsResource(resource_type=t, resource_name=n, configs=[
            Inc.AlterConfigsResource.AlterableConfig(name=RATE, config_operation=0, value="100")])
        for t, n in resources])


def _legacy(*resources: tuple[int, str]) -> Any:
    return Legacy(validate_only=False, resources=[
        Legacy.AlterConfigsResource(resource_type=t, resource_name=n, configs=[
            Legacy.AlterConfigsResource.AlterableConfig(name=RATE, value="100")])
        for t, n in resources])


class ForwardingBroker:
    """A broker node's context: no controller of its own, a door to the active controller that
    records what it is sent and answers every entry in reverse order (so the merge must not
    rely on the controller's order)."""

    def __init__(self, node_id: int) -> None:
        self.sent: list[tuple[Any, int | None]] = []
        # No authorizer: forwarding is a plain controller request.
        self.ctx = SimpleNamespace(node_id=node_id, image=lambda: MetadataImage.empty("c"),
                                   controller=None, controller_request=self.controller_request,
                                   forward=self.controller_request)

    async def controller_request(self, body: Any, version: int | None = None) -> Any:
        self.sent.append((body, version))
        resp = m.IncrementalAlterConfigsResponse if body.API_KEY == Inc.API_KEY else m.AlterConfigsResponse
        return resp(throttle_time_ms=0, responses=[
            resp.AlterConfigsResourceResponse(error_code=0, error_message=None, resource_type=r.resource_type,
                                              resource_name=r.resource_name)
            for r in reversed(body.resources)])


def _answers(resp: Any) -> list[tuple[int, str, int, str | None]]:
    return [(r.resource_type, r.resource_name, r.error_code, r.error_message) for r in resp.responses]


def test_broker_refuses_other_brokers_entries_and_forwards_the_rest_in_request_order() -> None:
    broker = ForwardingBroker(node_id=2)
    body = _incremental((RESOURCE_BROKER, "3"), (RESOURCE_TOPIC, "t"), (RESOURCE_BROKER, "2"),
                        (RESOURCE_BROKER, "x"), (RESOURCE_BROKER, ""))
    resp = trio.run(handle_incremental_alter_configs, broker.ctx, SimpleNamespace(body=body, api_version=1))
    assert _answers(resp) == [
        (RESOURCE_BROKER, "3", ErrorCode.INVALID_REQUEST, "Unexpected broker id, expected 2, but received 3"),
        (RESOURCE_TOPIC, "t", ErrorCode.NONE, None),
        (RESOURCE_BROKER, "2", ErrorCode.NONE, None),
        (RESOURCE_BROKER, "x", ErrorCode.INVALID_REQUEST, "Node id must be an integer, but it is: x"),
        (RESOURCE_BROKER, "", ErrorCode.NONE, None),
    ]
    [(sent, version)] = broker.sent
    assert version == 1 and sent.validate_only is False
    assert [(r.resource_type, r.resource_name) for r in sent.resources] == [
        (RESOURCE_TOPIC, "t"), (RESOURCE_BROKER, "2"), (RESOURCE_BROKER, "")]
    assert [(c.name, c.value) for c in sent.resources[1].configs] == [(RATE, "100")]
    assert [r.resource_name for r in body.resources] == ["3", "t", "2", "x", ""]  # the client's body is left alone


def test_nothing_is_forwarded_when_every_entry_is_refused() -> None:
    broker = ForwardingBroker(node_id=2)
    resp = trio.run(handle_alter_configs, broker.ctx,
                    SimpleNamespace(body=_legacy((RESOURCE_BROKER, "1")), api_version=2))
    assert _answers(resp) == [
        (RESOURCE_BROKER, "1", ErrorCode.INVALID_REQUEST, "Unexpected broker id, expected 2, but received 1")]
    assert broker.sent == []


def test_legacy_alter_configs_forwards_its_own_request_with_the_rest() -> None:
    broker = ForwardingBroker(node_id=2)
    resp = trio.run(handle_alter_configs, broker.ctx, SimpleNamespace(
        body=_legacy((RESOURCE_BROKER, "2"), (RESOURCE_BROKER, "5")), api_version=0))
    assert _answers(resp) == [
        (RESOURCE_BROKER, "2", ErrorCode.NONE, None),
        (RESOURCE_BROKER, "5", ErrorCode.INVALID_REQUEST, "Unexpected broker id, expected 2, but received 5")]
    [(sent, version)] = broker.sent
    assert sent.API_KEY == Legacy.API_KEY and version == 0
    assert [(r.resource_name, [(c.name, c.value) for c in r.configs]) for r in sent.resources] == [
        ("2", [(RATE, "100")])]


def _controller_ctx(node_id: int, given: list[list[AlterConfigsResource]]) -> SimpleNamespace:
    class Controller:
        def incremental_alter_configs(self, resources: list[AlterConfigsResource], *,
                                      validate_only: bool) -> list[AlterConfigsResult]:
            given.append(list(resources))
            return [AlterConfigsResult(r.resource_type, r.resource_name) for r in resources]

    async def controller(operation: Any) -> Any:
        return operation(Controller())

    return SimpleNamespace(node_id=node_id, image=lambda: MetadataImage.empty("c"), controller=controller,
                           controller_request=None)


def test_controller_accepts_any_brokers_entry_a_broker_forwards() -> None:
    given: list[list[AlterConfigsResource]] = []
    ctx = _controller_ctx(1, given)
    inc = trio.run(handle_forwarded_incremental_alter_configs, ctx,
                   SimpleNamespace(body=_incremental((RESOURCE_BROKER, "2")), api_version=1))
    legacy = trio.run(handle_forwarded_alter_configs, ctx,
                      SimpleNamespace(body=_legacy((RESOURCE_BROKER, "3")), api_version=2))
    assert _answers(inc) == [(RESOURCE_BROKER, "2", ErrorCode.NONE, None)]
    assert _answers(legacy) == [(RESOURCE_BROKER, "3", ErrorCode.NONE, None)]
    assert [[(r.resource_name, [(o.name, o.value) for o in r.ops]) for r in call] for call in given] == [
        [("2", [(RATE, "100")])], [("3", [(RATE, "100")])]]


def test_combined_node_checks_then_calls_its_own_controller() -> None:
    given: list[list[AlterConfigsResource]] = []
    ctx = _controller_ctx(1, given)
    resp = trio.run(handle_incremental_alter_configs, ctx, SimpleNamespace(
        body=_incremental((RESOURCE_BROKER, "2"), (RESOURCE_BROKER, "1")), api_version=1))
    assert _answers(resp) == [
        (RESOURCE_BROKER, "2", ErrorCode.INVALID_REQUEST, "Unexpected broker id, expected 1, but received 2"),
        (RESOURCE_BROKER, "1", ErrorCode.NONE, None)]
    assert [[r.resource_name for r in call] for call in given] == [["1"]]
