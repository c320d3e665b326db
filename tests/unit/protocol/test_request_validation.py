"""Requests are checked against their schema before decoding: bounded varints, counts and lengths
that fit the frame, nulls only where the schema allows them, honest tagged fields.

Each refusal surfaces from ``ServerConnection.next_request`` as ``MalformedRequest`` (the edge logs
one line and closes the connection, as Kafka does), before any handler could see the request.
"""

from __future__ import annotations

import random
import struct

import pytest
from protocol_samples import frame_request, null_probes, sample

from kafkapy.protocol import (
    ApiKey,
    ApiVersionsTable,
    MalformedHeader,
    MalformedRequest,
    Request,
    ServerConnection,
    request_class,
)
from kafkapy.protocol.validate import (
    InvalidRequestBody,
    check_request_body,
    read_uvarint,
    read_uvarlong,
)
from kafkapy.protocol.wire import uvarint

EVERYTHING = ApiVersionsTable.everything()
ALL_VERSIONS = [(r.api_key, v) for r in EVERYTHING for v in range(r.min_version, r.max_version + 1)]
IDS = [f"{ApiKey.name_of(k)}-v{v}" for k, v in ALL_VERSIONS]


def framed(api_key: int, version: int, body: bytes) -> bytes:
    return frame_request(request_class(api_key), version, body)


def parse(data: bytes) -> Request:
    conn = ServerConnection(EVERYTHING, max_request_bytes=1 << 30)
    conn.receive_data(data)
    req = conn.next_request()
    assert isinstance(req, Request)
    return req


def refused(data: bytes, match: str | None = None) -> MalformedRequest:
    with pytest.raises(MalformedRequest, match=match) as info:
        parse(data)
    return info.value


# -- what stock clients send is accepted --------------------------------------------------------


@pytest.mark.parametrize(("api_key", "version"), ALL_VERSIONS, ids=IDS)
def test_every_api_version_with_default_and_populated_fields_is_accepted(api_key, version):
    cls = request_class(api_key)
    bodies = [bytes(sample(cls, version).encode(version=version))]
    try:
        bodies.append(bytes(cls(version=version).encode(version=version)))
    except Exception:
        pass  # a few schemas have struct fields kafka-python can't default; sample covers them
    for body in bodies:
        assert check_request_body(api_key, version, body, 0) == len(body)
        req = parse(framed(api_key, version, body))
        assert bytes(req.body.encode(version=version)) == body


def test_bytes_after_the_body_are_ignored_as_in_kafka():
    body = bytes(sample(request_class(ApiKey.METADATA), 12).encode(version=12))
    req = parse(framed(ApiKey.METADATA, 12, body + b"trailing garbage"))
    assert req.body.topics[0].name == "s\u00e9"


# -- varints ------------------------------------------------------------------------------------


def test_varint_readers_stop_at_5_and_10_bytes():
    assert read_uvarint(b"\xff\xff\xff\xff\x0f", 0, 5) == (0xFFFFFFFF, 5)
    with pytest.raises(InvalidRequestBody, match="too long"):
        read_uvarint(b"\xff" * 5 + b"\x01", 0, 6)
    assert read_uvarlong(b"\xff" * 9 + b"\x01", 0, 10) == ((1 << 64) - 1, 10)
    with pytest.raises(InvalidRequestBody, match="too long"):
        read_uvarlong(b"\xff" * 10 + b"\x01", 0, 11)
    with pytest.raises(InvalidRequestBody, match="past the end"):
        read_uvarint(b"\x80\x80", 0, 2)


def test_issue_frame_with_a_megabyte_varint_count_is_refused_at_the_6th_byte():
    # Metadata v12 whose topics count is N bytes of 0xff then 0x01 (issue 27, defect 2).
    body = bytes.fromhex("00") + b"\xff" * 200_000 + b"\x01"
    data = struct.pack(">i", 14 + len(body)) + bytes.fromhex("0003000c00000007000474657374") + body
    assert "varint is too long" in refused(data).message


