"""ServerConnection: framing, headers, version policy, response encoding, error responses."""

from __future__ import annotations

import struct
import uuid

import pytest
from protocol_samples import sample

from kafkapy.protocol import (
    CLOSED,
    NEED_DATA,
    ApiKey,
    ApiVersionsTable,
    ErrorCode,
    FileRegion,
    FrameTooLarge,
    LocalProtocolError,
    MalformedFrame,
    MalformedHeader,
    MalformedRequest,
    Request,
    ServerConnection,
    UnknownApiKey,
    UnsupportedApiVersion,
    encode_response,
    encode_response_parts,
    error_response,
    frame_parts,
    request_class,
    response_class,
)
from kafkapy.protocol import messages as m

EVERYTHING = ApiVersionsTable.everything()


def frame_of(body, version: int, correlation_id: int = 7, client_id: str | None = "test-client") -> bytes:
    body.with_header(correlation_id=correlation_id, client_id=client_id)
    return body.encode(version=version, header=True, framed=True)


def one_request(data: bytes, table: ApiVersionsTable = EVERYTHING) -> Request:
    conn = ServerConnection(table)
    conn.receive_data(data)
    req = conn.next_request()
    assert isinstance(req, Request)
    assert conn.next_request() is NEED_DATA
    return req


def decode_response_frame(frame: bytes, api_key: int, version: int, flexible_header: bool):
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    (corr,) = struct.unpack_from(">i", frame, 4)
    pos = 8
    if flexible_header:
        assert frame[8] == 0  # empty tagged-field section of response header v1
        pos = 9
    body = response_class(api_key).decode(frame[pos:], version=version)
    return corr, body


CASES = [(r.api_key, v) for r in EVERYTHING for v in sorted({r.min_version, r.max_version})]


@pytest.mark.parametrize(("api_key", "version"), CASES,
                         ids=[f"{ApiKey.name_of(k)}-v{v}" for k, v in CASES])
def test_every_api_round_trips_at_min_and_max_version(api_key: int, version: int) -> None:
    req_cls, resp_cls = request_class(api_key), response_class(api_key)
    original = sample(req_cls, version)
    data = frame_of(original, version, correlation_id=1234)
    req = one_request(data)
    assert req.api_key == api_key and req.api_version == version
    assert req.correlation_id == 1234 and req.client_id == "test-client"
    assert req.size == len(data) - 4
    assert req.header.version == (2 if req_cls.flexible_version_q(version) else 1)
    assert not req.unsupported_version
    original._header = None
    assert req.body.to_dict() == original.to_dict()
    assert req.body.encode(version=version) == original.encode(version=version)

    response = sample(resp_cls, version)
    if api_key == ApiKey.API_VERSIONS:
        response.error_code = 0  # a non-zero code makes clients read the body as v0 (KIP-511)
    frame = encode_response(req, response)
    flexible_header = api_key != ApiKey.API_VERSIONS and resp_cls.flexible_version_q(version)
    corr, decoded = decode_response_frame(frame, api_key, version, flexible_header)
    assert corr == 1234
    assert decoded.to_dict() == response.to_dict()


def test_kraft_schema_of_our_own_round_trips_with_tagged_field() -> None:
    hb = m.BrokerHeartbeatRequest(broker_id=3, broker_epoch=9, current_metadata_offset=100,
                                  want_fence=False, want_shut_down=True,
                                  offline_log_dirs=[uuid.UUID(int=5)])
    req = one_request(frame_of(hb, 1))
    assert req.api_key == ApiKey.BROKER_HEARTBEAT
    assert req.body.offline_log_dirs == [uuid.UUID(int=5)]
    assert req.body.want_shut_down is True
    # v0 has no OfflineLogDirs at all
    assert one_request(frame_of(hb, 0)).body.offline_log_dirs == []


def test_byte_by_byte_feed_and_several_frames_in_one_feed() -> None:
    frames = [frame_of(m.MetadataRequest(topics=None), v, correlation_id=i)
              for i, v in enumerate([0, 4, 9, 12, 13])]
    conn = ServerConnection(EVERYTHING)
    seen = []
    for byte in b"".join(frames):
        conn.receive_data(bytes([byte]))
        while (ev := conn.next_request()) is not NEED_DATA:
            seen.append(ev)
    assert [r.correlation_id for r in seen] == [0, 1, 2, 3, 4]
    assert [r.api_version for r in seen] == [0, 4, 9, 12, 13]

    conn = ServerConnection(EVERYTHING)
    conn.receive_data(b"".join(frames) + frames[0][:3])
    got = []
    while (ev := conn.next_request()) is not NEED_DATA:
        got.append(ev.correlation_id)
    assert got == [0, 1, 2, 3, 4]
    conn.receive_data(frames[0][3:])
    assert conn.next_request().correlation_id == 0


