"""The server side of one Kafka connection, without I/O (in the style of h11).

This module owns only the request-side state machine. Bytes go in with
:meth:`ServerConnection.receive_data`; :meth:`ServerConnection.next_request` hands out one decoded
:class:`~kafkapy.protocol.events.Request` at a time, or :data:`NEED_DATA`, or :data:`CLOSED` once
the peer has closed and every complete request has been handed out. The work is done by its
neighbours, one job each:

* ``framing`` cuts the byte stream into size-prefixed frames within ``max_request_bytes``;
* ``decode`` turns a frame into a request (header, version policy, body via the schema codec);
* ``encode`` turns responses into frames, ``error_responses`` builds Kafka's failure answer;
* ``events`` and ``errors`` are what crosses the boundary.

Nothing here touches a socket or a clock. Once a
:class:`~kafkapy.protocol.errors.RemoteProtocolError` was raised, every later
:meth:`~ServerConnection.next_request` raises it again: the stream can't be resynchronised, and the
edge logs it once and closes the connection (Kafka sends nothing back in these cases and neither
do we). Misuse by our own code (feeding data after EOF) raises
:class:`~kafkapy.protocol.errors.LocalProtocolError`.
"""

from __future__ import annotations

from typing import Any

from kafkapy.protocol.apis import ApiVersionsTable
from kafkapy.protocol.decode import decode_request
from kafkapy.protocol.encode import encode_response, encode_response_parts
from kafkapy.protocol.error_responses import error_response
from kafkapy.protocol.errors import LocalProtocolError, RemoteProtocolError
from kafkapy.protocol.events import (
    CLOSED,
    NEED_DATA,
    FileRegion,
    Part,
    Request,
    RequestHeader,
    Sentinel,
)
from kafkapy.protocol.framing import DEFAULT_MAX_REQUEST_BYTES, FrameReader

# Request, RequestHeader and FileRegion live in ``events``; they stay importable from here because
# some twenty modules above protocol/ import them from this module.
__all__ = ["CLOSED", "DEFAULT_MAX_REQUEST_BYTES", "NEED_DATA", "FileRegion", "Part", "Request",
           "RequestHeader", "ServerConnection"]


class ServerConnection:
    """The request side of one Kafka connection: bytes in, :class:`Request` events out.

    ``supported`` decides which APIs and versions are accepted; ``max_request_bytes`` bounds a
    frame (Kafka's ``socket.request.max.bytes``).
    """

    def __init__(self, supported: ApiVersionsTable, max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
                 ) -> None:
        self.supported = supported
        self._frames = FrameReader(max_request_bytes)
        # Bound once: both run for every chunk and every request.
        self._feed = self._frames.feed
        self._next_frame = self._frames.next_frame
        self._error: RemoteProtocolError | None = None
        self._eof = False

    @property
    def max_request_bytes(self) -> int:
        """The largest frame accepted (Kafka's ``socket.request.max.bytes``)."""
        return self._frames.max_frame_bytes

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
        self._feed(data)

    def receive_buffer(self) -> memoryview | None:
        """Where the rest of the frame being filled goes, for readers that can receive into memory.

        An I/O layer with ``socket.recv_into`` reads straight into this view and then calls
        :meth:`received_into` with the byte count, saving the copy :meth:`receive_data` makes.
        None when no frame is partly received (a size prefix comes next: use ``receive_data``).
        """
        if self._error is not None or self._eof:
            return None
        return self._frames.receive_buffer()

    def received_into(self, n: int) -> None:
        """``n`` bytes were written into the view :meth:`receive_buffer` returned."""
        self._frames.received_into(n)

    @property
    def buffered_frames(self) -> int:
        """Complete frames waiting for :meth:`next_request`."""
        return self._frames.complete_frames

    @property
    def broken(self) -> bool:
        """Whether the peer already broke the framing (a negative or oversize size prefix):
        :meth:`next_request` raises, and no more bytes can help."""
        return self._error is not None or self._frames.error is not None

    @property
    def their_state_closed(self) -> bool:
        """Whether the peer has closed its side (``receive_data(b"")`` was called)."""
        return self._eof

    # -- output events -------------------------------------------------------------------------

    def next_request(self) -> Request | Sentinel:
        """The next complete request, :data:`NEED_DATA`, or :data:`CLOSED`.

        Raises a :class:`RemoteProtocolError` subclass when the peer broke the protocol; the
        connection is then unusable and must be closed. A frame cut short by the end of the
        stream is dropped: :data:`CLOSED` follows the last complete request.
        """
        frame = self._next_frame()
        if frame is not None:
            try:
                return decode_request(frame, self.supported)
            except RemoteProtocolError as exc:
                self._error = exc
                self._frames.discard()
                raise
        error = self._error or self._frames.error
        if error is not None:
            self._error = error
            raise error
        return CLOSED if self._eof else NEED_DATA

    # -- convenience: same as the module functions ---------------------------------------------

    def encode_response(self, request: Request, body: Any) -> bytes:
        """See :func:`kafkapy.protocol.encode.encode_response`."""
        return encode_response(request, body)

    def encode_response_parts(self, request: Request, body: Any) -> list[Part]:
        """See :func:`kafkapy.protocol.encode.encode_response_parts`."""
        return encode_response_parts(request, body)

    def error_response(self, request: Request, code: int, message: str | None = None) -> Any | None:
        """See :func:`kafkapy.protocol.error_responses.error_response`."""
        return error_response(request, code, message)
