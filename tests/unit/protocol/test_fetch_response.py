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
from kafkapy.protocol.leader_hints import NodeEndpoint

VERSIONS = range(FIRST_VERSION, LAST_VERSION + 1)
Resp = m.FetchResponse
T = Resp.FetchableTopicResponse
P = T.PartitionData


def _request(version: int, correlation_id: int = 99) -> Request:
    header = RequestHeader(ApiKey.FETCH, version, correlation_id, "c", 2 if version >= 12 else 1)
    return Request(ApiKey.FETCH, version, correlation_id, "c", header, None, 0)


def _partition_tags(version, p) -> dict:
    """The tagged fields of ``p`` as PartitionData keywords (they exist from v12)."""
    tags = {}
    if version >= 12 and p.diverging_epoch is not None:
        tags["diverging_epoch"] = P.EpochEndOffset(version=version, epoch=p.diverging_epoch[0],
                                                   end_offset=p.diverging_epoch[1])
    if version >= 12 and p.current_leader is not None:
        tags["current_leader"] = P.LeaderIdAndEpoch(version=version, leader_id=p.current_leader[0],
                                                    leader_epoch=p.current_leader[1])
    return tags


def _aborted(version, aborted) -> list | None:
    """``aborted`` as kafka-python's AbortedTransaction entries (None stays null)."""
    if aborted is None:
        return None
    return [P.AbortedTransaction(version=version, producer_id=pid, first_offset=first)
            for pid, first in aborted]


def _generic(version, throttle, error, session, topics, node_endpoints=()) -> bytes:
    """kafka-python's encoding of the same response."""
    extra = {}
    if version >= 16 and node_endpoints:
        extra["node_endpoints"] = [Resp.NodeEndpoint(version=version, node_id=e[0], host=e[1],
                                                     port=e[2], rack=e[3]) for e in node_endpoints]
    body = Resp(version=version, throttle_time_ms=throttle, error_code=error, session_id=session,
                responses=[T(version=version, topic=t.name, topic_id=t.topic_id, partitions=[
                    P(version=version, partition_index=p.partition_index, error_code=p.error_code,
                      high_watermark=p.high_watermark, last_stable_offset=p.last_stable_offset,
                      log_start_offset=p.log_start_offset,
                      aborted_transactions=_aborted(version, p.aborted_transactions),
                      preferred_read_replica=p.preferred_read_replica,
                      records=None if p.records is None else bytes(p.records),
                      **_partition_tags(version, p))
                    for p in t.partitions]) for t in topics], **extra)
    return encode_response(_request(version), body)


def _join(parts) -> bytes:
    out = bytearray()
    for part in parts:
        if isinstance(part, FileRegion):
            out += os.pread(part.fd, part.count, part.offset)
        else:
            out += part
    return bytes(out)


i32 = st.integers(-(1 << 31), (1 << 31) - 1)
i64 = st.integers(-1, (1 << 63) - 1)
partitions = st.builds(FetchPartitionResult, st.integers(0, 1 << 31 - 1), st.integers(-1, 120),
                       i64, i64, i64, st.one_of(st.none(), st.binary(max_size=300)),
                       diverging_epoch=st.one_of(st.none(), st.tuples(i32, i64)),
                       current_leader=st.one_of(st.none(), st.tuples(i32, i32)),
                       aborted_transactions=st.one_of(st.none(), st.lists(st.tuples(i64, i64),
                                                                          max_size=5)),
                       preferred_read_replica=st.integers(-1, (1 << 31) - 1))
topics = st.builds(FetchTopicResult, st.text(min_size=1, max_size=40),
                   st.builds(uuid.UUID, int=st.integers(0, (1 << 128) - 1)),
                   st.lists(partitions, max_size=4))
endpoints = st.lists(st.builds(NodeEndpoint, i32, st.text(max_size=40), i32,
                               st.one_of(st.none(), st.text(max_size=20))), max_size=3)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(list(VERSIONS)), st.integers(0, 1 << 31 - 1), st.integers(-1, 120),
       st.integers(0, (1 << 31) - 1), st.lists(topics, max_size=4), endpoints)
def test_matches_kafka_python_encoder(version, throttle, error, session, tops, nodes):
    # Tagged fields given for versions without them are left out, as Kafka's own encoder does.
    got = _join(fetch_response_parts(_request(version), throttle_time_ms=throttle,
                                     error_code=error, session_id=session, topics=tops,
                                     node_endpoints=nodes))
    assert got == _generic(version, throttle, error, session, tops, nodes)


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