def test_large_frame_in_chunks_is_linear_and_exact() -> None:
    records = bytes(range(256)) * 4096  # 1 MiB
    P = m.ProduceRequest
    body = P(acks=-1, timeout_ms=1000, transactional_id=None, topic_data=[
        P.TopicProduceData(name="t", partition_data=[P.TopicProduceData.PartitionProduceData(
            index=0, records=records)])])
    data = frame_of(body, 9)
    conn = ServerConnection(EVERYTHING)
    for i in range(0, len(data), 1000):
        conn.receive_data(data[i:i + 1000])
    req = conn.next_request()
    assert req.body.topic_data[0].partition_data[0].records == records
    assert req.expects_response


def test_receive_buffer_takes_the_rest_of_a_frame_in_place() -> None:
    # What net/server.py does with socket.recv_into: the prefix and the frame's start through
    # receive_data, the rest written straight into the frame's own buffer.
    records = bytes(range(256)) * 512
    P = m.ProduceRequest
    body = P(acks=-1, timeout_ms=1000, transactional_id=None, topic_data=[
        P.TopicProduceData(name="t", partition_data=[P.TopicProduceData.PartitionProduceData(
            index=0, records=records)])])
    data = frame_of(body, 9) + frame_of(body, 9, correlation_id=8)
    conn = ServerConnection(EVERYTHING)
    assert conn.receive_buffer() is None  # a size prefix comes first
    conn.receive_data(data[:100])
    pos = 100
    got = []
    while pos < len(data):
        view = conn.receive_buffer()
        if view is None:
            conn.receive_data(data[pos:pos + 3])  # the next prefix, split
            pos += 3
        else:
            n = min(len(view), 7000)
            view[:n] = data[pos:pos + n]
            view.release()
            conn.received_into(n)
            pos += n
        event = conn.next_request()
        if isinstance(event, Request):
            got.append(event)
    assert [r.correlation_id for r in got] == [7, 8]
    assert all(r.body.topic_data[0].partition_data[0].records == records for r in got)
    with pytest.raises(LocalProtocolError):
        conn.received_into(1)  # no frame in progress


def test_oversize_and_negative_sizes_fail_before_buffering() -> None:
    conn = ServerConnection(EVERYTHING, max_request_bytes=100)
    conn.receive_data(struct.pack(">i", 101))
    with pytest.raises(FrameTooLarge) as info:
        conn.next_request()
    assert info.value.size == 101 and "larger than 100" in str(info.value)
    conn.receive_data(b"more bytes are ignored")
    with pytest.raises(FrameTooLarge):
        conn.next_request()  # the error sticks

    conn = ServerConnection(EVERYTHING)
    conn.receive_data(b"\xff\xff")
    assert conn.next_request() is NEED_DATA
    conn.receive_data(b"\xff\xfe")
    with pytest.raises(MalformedFrame):
        conn.next_request()

    # An HTTP request on the Kafka port is a 1.2 GB "frame".
    conn = ServerConnection(EVERYTHING)
    conn.receive_data(b"GET / HTTP/1.1\r\n\r\n")
    with pytest.raises(FrameTooLarge):
        conn.next_request()


def test_frame_exactly_at_the_limit_is_accepted() -> None:
    data = frame_of(m.MetadataRequest(topics=None), 1)
    conn = ServerConnection(EVERYTHING, max_request_bytes=len(data) - 4)
    conn.receive_data(data)
    assert isinstance(conn.next_request(), Request)


def test_requests_before_a_bad_frame_are_still_delivered() -> None:
    good = frame_of(m.MetadataRequest(topics=None), 1)
    conn = ServerConnection(EVERYTHING, max_request_bytes=1000)
    conn.receive_data(good + struct.pack(">i", 5000))
    assert isinstance(conn.next_request(), Request)
    with pytest.raises(FrameTooLarge):
        conn.next_request()


