"""Kafka's variable-length integers (zigzag-encoded, protobuf-style base-128).

Record bodies in batch v2 carry every length and delta as a signed varint (int32) or varlong
(int64). Decoding mirrors Kafka's ``ByteUtils``: a varint may use at most 5 bytes and a varlong at
most 10; bits beyond the type's width are dropped, exactly as Java's shifts drop them, so that a
hostile encoding decodes to the same value here as in the Java broker.
"""

from __future__ import annotations

from collections.abc import Callable

_MASK32 = (1 << 32) - 1
_MASK64 = (1 << 64) - 1


class VarintError(ValueError):
    """A varint ran past its maximum length or past the end of the buffer."""


def zigzag(value: int) -> int:
    """Map a signed int64 to the unsigned form varints carry (0, -1, 1, -2 → 0, 1, 2, 3)."""
    return ((value << 1) ^ (value >> 63)) & _MASK64


def encode_varint(value: int, write: Callable[[int], object]) -> None:
    """Write signed ``value`` byte by byte through ``write`` (a bytearray's ``append``)."""
    v = zigzag(value)
    while v >= 0x80:
        write((v & 0x7F) | 0x80)
        v >>= 7
    write(v)


def varint_bytes(value: int) -> bytes:
    """The varint encoding of ``value`` as bytes."""
    out = bytearray()
    encode_varint(value, out.append)
    return bytes(out)


def _decode(buf: bytes | bytearray | memoryview, pos: int, end: int, max_bytes: int,
            bits: int) -> tuple[int, int]:
    raw = 0
    shift = 0
    for i in range(max_bytes):
        if pos >= end:
            raise VarintError("buffer underflow in varint")
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift if i < max_bytes - 1 else b << shift
        if not b & 0x80:
            mask = (1 << bits) - 1
            raw &= mask
            value = (raw >> 1) ^ -(raw & 1)
            return value, pos
        shift += 7
    raise VarintError("varint is too long")


def decode_varint(buf: bytes | bytearray | memoryview, pos: int, end: int) -> tuple[int, int]:
    """Decode a signed int32 varint at ``pos`` (bounded by ``end``); return (value, new_pos)."""
    return _decode(buf, pos, end, 5, 32)


def decode_varlong(buf: bytes | bytearray | memoryview, pos: int, end: int) -> tuple[int, int]:
    """Decode a signed int64 varlong at ``pos`` (bounded by ``end``); return (value, new_pos)."""
    return _decode(buf, pos, end, 10, 64)