@pytest.mark.parametrize("version", range(16, LAST_VERSION + 1))
def test_kip_951_node_endpoints_match_the_generic_encoder(version):
    part = FetchPartitionResult(0, 6, -1, -1, -1, b"", current_leader=(2, 4))
    topic = FetchTopicResult("t", uuid.UUID(int=5), [part])
    packed = _join(fetch_response_parts(_request(version), throttle_time_ms=0, error_code=0, session_id=0,
                                        topics=[topic], node_endpoints=[NodeEndpoint(2, "h", 1234, None)]))
    body = Resp(version=version, throttle_time_ms=0, error_code=0, session_id=0,
                responses=[T(version=version, topic="t", topic_id=uuid.UUID(int=5), partitions=[
                    P(version=version, partition_index=0, error_code=6, high_watermark=-1,
                      last_stable_offset=-1, log_start_offset=-1, aborted_transactions=None,
                      preferred_read_replica=-1, records=b"",
                      current_leader=P.LeaderIdAndEpoch(version=version, leader_id=2, leader_epoch=4))])],
                node_endpoints=[Resp.NodeEndpoint(version=version, node_id=2, host="h", port=1234, rack=None)])
    assert packed == encode_response(_request(version), body)


@pytest.mark.parametrize("version", range(12, LAST_VERSION + 1))
def test_the_replica_fetcher_decodes_the_tagged_fields(version):
    # Our KafkaClient decodes Fetch responses with m.FetchResponse: the follower must see the
    # diverging epoch, a client the current leader and its endpoint, and untagged partitions none.
    with tempfile.TemporaryFile() as f:
        f.write(b"\x07" * 64)
        f.flush()
        parts = [FetchPartitionResult(0, 0, 10, 10, 0, b"", diverging_epoch=(3, 120)),
                 FetchPartitionResult(1, 6, -1, -1, -1, None, current_leader=(2, 9)),
                 FetchPartitionResult(2, 0, 64, 64, 0, FileRegion(f.fileno(), 0, 64))]
        frame = _join(fetch_response_parts(
            _request(version), throttle_time_ms=0, error_code=0, session_id=0,
            topics=[FetchTopicResult("t", uuid.UUID(int=5), parts)],
            node_endpoints=[NodeEndpoint(2, "broker-2", 9092, "rack-b")]))
    # size prefix (4), correlation id (4), response header tagged fields (1)
    body = Resp.decode(memoryview(frame)[9:], version=version)
    diverged, moved, plain = body.responses[0].partitions
    assert (diverged.diverging_epoch.epoch, diverged.diverging_epoch.end_offset) == (3, 120)
    assert diverged.current_leader is None
    assert (moved.current_leader.leader_id, moved.current_leader.leader_epoch) == (2, 9)
    assert moved.diverging_epoch is None
    assert plain.diverging_epoch is None and plain.current_leader is None
    assert bytes(plain.records) == b"\x07" * 64
    endpoints = [(e.node_id, e.host, e.port, e.rack) for e in (body.node_endpoints or [])]
    assert endpoints == ([(2, "broker-2", 9092, "rack-b")] if version >= 16 else [])


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("aborted", [None, [], [(7, 0)], [(7, 0), (9, 12), ((1 << 63) - 1, 5)]])
def test_aborted_transactions_null_empty_and_listed(version, aborted):
    # null (read_uncommitted), an empty array (read_committed, nothing aborted) and entries all
    # encode as Kafka's generated code does: a non-flexible array below v12, compact from v12.
    part = FetchPartitionResult(3, 0, 40, 30, 0, b"", aborted_transactions=aborted)
    topic = FetchTopicResult("t", uuid.UUID(int=5), [part])
    packed = _join(fetch_response_parts(_request(version), throttle_time_ms=0, error_code=0,
                                        session_id=0, topics=[topic]))
    assert packed == _generic(version, 0, 0, 0, [topic])
    header = 8 + (1 if version >= 12 else 0)
    got = Resp.decode(memoryview(packed)[header:], version=version).responses[0].partitions[0]
    if aborted is None:
        assert got.aborted_transactions is None
    else:
        assert [(a.producer_id, a.first_offset) for a in got.aborted_transactions] == aborted