def test_unreadable_headers() -> None:
    for payload in (b"", b"\x00\x03\x00", b"\x00\x03\x00\x01\x00\x00\x00\x01",
                    b"\x00\x03\x00\x01\x00\x00\x00\x01\x00\x09ab"):
        conn = ServerConnection(EVERYTHING)
        conn.receive_data(struct.pack(">i", len(payload)) + payload)
        with pytest.raises(MalformedHeader):
            conn.next_request()
    # flexible header with a truncated tagged-field section
    payload = struct.pack(">hhih", 3, 12, 1, -1) + b"\x01\x00\x05ab"
    conn = ServerConnection(EVERYTHING)
    conn.receive_data(struct.pack(">i", len(payload)) + payload)
    with pytest.raises(MalformedHeader):
        conn.next_request()


def test_null_client_id_and_header_tagged_fields() -> None:
    payload = struct.pack(">hhih", 3, 12, 5, -1) + b"\x01\x07\x02hi" + m.MetadataRequest(
        topics=None).encode(version=12)
    req = one_request(struct.pack(">i", len(payload)) + payload)
    assert req.client_id is None
    assert req.header.tagged_fields == {7: b"hi"}


def test_unknown_and_unserved_api_keys() -> None:
    payload = struct.pack(">hhih", 999, 0, 3, 2) + b"me"
    conn = ServerConnection(EVERYTHING)
    conn.receive_data(struct.pack(">i", len(payload)) + payload)
    with pytest.raises(UnknownApiKey) as info:
        conn.next_request()
    assert info.value.api_key == 999 and info.value.client_id == "me"
    assert "Unknown API key 999" in str(info.value)

    only_meta = ApiVersionsTable([(ApiKey.METADATA, 0, 12)])
    conn = ServerConnection(only_meta)
    conn.receive_data(frame_of(m.FindCoordinatorRequest(key="g"), 1))
    with pytest.raises(UnknownApiKey, match="FindCoordinator"):
        conn.next_request()


def test_unsupported_version_of_other_apis_disconnects() -> None:
    table = ApiVersionsTable([(ApiKey.API_VERSIONS, 0, 4), (ApiKey.PRODUCE, 3, 9)])
    P = m.ProduceRequest
    conn = ServerConnection(table)
    conn.receive_data(frame_of(P(acks=1, timeout_ms=1, topic_data=[]), 10, client_id="old"))
    with pytest.raises(UnsupportedApiVersion) as info:
        conn.next_request()
    assert info.value.api_version == 10 and info.value.client_id == "old"
    assert "not enabled" in str(info.value)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_supported_versions(version: int) -> None:
    table = ApiVersionsTable([(ApiKey.API_VERSIONS, 0, 4), (ApiKey.METADATA, 0, 12)])
    body = m.ApiVersionsRequest(client_software_name="x", client_software_version="1")
    req = one_request(frame_of(body, version, correlation_id=77), table)
    assert not req.unsupported_version and req.response_version == version
    frame = encode_response(req, table.response(req.api_version))
    # ApiVersions always answers with response header v0, even for flexible versions
    corr, decoded = decode_response_frame(frame, ApiKey.API_VERSIONS, version, flexible_header=False)
    assert corr == 77 and decoded.error_code == 0
    assert [(k.api_key, k.min_version, k.max_version) for k in decoded.api_keys] == [(3, 0, 12), (18, 0, 4)]


def test_api_versions_unsupported_version_gets_v0_unsupported_version_answer() -> None:
    table = ApiVersionsTable([(ApiKey.API_VERSIONS, 0, 3), (ApiKey.METADATA, 0, 12)])
    # v99 with a v2 header (as Kafka reads any ApiVersions version >= 3) and a body we can't know
    payload = struct.pack(">hhih", 18, 99, 31, 3) + b"cli" + b"\x00" + b"\xde\xad\xbe\xef"
    req = one_request(struct.pack(">i", len(payload)) + payload, table)
    assert req.unsupported_version and req.api_version == 99 and req.response_version == 0
    assert req.client_id == "cli"
    frame = encode_response(req, table.response(req.api_version))
    # As Kafka: only the ApiVersions range, for the client to retry at a version we serve
    expected_body = struct.pack(">hi", 35, 1) + struct.pack(">hhh", 18, 0, 3)
    assert frame == struct.pack(">ii", 4 + len(expected_body), 31) + expected_body
    # v4 is only unsupported because the table stops at 3
    body = m.ApiVersionsRequest(client_software_name="x", client_software_version="1")
    req = one_request(frame_of(body, 4), table)
    assert req.unsupported_version
    assert encode_response(req, table.response(4)) == encode_response(req, table.response(99))


