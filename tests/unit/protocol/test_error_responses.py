"""error_response: Kafka's failure answer for a request, encoded at the version the client can read."""

from __future__ import annotations

import struct

from kafkapy.protocol import (
    ApiKey,
    ApiVersionsTable,
    ErrorCode,
    Request,
    ServerConnection,
    encode_response,
    error_response,
)
from kafkapy.protocol import messages as m


def one_request(data: bytes, table: ApiVersionsTable) -> Request:
    conn = ServerConnection(table)
    conn.receive_data(data)
    req = conn.next_request()
    assert isinstance(req, Request)
    return req


def test_unknown_api_versions_version_gets_unsupported_version_shaped_like_v0() -> None:
    table = ApiVersionsTable([(ApiKey.API_VERSIONS, 0, 3), (ApiKey.METADATA, 0, 12)])
    # ApiVersions v7 (a version no broker knows yet), v2 header, a body we can't read
    payload = struct.pack(">hhih", ApiKey.API_VERSIONS, 7, 41, 2) + b"cl" + b"\x00" + b"\x05junk"
    req = one_request(struct.pack(">i", len(payload)) + payload, table)
    assert req.unsupported_version and req.response_version == 0

    body = error_response(req, ErrorCode.UNSUPPORTED_VERSION)
    assert body is not None
    frame = encode_response(req, body)
    # v0 answer with a v0 response header: size, correlation id, error_code, empty api_keys array
    assert frame == struct.pack(">iihi", 4 + 2 + 4, 41, ErrorCode.UNSUPPORTED_VERSION, 0)
    decoded = m.ApiVersionsResponse.decode(frame[8:], version=0)
    assert decoded.error_code == ErrorCode.UNSUPPORTED_VERSION and list(decoded.api_keys) == []


def test_supported_api_versions_error_is_encoded_at_the_requested_version() -> None:
    table = ApiVersionsTable([(ApiKey.API_VERSIONS, 0, 3)])
    body = m.ApiVersionsRequest(client_software_name="x", client_software_version="1")
    body.with_header(correlation_id=9, client_id="c")
    req = one_request(body.encode(version=3, header=True, framed=True), table)
    frame = encode_response(req, error_response(req, ErrorCode.UNKNOWN_SERVER_ERROR))
    # response header v0 even for v3, then the error code first, as every version has it
    assert struct.unpack_from(">ih", frame, 4) == (9, ErrorCode.UNKNOWN_SERVER_ERROR)
    assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
