"""Controller mutation quotas (KIP-599): the token bucket, strict and permissive requests, and the
gate that keeps refused topics from the controller and puts them back into the answer."""

from __future__ import annotations

import uuid
from types import MappingProxyType

from kafkapy.broker.mutation_gate import THROTTLED, gate_mutations
from kafkapy.broker.mutation_quota import ControllerMutationQuotaManager
from kafkapy.broker.quota_managers import ClientQuotas
from kafkapy.metadata.client_quotas import ClientQuotasImage
from kafkapy.metadata.delta import replay_all
from kafkapy.metadata.image import MetadataImage
from kafkapy.metadata.records import FeatureLevelRecord, PartitionRecord, TopicRecord
from kafkapy.protocol import ApiKey
from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.events import Request

RATE = ClientQuotasImage(MappingProxyType({
    (("client-id", "app"),): MappingProxyType({"controller_mutation_rate": 2.0})}))
T = uuid.UUID(int=5)


def quotas() -> ClientQuotas:
    q = ClientQuotas()
    q.refresh(RATE)
    return q


def manager() -> ControllerMutationQuotaManager:
    return quotas().controller_mutation


def test_strict_accepts_until_the_bucket_is_below_zero_then_refuses() -> None:
    q = manager()
    # Burst: 2/s x 11 samples x 1 s = 22 permits, the bucket starts full.
    assert q.apply("u", "app", 20, strict=True, now_ms=0) == (True, 0)
    assert q.apply("u", "app", 10, strict=True, now_ms=0) == (True, 0)   # 2 left: accepted, -8
    assert q.apply("u", "app", 1, strict=True, now_ms=0) == (False, 4000)  # 8 / 2 per s
    assert q.apply("u", "app", 1, strict=True, now_ms=4000) == (True, 0)   # refilled to 0
    assert q.apply("other", "x", 1000, strict=True, now_ms=0) == (True, 0)  # no quota for it


def test_permissive_accepts_and_throttles() -> None:
    q = manager()
    assert q.apply("u", "app", 30, strict=False, now_ms=0) == (True, 4000)
    assert q.apply("u", "app", 1, strict=False, now_ms=1000) == (True, 3500)


def test_given_back_permits_refill_the_bucket() -> None:
    q = manager()
    q.apply("u", "app", 30, strict=True, now_ms=0)
    q.give_back("u", "app", 30, now_ms=0)
    assert q.apply("u", "app", 1, strict=True, now_ms=0) == (True, 0)


def image() -> MetadataImage:
    """Topic "old" with 4 partitions."""
    records = [FeatureLevelRecord("metadata.version", 21), TopicRecord("old", T),
               *(PartitionRecord(i, T, (1,), (1,), 1) for i in range(4))]
    return replay_all(MetadataImage.empty("c"), [(r, i) for i, r in enumerate(records)])


def request(body: object, api_key: int, version: int) -> Request:
    return Request(api_key=ApiKey(api_key), api_version=version, correlation_id=1, client_id="app",
                   header=None, body=body, size=0)


def create_topics(*topics: tuple[str, int]) -> object:
    C = m.CreateTopicsRequest
    return C(timeout_ms=1000, validate_only=False, topics=[
        C.CreatableTopic(name=n, num_partitions=p, replication_factor=1, assignments=[], configs=[])
        for n, p in topics])


def test_strict_create_topics_refuses_once_over_and_keeps_request_order() -> None:
    q = quotas()
    req = request(create_topics(("a", 20), ("b", 10), ("c", 1), ("d", -1)), ApiKey.CREATE_TOPICS, 7)
    gated, gate = gate_mutations(q, image(), 3, req, "u", "app", 0)
    assert gate is not None
    assert [t.name for t in gated.body.topics] == ["a", "b"]
    assert [t.name for t in req.body.topics] == ["a", "b", "c", "d"]  # the client's request is untouched
    assert gate.throttle_ms == 4000
    R = m.CreateTopicsResponse
    answer = R(throttle_time_ms=0, topics=[
        R.CreatableTopicResult(name="a", error_code=0, error_message=None, num_partitions=20,
                               replication_factor=1),
        R.CreatableTopicResult(name="b", error_code=ErrorCode.TOPIC_ALREADY_EXISTS, error_message="x",
                               num_partitions=-1, replication_factor=-1)])
    merged = gate.merge(answer, q, "u", "app", 0)
    assert [(t.name, t.error_code) for t in merged.topics] == [
        ("a", 0), ("b", ErrorCode.TOPIC_ALREADY_EXISTS), ("c", ErrorCode.THROTTLING_QUOTA_EXCEEDED),
        ("d", ErrorCode.THROTTLING_QUOTA_EXCEEDED)]
    assert merged.topics[2].error_message == THROTTLED
    # b's 10 permits came back: the bucket is at 22 - 20 = 2.
    assert q.controller_mutation.apply("u", "app", 2, strict=True, now_ms=0) == (True, 0)


def test_permissive_create_topics_keeps_every_topic() -> None:
    q = quotas()
    req = request(create_topics(("a", 30), ("b", 1)), ApiKey.CREATE_TOPICS, 5)
    gated, gate = gate_mutations(q, image(), 3, req, "u", "app", 0)
    assert gated is req and gate is not None and not gate.refused
    assert gate.throttle_ms == 4500


def test_delete_topics_and_create_partitions_count_partitions() -> None:
    q = quotas()
    D = m.DeleteTopicsRequest
    gated, gate = gate_mutations(q, image(), 3, request(D(topic_names=["old", "missing"], timeout_ms=1),
                                                        ApiKey.DELETE_TOPICS, 4), "u", "app", 0)
    assert gate is not None and gate.taken == {"old": 4, "missing": 0}
    P = m.CreatePartitionsRequest
    body = P(topics=[P.CreatePartitionsTopic(name="old", count=30, assignments=None)], timeout_ms=1,
             validate_only=False)
    _, gate = gate_mutations(q, image(), 3, request(body, ApiKey.CREATE_PARTITIONS, 3), "u", "app", 0)
    assert gate is not None and gate.taken == {"old": 26}


def test_nothing_is_gated_without_a_mutation_quota() -> None:
    req = request(create_topics(("a", 1000)), ApiKey.CREATE_TOPICS, 7)
    assert gate_mutations(ClientQuotas(), image(), 3, req, "u", "app", 0) == (req, None)
