"""Primitive encodings of the Kafka wire format shared by the hand-packed response encoders.

The generic codec (kafka-python's schema classes) covers every message; these few helpers are for
the hot-path encoders that pack Produce and Fetch responses directly.
"""

from __future__ import annotations

import struct
import uuid

I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
I64 = struct.Struct(">q")


def uvarint(value: int) -> bytes:
    """An unsigned varint (compact lengths and counts of flexible versions)."""
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value & ~0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def uuid_bytes(topic_id: uuid.UUID | bytes | None) -> bytes:
    """A topic id's 16 bytes; None is Kafka's all-zero id."""
    if topic_id is None:
        return bytes(16)
    if isinstance(topic_id, uuid.UUID):
        return topic_id.bytes
    raw = bytes(topic_id)
    if len(raw) != 16:
        raise ValueError(f"a topic id has 16 bytes, not {len(raw)}")
    return raw
