"""Fail-closed and wire-safety fixes from the review of the security work: the controller's own
RPCs need the cluster rights Kafka asks for, unknown ssl.* keys, a custom principal builder and a
PLAIN/SCRAM server callback handler stop the node, a token's algorithm must fit its key, and a
throttle time never overflows its int32 field."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import trio

from kafkapy.broker.request_throttle import RequestThrottle
from kafkapy.config import BrokerConfig, UnsupportedSecurityConfig
from kafkapy.node.controller_apis import ControllerApis
from kafkapy.node.sasl_settings import listener_sasl
from kafkapy.protocol import ApiKey, messages as m
from kafkapy.protocol.connection import Request, RequestHeader
from kafkapy.protocol.errors import ErrorCode
from kafkapy.security.acl import AclOperation, ResourceType

PLAIN = {
    "process.roles": "broker,controller", "node.id": "1",
    "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
    "controller.listener.names": "CONTROLLER", "controller.quorum.voters": "1@127.0.0.1:9093",
}


@pytest.mark.parametrize("key", ["ssl.crl.check", "listener.name.ssl.ssl.bogus", "principal.builder.class",
                                 "listener.name.client.principal.builder.class"])
def test_security_settings_kafkapy_does_not_know_stop_the_node(key: str) -> None:
    with pytest.raises(UnsupportedSecurityConfig, match=key.replace(".", r"\.")):
        BrokerConfig.from_sources({**PLAIN, key: "x"})


def test_a_plain_server_callback_handler_is_refused_not_ignored() -> None:
    config = BrokerConfig.from_sources({
        **PLAIN, "listeners": "SASL_PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN", "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="b" '
            'user_a="b";',
        "listener.name.sasl_plaintext.plain.sasl.server.callback.handler.class": "com.example.Ldap"})
    with pytest.raises(ValueError, match="com.example.Ldap"):
        listener_sasl(config, "SASL_PLAINTEXT", lambda mechanism, user: None)


def test_a_throttle_time_fits_the_int32_field() -> None:
    throttle = RequestThrottle(quotas=None, user="u", client_id="c")  # type: ignore[arg-type]
    throttle.add(104_857_590_000)  # producer_byte_rate=1 against a 100 MB produce
    assert throttle.throttle_ms == 0x7FFFFFFF


class _Denying:
    """An admin context whose principal has no rights on the cluster."""

    def __init__(self) -> None:
        self.asked: list[tuple[AclOperation, ResourceType]] = []

    def authorize(self, op: AclOperation, rtype: ResourceType, name: str = "kafka-cluster", **_: Any) -> bool:
        self.asked.append((op, rtype))
        return False


class _Quorum:
    versions: tuple = ()

    async def handle(self, request: Any, conn: Any) -> Any:
        raise AssertionError("a refused request must not reach the quorum")


def _serve(apis: ControllerApis, key: int, body: Any, version: int) -> Any:
    header = RequestHeader(key, version, 7, "intruder", 2)
    request = Request(key, version, 7, "intruder", header, body, 0)

    async def serve() -> Any:
        return await apis.handle(request, SimpleNamespace(session=None, peer=("10.0.0.9", 1)))
    return trio.run(serve)


def test_the_controllers_own_rpcs_need_the_cluster_rights_kafka_asks_for() -> None:
    ctx = _Denying()
    apis = ControllerApis(_Quorum(), SimpleNamespace(), admin_context=ctx)  # type: ignore[arg-type]
    heartbeat = m.BrokerHeartbeatRequest(broker_id=1, broker_epoch=5, current_metadata_offset=0,
                                         want_fence=False, want_shut_down=False)
    answer = _serve(apis, ApiKey.BROKER_HEARTBEAT, heartbeat, 0)
    assert answer.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    unregister = _serve(apis, ApiKey.UNREGISTER_BROKER, m.UnregisterBrokerRequest(broker_id=1), 0)
    assert unregister.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert ctx.asked == [(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER), (AclOperation.ALTER, ResourceType.CLUSTER)]
