"""The Kafka wire protocol, without I/O: API registry, framing, headers, message classes, errors.

Code above ``protocol/`` reaches kafka-python's message classes only through this package
(``kafkapy.protocol.messages``), and reads and writes frames through :class:`ServerConnection`.
"""

from kafkapy.protocol.apis import (
    ApiKey,
    ApiVersionRange,
    ApiVersionsTable,
    is_flexible,
    load_schema_class,
    request_class,
    response_class,
    valid_api_versions_request,
)
from kafkapy.protocol.connection import (
    CLOSED,
    DEFAULT_MAX_REQUEST_BYTES,
    NEED_DATA,
    FileRegion,
    FrameTooLarge,
    LocalProtocolError,
    MalformedFrame,
    MalformedHeader,
    MalformedRequest,
    ProtocolError,
    RemoteProtocolError,
    Request,
    RequestHeader,
    ServerConnection,
    UnknownApiKey,
    UnsupportedApiVersion,
    encode_response,
    encode_response_parts,
    error_response,
    frame_parts,
    frame_size,
)
from kafkapy.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "CLOSED",
    "DEFAULT_MAX_REQUEST_BYTES",
    "NEED_DATA",
    "ApiKey",
    "ApiVersionRange",
    "ApiVersionsTable",
    "ErrorCode",
    "FileRegion",
    "FrameTooLarge",
    "KafkaError",
    "LocalProtocolError",
    "MalformedFrame",
    "MalformedHeader",
    "MalformedRequest",
    "ProtocolError",
    "RemoteProtocolError",
    "Request",
    "RequestHeader",
    "ServerConnection",
    "UnknownApiKey",
    "UnsupportedApiVersion",
    "encode_response",
    "encode_response_parts",
    "error_response",
    "frame_parts",
    "frame_size",
    "is_flexible",
    "load_schema_class",
    "request_class",
    "response_class",
    "valid_api_versions_request",
]
