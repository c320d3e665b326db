"""protocol.produce_response writes exactly what kafka-python's encoder writes for the same response."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.protocol import ApiKey, Request, RequestHeader, encode_response
from kafkapy.protocol import messages as m
from kafkapy.protocol.produce_response import (
    FIRST_VERSION,
    LAST_VERSION,
    ProducePartitionResult,
    ProduceTopicResult,
    produce_response_frame,
)
from kafkapy.protocol.leader_hints import NodeEndpoint

Resp = m.ProduceResponse
T = Resp.TopicProduceResponse
P = T.PartitionProduceResponse


def _request(version: int, correlation_id: int = 41) -> Request:
    header = RequestHeader(ApiKey.PRODUCE, version, correlation_id, "c", 2 if version >= 9 else 1)
    return Request(ApiKey.PRODUCE, version, correlation_id, "c", header, None, 0)


def _leader(version, leader):
    return P.LeaderIdAndEpoch(version=version, leader_id=leader[0], leader_epoch=leader[1])


def _generic(version, topics, throttle, node_endpoints=()) -> bytes:
    """kafka-python's encoding of the same response; the KIP-951 fields exist from v10."""
    kip_951 = version >= 10
    extra = {}
    if kip_951 and node_endpoints:
        extra["node_endpoints"] = [Resp.NodeEndpoint(version=version, node_id=e[0], host=e[1],
                                                     port=e[2], rack=e[3]) for e in node_endpoints]
    body = Resp(version=version, throttle_time_ms=throttle, responses=[
        T(version=version, name=t.name, topic_id=t.topic_id, partition_responses=[
            P(version=version, index=p.index, error_code=p.error_code, base_offset=p.base_offset,
              log_append_time_ms=p.log_append_time_ms, log_start_offset=p.log_start_offset,
              record_errors=[P.BatchIndexAndErrorMessage(
                  version=version, batch_index=i, batch_index_error_message=why)
                  for i, why in p.record_errors] if version >= 8 else [],
              error_message=p.error_message,
              **({"current_leader": _leader(version, p.current_leader)}
                 if kip_951 and p.current_leader is not None else {}))
            for p in t.partitions]) for t in topics], **extra)
    return encode_response(_request(version), body)


i32 = st.integers(-(1 << 31), (1 << 31) - 1)
i64 = st.integers(-1, (1 << 63) - 1)
partitions = st.builds(ProducePartitionResult, st.integers(0, (1 << 31) - 1),
                       st.integers(-1, 120), i64, i64, i64,
                       st.one_of(st.none(), st.text(max_size=200)),
                       current_leader=st.one_of(st.none(), st.tuples(i32, i32)),
                       record_errors=st.lists(st.tuples(i32, st.one_of(st.none(), st.text(max_size=80))),
                                              max_size=3))
topics = st.builds(ProduceTopicResult, st.text(min_size=1, max_size=40),
                   st.builds(uuid.UUID, int=st.integers(0, (1 << 128) - 1)),
                   st.lists(partitions, max_size=4))
endpoints = st.lists(st.builds(NodeEndpoint, i32, st.text(max_size=40), i32,
                               st.one_of(st.none(), st.text(max_size=20))), max_size=3)


@settings(max_examples=200, deadline=None)
@given(st.integers(FIRST_VERSION, LAST_VERSION), st.lists(topics, max_size=4),
       st.integers(0, (1 << 31) - 1), endpoints)
def test_matches_kafka_python_encoder(version, tops, throttle, nodes):
    # Leader hints passed for versions without them are left out, as Kafka's own encoder does.
    got = produce_response_frame(_request(version), tops, throttle_time_ms=throttle,
                                 node_endpoints=nodes)
    assert got == _generic(version, tops, throttle, nodes)


def test_versions_outside_the_range_are_refused():
    with pytest.raises(ValueError):
        produce_response_frame(_request(2), [])


@pytest.mark.parametrize("version", range(10, LAST_VERSION + 1))
@pytest.mark.parametrize("rack", [None, "r1"])
def test_kip_951_leader_hints_match_the_generic_encoder(version, rack):
    part = ProducePartitionResult(0, 6, -1, -1, -1, None, current_leader=(3, 7))
    topic = ProduceTopicResult("t", uuid.UUID(int=9), [part])
    packed = produce_response_frame(_request(version), [topic],
                                    node_endpoints=[NodeEndpoint(3, "broker-3", 9092, rack)])
    body = Resp(version=version, throttle_time_ms=0, responses=[
        T(version=version, name="t", topic_id=uuid.UUID(int=9), partition_responses=[
            P(version=version, index=0, error_code=6, base_offset=-1, log_append_time_ms=-1,
              log_start_offset=-1, record_errors=[], error_message=None,
              current_leader=P.LeaderIdAndEpoch(version=version, leader_id=3, leader_epoch=7))])],
        node_endpoints=[Resp.NodeEndpoint(version=version, node_id=3, host="broker-3", port=9092, rack=rack)])
    assert packed == encode_response(_request(version), body)


@pytest.mark.parametrize("version", range(10, LAST_VERSION + 1))
def test_a_client_decodes_the_leader_hints(version):
    part = ProducePartitionResult(2, 6, -1, -1, -1, "not the leader", current_leader=(3, 7))
    quiet = ProducePartitionResult(5, 0, 40, -1, 0)
    topic = ProduceTopicResult("t", uuid.UUID(int=9), [part, quiet])
    frame = produce_response_frame(_request(version), [topic],
                                   node_endpoints=[NodeEndpoint(3, "broker-3", 9092, "r1"),
                                                   NodeEndpoint(4, "broker-4", 9093)])
    # size prefix (4), correlation id (4), response header tagged fields (1)
    body = Resp.decode(memoryview(frame)[9:], version=version)
    got, untouched = body.responses[0].partition_responses
    assert (got.current_leader.leader_id, got.current_leader.leader_epoch) == (3, 7)
    assert untouched.current_leader is None
    assert [(e.node_id, e.host, e.port, e.rack) for e in body.node_endpoints] == [
        (3, "broker-3", 9092, "r1"), (4, "broker-4", 9093, None)]


@pytest.mark.parametrize("version", [8, 9, LAST_VERSION])
def test_a_client_decodes_the_record_errors(version):
    why = "Compacted topic cannot accept message without key in topic partition t-0"
    part = ProducePartitionResult(0, 87, -1, -1, 0, "One or more records have been rejected",
                                  record_errors=[(1, why), (3, why)])
    frame = produce_response_frame(_request(version), [ProduceTopicResult("t", uuid.UUID(int=9), [part])])
    header = 9 if version >= 9 else 8
    got = Resp.decode(memoryview(frame)[header:], version=version).responses[0].partition_responses[0]
    assert [(e.batch_index, e.batch_index_error_message) for e in got.record_errors] == [
        (1, why), (3, why)]
    assert (got.error_code, got.error_message) == (87, "One or more records have been rejected")