def test_malformed_bodies() -> None:
    good = frame_of(m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name="abc")]), 9)
    # truncated body (size prefix adjusted so the frame itself is complete)
    for cut in (1, 3, 5):
        body = good[4:-cut]
        conn = ServerConnection(EVERYTHING)
        conn.receive_data(struct.pack(">i", len(body)) + body)
        with pytest.raises(MalformedRequest) as info:
            conn.next_request()
        assert info.value.api_key == ApiKey.METADATA and info.value.correlation_id == 7
    # a string length running past the end
    body = bytearray(good[4:])
    conn = ServerConnection(EVERYTHING)
    body[body.index(b"\x04abc")] = 0x7F
    conn.receive_data(struct.pack(">i", len(body)) + bytes(body))
    with pytest.raises(MalformedRequest):
        conn.next_request()


def test_eof_and_misuse() -> None:
    data = frame_of(m.MetadataRequest(topics=None), 1)
    conn = ServerConnection(EVERYTHING)
    conn.receive_data(data + data[:5])
    conn.receive_data(b"")
    assert isinstance(conn.next_request(), Request)
    assert conn.next_request() is CLOSED
    assert conn.their_state_closed
    with pytest.raises(LocalProtocolError):
        conn.receive_data(b"x")


def test_encode_response_rejects_wrong_body_type() -> None:
    req = one_request(frame_of(m.MetadataRequest(topics=None), 1))
    with pytest.raises(LocalProtocolError):
        encode_response(req, m.ProduceResponse(responses=[]))
    bad = m.MetadataResponse(brokers=[], topics=[], controller_id="not an int")
    with pytest.raises(LocalProtocolError):
        encode_response(req, bad)


def test_acks_zero_produce_expects_no_response() -> None:
    req = one_request(frame_of(m.ProduceRequest(acks=0, timeout_ms=1, topic_data=[]), 9))
    assert not req.expects_response


# -- error responses ------------------------------------------------------------------------------


def _request(body, version: int) -> Request:
    return one_request(frame_of(body, version))


def _roundtrip(req: Request, body):
    frame = encode_response(req, body)
    cls = response_class(req.api_key)
    flexible = req.api_key != ApiKey.API_VERSIONS and cls.flexible_version_q(req.response_version)
    return decode_response_frame(frame, req.api_key, req.response_version, flexible)[1]


@pytest.mark.parametrize(("api_key", "version"), CASES,
                         ids=[f"{ApiKey.name_of(k)}-v{v}" for k, v in CASES])
def test_error_response_is_none_or_encodable_for_every_api(api_key: int, version: int) -> None:
    req = _request(sample(request_class(api_key), version), version)
    body = error_response(req, ErrorCode.UNKNOWN_SERVER_ERROR)
    if body is None:
        assert "error_code" not in response_class(api_key)._struct.fields or not \
            response_class(api_key)._struct.fields["error_code"].for_version_q(version)
        return
    if api_key == ApiKey.API_VERSIONS:
        # kafka-python reads any failed ApiVersions response as v0; check the code bytes instead
        assert encode_response(req, body)[8:10] == b"\xff\xff"
        return
    decoded = _roundtrip(req, body)
    if "error_code" in decoded._struct.fields and decoded._struct.fields["error_code"].for_version_q(version):
        assert decoded.error_code == -1


def test_error_response_mirrors_produce_partitions() -> None:
    P = m.ProduceRequest
    body = P(acks=1, timeout_ms=5, topic_data=[
        P.TopicProduceData(name="a", partition_data=[P.TopicProduceData.PartitionProduceData(index=i, records=b"")
                                                     for i in (0, 2)]),
        P.TopicProduceData(name="b", partition_data=[P.TopicProduceData.PartitionProduceData(index=1, records=b"")])])
    for version in (3, 8, 11):
        resp = _roundtrip(_request(body, version), error_response(_request(body, version), ErrorCode.NOT_LEADER_OR_FOLLOWER))
        got = [(t.name, p.index, p.error_code, p.base_offset) for t in resp.responses for p in t.partition_responses]
        assert got == [("a", 0, 6, -1), ("a", 2, 6, -1), ("b", 1, 6, -1)]


