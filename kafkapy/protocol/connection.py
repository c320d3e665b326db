"""The server side of one Kafka connection, without I/O (in the style of h11).

This file owns the request-side state machine of a connection. Bytes go in with
:meth:`ServerConnection.receive_data`; :meth:`ServerConnection.next_request` hands out one decoded
:class:`Request` at a time, or :data:`NEED_DATA`, or :data:`CLOSED` once the peer has closed and
every complete request has been handed out. Responses become bytes with :func:`encode_response` (or
a list of parts with :func:`encode_response_parts` when file regions are to be sent with
``sendfile``). Nothing here touches a socket or a clock.

Failure policy (Apache Kafka's, see ``SocketServer.processCompletedReceives`` and
``RequestContext.parseRequest``):

* A frame size below zero or above ``max_request_bytes`` (Kafka's ``InvalidReceiveException``), a
  header that can't be read, an unknown or unserved API key, an unserved version of any API but
  ApiVersions, and a body that fails to decode all mean the peer broke the protocol: the matching
  :class:`RemoteProtocolError` subclass is raised and the edge logs it and closes the connection.
  Kafka sends nothing back in these cases and neither do we.
* An ApiVersions request at a version we don't serve is *not* an error. Clients send their newest
  version first and expect a v0 answer with UNSUPPORTED_VERSION and the versions we do serve (KIP-511),
  so it surfaces as a normal :class:`Request` with ``unsupported_version=True`` whose body is an empty
  v0 request and whose response is encoded at v0.
* Once a :class:`RemoteProtocolError` was raised, every later :meth:`~ServerConnection.next_request`
  raises it again: the stream can't be resynchronised.

Misuse by our own code (encoding a response of the wrong type, feeding data after EOF) raises
:class:`LocalProtocolError`.
"""

from __future__ import annotations

import os
import struct
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import MethodType
from typing import Any, Final

from kafkapy.protocol.codec import Bytes, StructField, UnsignedVarInt32
from kafkapy.protocol.validate import InvalidRequestBody, check_request_body, read_tagged_fields
from kafkapy.protocol.wire import uvarint
from kafkapy.protocol.apis import (
    ApiKey,
    ApiMessage,
    ApiVersionsTable,
    request_class,
    response_class,
)

__all__ = [
    "CLOSED",
    "DEFAULT_MAX_REQUEST_BYTES",
    "NEED_DATA",
    "FileRegion",
    "FrameTooLarge",
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
]

# Kafka's socket.request.max.bytes default.
DEFAULT_MAX_REQUEST_BYTES: Final = 104_857_600


class _Sentinel:
    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


#: ``next_request()`` needs more bytes before it can produce a request.
NEED_DATA: Final = _Sentinel("NEED_DATA")
#: The peer closed its side and every complete request has been handed out.
CLOSED: Final = _Sentinel("CLOSED")


# ---------------------------------------------------------------------------------------------
# Errors: whose fault, and what the edge needs to log
# ---------------------------------------------------------------------------------------------


class ProtocolError(Exception):
    """Base of the protocol errors this module raises."""