def test_header_tagged_fields_are_bounded_and_ordered():
    def with_header_tags(tags: bytes) -> bytes:
        payload = struct.pack(">hhih", 3, 12, 1, 1) + b"c" + tags + b"\x01\x00\x00\x00"
        return struct.pack(">i", len(payload)) + payload

    assert parse(with_header_tags(b"\x02\x01\x01x\x05\x00")).header.tagged_fields == {1: b"x", 5: b""}
    for bad in (b"\x02\x05\x00\x01\x00",       # tags out of order
                b"\x01\x01\x7fx",                # size past the frame
                b"\x7f\x01\x00",                 # more fields than bytes
                b"\xff\xff\xff\xff\xff\x01"):    # over-long count
        with pytest.raises(MalformedHeader):
            parse(with_header_tags(bad))


# -- counts and lengths -------------------------------------------------------------------------


def test_counts_and_lengths_must_fit_in_the_bytes_left():
    # Metadata v4: topics count of a million with nothing behind it.
    assert "needs at least" in refused(framed(3, 4, struct.pack(">i", 1_000_000) + b"\x00")).message
    # AddPartitionsToTxn v0: a []int32 of 100 partitions with 4 bytes behind it.
    body = (struct.pack(">h", 1) + b"x" + struct.pack(">qh", 1, 0) + struct.pack(">i", 1)
            + struct.pack(">h", 1) + b"t" + struct.pack(">i", 100) + struct.pack(">i", 7))
    assert "needs at least 400 bytes" in refused(framed(24, 0, body)).message
    # Produce v3: a records length running past the frame.
    body = (struct.pack(">hhi", -1, 1, 1000) + struct.pack(">i", 1) + struct.pack(">h", 1) + b"t"
            + struct.pack(">i", 1) + struct.pack(">ii", 0, 1 << 20) + b"abc")
    assert "only 3 bytes remain" in refused(framed(0, 3, body)).message
    # A compact string longer than Kafka's 32767 limit, though the bytes are there.
    name = b"n" * 40_000
    body = uvarint(2) + bytes(16) + uvarint(len(name) + 1) + name + b"\x00" + b"\x00\x00\x00"
    assert "invalid length" in refused(framed(3, 12, body)).message