def test_error_response_fetch_old_and_new() -> None:
    F = m.FetchRequest
    body = F(max_wait_ms=1, min_bytes=1, topics=[F.FetchTopic(topic="t", topic_id=uuid.UUID(int=9), partitions=[
        F.FetchTopic.FetchPartition(partition=3, fetch_offset=0, partition_max_bytes=10)])])
    old = _roundtrip(_request(body, 12), error_response(_request(body, 12), ErrorCode.UNKNOWN_SERVER_ERROR))
    assert old.error_code == -1
    assert [(t.topic, p.partition_index, p.error_code, p.high_watermark) for t in old.responses
            for p in t.partitions] == [("t", 3, -1, -1)]
    new = _roundtrip(_request(body, 13), error_response(_request(body, 13), ErrorCode.UNKNOWN_SERVER_ERROR))
    assert new.error_code == -1 and new.responses == []


def test_error_response_shapes_of_the_listed_apis() -> None:
    req = _request(m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name="x")]), 12)
    resp = _roundtrip(req, error_response(req, 29))
    assert [(t.name, t.error_code) for t in resp.topics] == [("x", 29)]
    req = _request(m.MetadataRequest(topics=None), 13)
    assert _roundtrip(req, error_response(req, 31)).error_code == 31

    L = m.ListOffsetsRequest
    req = _request(L(topics=[L.ListOffsetsTopic(name="t", partitions=[L.ListOffsetsTopic.ListOffsetsPartition(
        partition_index=4, timestamp=-1)])]), 7)
    resp = _roundtrip(req, error_response(req, 3))
    assert [(p.partition_index, p.error_code, p.offset) for p in resp.topics[0].partitions] == [(4, 3, -1)]

    C = m.CreateTopicsRequest
    req = _request(C(topics=[C.CreatableTopic(name="n", num_partitions=1, replication_factor=1,
                                              assignments=[], configs=[])], timeout_ms=1), 7)
    resp = _roundtrip(req, error_response(req, 41, "not controller"))
    assert [(t.name, t.error_code, t.error_message) for t in resp.topics] == [("n", 41, "not controller")]

    D = m.DeleteTopicsRequest
    for version, body in ((5, D(topic_names=["a", "b"], timeout_ms=1)),
                          (6, D(topics=[D.DeleteTopicState(name="a", topic_id=None)], timeout_ms=1))):
        req = _request(body, version)
        names = [r.name for r in _roundtrip(req, error_response(req, 41)).responses]
        assert names == (["a", "b"] if version == 5 else ["a"])

    req = _request(m.FindCoordinatorRequest(key="g"), 3)
    resp = _roundtrip(req, error_response(req, 15))
    assert (resp.error_code, resp.node_id) == (15, -1)
    req = _request(m.FindCoordinatorRequest(coordinator_keys=["g1", "g2"]), 4)
    resp = _roundtrip(req, error_response(req, 15))
    assert [(c.key, c.error_code) for c in resp.coordinators] == [("g1", 15), ("g2", 15)]

    req = _request(m.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=1), 4)
    resp = _roundtrip(req, error_response(req, 15))
    assert (resp.error_code, resp.producer_id, resp.producer_epoch) == (15, -1, -1)

    R = m.DescribeConfigsRequest
    req = _request(R(resources=[R.DescribeConfigsResource(resource_type=2, resource_name="t",
                                                          configuration_keys=None)]), 4)
    resp = _roundtrip(req, error_response(req, 29))
    assert [(r.resource_name, r.resource_type, r.error_code) for r in resp.results] == [("t", 2, 29)]


def test_error_response_is_none_when_not_expressible() -> None:
    req = _request(m.CreateAclsRequest(creations=[]), 3)
    assert error_response(req, -1) is None


def test_error_response_group_apis() -> None:
    O = m.OffsetCommitRequest
    T = O.OffsetCommitRequestTopic
    req = _request(O(group_id="g", generation_id_or_member_epoch=1, member_id="m", topics=[
        T(name="t", partitions=[T.OffsetCommitRequestPartition(partition_index=2, committed_offset=5)])]), 8)
    resp = _roundtrip(req, error_response(req, 25))
    assert [(t.name, p.partition_index, p.error_code) for t in resp.topics for p in t.partitions] == [("t", 2, 25)]

    F = m.OffsetFetchRequest
    req = _request(F(group_id="g", topics=None, require_stable=False), 7)
    assert _roundtrip(req, error_response(req, 14)).error_code == 14
    req = _request(F(groups=[F.OffsetFetchRequestGroup(group_id="g1", topics=None)], require_stable=False), 9)
    assert [(g.group_id, g.error_code) for g in _roundtrip(req, error_response(req, 14)).groups] == [("g1", 14)]

    req = _request(m.DescribeGroupsRequest(groups=["a", "b"]), 5)
    assert [(g.group_id, g.error_code) for g in _roundtrip(req, error_response(req, 16)).groups] == [("a", 16), ("b", 16)]