class RemoteProtocolError(ProtocolError):
    """The peer broke the protocol; the edge logs ``str(error)`` and closes the connection.

    What was known about the offending request when it failed is attached for the log line
    (any of these may be None).
    """

    def __init__(self, message: str, *, api_key: int | None = None, api_version: int | None = None,
                 correlation_id: int | None = None, client_id: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id


class FrameTooLarge(RemoteProtocolError):
    """The size prefix exceeds ``max_request_bytes`` (Kafka: InvalidReceiveException)."""

    def __init__(self, size: int, max_size: int) -> None:
        super().__init__(f"Invalid receive (size = {size} larger than {max_size})")
        self.size = size
        self.max_size = max_size


class MalformedFrame(RemoteProtocolError):
    """The size prefix is negative (Kafka: InvalidReceiveException)."""

    def __init__(self, size: int) -> None:
        super().__init__(f"Invalid receive (size = {size})")
        self.size = size


class MalformedHeader(RemoteProtocolError):
    """The request header could not be read."""


class UnknownApiKey(RemoteProtocolError):
    """The API key is not one Kafka assigned, or not one this node serves."""


class UnsupportedApiVersion(RemoteProtocolError):
    """A version of an API (other than ApiVersions) this node does not serve."""


class MalformedRequest(RemoteProtocolError):
    """The request body failed to decode at the version its header names."""


class LocalProtocolError(ProtocolError):
    """Our own code misused the connection (a bug on this side, not the peer's)."""


# ---------------------------------------------------------------------------------------------
# Events
# ---------------------------------------------------------------------------------------------


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
    ``unsupported_version`` is only ever True for ApiVersions (see the module docstring); the broker
    answers such a request with ``ApiVersionsTable.response(request.api_version)``.

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


# ---------------------------------------------------------------------------------------------
# File regions (zero-copy fetch)
# ---------------------------------------------------------------------------------------------

# While encode_response_parts runs, FileRegion.encode() records each region it meets here and
# returns a marker the encoder writes in the region's place; the markers are then cut back out.
_MARKER_MAGIC: Final = os.urandom(12)
_collect = threading.local()


@dataclass(frozen=True, slots=True)
class FileRegion:
    """``count`` bytes of the open file ``fd`` from ``offset``, sent with ``os.sendfile``.

    Put one where a message has a ``records`` field and encode with :func:`encode_response_parts`
    (the listener does that for any response body it is handed). The descriptor must stay open
    until the reply is written: ``owner`` (a log ``FetchSlice``, from :meth:`of`) holds it open,
    whatever closes the segment meanwhile, until :meth:`release`; the listener releases every
    region of a reply once it is written or abandoned (the garbage collector releases a reply
    that never got there). A region without an owner is the caller's to keep open.
    """

    fd: int
    offset: int
    count: int
    owner: object = field(default=None, compare=False, repr=False)

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

    def encode(self) -> bytes:
        # kafka-python's bytes codec calls .encode() on values that aren't bytes-like.
        regions = getattr(_collect, "regions", None)
        if regions is None:
            raise LocalProtocolError("a FileRegion can only be encoded by encode_response_parts()")
        regions.append(self)
        return _MARKER_MAGIC + struct.pack(">I", len(regions) - 1)


Part = bytes | bytearray | memoryview | FileRegion


def frame_size(parts: list[Part]) -> int:
    """The total length of ``parts`` (file regions count their ``count``)."""
    return sum(p.count if isinstance(p, FileRegion) else len(p) for p in parts)


# ---------------------------------------------------------------------------------------------
# The connection
# ---------------------------------------------------------------------------------------------

_HDR_FIXED = struct.Struct(">hhi")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")


class ServerConnection:
    """The request side of one Kafka connection: bytes in, :class:`Request` events out.

    ``supported`` decides which APIs and versions are accepted; ``max_request_bytes`` bounds a
    frame (Kafka's ``socket.request.max.bytes``). Each byte received is copied once, into its own
    frame's buffer, so partial frames cost linear time however they are split.
    """

    def __init__(self, supported: ApiVersionsTable, max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
                 ) -> None:
        self.supported = supported
        self.max_request_bytes = max_request_bytes
        self._prefix = bytearray()          # a size prefix split across receive_data calls
        self._frame: bytearray | None = None  # the frame being filled, at its final size
        self._filled = 0                    # bytes of _frame received so far
        self._need = 0                      # bytes still missing from _frame
        self._ready: deque[bytearray] = deque()
        self._error: RemoteProtocolError | None = None
        self._eof = False

    # -- input ---------------------------------------------------------------------------------

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Feed bytes read from the peer; ``b""`` means the peer closed its side."""
        if self._eof:
            if data:
                raise LocalProtocolError("data received after end of stream")
            return
        if not data:
            self._eof = True
            return
        if self._error is not None:
            return  # the stream is already unreadable; drop what follows
        mv = memoryview(data).cast("B")
        n = len(mv)
        i = 0
        while i < n:
            if self._frame is None:
                if not self._prefix and n - i >= 4:
                    size = _I32.unpack_from(mv, i)[0]
                    i += 4
                else:
                    take = min(4 - len(self._prefix), n - i)
                    self._prefix += mv[i:i + take]
                    i += take
                    if len(self._prefix) < 4:
                        return
                    size = _I32.unpack_from(self._prefix)[0]
                    self._prefix.clear()
                # Checked before anything is buffered, as Kafka does, so a bogus prefix (an HTTP or
                # TLS client on the Kafka port) can't make us allocate.
                if size < 0:
                    self._error = MalformedFrame(size)
                    return
                if size > self.max_request_bytes:
                    self._error = FrameTooLarge(size, self.max_request_bytes)
                    return
                # Allocated at its final size once (as Kafka's NetworkReceive does): a large
                # bytearray comes zeroed from the kernel lazily, and bytes are then copied in once
                # instead of regrowing the buffer.
                self._frame = bytearray(size)
                self._filled = 0
                self._need = size
            take = min(self._need, n - i)
            if take:
                filled = self._filled
                self._frame[filled:filled + take] = mv[i:i + take]
                self._filled = filled + take
                i += take
                self._need -= take
            if self._need == 0:
                self._ready.append(self._frame)
                self._frame = None

    def receive_buffer(self) -> memoryview | None:
        """Where the rest of the frame being filled goes, for readers that can receive into memory.

        An I/O layer with ``socket.recv_into`` reads straight into this view and then calls
        :meth:`received_into` with the byte count, saving the copy :meth:`receive_data` makes.
        None when no frame is partly received (a size prefix comes next: use ``receive_data``).
        """
        if self._frame is None or self._error is not None or self._eof:
            return None
        return memoryview(self._frame)[self._filled:]

    def received_into(self, n: int) -> None:
        """``n`` bytes were written into the view :meth:`receive_buffer` returned."""
        if self._frame is None or not 0 <= n <= self._need:
            raise LocalProtocolError(f"received_into({n}) does not match the frame being filled")
        self._filled += n
        self._need -= n
        if self._need == 0:
            self._ready.append(self._frame)
            self._frame = None

    @property
    def buffered_frames(self) -> int:
        """Complete frames waiting for :meth:`next_request`."""
        return len(self._ready)

    @property
    def their_state_closed(self) -> bool:
        """Whether the peer has closed its side (``receive_data(b"")`` was called)."""
        return self._eof

    # -- output events -------------------------------------------------------------------------

    def next_request(self) -> Request | _Sentinel:
        """The next complete request, :data:`NEED_DATA`, or :data:`CLOSED`.

        Raises a :class:`RemoteProtocolError` subclass when the peer broke the protocol; the
        connection is then unusable and must be closed.
        """
        if self._ready:
            frame = self._ready.popleft()
            try:
                return self._parse(frame)
            except RemoteProtocolError as exc:
                self._error = exc
                self._ready.clear()
                raise
        if self._error is not None:
            raise self._error
        return CLOSED if self._eof else NEED_DATA

    # -- parsing -------------------------------------------------------------------------------

    def _parse(self, frame: bytearray) -> Request:
        n = len(frame)
        if n < 8:
            raise MalformedHeader(f"Error parsing request header: frame of {n} bytes is too short")
        api_key_num, api_version, correlation_id = _HDR_FIXED.unpack_from(frame, 0)
        cls = request_class(api_key_num)
        served = self.supported.get(api_key_num)
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
            return Request(api_key, api_version, correlation_id, header.client_id, header, body, n,
                           True)

        # The generated decoder trusts lengths, counts, varints and nulls; the schema walk checks
        # them all first (refusing as Kafka's parser does), so that decoding can neither loop nor
        # allocate beyond the frame, nor hand a handler None where the schema forbids it.
        try:
            check_request_body(api_key_num, api_version, frame, pos, n)
        except InvalidRequestBody as exc:
            raise _malformed(header, str(exc)) from None
        decoder = _DECODERS.get((api_key_num, api_version))
        if decoder is None:
            decoder = _request_decoder(cls, api_version, flexible)
            _DECODERS[(api_key_num, api_version)] = decoder
        try:
            body, end = decoder(memoryview(frame), pos)
        except Exception as exc:  # e.g. invalid UTF-8 in a string; all mean "malformed"
            raise _malformed(header, f"{type(exc).__name__}: {exc}") from exc
        if end > n:  # can't happen after the walk; kept as a last line of defence
            raise _malformed(header, f"body truncated ({end - n} bytes missing)")
        body._header = None
        return Request(api_key, api_version, correlation_id, header.client_id, header, body, n,
                       False)

    # -- convenience: same as the module functions ---------------------------------------------

    def encode_response(self, request: Request, body: Any) -> bytes:
        """See :func:`encode_response`."""
        return encode_response(request, body)

    def encode_response_parts(self, request: Request, body: Any) -> list[Part]:
        """See :func:`encode_response_parts`."""
        return encode_response_parts(request, body)

    def error_response(self, request: Request, code: int, message: str | None = None) -> Any | None:
        """See :func:`error_response`."""
        return error_response(request, code, message)


_API_KEYS: dict[int, ApiKey] = {int(k): k for k in ApiKey}

# Generated body decoders by (api key, version), shared by every connection.
_DECODERS: dict[tuple[int, int], Callable[..., Any]] = {}

# Requests whose ``records`` fields are decoded as writable memoryviews into the request frame
# rather than copied out: produce data then reaches validation and the log without an extra copy.
_ZERO_COPY_RECORDS: Final = frozenset({ApiKey.PRODUCE})


class _RecordsView:
    """kafka-python codec for ``records`` fields that decodes to a slice of the frame, not a copy.

    Encoding is the ordinary bytes codec's; only the generated decode differs.
    """

    fmt = Bytes.fmt
    size = "variable"
    encode = Bytes.encode
    encode_into = Bytes.encode_into
    emit_encode_into = Bytes.emit_encode_into
    decode = Bytes.decode

    @classmethod
    def emit_decode_from(cls, ctx: Any, var_name: str, indent: str, compact: bool = False) -> None:
        ln = ctx.next_var("ln")
        if compact:
            UnsignedVarInt32.emit_decode_from(ctx, ln, indent)
            ctx.emit(indent, f"{ln} -= 1")
        else:
            ctx.emit(indent, f'{ln} = unpack_from(">i", data, pos)[0]')
            ctx.emit(indent, "pos += 4")
        ctx.emit(indent, f"if {ln} < 0:")
        ctx.emit(indent, f"    {var_name} = None")
        ctx.emit(indent, "else:")
        ctx.emit(indent, f"    {var_name} = data[pos:pos+{ln}]")
        ctx.emit(indent, f"    pos += {ln}")


class _FrameReader:
    """A file-like cursor over the frame for kafka-python's tagged-field decoder.

    Its generated code hands that decoder ``BytesIO(bytes(data[pos:]))``: a copy of the whole rest
    of the frame for every struct that carries tagged fields, which a frame of many small tagged
    structs turns into time quadratic in its size. This reads in place instead; ``tell()`` is what
    the generated code adds to its position.
    """

    __slots__ = ("_data", "_start", "_pos")

    def __init__(self, data: memoryview, pos: int) -> None:
        self._data = data
        self._start = pos
        self._pos = pos

    def read(self, n: int = -1) -> bytes:
        stop = len(self._data) if n is None or n < 0 else self._pos + n
        chunk = bytes(self._data[self._pos:stop])
        self._pos += len(chunk)
        return chunk

    def tell(self) -> int:
        return self._pos - self._start


def _emit_tagged_decode_in_place(node: Any, ctx: Any, var_name: str, indent: str,
                                 version: int) -> None:
    first = len(ctx.lines)
    StructField._emit_tagged_decode(node, ctx, var_name, indent, version)
    for i in range(first, len(ctx.lines)):
        ctx.lines[i] = ctx.lines[i].replace("_BytesIO(bytes(data[pos:]))", "_FrameReader(data, pos)")
    ctx.globs["_FrameReader"] = _FrameReader


def _request_decoder(cls: Any, version: int, flexible: bool) -> Callable[..., Any]:
    # A private copy of the schema tree whose structs decode tagged fields in place and, for
    # Produce, whose records fields use _RecordsView; its structs build the very same message
    # classes, so callers can't tell the difference except that records are memoryviews.
    tree = StructField(cls._json)
    _graft(tree, cls._struct, cls.API_KEY in _ZERO_COPY_RECORDS)
    return tree.compiled_decode_from(version, compact=flexible, tagged=flexible, data_class=cls)


def _graft(new: Any, old: Any, zero_copy_records: bool) -> None:
    new._emit_tagged_decode = MethodType(_emit_tagged_decode_in_place, new)
    for nf, of in zip(new._fields, old._fields):
        if nf.is_struct_array():
            nf.set_data_class(of.data_class)
            _graft(nf.array_of, of.array_of, zero_copy_records)
        elif nf.is_struct():
            nf.set_data_class(of.data_class)
            _graft(nf, of, zero_copy_records)
        elif nf.type_str == "records" and zero_copy_records:
            nf._type = _RecordsView


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
        (length,) = struct.unpack_from(">h", frame, 8)
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
    (length,) = _I16.unpack_from(frame, 8)
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


# ---------------------------------------------------------------------------------------------
# Responses
# ---------------------------------------------------------------------------------------------


def _response_header(request: Request, body_len: int) -> bytes:
    # Response header v1 (with an empty tagged-field section) goes with flexible versions, v0
    # otherwise; ApiVersions always uses v0 so that a client that doesn't know our versions yet
    # can read the answer.
    cls = response_class(request.api_key)
    version = request.response_version
    if request.api_key != ApiKey.ApiVersions and cls is not None and cls.flexible_version_q(version):
        return struct.pack(">iib", body_len + 5, request.correlation_id, 0)
    return struct.pack(">ii", body_len + 4, request.correlation_id)


def _check_body(request: Request, body: Any) -> type[ApiMessage]:
    cls = response_class(request.api_key)
    if cls is None or not isinstance(body, cls):
        raise LocalProtocolError(
            f"response to {request.api_key.message_name} must be a {cls.__name__ if cls else '?'}, "
            f"not {type(body).__name__}")
    return cls


def encode_response(request: Request, body: Any) -> bytes:
    """The complete frame (size prefix, response header, body) answering ``request``.

    ``body`` must be an instance of the request's response class; it is encoded at
    ``request.response_version``. Encoding failures raise :class:`LocalProtocolError`.
    """
    _check_body(request, body)
    try:
        payload = body.encode(version=request.response_version)
    except LocalProtocolError:
        raise
    except Exception as exc:
        raise LocalProtocolError(
            f"cannot encode {type(body).__name__} v{request.response_version}: "
            f"{type(exc).__name__}: {exc}") from exc
    return _response_header(request, len(payload)) + payload


def encode_response_parts(request: Request, body: Any) -> list[Part]:
    """Like :func:`encode_response`, but ``records`` fields may hold :class:`FileRegion` objects.

    Returns the frame as a list of byte strings and file regions, in order, ready for
    ``kafkapy.net`` to write (regions go out with ``os.sendfile``). Without regions the list has
    one element.
    """
    _check_body(request, body)
    version = request.response_version
    cls = response_class(request.api_key)
    assert cls is not None
    compact = bool(cls.flexible_version_q(version))
    previous = getattr(_collect, "regions", None)
    _collect.regions = regions = []
    try:
        payload = body.encode(version=version)
    except LocalProtocolError:
        raise
    except Exception as exc:
        raise LocalProtocolError(
            f"cannot encode {type(body).__name__} v{version}: {type(exc).__name__}: {exc}") from exc
    finally:
        _collect.regions = previous
    if not regions:
        return [_response_header(request, len(payload)) + payload]
    parts: list[Part] = []
    view = memoryview(payload)
    start = 0
    for marker_at, region in _find_markers(payload, regions):
        # The encoder wrote the marker's length (16) in front of it; rewrite it as the region's.
        if compact:
            len_start = marker_at - 1
            if payload[len_start] != 17:
                raise LocalProtocolError("file region marker without its compact length")
            length = uvarint(region.count + 1)
        else:
            len_start = marker_at - 4
            if payload[len_start:marker_at] != b"\x00\x00\x00\x10":
                raise LocalProtocolError("file region marker without its length")
            length = _I32.pack(region.count)
        parts.append(bytes(view[start:len_start]) + length)
        if region.count:
            parts.append(region)
        start = marker_at + 16
    parts.append(bytes(view[start:]))
    size = frame_size(parts)
    parts[0] = _response_header(request, size) + parts[0]  # type: ignore[operator]
    return parts


def _find_markers(payload: bytes, regions: list[FileRegion]) -> Iterator[tuple[int, FileRegion]]:
    at = 0
    for expected in range(len(regions)):
        at = payload.find(_MARKER_MAGIC, at)
        if at < 0:
            raise LocalProtocolError("file region marker missing from the encoded response")
        (index,) = struct.unpack_from(">I", payload, at + 12)
        if index != expected:
            raise LocalProtocolError("file region markers out of order")
        yield at, regions[index]
        at += 16


def frame_parts(request: Request, body_parts: list[Part]) -> list[Part]:
    """Frame an already encoded response body: prepend the size prefix and response header.

    ``body_parts`` is the body at ``request.response_version`` as bytes and file regions, in order.
    """
    header = _response_header(request, frame_size(body_parts))
    if body_parts and not isinstance(body_parts[0], FileRegion):
        return [header + bytes(body_parts[0]), *body_parts[1:]]
    return [header, *body_parts]


# ---------------------------------------------------------------------------------------------
# Error responses
# ---------------------------------------------------------------------------------------------


def error_response(request: Request, code: int, message: str | None = None) -> Any | None:
    """A response to ``request`` that fails it with ``code``, or None when that can't be said.

    Like Kafka's ``AbstractRequest.getErrorResponse``: the top-level error code is set where the
    schema has one, and for APIs whose responses carry per-topic/per-partition (or per-resource,
    per-key) errors, the request's items are mirrored back each with the code. None means the
    response type has no place for an error; the caller should close the connection instead.
    """
    cls = response_class(request.api_key)
    if cls is None:
        return None
    version = request.response_version
    code = int(code)
    builder = _ERROR_BUILDERS.get(request.api_key)
    if builder is not None:
        return builder(cls, request.body, version, code, message)
    return _generic_error(cls, version, code, message)


def _has(cls: Any, name: str, version: int) -> bool:
    f = cls._struct.fields.get(name) if hasattr(cls, "_struct") else None
    return f is not None and f.for_version_q(version)


def _generic_error(cls: Any, version: int, code: int, message: str | None) -> Any | None:
    if not _has(cls, "error_code", version):
        return None
    kwargs: dict[str, Any] = {"error_code": code}
    if message is not None and _has(cls, "error_message", version):
        kwargs["error_message"] = message
    return cls(version=version, **kwargs)


def _produce_error(cls: Any, req: Any, version: int, code: int, message: str | None) -> Any:
    T = cls.TopicProduceResponse
    P = T.PartitionProduceResponse
    topics = [
        T(name=t.name, topic_id=t.topic_id,
          partition_responses=[P(index=p.index, error_code=code, base_offset=-1,
                                 log_append_time_ms=-1, log_start_offset=-1, record_errors=[],
                                 error_message=message)
                               for p in (t.partition_data or [])])
        for t in (req.topic_data or [])]
    return cls(version=version, responses=topics, throttle_time_ms=0)


def _fetch_error(cls: Any, req: Any, version: int, code: int, message: str | None) -> Any:
    # Kafka: v13+ clients read the top-level code and get no partitions; older ones get the code
    # in every requested partition too (there was no top-level code before v7).
    topics = []
    if version < 13:
        T = cls.FetchableTopicResponse
        P = T.PartitionData
        topics = [
            T(topic=t.topic, topic_id=t.topic_id,
              partitions=[P(partition_index=p.partition, error_code=code, high_watermark=-1,
                            last_stable_offset=-1, log_start_offset=-1, aborted_transactions=None,
                            preferred_read_replica=-1, records=b"")
                          for p in (t.partitions or [])])
            for t in (req.topics or [])]
    return cls(version=version, throttle_time_ms=0, error_code=code,
               session_id=getattr(req, "session_id", 0) or 0, responses=topics)


def _metadata_error(cls: Any, req: Any, version: int, code: int, message: str | None) -> Any:
    T = cls.MetadataResponseTopic
    topics = [T(error_code=code, name=t.name, topic_id=t.topic_id, is_internal=False, partitions=[])
              for t in (req.topics or [])]
    kwargs: dict[str, Any] = {"brokers": [], "topics": topics, "controller_id": -1,
                              "cluster_id": None, "throttle_time_ms": 0}
    if _has(cls, "error_code", version):
        kwargs["error_code"] = code
    return cls(version=version, **kwargs)


def _list_offsets_error(cls: Any, req: Any, version: int, code: int, message: str | None) -> Any:
    T = cls.ListOffsetsTopicResponse
    P = T.ListOffsetsPartitionResponse
    topics = [T(name=t.name,
                partitions=[P(partition_index=p.partition_index, error_code=code,
                              old_style_offsets=[], timestamp=-1, offset=-1, leader_epoch=-1)
                            for p in (t.partitions or [])])
              for t in (req.topics or [])]
    return cls(version=version, throttle_time_ms=0, topics=topics)


def _create_topics_error(cls: Any, req: Any, version: int, code: int, message: str | None) -> Any:
    T = cls.CreatableTopicResult
    topics = [T(name=t.name, topic_id=None, error_code=code, error_message=message,
                num_partitions=-1, replication_factor=-1, configs=None)
              for t in (req.topics or [])]
    return cls(version=version, throttle_time_ms=0, topics=topics)


def _delete_topics_error(cls: Any, req: Any, version: int, code: int, message: str | None) -> Any:
    R = cls.DeletableTopicResult
    if version >= 6:
        items = [(t.name, t.topic_id) for t in (req.topics or [])]
    else:
        items = [(name, None) for name in (req.topic_names or [])]
    results = [R(name=name, topic_id=topic_id, error_code=code, error_message=message)
               for name, topic_id in items]
    return cls(version=version, throttle_time_ms=0, responses=results)


def _find_coordinator_error(cls: Any, req: Any, version: int, code: int, message: str | None) -> Any:
    if version < 4:
        return cls(version=version, throttle_time_ms=0, error_code=code, error_message=message,
                   node_id=-1, host="", port=-1)
    C = cls.Coordinator
    coords = [C(key=key, node_id=-1, host="", port=-1, error_code=code, error_message=message)
              for key in (req.coordinator_keys or [])]
    return cls(version=version, throttle_time_ms=0, coordinators=coords)


def _init_producer_id_error(cls: Any, req: Any, version: int, code: int, message: str | None) -> Any:
    return cls(version=version, throttle_time_ms=0, error_code=code, producer_id=-1,
               producer_epoch=-1)


def _describe_configs_error(cls: Any, req: Any, version: int, code: int, message: str | None) -> Any:
    R = cls.DescribeConfigsResult
    results = [R(error_code=code, error_message=message, resource_type=r.resource_type,
                 resource_name=r.resource_name, configs=[])
               for r in (req.resources or [])]
    return cls(version=version, throttle_time_ms=0, results=results)


def _api_versions_error(cls: Any, req: Any, version: int, code: int, message: str | None) -> Any:
    return cls(version=version, error_code=code, api_keys=[], throttle_time_ms=0)


def _offset_commit_error(cls: Any, req: Any, version: int, code: int, message: str | None) -> Any:
    T = cls.OffsetCommitResponseTopic
    P = T.OffsetCommitResponsePartition
    topics = [T(name=t.name, topic_id=t.topic_id,
                partitions=[P(partition_index=p.partition_index, error_code=code) for p in t.partitions or []])
              for t in req.topics or []]
    return cls(version=version, throttle_time_ms=0, topics=topics)


def _offset_fetch_error(cls: Any, req: Any, version: int, code: int, message: str | None) -> Any:
    # Kafka: before v8 the top-level error_code (v2+) carries it; v8+ has one error per group.
    if version < 8:
        if version < 2:
            T = cls.OffsetFetchResponseTopic
            P = T.OffsetFetchResponsePartition
            topics = [T(name=t.name, partitions=[
                P(partition_index=i, committed_offset=-1, committed_leader_epoch=-1, metadata="",
                  error_code=code) for i in t.partition_indexes or []]) for t in req.topics or []]
            return cls(version=version, throttle_time_ms=0, topics=topics)
        return cls(version=version, throttle_time_ms=0, topics=[], error_code=code)
    G = cls.OffsetFetchResponseGroup
    groups = [G(group_id=g.group_id, topics=[], error_code=code) for g in req.groups or []]
    return cls(version=version, throttle_time_ms=0, groups=groups)


def _describe_groups_error(cls: Any, req: Any, version: int, code: int, message: str | None) -> Any:
    G = cls.DescribedGroup
    groups = [G(error_code=code, error_message=message, group_id=g, group_state="", protocol_type="",
                protocol_data="", members=[], authorized_operations=None)
              for g in req.groups or []]
    return cls(version=version, throttle_time_ms=0, groups=groups)


def _delete_records_error(cls: Any, req: Any, version: int, code: int, message: str | None) -> Any:
    T = cls.DeleteRecordsTopicResult
    P = T.DeleteRecordsPartitionResult
    topics = [T(name=t.name, partitions=[P(partition_index=p.partition_index, low_watermark=-1,
                                           error_code=code) for p in t.partitions or []])
              for t in req.topics or []]
    return cls(version=version, throttle_time_ms=0, topics=topics)


def _offset_for_leader_epoch_error(cls: Any, req: Any, version: int, code: int,
                                   message: str | None) -> Any:
    T = cls.OffsetForLeaderTopicResult
    P = T.EpochEndOffset
    topics = [T(topic=t.topic, partitions=[P(error_code=code, partition=p.partition, leader_epoch=-1,
                                             end_offset=-1) for p in t.partitions or []])
              for t in req.topics or []]
    return cls(version=version, throttle_time_ms=0, topics=topics)


def _txn_offset_commit_error(cls: Any, req: Any, version: int, code: int, message: str | None) -> Any:
    T = cls.TxnOffsetCommitResponseTopic
    P = T.TxnOffsetCommitResponsePartition
    topics = [T(name=t.name, partitions=[P(partition_index=p.partition_index, error_code=code)
                                         for p in t.partitions or []])
              for t in req.topics or []]
    return cls(version=version, throttle_time_ms=0, topics=topics)


def _add_partitions_to_txn_error(cls: Any, req: Any, version: int, code: int,
                                 message: str | None) -> Any:
    if version >= 4:
        return cls(version=version, throttle_time_ms=0, error_code=code, results_by_transaction=[])
    T = cls.AddPartitionsToTxnTopicResult
    P = T.AddPartitionsToTxnPartitionResult
    topics = [T(name=t.name, results_by_partition=[P(partition_index=i, partition_error_code=code)
                                                   for i in t.partitions or []])
              for t in req.v3_and_below_topics or []]
    return cls(version=version, throttle_time_ms=0, results_by_topic_v3_and_below=topics)


def _create_partitions_error(cls: Any, req: Any, version: int, code: int, message: str | None) -> Any:
    R = cls.CreatePartitionsTopicResult
    results = [R(name=t.name, error_code=code, error_message=message) for t in req.topics or []]
    return cls(version=version, throttle_time_ms=0, results=results)


def _delete_groups_error(cls: Any, req: Any, version: int, code: int, message: str | None) -> Any:
    R = cls.DeletableGroupResult
    results = [R(group_id=g, error_code=code) for g in req.groups_names or []]
    return cls(version=version, throttle_time_ms=0, results=results)


def _alter_configs_error(cls: Any, req: Any, version: int, code: int, message: str | None) -> Any:
    R = cls.AlterConfigsResourceResponse
    results = [R(error_code=code, error_message=message, resource_type=r.resource_type,
                 resource_name=r.resource_name) for r in req.resources or []]
    return cls(version=version, throttle_time_ms=0, responses=results)


def _describe_topic_partitions_error(cls: Any, req: Any, version: int, code: int,
                                     message: str | None) -> Any:
    T = cls.DescribeTopicPartitionsResponseTopic
    topics = [T(error_code=code, name=t.name, topic_id=None, is_internal=False, partitions=[],
                topic_authorized_operations=-2147483648) for t in req.topics or []]
    return cls(version=version, throttle_time_ms=0, topics=topics, next_cursor=None)


_ERROR_BUILDERS: dict[int, Callable[[Any, Any, int, int, str | None], Any]] = {
    ApiKey.OFFSET_COMMIT: _offset_commit_error,
    ApiKey.OFFSET_FETCH: _offset_fetch_error,
    ApiKey.DESCRIBE_GROUPS: _describe_groups_error,
    ApiKey.DELETE_RECORDS: _delete_records_error,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: _offset_for_leader_epoch_error,
    ApiKey.TXN_OFFSET_COMMIT: _txn_offset_commit_error,
    ApiKey.ADD_PARTITIONS_TO_TXN: _add_partitions_to_txn_error,
    ApiKey.CREATE_PARTITIONS: _create_partitions_error,
    ApiKey.DELETE_GROUPS: _delete_groups_error,
    ApiKey.ALTER_CONFIGS: _alter_configs_error,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: _alter_configs_error,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: _describe_topic_partitions_error,
    ApiKey.Produce: _produce_error,
    ApiKey.Fetch: _fetch_error,
    ApiKey.Metadata: _metadata_error,
    ApiKey.ListOffsets: _list_offsets_error,
    ApiKey.CreateTopics: _create_topics_error,
    ApiKey.DeleteTopics: _delete_topics_error,
    ApiKey.FindCoordinator: _find_coordinator_error,
    ApiKey.InitProducerId: _init_producer_id_error,
    ApiKey.DescribeConfigs: _describe_configs_error,
    ApiKey.ApiVersions: _api_versions_error,
}
