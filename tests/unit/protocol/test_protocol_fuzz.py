"""Random and mutated frames: ServerConnection only ever raises its documented errors."""

from __future__ import annotations

import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from protocol_samples import sample

from kafkapy.protocol import (
    CLOSED,
    NEED_DATA,
    ApiVersionsTable,
    RemoteProtocolError,
    Request,
    ServerConnection,
    encode_response,
    error_response,
    request_class,
)

TABLE = ApiVersionsTable.everything()
VALID_FRAMES: list[bytes] = []
for _r in TABLE:
    for _v in sorted({_r.min_version, _r.max_version}):
        _body = sample(request_class(_r.api_key), _v)
        _body.with_header(correlation_id=11, client_id="fuzz")
        VALID_FRAMES.append(_body.encode(version=_v, header=True, framed=True))

FUZZ = settings(max_examples=200, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])


def drain(conn: ServerConnection) -> list[Request]:
    """Pull events until the connection needs data, closes, or fails in a documented way."""
    out: list[Request] = []
    for _ in range(1000):
        try:
            ev = conn.next_request()
        except RemoteProtocolError as exc:
            assert str(exc)  # always something to log
            return out
        if ev is NEED_DATA or ev is CLOSED:
            return out
        assert isinstance(ev, Request)
        # whatever decoded must be answerable: an error response is None or encodable
        body = error_response(ev, -1)
        if body is not None:
            encode_response(ev, body)
        out.append(ev)
    raise AssertionError("next_request did not settle")


@FUZZ
@given(st.binary(max_size=300), st.integers(min_value=1, max_value=64))
def test_random_bytes(data: bytes, chunk: int) -> None:
    conn = ServerConnection(TABLE, max_request_bytes=10_000)
    for i in range(0, len(data), chunk):
        conn.receive_data(data[i:i + chunk])
        drain(conn)
    conn.receive_data(b"")
    drain(conn)


@FUZZ
@given(st.sampled_from(VALID_FRAMES), st.data())
def test_mutated_valid_frames(frame: bytes, data: st.DataObject) -> None:
    buf = bytearray(frame)
    for _ in range(data.draw(st.integers(1, 6), label="mutations")):
        kind = data.draw(st.sampled_from(["flip", "set", "truncate", "extend"]), label="kind")
        if kind == "flip" and len(buf) > 4:
            i = data.draw(st.integers(4, len(buf) - 1))
            buf[i] ^= 1 << data.draw(st.integers(0, 7))
        elif kind == "set" and len(buf) > 4:
            i = data.draw(st.integers(4, len(buf) - 1))
            buf[i] = data.draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF]))
        elif kind == "truncate" and len(buf) > 8:
            del buf[data.draw(st.integers(8, len(buf) - 1)):]
        else:
            buf += data.draw(st.binary(min_size=1, max_size=8))
    # keep the size prefix consistent with the (mutated) payload half of the time
    if data.draw(st.booleans(), label="fix size"):
        struct.pack_into(">i", buf, 0, len(buf) - 4)
    conn = ServerConnection(TABLE)
    conn.receive_data(bytes(buf))
    drain(conn)
    conn.receive_data(b"")
    drain(conn)


def test_mutations_cover_every_api() -> None:
    # a frame of each API with its body bytes progressively zeroed decodes or fails cleanly
    for frame in VALID_FRAMES:
        for cut in range(12, len(frame), max(1, len(frame) // 8)):
            buf = bytearray(frame[:cut])
            struct.pack_into(">i", buf, 0, cut - 4)
            conn = ServerConnection(TABLE)
            conn.receive_data(bytes(buf))
            drain(conn)
