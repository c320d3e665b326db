"""Fetch responses go out with sendfile; their wire bytes equal the copying encoder's.

A raw socket reads the exact frame the node sends (size prefix, header, body with the record bytes
spliced in by ``os.sendfile``). The same response is decoded and re-encoded with the ordinary
in-memory encoder (``protocol.encode_response``, records as bytes); both must match byte for byte,
for every Fetch version we serve and for fetches spanning several partitions and topics.
"""

from __future__ import annotations

import socket
import struct

import pytest
from helpers import batch, create_topics, produce, run_client

from kafkapy.testing.node import recv_exactly
from kafkapy.protocol import ApiKey, Request, RequestHeader, encode_response
from kafkapy.protocol import messages as m
from kafkapy.protocol.apis import response_class

TOPICS = ("zc-a", "zc-b")


@pytest.fixture(scope="module")
def loaded(node):
    async def scenario(c):
        await c.send(create_topics(*((t, 3, 1) for t in TOPICS)))
        for t in TOPICS:
            for p in range(3):
                for i in range(4):  # several batches, so cuts fall between batches
                    values = [b"%s-%d-%d-%d" % (t.encode(), p, i, j) * (j + 1) for j in range(50)]
                    resp = await c.send(produce(t, p, batch(values)))
                    assert resp.responses[0].partition_responses[0].error_code == 0
        topic_ids = {}
        md = await c.send(m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=t)
                                                     for t in TOPICS],
                                            allow_auto_topic_creation=False,
                                            include_topic_authorized_operations=False))
        for t in md.topics:
            topic_ids[t.name] = t.topic_id
        return topic_ids

    return run_client(node, scenario)


def _fetch_request(topic_ids, version: int, *, offset: int, partition_max: int, max_bytes: int):
    Req = m.FetchRequest
    topics = []
    for t in TOPICS:
        topics.append(Req.FetchTopic(
            topic=t, topic_id=topic_ids[t],
            partitions=[Req.FetchTopic.FetchPartition(
                partition=p, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                log_start_offset=-1, partition_max_bytes=partition_max) for p in range(3)]))
    return Req(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=max_bytes, isolation_level=0,
               session_id=0, session_epoch=-1, topics=topics, forgotten_topics_data=[],
               rack_id="")


@pytest.mark.parametrize("version", [4, 7, 11, 12, 13, 15, 16])
@pytest.mark.parametrize("offset,partition_max,max_bytes", [
    (0, 1 << 20, 1 << 20),       # everything
    (60, 3000, 1 << 20),         # mid-log, cut by the partition limit
    (0, 1 << 20, 5000),          # cut by the response limit: later partitions get nothing
    (1000, 1 << 20, 1 << 20),    # past the end: OFFSET_OUT_OF_RANGE everywhere
])
def test_sendfile_fetch_is_byte_exact(node, loaded, version, offset, partition_max, max_bytes):
    request = _fetch_request(loaded, version, offset=offset, partition_max=partition_max,
                             max_bytes=max_bytes)
    correlation_id = 4242 + version
    request.with_header(correlation_id=correlation_id, client_id="zero-copy")
    frame = request.encode(version=version, header=True, framed=True)
    with socket.create_connection((node.host, node.port), timeout=10) as s:
        s.sendall(frame)
        (size,) = struct.unpack(">i", recv_exactly(s, 4))
        wire = recv_exactly(s, size)
    flexible = version >= 12
    header_len = 5 if flexible else 4
    (got_id,) = struct.unpack_from(">i", wire)
    assert got_id == correlation_id
    body = response_class(ApiKey.FETCH).decode(memoryview(wire)[header_len:], version=version)
    body._header = None  # decoded without a header; encode the body alone
    if offset < 1000:
        assert any(p.records for t in body.responses for p in t.partitions)
    # The same response through the in-memory encoder.
    req = Request(ApiKey.FETCH, version, correlation_id, "zero-copy",
                  RequestHeader(ApiKey.FETCH, version, correlation_id, "zero-copy",
                                2 if flexible else 1), request, size)
    for t in body.responses:
        for p in t.partitions:
            if p.records is not None:
                p.records = bytes(p.records)
    expected = encode_response(req, body)
    assert struct.pack(">i", size) + wire == expected


def test_incremental_session_names_topics_of_earlier_requests(node, loaded):
    """v13+ responses carry topic ids; an incremental fetch answers for partitions named only in
    the session's first request, so their ids come from metadata, not from the request."""
    Req = m.FetchRequest

    def req(session_id, epoch, topics):
        return Req(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                   isolation_level=0, session_id=session_id, session_epoch=epoch, topics=topics,
                   forgotten_topics_data=[], rack_id="")

    async def scenario(c):
        md = await c.send(m.MetadataRequest(
            topics=[m.MetadataRequest.MetadataRequestTopic(name="zc-a")],
            allow_auto_topic_creation=False, include_topic_authorized_operations=False))
        topic_id = md.topics[0].topic_id
        ends = {}
        for p in range(3):
            resp = await c.send(produce("zc-a", p, batch([b"before"])))
            ends[p] = resp.responses[0].partition_responses[0].base_offset + 1
        first = await c.send(req(0, 0, [Req.FetchTopic(topic="zc-a", topic_id=topic_id, partitions=[
            Req.FetchTopic.FetchPartition(partition=p, current_leader_epoch=-1,
                                          fetch_offset=ends[p], last_fetched_epoch=-1,
                                          log_start_offset=-1, partition_max_bytes=1 << 20)
            for p in range(3)])]), version=16)
        assert first.error_code == 0 and first.session_id != 0
        await c.send(produce("zc-a", 1, batch([b"after"])))
        second = await c.send(req(first.session_id, 1, []), version=16)
        assert second.error_code == 0
        assert [t.topic_id for t in second.responses] == [topic_id]
        got = second.responses[0].partitions
        assert [(p.partition_index, p.error_code) for p in got] == [(1, 0)] and got[0].records

    run_client(node, scenario)
