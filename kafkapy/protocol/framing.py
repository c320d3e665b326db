"""Length-prefixed frames: a stream of bytes cut into whole request frames, within a size limit.

Every Kafka request is a 4-byte big-endian size followed by that many bytes. :class:`FrameReader`
cuts frames out of whatever chunks the socket delivers; it neither parses nor copies twice. A
negative size or one above the limit (Kafka's ``socket.request.max.bytes``) is refused before
anything is buffered, as Kafka's ``NetworkReceive`` does, so a stray HTTP or TLS client on the
Kafka port can't make the node allocate.

Unlike ``NetworkReceive``, a frame's buffer is not allocated at the declared size up front when that
is large: ``bytearray(n)`` writes all ``n`` zero bytes, so a 4-byte prefix claiming 100 MB would
commit 100 MB of memory per connection before a byte of the frame arrived. Frames up to
:data:`PREALLOCATE_BYTES` (every ordinary request) get their final buffer at once; larger ones
start there and double as their bytes arrive, never past the declared size.
"""

from __future__ import annotations

from collections import deque
from typing import Final

from kafkapy.protocol.errors import (
    FrameTooLarge,
    LocalProtocolError,
    MalformedFrame,
    RemoteProtocolError,
)
from kafkapy.protocol.wire import I32

__all__ = ["DEFAULT_MAX_REQUEST_BYTES", "PREALLOCATE_BYTES", "FrameReader"]

# Kafka's socket.request.max.bytes default.
DEFAULT_MAX_REQUEST_BYTES: Final = 104_857_600
# The producer's default max.request.size: a frame this size or smaller is allocated whole.
PREALLOCATE_BYTES: Final = 1_048_576


class FrameReader:
    """Bytes in, complete frames (without their size prefix) out, in order.

    Each byte received is copied once into its own frame's buffer (a frame above
    :data:`PREALLOCATE_BYTES` is moved as its buffer doubles: under one extra copy per byte), so
    partial frames cost linear time however they are split. After a bad size prefix,
    :attr:`error` is set and every later byte is dropped: the stream can't be resynchronised.
    Frames completed before it stay readable.
    """

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
                 preallocate_bytes: int = PREALLOCATE_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self.preallocate_bytes = max(1, preallocate_bytes)
        #: Why the stream became unreadable (a bad size prefix), or None.
        self.error: RemoteProtocolError | None = None
        self._prefix = bytearray()          # a size prefix split across feed calls
        self._frame: bytearray | None = None  # the frame being filled (its final size, or less)
        self._filled = 0                    # bytes of _frame received so far
        self._need = 0                      # bytes still missing from the frame
        self._ready: deque[bytearray] = deque()

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Take bytes read from the peer (never empty: end of stream is the connection's business)."""
        if self.error is not None:
            return
        mv = memoryview(data).cast("B")
        n = len(mv)
        i = 0
        while i < n:
            if self._frame is None:
                if not self._prefix and n - i >= 4:
                    size = I32.unpack_from(mv, i)[0]
                    i += 4
                else:
                    take = min(4 - len(self._prefix), n - i)
                    self._prefix += mv[i:i + take]
                    i += take
                    if len(self._prefix) < 4:
                        return
                    size = I32.unpack_from(self._prefix)[0]
                    self._prefix.clear()
                if size < 0:
                    self.error = MalformedFrame(size)
                    return
                if size > self.max_frame_bytes:
                    self.error = FrameTooLarge(size, self.max_frame_bytes)
                    return
                self._frame = bytearray(min(size, self.preallocate_bytes))
                self._filled = 0
                self._need = size
            take = min(self._need, n - i)
            if take:
                filled = self._filled
                if filled + take > len(self._frame):
                    self._grow(filled + take)
                self._frame[filled:filled + take] = mv[i:i + take]
                self._filled = filled + take
                i += take
                self._need -= take
            if self._need == 0:
                self._ready.append(self._frame)
                self._frame = None

    def _grow(self, at_least: int) -> None:
        """Move the frame in progress to a buffer of double the size (or ``at_least``), capped at
        the frame's declared size, so the last one is exactly the frame."""
        frame = self._frame
        assert frame is not None
        size = self._filled + self._need
        bigger = bytearray(min(size, max(2 * len(frame), at_least)))
        bigger[:self._filled] = memoryview(frame)[:self._filled]
        self._frame = bigger

    def receive_buffer(self) -> memoryview | None:
        """The unfilled rest of the frame's buffer (for ``recv_into``), or None between frames.

        It may be shorter than what the frame still needs; ask again after :meth:`received_into`.
        """
        if self._frame is None or self.error is not None:
            return None
        if self._filled == len(self._frame):
            self._grow(self._filled + 1)
        return memoryview(self._frame)[self._filled:]

    def received_into(self, n: int) -> None:
        """``n`` bytes were written into the view :meth:`receive_buffer` returned."""
        if self._frame is None or not 0 <= n <= len(self._frame) - self._filled:
            raise LocalProtocolError(f"received_into({n}) does not match the frame being filled")
        self._filled += n
        self._need -= n
        if self._need == 0:
            self._ready.append(self._frame)
            self._frame = None

    def next_frame(self) -> bytearray | None:
        """The oldest complete frame, or None when there is none yet."""
        return self._ready.popleft() if self._ready else None

    def discard(self) -> None:
        """Drop every complete frame not yet taken (after the stream turned out unreadable)."""
        self._ready.clear()

    @property
    def complete_frames(self) -> int:
        """Complete frames waiting for :meth:`next_frame`."""
        return len(self._ready)

    @property
    def partial(self) -> bool:
        """Whether part of a frame (or of its size prefix) has arrived and the rest hasn't."""
        return self._frame is not None or bool(self._prefix)
