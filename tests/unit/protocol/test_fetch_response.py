"""protocol.fetch_response writes exactly what kafka-python's encoder writes for the same response."""

from __future__ import annotations

import os
import tempfile
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.protocol import ApiKey, FileRegion, Request, RequestHeader, encode_response
from kafkapy.protocol import messages as m
from kafkapy.protocol.fetch_response import (
    FIRST_VERSION,
    LAST_VERSION,
    FetchPartitionResult,
    FetchTopicResult,
    fetch_response_parts,
)

VERSIONS = range(FIRST_VERSION, LAST_VERSION + 1)
Resp = m.FetchResponse
T = Resp.FetchableTopicResponse
P = T.PartitionData


def _request(version: int, correlation_id: int = 99) -> Request:
    header = RequestHeader(ApiKey.FETCH, version, correlation_id, "c", 2 if version >= 12 else 1)
    return Request(ApiKey.FETCH, version, correlation_id, "c", header, None, 0)


def _generic(version, throttle, error, session, topics) -> bytes:
    body = Resp(version=version, throttle_time_ms=throttle, error_code=error, session_id=session,
                responses=[T(version=version, topic=t.name, topic_id=t.topic_id, partitions=[
                    P(version=version, partition_index=p.partition_index, error_code=p.error_code,
                      high_watermark=p.high_watermark, last_stable_offset=p.last_stable_offset,
                      log_start_offset=p.log_start_offset, aborted_transactions=None,
                      preferred_read_replica=-1,
                      records=None if p.records is None else bytes(p.records))
                    for p in t.partitions]) for t in topics])
    return encode_response(_request(version), body)


def _join(parts) -> bytes:
    out = bytearray()
    for part in parts:
        if isinstance(part, FileRegion):
            out += os.pread(part.fd, part.count, part.offset)
        else:
            out += part
    return bytes(out)


i64 = st.integers(-1, (1 << 63) - 1)
partitions = st.builds(FetchPartitionResult, st.integers(0, 1 << 31 - 1), st.integers(-1, 120),
                       i64, i64, i64, st.one_of(st.none(), st.binary(max_size=300)),
                       diverging_epoch=st.none(), current_leader=st.none())
topics = st.builds(FetchTopicResult, st.text(min_size=1, max_size=40),
                   st.builds(uuid.UUID, int=st.integers(0, (1 << 128) - 1)),
                   st.lists(partitions, max_size=4))


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(list(VERSIONS)), st.integers(0, 1 << 31 - 1), st.integers(-1, 120),
       st.integers(0, (1 << 31) - 1), st.lists(topics, max_size=4))
def test_matches_kafka_python_encoder(version, throttle, error, session, tops):
    got = _join(fetch_response_parts(_request(version), throttle_time_ms=throttle,
                                     error_code=error, session_id=session, topics=tops))
    assert got == _generic(version, throttle, error, session, tops)


@pytest.mark.parametrize("version", VERSIONS)
def test_file_regions_become_parts(version):
    with tempfile.TemporaryFile() as f:
        data = bytes(range(256)) * 40
        f.write(data)
        f.flush()
        fd = f.fileno()
        regions = [FileRegion(fd, 0, 1000), FileRegion(fd, 1000, 0), FileRegion(fd, 5000, 4000)]
        tops = [FetchTopicResult("a", uuid.UUID(int=1), [
                    FetchPartitionResult(0, 0, 10, 10, 0, regions[0]),
                    FetchPartitionResult(1, 0, 10, 10, 0, regions[1])]),
                FetchTopicResult("b", uuid.UUID(int=2), [
                    FetchPartitionResult(7, 0, 99, 99, 3, regions[2]),
                    FetchPartitionResult(8, 1, -1, -1, -1, b"")])]
        parts = fetch_response_parts(_request(version), throttle_time_ms=0, error_code=0,
                                     session_id=5, topics=tops)
        assert [p for p in parts if isinstance(p, FileRegion)] == [regions[0], regions[2]]
        def read(r):
            return data[r.offset:r.offset + r.count] if isinstance(r, FileRegion) else r

        as_bytes = [t._replace(partitions=[p._replace(records=read(p.records))
                                           for p in t.partitions]) for t in tops]
        assert _join(parts) == _generic(version, 0, 0, 5, as_bytes)


def test_versions_outside_the_range_are_refused():
    with pytest.raises(ValueError):
        fetch_response_parts(_request(3), throttle_time_ms=0, error_code=0, session_id=0,
                             topics=[])


@pytest.mark.parametrize("version", range(12, LAST_VERSION + 1))
@pytest.mark.parametrize("diverging,leader", [((3, 120), None), (None, (2, 7)), ((0, 5), (4, 9))])
def test_tagged_diverging_epoch_and_current_leader_match_the_generic_encoder(version, diverging, leader):
    part = FetchPartitionResult(0, 0, 10, 10, 0, b"", diverging_epoch=diverging, current_leader=leader)
    topic = FetchTopicResult("t", uuid.UUID(int=5), [part])
    fields = dict(partition_index=0, error_code=0, high_watermark=10, last_stable_offset=10,
                  log_start_offset=0, aborted_transactions=None, preferred_read_replica=-1, records=b"")
    if diverging is not None:
        fields["diverging_epoch"] = P.EpochEndOffset(version=version, epoch=diverging[0],
                                                     end_offset=diverging[1])
    if leader is not None:
        fields["current_leader"] = P.LeaderIdAndEpoch(version=version, leader_id=leader[0],
                                                      leader_epoch=leader[1])
    body = Resp(version=version, throttle_time_ms=0, error_code=0, session_id=0,
                responses=[T(version=version, topic="t", topic_id=uuid.UUID(int=5),
                             partitions=[P(version=version, **fields)])])
    expected = encode_response(_request(version), body)
    packed = _join(fetch_response_parts(_request(version), throttle_time_ms=0, error_code=0,
                                        session_id=0, topics=[topic]))
    assert packed == expected
    decoded = Resp.decode(memoryview(packed)[8 + 1:], version=version)
    got = decoded.responses[0].partitions[0]
    if diverging is not None:
        assert (got.diverging_epoch.epoch, got.diverging_epoch.end_offset) == diverging
