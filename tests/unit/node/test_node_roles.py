"""Node chooses its runtimes from process.roles, and refuses settings it cannot run with before
it touches any directory."""

from __future__ import annotations

import pytest

from kafkapy.config import BrokerConfig
from kafkapy.config_views import NodeSettings
from kafkapy.node.node import Node

BASE = {"node.id": "1", "controller.listener.names": "CONTROLLER",
        "controller.quorum.voters": "1@127.0.0.1:9093",
        "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"}


def config(**props: str) -> BrokerConfig:
    return BrokerConfig({**BASE, **{k.replace("_", "."): v for k, v in props.items()}})


@pytest.mark.parametrize("roles, broker, controller", [
    ("broker,controller", True, True), ("broker", True, False), ("controller", False, True)])
def test_process_roles_choose_the_runtimes(roles, broker, controller):
    node = Node(config(process_roles=roles))
    assert (node.is_broker, node.is_controller) == (broker, controller)
    # Nothing runs yet: the roles' runtimes are built by run().
    assert node.controller is None and node.replicas is None and node.lifecycle is None


@pytest.mark.parametrize("props, message", [
    ({"process.roles": ""}, "process.roles=(unset)"),
    ({"process.roles": "broker", "node.id": "-1"}, "node.id must be set"),
    ({"process.roles": "broker", "controller.listener.names": ""}, "controller.listener.names"),
])
def test_settings_a_node_cannot_run_with_are_refused(props, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Node(BrokerConfig({**BASE, **props}))


def test_node_settings_are_typed():
    settings = NodeSettings.from_config(config(process_roles="broker,controller"))
    assert settings.roles == frozenset({"broker", "controller"})
    assert settings.controller_listener_names == frozenset({"CONTROLLER"})
    assert settings.quorum_voters == ("1@127.0.0.1:9093",)
    assert isinstance(settings.election_timeout_ms, int) and settings.socket_request_max_bytes > 0
