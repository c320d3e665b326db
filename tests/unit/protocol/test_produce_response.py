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

Resp = m.ProduceResponse
T = Resp.TopicProduceResponse
P = T.PartitionProduceResponse


def _request(version: int, correlation_id: int = 41) -> Request:
    header = RequestHeader(ApiKey.PRODUCE, version, correlation_id, "c", 2 if version >= 9 else 1)
    return Request(ApiKey.PRODUCE, version, correlation_id, "c", header, None, 0)


def _generic(version, topics, throttle) -> bytes:
    body = Resp(version=version, throttle_time_ms=throttle, responses=[
        T(version=version, name=t.name, topic_id=t.topic_id, partition_responses=[
            P(version=version, index=p.index, error_code=p.error_code, base_offset=p.base_offset,
              log_append_time_ms=p.log_append_time_ms, log_start_offset=p.log_start_offset,
              record_errors=[], error_message=p.error_message)
            for p in t.partitions]) for t in topics])
    return encode_response(_request(version), body)


i64 = st.integers(-1, (1 << 63) - 1)
partitions = st.builds(ProducePartitionResult, st.integers(0, (1 << 31) - 1),
                       st.integers(-1, 120), i64, i64, i64,
                       st.one_of(st.none(), st.text(max_size=200)))
topics = st.builds(ProduceTopicResult, st.text(min_size=1, max_size=40),
                   st.builds(uuid.UUID, int=st.integers(0, (1 << 128) - 1)),
                   st.lists(partitions, max_size=4))


@settings(max_examples=150, deadline=None)
@given(st.integers(FIRST_VERSION, LAST_VERSION), st.lists(topics, max_size=4),
       st.integers(0, (1 << 31) - 1))
def test_matches_kafka_python_encoder(version, tops, throttle):
    got = produce_response_frame(_request(version), tops, throttle_time_ms=throttle)
    assert got == _generic(version, tops, throttle)


def test_versions_outside_the_range_are_refused():
    with pytest.raises(ValueError):
        produce_response_frame(_request(2), [])
