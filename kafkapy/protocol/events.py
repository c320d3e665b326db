"""What crosses the protocol boundary: decoded requests in, replies out.

A :class:`ServerConnection <kafkapy.protocol.connection.ServerConnection>` hands out one
:class:`Request` at a time, or :data:`NEED_DATA`, or :data:`CLOSED`. A handler answers with a
:class:`Reply`: a response body, or frame parts already encoded, bytes and :class:`FileRegion`
slices of files (a :data:`Part` each). Handlers build replies without knowing the listener.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from kafkapy.protocol.apis import ApiKey

__all__ = ["CLOSED", "NEED_DATA", "FileRegion", "Part", "Reply", "Request", "RequestHeader", "Sentinel"]


class Sentinel:
    """A named marker event (``NEED_DATA``, ``CLOSED``); compare with ``is``."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


#: ``next_request()`` needs more bytes before it can produce a request.
NEED_DATA: Final = Sentinel("NEED_DATA")
#: The peer closed its side and every complete request has been handed out.
CLOSED: Final = Sentinel("CLOSED")


@dataclass(frozen=True, slots=True)
class RequestHeader:
    """A decoded request header (v1, or v2 with tagged fields for flexible versions)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    version: int
    #: Tagged fields of a v2 header, raw, by tag (Kafka defines none today).
    tagged_fields: dict[int, bytes] | None = None


@dataclass(frozen=True, slots=True)
class Request:
    """One request read off a connection.

    ``body`` is the decoded request message (``kafkapy.protocol.messages.<Name>Request``); its fields
    are snake_case attributes. ``size`` is the frame's length without its 4-byte size prefix.
    ``unsupported_version`` is only ever True for ApiVersions (an ApiVersions request at a version
    this node doesn't serve, KIP-511); the broker answers such a request with
    ``ApiVersionsTable.response(request.api_version)``, encoded at v0.

    Produce ``records`` fields are *writable memoryviews* into this request's frame, not copies:
    use them like bytes (``len``, slicing, ``bytearray(records)`` for a private copy), or validate
    and rewrite the batches in place.
    """

    api_key: ApiKey
    api_version: int
    correlation_id: int
    client_id: str | None
    header: RequestHeader
    body: Any
    size: int
    unsupported_version: bool = False

    @property
    def response_version(self) -> int:
        """The version the response is encoded at (v0 for an unsupported ApiVersions request)."""
        return 0 if self.unsupported_version else self.api_version

    @property
    def expects_response(self) -> bool:
        """False only for acks=0 Produce requests, which Kafka never answers."""
        return not (self.api_key == ApiKey.Produce and getattr(self.body, "acks", 1) == 0)

    def describe(self) -> str:
        """``Produce v9 correlation_id=7 client_id='x'``, for log lines."""
        return (f"{self.api_key.message_name} v{self.api_version} correlation_id={self.correlation_id} "
                f"client_id={self.client_id!r}")


@dataclass(frozen=True, slots=True)
class FileRegion:
    """``count`` bytes of the open file ``fd`` from ``offset``, sent with ``os.sendfile``.

    Put one where a message has a ``records`` field and encode with ``encode_response_parts``
    (the listener does that for any response body it is handed), or pass it to ``frame_parts``
    (the Fetch encoder does). The descriptor must stay open until the reply is written: ``owner``
    (a log ``FetchSlice``, from :meth:`of`) holds it open, whatever closes the segment meanwhile,
    until :meth:`release`; the listener releases every region of a reply once it is written or
    abandoned (the garbage collector releases a reply that never got there). A region without an
    owner is the caller's to keep open.
    """

    fd: int
    offset: int
    count: int
    owner: Any = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, file_slice: Any) -> FileRegion:
        """A region for anything with ``fileno()``, ``position`` and ``size`` (a log FetchSlice),
        keeping it as the owner; ``release()`` on the region calls the owner's, if it has one."""
        return cls(file_slice.fileno(), file_slice.position, file_slice.size, file_slice)

    def fileno(self) -> int:
        """The descriptor to send from; raises ValueError once the owner has released it (its
        number may belong to another file by then)."""
        owner = self.owner
        return self.fd if owner is None else owner.fileno()

    def release(self) -> None:
        """Let go of the descriptor (idempotent); the region can't be sent afterwards."""
        release = getattr(self.owner, "release", None)
        if release is not None:
            release()

    def describe(self) -> str:
        """What the region is, for log lines (a FetchSlice owner's repr names its file)."""
        where = f"fd={self.fd}" if self.owner is None else repr(self.owner)
        return f"file region [{self.offset}, +{self.count}] of {where}"

    def __len__(self) -> int:
        return self.count


#: One piece of an outgoing frame: bytes to write, or a file region to ``sendfile``.
Part = bytes | bytearray | memoryview | FileRegion


@dataclass(frozen=True, slots=True)
class Reply:
    """What to send back for one request (a handler's answer, handed to the listener).

    Exactly one of ``body`` (a response message object, encoded for the request's version) or
    ``parts`` (a complete frame — size prefix and response header included — as bytes and
    :class:`FileRegion` objects, e.g. from ``protocol.encode_response_parts`` or
    ``protocol.frame_parts``) is set; neither means nothing is sent. ``close`` closes the
    connection after sending (Kafka's answer to a failed acks=0 produce). ``on_done`` is called
    once the reply has been written or abandoned, so file descriptors can be released.
    ``mute_ms``: read nothing more from the connection for this long after sending (a client
    quota's throttle, KIP-219).
    """

    body: Any = None
    parts: Sequence[Part] | None = None
    close: bool = False
    on_done: Callable[[], None] | None = None
    mute_ms: int = 0
