"""encode_response_parts: file regions spliced out of a message object, which is left untouched."""

from __future__ import annotations

from kafkapy.protocol import (
    ApiVersionsTable,
    FileRegion,
    Request,
    ServerConnection,
    encode_response_parts,
)
from kafkapy.protocol import messages as m


def fetch_request(version: int) -> Request:
    body = m.FetchRequest(max_wait_ms=1, min_bytes=1, topics=[])
    body.with_header(correlation_id=3, client_id="c")
    conn = ServerConnection(ApiVersionsTable.everything())
    conn.receive_data(body.encode(version=version, header=True, framed=True))
    req = conn.next_request()
    assert isinstance(req, Request)
    return req


def test_body_keeps_its_regions_after_encoding() -> None:
    F = m.FetchResponse
    T = F.FetchableTopicResponse
    region = FileRegion(0, 0, 5)
    part = T.PartitionData(partition_index=0, error_code=0, high_watermark=5, records=region)
    body = F(throttle_time_ms=0, error_code=0, session_id=0, responses=[T(topic="t", partitions=[part])])
    for version in (4, 12):
        parts = encode_response_parts(fetch_request(version), body)
        assert [p for p in parts if isinstance(p, FileRegion)] == [region]
        assert part.records is region