# -- file regions -------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [4, 11, 12, 16])
def test_file_regions_splice_into_fetch_responses(version: int, tmp_path) -> None:
    data = bytes(range(256)) * 8
    path = tmp_path / "seg"
    path.write_bytes(data)
    F = m.FetchResponse
    T = F.FetchableTopicResponse
    fd = open(path, "rb")
    try:
        def response(records_a, records_b):
            return F(throttle_time_ms=0, error_code=0, session_id=0, responses=[T(topic="t", partitions=[
                T.PartitionData(partition_index=0, error_code=0, high_watermark=5, records=records_a),
                T.PartitionData(partition_index=1, error_code=0, high_watermark=5, records=records_b)])])

        req = _request(m.FetchRequest(max_wait_ms=1, min_bytes=1, topics=[]), version)
        regions = (FileRegion(fd.fileno(), 10, 300), FileRegion(fd.fileno(), 1000, 0))
        parts = encode_response_parts(req, response(*regions))
        assert [p for p in parts if isinstance(p, FileRegion)] == [regions[0]]
        flat = b"".join(data[p.offset:p.offset + p.count] if isinstance(p, FileRegion) else p for p in parts)
        assert flat == encode_response(req, response(data[10:310], b""))
        # without regions it is a single part equal to encode_response
        assert encode_response_parts(req, response(b"ab", b"")) == [encode_response(req, response(b"ab", b""))]
    finally:
        fd.close()
    with pytest.raises(LocalProtocolError):
        encode_response(req, response(FileRegion(0, 0, 5), b""))


def test_frame_parts_prefixes_size_and_header() -> None:
    req = _request(m.MetadataRequest(topics=None), 12)  # flexible: header v1
    body = m.MetadataResponse(brokers=[], topics=[], cluster_id=None, controller_id=1).encode(version=12)
    parts = frame_parts(req, [body[:3], body[3:]])
    assert b"".join(parts) == encode_response(req, m.MetadataResponse(brokers=[], topics=[], cluster_id=None,
                                                                       controller_id=1))
    region = FileRegion(0, 0, 10)
    parts = frame_parts(req, [region, b"x"])
    assert parts[1] is region and struct.unpack_from(">i", parts[0])[0] == 5 + 10 + 1


@pytest.mark.parametrize("version", [3, 8, 9, 13])
def test_produce_records_are_writable_views_into_the_frame(version: int) -> None:
    P = m.ProduceRequest
    T = P.TopicProduceData
    body = P(acks=1, timeout_ms=5, transactional_id="tx", topic_data=[
        T(name="a", topic_id=uuid.UUID(int=3), partition_data=[
            T.PartitionProduceData(index=0, records=b"batch-zero"),
            T.PartitionProduceData(index=1, records=None)])])
    req = one_request(frame_of(body, version))
    parts = req.body.topic_data[0].partition_data
    records = parts[0].records
    assert isinstance(records, memoryview) and not records.readonly
    assert records == b"batch-zero" and bytes(records) == b"batch-zero" and parts[1].records is None
    records[0:5] = b"BATCH"  # in-place rewrite, as offset assignment does
    assert bytearray(records) == bytearray(b"BATCH-zero")
    # the decoded object still re-encodes like kafka-python's own
    assert req.body.encode(version=version) == P.decode(frame_of(body, version)[4:], version=version,
                                                        header=True).encode(version=version).replace(
        b"batch-zero", b"BATCH-zero")


def test_other_apis_keep_plain_bytes() -> None:
    S = m.SaslAuthenticateRequest
    req = one_request(frame_of(S(auth_bytes=b"secret"), 2))
    assert type(req.body.auth_bytes) is bytes


def test_file_region_keeps_its_owner(tmp_path) -> None:
    class Slice:
        def __init__(self, f) -> None:
            self.f, self.position, self.size = f, 3, 4

        def fileno(self) -> int:
            return self.f.fileno()

    path = tmp_path / "s"
    path.write_bytes(b"0123456789")
    with open(path, "rb") as f:
        s = Slice(f)
        region = FileRegion.of(s)
        assert (region.fd, region.offset, region.count) == (f.fileno(), 3, 4) and region.owner is s
        assert region == FileRegion(f.fileno(), 3, 4)  # the owner takes no part in equality
