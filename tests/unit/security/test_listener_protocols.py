"""Which protocol a listener speaks, and which listener brokers use among themselves."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kafkapy.security.listener_protocols import (
    SECURITY_PROTOCOL_IDS,
    inter_broker_listener_name,
    listener_protocol,
    own_listener,
)


def test_the_map_names_each_listeners_protocol():
    props = {"listener.security.protocol.map": "CLIENTS:SSL,INTERNAL:PLAINTEXT,CONTROLLER:SSL",
             "controller.listener.names": "CONTROLLER"}
    assert listener_protocol(props, "clients") == "SSL"
    assert listener_protocol(props, "CONTROLLER") == "SSL"
    # A protocol's own name stands for itself.
    assert listener_protocol(props, "SASL_SSL") == "SASL_SSL"
    with pytest.raises(ValueError, match="no security protocol for listener OTHER"):
        listener_protocol(props, "OTHER")


def test_a_controller_listener_left_out_of_the_default_map_is_plaintext():
    assert listener_protocol({"controller.listener.names": "CTL"}, "CTL") == "PLAINTEXT"
    with pytest.raises(ValueError):
        listener_protocol({"controller.listener.names": "CTL", "listener.security.protocol.map": "A:SSL"}, "CTL")


def test_unknown_protocols_are_refused():
    with pytest.raises(ValueError, match="TLS .listener A. is not one of"):
        listener_protocol({"listener.security.protocol.map": "A:TLS"}, "A")


def test_inter_broker_listener():
    assert inter_broker_listener_name({}) == "PLAINTEXT"
    assert inter_broker_listener_name({"security.inter.broker.protocol": "ssl"}) == "SSL"
    assert inter_broker_listener_name({"inter.broker.listener.name": "internal"}) == "INTERNAL"


def test_protocol_ids_are_kafkas():
    assert SECURITY_PROTOCOL_IDS == {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


def test_a_broker_reaches_its_own_cluster_on_its_inter_broker_listener():
    # A SASL client listener has no node identity: using it for the broker's own admin work
    # (cluster links) stopped a broker whose every listener was SASL_SSL from starting.
    client, internal = SimpleNamespace(name="CLIENT"), SimpleNamespace(name="INTERNAL")
    assert own_listener([client, internal], {"inter.broker.listener.name": "internal"}) is internal
    assert own_listener([client, internal], {}) is client  # no PLAINTEXT listener: the first
