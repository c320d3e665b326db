"""Forwarding in an Envelope: the controller runs the inner request as the client it names, after
checking that the sender may forward (Kafka's KIP-590 rules)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import trio

from kafkapy.broker.authorization import BrokerAuthorizer, request_principal
from kafkapy.broker.context import BrokerContext
from kafkapy.config import BrokerConfig
from kafkapy.metadata import MetadataImage
from kafkapy.metadata.delta import MetadataDelta
from kafkapy.metadata.records import AccessControlEntryRecord
from kafkapy.net.client import encode_request
from kafkapy.node.envelope import serve, unwrap, wrap
from kafkapy.protocol import ApiKey
from kafkapy.protocol import messages as m
from kafkapy.protocol.apis import ApiVersionsTable
from kafkapy.protocol.connection import Request, RequestHeader
from kafkapy.protocol.decode import decode_request
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.security import KafkaPrincipal

BROKER, ALICE, BOB = (KafkaPrincipal.user(n) for n in ("broker", "alice", "bob"))
C = m.CreateTopicsRequest


def image_with(*acls: AccessControlEntryRecord) -> MetadataImage:
    delta = MetadataDelta(MetadataImage.empty("c"))
    for offset, rec in enumerate(acls):
        delta.replay(rec, offset)
    return delta.apply()


IMAGE = image_with(
    AccessControlEntryRecord(uuid.UUID(int=1), 4, "kafka-cluster", 3, "User:broker", "*", 9, 3),  # CLUSTER_ACTION
    AccessControlEntryRecord(uuid.UUID(int=2), 2, "app-", 4, "User:alice", "*", 5, 3))  # CREATE app-*


@pytest.fixture
def ctx() -> BrokerContext:
    return BrokerContext(node_id=1, cluster_id="c", config=BrokerConfig.from_sources({}), clock=None,  # type: ignore[arg-type]
                         replicas=None, image=lambda: IMAGE, controller=None, advertised=[],  # type: ignore[arg-type]
                         authorizer=BrokerAuthorizer(lambda: IMAGE, super_users=frozenset(), allow_if_no_acl=False))


def create_topics(*names: str) -> Any:
    return C(timeout_ms=1000, validate_only=False, topics=[
        C.CreatableTopic(name=n, num_partitions=1, replication_factor=1, assignments=[], configs=[]) for n in names])


def envelope_request(envelope: Any) -> Request:
    frame = bytearray(encode_request(envelope, 0, 9, "broker-1")[4:])
    table = ApiVersionsTable()
    table.register(ApiKey.ENVELOPE, 0, 0)
    return decode_request(frame, table)


VERSIONS = ApiVersionsTable()
VERSIONS.register(ApiKey.CREATE_TOPICS, 2, 7)


async def _create(ctx: BrokerContext, request: Request) -> Any:
    # Stands in for the controller's CreateTopics: creates whatever reaches it, as whom it ran.
    R = m.CreateTopicsResponse
    ran_as.append(str(request_principal.get()))
    return R(throttle_time_ms=0, topics=[R.CreatableTopicResult(
        name=t.name, topic_id=uuid.UUID(int=7), error_code=0, error_message=None, num_partitions=1,
        replication_factor=1, configs=[]) for t in request.body.topics])


ran_as: list[str] = []


def forward(ctx: BrokerContext, sender: KafkaPrincipal, body: Any, principal: KafkaPrincipal) -> Any:
    envelope = wrap(body, 7, principal, "10.1.2.3", "broker-1")
    answer = trio.run(serve, ctx, envelope_request(envelope), sender, ("10.0.0.9", 1234), VERSIONS,
                      {ApiKey.CREATE_TOPICS: _create})
    return answer


def test_the_inner_request_runs_and_is_authorized_as_the_named_client(ctx) -> None:
    ran_as.clear()
    answer = forward(ctx, BROKER, create_topics("app-a", "other"), ALICE)
    assert answer.error_code == 0
    response = unwrap(create_topics(), 7, answer)
    assert {t.name: t.error_code for t in response.topics} == {
        "app-a": 0, "other": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    assert ran_as == ["User:alice"]
    # Bob may create nothing: nothing runs.
    ran_as.clear()
    response = unwrap(create_topics(), 7, forward(ctx, BROKER, create_topics("app-a"), BOB))
    assert [t.error_code for t in response.topics] == [ErrorCode.TOPIC_AUTHORIZATION_FAILED] and ran_as == []


def test_only_a_sender_with_cluster_action_may_forward(ctx) -> None:
    answer = forward(ctx, ALICE, create_topics("app-a"), ALICE)
    assert answer.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED and answer.response_data is None
    with pytest.raises(KafkaError):
        unwrap(create_topics(), 7, answer)


def test_an_envelope_without_a_readable_principal_is_refused(ctx) -> None:
    envelope = wrap(create_topics("app-a"), 7, ALICE, None, "broker-1")
    envelope.request_principal = b"\x00\x07garbage"
    answer = trio.run(serve, ctx, envelope_request(envelope), BROKER, None, VERSIONS, {ApiKey.CREATE_TOPICS: _create})
    assert answer.error_code == ErrorCode.INVALID_REQUEST


def test_the_envelope_carries_the_request_and_the_clients_address() -> None:
    envelope = wrap(create_topics("x"), 7, ALICE, "::1", "broker-1")
    assert envelope.client_host_address == bytes(15) + b"\x01"
    inner = decode_request(bytearray(envelope.request_data), VERSIONS)
    assert inner.api_key == ApiKey.CREATE_TOPICS and inner.api_version == 7
    assert [t.name for t in inner.body.topics] == ["x"]
    assert isinstance(inner.header, RequestHeader)
