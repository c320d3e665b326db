"""FrameReader: size-prefixed frames cut out of arbitrary chunks, refused when oversize or cut short."""

from __future__ import annotations

import struct

import pytest

from kafkapy.protocol import (
    CLOSED,
    NEED_DATA,
    ApiVersionsTable,
    FrameTooLarge,
    LocalProtocolError,
    MalformedFrame,
    ServerConnection,
)
from kafkapy.protocol import messages as m
from kafkapy.protocol.framing import FrameReader


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def test_frames_come_out_whole_and_in_order_however_the_bytes_are_split() -> None:
    stream = framed(b"first") + framed(b"") + framed(b"third frame")
    for chunk in (1, 3, 4, 7, len(stream)):
        reader = FrameReader(max_frame_bytes=100)
        for i in range(0, len(stream), chunk):
            reader.feed(stream[i:i + chunk])
        assert [reader.next_frame() for _ in range(3)] == [b"first", b"", b"third frame"]
        assert reader.next_frame() is None and not reader.partial and reader.error is None


def test_oversize_frame_is_refused_before_anything_is_buffered() -> None:
    reader = FrameReader(max_frame_bytes=10)
    reader.feed(framed(b"ok") + struct.pack(">i", 11) + b"x" * 11 + framed(b"after"))
    assert isinstance(reader.error, FrameTooLarge)
    assert (reader.error.size, reader.error.max_size) == (11, 10)
    assert str(reader.error) == "Invalid receive (size = 11 larger than 10)"
    # the frame before the bad prefix is still there; nothing after it is taken
    assert reader.next_frame() == b"ok" and reader.next_frame() is None
    assert reader.receive_buffer() is None
    reader.feed(framed(b"more"))
    assert reader.next_frame() is None


def test_frame_at_the_limit_is_accepted() -> None:
    reader = FrameReader(max_frame_bytes=10)
    reader.feed(framed(b"0123456789"))
    assert reader.next_frame() == b"0123456789" and reader.error is None


def test_negative_size_is_a_malformed_frame() -> None:
    reader = FrameReader()
    reader.feed(struct.pack(">i", -1))
    assert isinstance(reader.error, MalformedFrame) and reader.error.size == -1


@pytest.mark.parametrize("cut", [1, 3, 4, 5, 12])
def test_truncated_frame_is_never_handed_out(cut: int) -> None:
    data = framed(b"0123456789")
    reader = FrameReader()
    reader.feed(data[:cut])
    assert reader.next_frame() is None and reader.partial and reader.error is None


def test_truncated_frame_then_end_of_stream_closes_the_connection_quietly() -> None:
    # Kafka drops a request cut short by a disconnect: nothing is answered, nothing is raised.
    table = ApiVersionsTable.everything()
    body = m.MetadataRequest(topics=None)
    body.with_header(correlation_id=1, client_id="c")
    whole = body.encode(version=1, header=True, framed=True)
    conn = ServerConnection(table)
    conn.receive_data(whole + whole[:-3])
    assert conn.next_request().correlation_id == 1  # type: ignore[union-attr]
    assert conn.next_request() is NEED_DATA
    conn.receive_data(b"")
    assert conn.next_request() is CLOSED
    assert conn.next_request() is CLOSED


def test_receive_buffer_fills_the_frame_in_place() -> None:
    reader = FrameReader()
    reader.feed(struct.pack(">i", 6) + b"ab")
    view = reader.receive_buffer()
    assert view is not None and len(view) == 4
    view[:4] = b"cdef"
    reader.received_into(4)
    assert reader.next_frame() == b"abcdef" and reader.receive_buffer() is None


def test_a_large_size_prefix_alone_does_not_allocate_the_frame() -> None:
    # bytearray(n) writes n zeros: allocating a declared 100 MB up front would commit 100 MB per
    # connection for 4 bytes sent. Only what arrives (doubled) is held.
    reader = FrameReader(max_frame_bytes=100_000_000, preallocate_bytes=1024)
    reader.feed(struct.pack(">i", 100_000_000) + b"x" * 10)
    view = reader.receive_buffer()
    assert view is not None and 0 < len(view) <= 1024
    view.release()
    reader.feed(b"y" * 5000)
    view = reader.receive_buffer()
    assert view is not None and len(view) <= 2 * 5010
    assert reader.partial and reader.next_frame() is None


@pytest.mark.parametrize("chunk", [1, 7, 1000, 5000, 70_000])
def test_frames_above_the_preallocation_come_out_whole_by_feed(chunk: int) -> None:
    payload = bytes(range(256)) * 200  # 51,200 bytes
    stream = framed(payload) + framed(b"next")
    reader = FrameReader(preallocate_bytes=1024)
    for i in range(0, len(stream), chunk):
        reader.feed(stream[i:i + chunk])
    frame = reader.next_frame()
    assert frame == payload and len(frame) == len(payload)
    assert reader.next_frame() == b"next" and not reader.partial


@pytest.mark.parametrize("most", [1, 333, 4096, 1 << 20])
def test_frames_above_the_preallocation_come_out_whole_by_recv_into(most: int) -> None:
    payload = bytes(range(256)) * 200
    reader = FrameReader(preallocate_bytes=1000)
    reader.feed(struct.pack(">i", len(payload)) + payload[:10])
    sent = 10
    while (view := reader.receive_buffer()) is not None:
        n = min(most, len(view), len(payload) - sent)
        view[:n] = payload[sent:sent + n]
        view.release()
        reader.received_into(n)
        sent += n
    assert sent == len(payload) and reader.next_frame() == payload


def test_received_into_past_the_buffer_is_refused() -> None:
    reader = FrameReader(preallocate_bytes=8)
    reader.feed(struct.pack(">i", 100))
    view = reader.receive_buffer()
    assert view is not None and len(view) == 8
    view.release()
    with pytest.raises(LocalProtocolError):
        reader.received_into(9)