def test_truncated_body_is_refused():
    body = bytes(sample(request_class(ApiKey.FETCH), 12).encode(version=12))
    for cut in (1, 7, len(body) // 2, len(body) - 1):
        refused(framed(ApiKey.FETCH, 12, body[:cut]))


# -- nulls --------------------------------------------------------------------------------------


def test_issue_null_delete_topics_frame_is_refused():
    data = bytes.fromhex("0000002600140004000000010001780003135f5f636f6e73756d65725f6f666673657473"
                         "000000753000")
    assert "non-nullable field topic_names[] was serialized as null" in refused(data).message


def test_produce_with_a_null_partition_list_is_refused_before_any_append():
    P = request_class(ApiKey.PRODUCE)
    good = P.TopicProduceData(name="a", partition_data=[
        P.TopicProduceData.PartitionProduceData(index=0, records=b"x")])
    bad = P.TopicProduceData(name="b", partition_data=None)
    body = bytes(P(transactional_id=None, acks=-1, timeout_ms=1000, topic_data=[good, bad])
                 .encode(version=9))
    assert refused(framed(0, 9, body)).message.endswith(
        "non-nullable field partition_data was serialized as null (in topic_data[1])")


def test_nulls_where_the_schema_allows_them_are_accepted():
    P = request_class(ApiKey.PRODUCE)
    body = bytes(P(transactional_id=None, acks=1, timeout_ms=1, topic_data=[]).encode(version=9))
    assert parse(framed(0, 9, body)).body.transactional_id is None
    M = request_class(ApiKey.METADATA)
    assert parse(framed(3, 12, bytes(M(topics=None).encode(version=12)))).body.topics is None


NULL_CASES = [(k, v, path, nullable, body) for k, v in ALL_VERSIONS
              for path, nullable, body in null_probes(request_class(k), v)]


def test_null_sweep_covers_many_fields():
    assert sum(not c[3] for c in NULL_CASES) > 400


@pytest.mark.parametrize(("api_key", "version", "path", "nullable", "body"), NULL_CASES,
                         ids=[f"{ApiKey.name_of(c[0])}-v{c[1]}-{c[2]}" for c in NULL_CASES])
def test_null_in_each_field_is_refused_unless_the_schema_allows_it(api_key, version, path,
                                                                   nullable, body):
    data = framed(api_key, version, body)
    if nullable:
        parse(data)
    else:
        assert "was serialized as null" in refused(data).message


# -- tagged fields ------------------------------------------------------------------------------


def _metadata_v12_with_topic_tags(tags: bytes) -> bytes:
    topic = bytes(16) + b"\x02x" + tags
    return framed(3, 12, uvarint(2) + topic + b"\x00\x00\x00")


def test_body_tagged_fields_must_be_ordered_and_sized_honestly():
    req = parse(_metadata_v12_with_topic_tags(b"\x02\x03\x01z\x09\x00"))
    assert req.body.topics[0].name == "x"
    refused(_metadata_v12_with_topic_tags(b"\x02\x09\x00\x03\x00"), "after 9")
    refused(_metadata_v12_with_topic_tags(b"\x01\x03\x40z"), "size 64")
    refused(_metadata_v12_with_topic_tags(b"\x40\x03\x00"), "claims 64 tagged fields")


def test_known_tagged_field_must_fill_exactly_its_size():
    # Fetch v12's cluster_id is tag 0 (a compact nullable string) of the request.
    F = request_class(ApiKey.FETCH)
    body = bytearray(F(cluster_id="abc", replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1,
                       isolation_level=0, session_id=0, session_epoch=-1, topics=[],
                       forgotten_topics_data=[], rack_id="").encode(version=12))
    assert parse(framed(1, 12, bytes(body))).body.cluster_id == "abc"
    tagged_at = body.index(b"\x01\x00\x04\x04abc")  # one field: tag 0, size 4, "abc"
    lying = bytes(body[:tagged_at]) + b"\x01\x00\x05\x04abcX" + bytes(body[tagged_at + 7:])
    refused(framed(1, 12, lying), "its value takes 4 bytes")


# -- the generated walk and the interpreted one agree -------------------------------------------


def _outcome(api_key: int, version: int, body: bytes, interpreted: bool) -> str | int:
    """Where the body ends, or "refused" (the two may word a truncation differently)."""
    try:
        if interpreted:
            return check_request_body(api_key, version, body, 0, visit=lambda *_: None)
        return check_request_body(api_key, version, body, 0)
    except InvalidRequestBody:
        return "refused"


def test_generated_and_interpreted_walks_agree_on_valid_null_and_mutated_bodies():
    rng = random.Random(27)
    compared = 0
    for api_key, version in ALL_VERSIONS:
        cls = request_class(api_key)
        good = bytes(sample(cls, version).encode(version=version))
        bodies = [good] + [body for _, _, body in null_probes(cls, version)]
        for _ in range(20 if good else 0):
            mutated = bytearray(good)
            for _ in range(rng.randint(1, 3)):
                mutated[rng.randrange(len(mutated))] = rng.choice((0x00, 0x7F, 0x80, 0xFF,
                                                                   rng.randrange(256)))
            bodies.append(bytes(mutated[: rng.randint(len(mutated) // 2, len(mutated))]))
        for body in bodies:
            assert (_outcome(api_key, version, body, False)
                    == _outcome(api_key, version, body, True)), (cls.__name__, version, body.hex())
            compared += 1
    assert compared > 5000
