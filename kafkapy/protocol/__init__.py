"""The Kafka wire protocol, without I/O: API registry, framing, headers, message classes, errors.

Code above ``protocol/`` reaches kafka-python's message classes only through this package
(``kafkapy.protocol.messages``), and reads and writes frames through :class:`ServerConnection`.
Shaped like h11: ``errors`` (whose fault), ``events`` (what crosses the boundary), ``framing``
(size-prefixed frames), ``decode`` (frame to request), ``encode`` (response to frame),
``error_responses`` (Kafka's failure answer for any request), ``connection`` (the state machine
tying them together); ``kafka_python_adapter`` is the one module touching kafka-python internals.
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
from kafkapy.protocol.connection import ServerConnection
from kafkapy.protocol.encode import (
    encode_response,
    encode_response_parts,
    frame_parts,
    frame_size,
)
from kafkapy.protocol.error_responses import error_response
from kafkapy.protocol.errors import (
    ErrorCode,
    FrameTooLarge,
    KafkaError,
    LocalProtocolError,
    MalformedFrame,
    MalformedHeader,
    MalformedRequest,
    ProtocolError,
    RemoteProtocolError,
    UnknownApiKey,
    UnsupportedApiVersion,
)
from kafkapy.protocol.events import (
    CLOSED,
    NEED_DATA,
    FileRegion,
    Reply,
    Request,
    RequestHeader,
)
from kafkapy.protocol.framing import DEFAULT_MAX_REQUEST_BYTES

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
    "Reply",
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
