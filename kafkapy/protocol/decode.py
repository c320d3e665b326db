"""One request frame to a :class:`~kafkapy.protocol.events.Request`: header, version policy, body.

Apache Kafka's policy (``SocketServer.processCompletedReceives``, ``RequestContext.parseRequest``):

* A header that can't be read, an unknown or unserved API key, an unserved version of any API but
  ApiVersions, and a body that fails to decode all mean the peer broke the protocol: the matching
  :class:`~kafkapy.protocol.errors.RemoteProtocolError` subclass is raised.
* An ApiVersions request at a version we don't serve is *not* an error. Clients send their newest
  version first and expect a v0 answer with UNSUPPORTED_VERSION and the versions we do serve
  (KIP-511), so it becomes a normal request with ``unsupported_version=True`` whose body is an
  empty v0 request.

Before a body is decoded, :func:`~kafkapy.protocol.validate.check_request_body` walks it against
its schema, so the generated decoder (which trusts lengths) can neither loop nor over-allocate.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, Final

from kafkapy.protocol.apis import ApiKey, ApiVersionsTable, request_class
from kafkapy.protocol.errors import (
    MalformedHeader,
    MalformedRequest,
    UnknownApiKey,
    UnsupportedApiVersion,
)
from kafkapy.protocol.events import Request, RequestHeader
from kafkapy.protocol.kafka_python_adapter import compile_request_decoder, detach_header
from kafkapy.protocol.validate import (
    InvalidRequestBody,
    check_request_body,
    read_tagged_fields,
)
from kafkapy.protocol.wire import I16

__all__ = ["decode_request"]

_HDR_FIXED: Final = struct.Struct(">hhi")
_API_KEYS: dict[int, ApiKey] = {int(k): k for k in ApiKey}

# Generated body decoders by (api key, version), shared by every connection.
_DECODERS: dict[tuple[int, int], Callable[..., Any]] = {}

# Requests whose ``records`` fields are decoded as writable memoryviews into the request frame
# rather than copied out: produce data then reaches validation and the log without an extra copy.
_ZERO_COPY_RECORDS: Final = frozenset({ApiKey.PRODUCE})


def decode_request(frame: bytearray, supported: ApiVersionsTable) -> Request:
    """The request in ``frame`` (one frame without its size prefix), if ``supported`` serves it.

    Raises a :class:`~kafkapy.protocol.errors.RemoteProtocolError` subclass when it can't be served.
    """
    n = len(frame)
    if n < 8:
        raise MalformedHeader(f"Error parsing request header: frame of {n} bytes is too short")
    api_key_num, api_version, correlation_id = _HDR_FIXED.unpack_from(frame, 0)
    cls = request_class(api_key_num)
    served = supported.get(api_key_num)
    if cls is None or served is None:
        client_id = _peek_client_id(frame)
        what = "Unknown API key" if cls is None else "Unsupported API key"
        raise UnknownApiKey(
            f"{what} {api_key_num} ({ApiKey.name_of(api_key_num)}) with version {api_version} "
            f"from client_id {client_id!r} (correlation_id {correlation_id})",
            client_id=client_id, api_key=api_key_num, api_version=api_version,
            correlation_id=correlation_id)
    api_key = _API_KEYS[api_key_num]

    unsupported_api_versions = False
    if not served.min_version <= api_version <= served.max_version:
        if api_key != ApiKey.API_VERSIONS:
            client_id = _peek_client_id(frame)
            raise UnsupportedApiVersion(
                f"Received request api key {api_key.message_name} with version {api_version} "
                f"which is not enabled (we serve {served.min_version}-{served.max_version}), "
                f"client_id {client_id!r}, correlation_id {correlation_id}",
                client_id=client_id, api_key=api_key_num, api_version=api_version,
                correlation_id=correlation_id)
        unsupported_api_versions = True

    flexible = bool(cls.flexible_version_q(api_version))
    header, pos = _parse_header_rest(frame, api_key, api_version, correlation_id, flexible)

    if unsupported_api_versions:
        # Kafka neither parses the body nor fails on it: it answers as if v0 were asked.
        body = cls(version=0)
        return Request(api_key, api_version, correlation_id, header.client_id, header, body, n, True)

    # The generated decoder trusts lengths, counts, varints and nulls; the schema walk checks
    # them all first (refusing as Kafka's parser does), so that decoding can neither loop nor
    # allocate beyond the frame, nor hand a handler None where the schema forbids it.
    try:
        check_request_body(api_key_num, api_version, frame, pos, n)
    except InvalidRequestBody as exc:
        raise _malformed(header, str(exc)) from None
    decoder = _DECODERS.get((api_key_num, api_version))
    if decoder is None:
        decoder = compile_request_decoder(cls, api_version, flexible,
                                          zero_copy_records=api_key in _ZERO_COPY_RECORDS)
        _DECODERS[(api_key_num, api_version)] = decoder
    try:
        body, end = decoder(memoryview(frame), pos)
    except Exception as exc:  # e.g. invalid UTF-8 in a string; all mean "malformed"
        raise _malformed(header, f"{type(exc).__name__}: {exc}") from exc
    if end > n:  # can't happen after the walk; kept as a last line of defence
        raise _malformed(header, f"body truncated ({end - n} bytes missing)")
    detach_header(body)
    return Request(api_key, api_version, correlation_id, header.client_id, header, body, n, False)


def _malformed(header: RequestHeader, detail: str) -> MalformedRequest:
    return MalformedRequest(
        f"Error getting request for apiKey: {ApiKey.name_of(header.api_key)}, apiVersion: "
        f"{header.api_version}, client_id {header.client_id!r}, correlation_id "
        f"{header.correlation_id}: {detail}", api_key=header.api_key,
        api_version=header.api_version, correlation_id=header.correlation_id,
        client_id=header.client_id)


def _peek_client_id(frame: bytearray) -> str | None:
    """The client id of a v1/v2 header if it can be read, for log lines only."""
    try:
        (length,) = I16.unpack_from(frame, 8)
        if length < 0 or 10 + length > len(frame):
            return None
        return bytes(frame[10:10 + length]).decode("utf-8", "replace")
    except struct.error:
        return None


def _parse_header_rest(frame: bytearray, api_key: ApiKey, api_version: int, correlation_id: int,
                       flexible: bool) -> tuple[RequestHeader, int]:
    """Read the client id (and v2 tagged fields) after the fixed 8 header bytes."""
    n = len(frame)
    if n < 10:
        raise _bad_header(api_key, api_version, correlation_id, None, "no client id")
    # The client id keeps the 2-byte length even in v2 headers, so that any broker can read the
    # header of an ApiVersions request newer than it knows.
    (length,) = I16.unpack_from(frame, 8)
    pos = 10
    client_id: str | None = None
    if length >= 0:
        if pos + length > n:
            raise _bad_header(api_key, api_version, correlation_id, None,
                              "client id runs past the frame")
        # Java decodes invalid UTF-8 with replacement characters rather than failing; so do we.
        client_id = frame[pos:pos + length].decode("utf-8", "replace")
        pos += length
    tagged: dict[int, bytes] | None = None
    if flexible:
        if pos < n and frame[pos] == 0:
            pos += 1  # no tagged fields: the usual case
        else:
            try:
                fields, pos = read_tagged_fields(frame, pos, n, "the request header")
                tagged = {tag: bytes(frame[at:at + size]) for tag, at, size in fields}
            except InvalidRequestBody as exc:
                raise _bad_header(api_key, api_version, correlation_id, client_id,
                                  str(exc)) from None
    header = RequestHeader(int(api_key), api_version, correlation_id, client_id,
                           2 if flexible else 1, tagged)
    return header, pos


def _bad_header(api_key: ApiKey, api_version: int, correlation_id: int, client_id: str | None,
                detail: str) -> MalformedHeader:
    return MalformedHeader(
        f"Error parsing request header for {api_key.message_name} v{api_version}, client_id "
        f"{client_id!r}: {detail}", api_key=int(api_key), api_version=api_version,
        correlation_id=correlation_id, client_id=client_id)
