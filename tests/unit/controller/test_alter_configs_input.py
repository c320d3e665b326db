"""(Incremental)AlterConfigs with input Kafka refuses: an unknown operation type is that
resource's INVALID_REQUEST (on a combined node and when forwarded to the controller), and a null
where the schema has none refuses the whole request with nothing changed."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import trio

from kafkapy.broker.handlers.configs import (
    handle_alter_configs, handle_forwarded_incremental_alter_configs, handle_incremental_alter_configs,
)
from kafkapy.controller import NewTopic
from kafkapy.metadata.image import RESOURCE_BROKER, RESOURCE_TOPIC
from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import ErrorCode

from .conftest import make_harness

Inc = m.IncrementalAlterConfigsRequest
Res = Inc.AlterConfigsResource
Cfg = Res.AlterableConfig
Legacy = m.AlterConfigsRequest


class CombinedNode:
    """A combined node's context: its controller runs the change in-process (the harness
    commits at once), so what the handler asks for is what the image then holds."""

    def __init__(self) -> None:
        self.h = make_harness()
        self.h.add_broker(1)
        self.h.commit(self.h.controller.create_topics([NewTopic("t", 1, 1)]))

        async def controller(op):
            return self.h.commit(op(self.h.controller))

        self.ctx = SimpleNamespace(node_id=1, image=lambda: self.h.controller.image, controller=controller,
                                   controller_request=None)

    def configs(self) -> dict[str, str]:
        return dict(self.h.controller.image.configs.topic("t"))


def call(handler: Any, ctx: Any, body: Any, version: int = 0) -> list[tuple[int, str, int, str | None]]:
    resp = trio.run(handler, ctx, SimpleNamespace(body=body, api_version=version))
    return [(r.resource_type, r.resource_name, r.error_code, r.error_message) for r in resp.responses]


def incremental(*resources: Any) -> Any:
    return Inc(validate_only=False, resources=list(resources))


def topic_op(op: int, name: str = "retention.ms", value: str | None = "1") -> Any:
    return Res(resource_type=RESOURCE_TOPIC, resource_name="t", configs=[Cfg(name=name, config_operation=op, value=value)])


def broker_default_set() -> Any:
    return Res(resource_type=RESOURCE_BROKER, resource_name="",
               configs=[Cfg(name="log.retention.ms", config_operation=0, value="60000")])


@pytest.mark.parametrize("handler", [handle_incremental_alter_configs, handle_forwarded_incremental_alter_configs])
@pytest.mark.parametrize("op", [-2, 4, 100])
def test_an_unknown_op_type_is_invalid_request_for_its_resource(handler, op) -> None:
    node = CombinedNode()
    assert call(handler, node.ctx, incremental(topic_op(op), broker_default_set())) == [
        (RESOURCE_TOPIC, "t", ErrorCode.INVALID_REQUEST, f"Unknown config operation type {op} for config retention.ms"),
        (RESOURCE_BROKER, "", ErrorCode.NONE, None)]
    assert node.configs() == {}


@pytest.mark.parametrize("handler", [handle_incremental_alter_configs, handle_forwarded_incremental_alter_configs])
@pytest.mark.parametrize("bad,problem", [
    (lambda: [topic_op(0), Res(resource_type=RESOURCE_TOPIC, resource_name=None, configs=[])],
     "resource entry 1 has a null resource_name"),
    (lambda: [topic_op(0), Res(resource_type=RESOURCE_BROKER, resource_name="", configs=None)],
     "resource '' has null configs"),
    (lambda: [topic_op(0), topic_op(1, name=None)], "resource 't' has a config with a null name"),
])
def test_a_null_refuses_the_whole_request_and_changes_nothing(handler, bad, problem) -> None:
    node = CombinedNode()
    got = call(handler, node.ctx, incremental(*bad()))
    assert got and all(code == ErrorCode.INVALID_REQUEST and msg == problem for _, _, code, msg in got)
    assert node.configs() == {}
    assert call(handler, node.ctx, Inc(validate_only=False, resources=None)) == []


def test_legacy_alter_configs_refuses_nulls_too() -> None:
    node = CombinedNode()
    body = Legacy(validate_only=False, resources=[
        Legacy.AlterConfigsResource(resource_type=RESOURCE_TOPIC, resource_name="t", configs=[
            Legacy.AlterConfigsResource.AlterableConfig(name="retention.ms", value="1000"),
            Legacy.AlterConfigsResource.AlterableConfig(name=None, value="x")])])
    assert call(handle_alter_configs, node.ctx, body) == [
        (RESOURCE_TOPIC, "t", ErrorCode.INVALID_REQUEST, "resource 't' has a config with a null name")]
    assert node.configs() == {}


def test_duplicate_resources_are_invalid_request() -> None:
    node = CombinedNode()
    assert call(handle_incremental_alter_configs, node.ctx, incremental(topic_op(0), topic_op(0))) == [
        (RESOURCE_TOPIC, "t", ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")]
    assert node.configs() == {}
