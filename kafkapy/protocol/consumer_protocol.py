"""The consumer's embedded protocol: the ConsumerProtocolSubscription a consumer puts in its
JoinGroup metadata and the ConsumerProtocolAssignment the leader hands out in SyncGroup (Kafka's
ConsumerProtocol, versions 0 to 3; neither is a flexible version).

A version above 3 is read as 3, as Kafka's reader does (newer fields are appended). Anything that
cannot be read raises :class:`MalformedConsumerProtocol`.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

PROTOCOL_TYPE = "consumer"
HIGHEST_VERSION = 3


class MalformedConsumerProtocol(ValueError):
    """Bytes that are not a ConsumerProtocolSubscription / ConsumerProtocolAssignment."""


@dataclass(frozen=True)
class Subscription:
    """ConsumerProtocolSubscription: topics, user data, and from v1 the owned partitions, v2 the
    generation, v3 the rack."""

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    generation_id: int = -1
    rack_id: str | None = None
    version: int = 0


@dataclass(frozen=True)
class Assignment:
    """ConsumerProtocolAssignment: partitions by topic name, and user data."""

    partitions: Mapping[str, tuple[int, ...]]
    user_data: bytes | None = None
    version: int = 0


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = bytes(data)
        self.pos = 0

    def take(self, fmt: str) -> int:
        try:
            (v,) = struct.unpack_from(fmt, self.data, self.pos)
        except struct.error as e:
            raise MalformedConsumerProtocol(f"truncated at byte {self.pos}") from e
        self.pos += struct.calcsize(fmt)
        return int(v)

    def raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise MalformedConsumerProtocol(f"length {n} at byte {self.pos} runs past the end")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def string(self, nullable: bool = False) -> str | None:
        n = self.take(">h")
        if n < 0:
            if nullable:
                return None
            raise MalformedConsumerProtocol("null string where one is required")
        try:
            return self.raw(n).decode()
        except UnicodeDecodeError as e:
            raise MalformedConsumerProtocol("string is not UTF-8") from e

    def nullable_bytes(self) -> bytes | None:
        n = self.take(">i")
        return None if n < 0 else self.raw(n)

    def count(self) -> int:
        n = self.take(">i")
        if n < 0 or n > len(self.data):
            raise MalformedConsumerProtocol(f"array length {n} at byte {self.pos}")
        return n

    def topic_partitions(self) -> dict[str, tuple[int, ...]]:
        out: dict[str, tuple[int, ...]] = {}
        for _ in range(self.count()):
            topic = self.string() or ""
            out[topic] = tuple(self.take(">i") for _ in range(self.count()))
        return out


def version_of(data: bytes) -> int:
    """The version an embedded protocol message was written with."""
    v = _Reader(data).take(">h")
    if v < 0:
        raise MalformedConsumerProtocol(f"negative version {v}")
    return v


def decode_subscription(data: bytes) -> Subscription:
    r = _Reader(data)
    version = r.take(">h")
    if version < 0:
        raise MalformedConsumerProtocol(f"negative version {version}")
    v = min(version, HIGHEST_VERSION)
    topics = tuple(r.string() or "" for _ in range(r.count()))
    user_data = r.nullable_bytes()
    owned = r.topic_partitions() if v >= 1 else {}
    generation = r.take(">i") if v >= 2 else -1
    rack = r.string(nullable=True) if v >= 3 else None
    return Subscription(topics, user_data, owned, generation, rack, version)


def decode_assignment(data: bytes) -> Assignment:
    r = _Reader(data)
    version = r.take(">h")
    if version < 0:
        raise MalformedConsumerProtocol(f"negative version {version}")
    partitions = r.topic_partitions()
    return Assignment(partitions, r.nullable_bytes(), version)


def _w_string(out: bytearray, s: str | None) -> None:
    if s is None:
        out += struct.pack(">h", -1)
        return
    b = s.encode()
    out += struct.pack(">h", len(b)) + b


def _w_bytes(out: bytearray, b: bytes | None) -> None:
    out += struct.pack(">i", -1) if b is None else struct.pack(">i", len(b)) + b


def _w_topic_partitions(out: bytearray, parts: Mapping[str, Sequence[int]]) -> None:
    out += struct.pack(">i", len(parts))
    for topic in sorted(parts):
        _w_string(out, topic)
        ps = sorted(parts[topic])
        out += struct.pack(f">i{len(ps)}i", len(ps), *ps)


def encode_assignment(partitions: Mapping[str, Sequence[int]], user_data: bytes | None = None,
                      version: int = 0) -> bytes:
    """A ConsumerProtocolAssignment of ``version`` (capped at 3; every version has the same
    fields)."""
    out = bytearray(struct.pack(">h", min(max(version, 0), HIGHEST_VERSION)))
    _w_topic_partitions(out, partitions)
    _w_bytes(out, user_data)
    return bytes(out)


def encode_subscription(topics: Sequence[str], user_data: bytes | None = None,
                        owned_partitions: Mapping[str, Sequence[int]] | None = None,
                        generation_id: int = -1, rack_id: str | None = None, version: int = 0) -> bytes:
    """A ConsumerProtocolSubscription of ``version`` (0 to 3): fields newer than it are left out."""
    v = min(max(version, 0), HIGHEST_VERSION)
    out = bytearray(struct.pack(">h", v))
    out += struct.pack(">i", len(topics))
    for t in topics:
        _w_string(out, t)
    _w_bytes(out, user_data)
    if v >= 1:
        _w_topic_partitions(out, owned_partitions or {})
    if v >= 2:
        out += struct.pack(">i", generation_id)
    if v >= 3:
        _w_string(out, rack_id)
    return bytes(out)
