"""The records of ``__consumer_offsets``: Kafka's key and value layouts, and group placement.

Every record's key starts with an int16 version saying what it is:

* versions 0 and 1: an offset commit, ``group, topic, partition`` (Kafka writes version 1);
* version 2: a classic group's metadata, ``group``;
* 3-16: consumer and share group records (:mod:`kafkapy.coordinator.group_records`), for which
  :func:`decode_key` answers None; 17-23 streams groups', skipped.

Offset commit values come in versions 0-4 (we write 3, or 1 when the commit carries an explicit
expiry as OffsetCommit v2-v4 allowed); group metadata values in versions 0-4 (we write 3). Version
4 of both is version 3 made flexible, read through the schema codec. A record
with a null value is a tombstone: the offset or the group is gone. Strings are int16-length UTF-8,
nullable ones use length -1; byte fields are int32-length.

Pure functions only: no I/O, no clock.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from kafkapy.protocol import schemas
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.protocol.schema_codec import MessageSchema, SchemaError, load_schema

OFFSETS_TOPIC = "__consumer_offsets"

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_VALUE_VERSION = 3

_OFFSET_VALUE = load_schema("OffsetCommitValue", schemas.package("coordinator"))
_GROUP_VALUE = load_schema("GroupMetadataValue", schemas.package("coordinator"))


def java_string_hash(s: str) -> int:
    """``String.hashCode()`` of Java: over UTF-16 code units, wrapping at 32 bits, signed."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition of a group, as Kafka computes it.

    Kafka's ``Utils.abs`` maps Integer.MIN_VALUE to 0 instead of overflowing.
    """
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


# -- primitive writers and readers ---------------------------------------------------------------

def _w_str(out: bytearray, s: str | None) -> None:
    if s is None:
        out += struct.pack(">h", -1)
        return
    b = s.encode("utf-8")
    out += struct.pack(">h", len(b))
    out += b


def _w_bytes(out: bytearray, b: bytes | None) -> None:
    if b is None:
        out += struct.pack(">i", -1)
        return
    out += struct.pack(">i", len(b))
    out += b


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "__consumer_offsets record is truncated")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        value: int = struct.unpack(">h", self._take(2))[0]
        return value

    def i32(self) -> int:
        value: int = struct.unpack(">i", self._take(4))[0]
        return value

    def i64(self) -> int:
        value: int = struct.unpack(">q", self._take(8))[0]
        return value

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "null in a non-nullable string field")
        return s

    def nullable_string(self) -> str | None:
        n = self.i16()
        return None if n < 0 else self._take(n).decode("utf-8")

    def bytes_(self) -> bytes:
        n = self.i32()
        return b"" if n < 0 else bytes(self._take(n))


# -- keys --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    group: str


def encode_offset_key(group: str, topic: str, partition: int) -> bytes:
    out = bytearray(struct.pack(">h", OFFSET_KEY_VERSION))
    _w_str(out, group)
    _w_str(out, topic)
    out += struct.pack(">i", partition)
    return bytes(out)


def encode_group_key(group: str) -> bytes:
    out = bytearray(struct.pack(">h", GROUP_KEY_VERSION))
    _w_str(out, group)
    return bytes(out)


def decode_key(key: bytes) -> OffsetKey | GroupKey | None:
    """The key of an offset or classic group record; None for every other type."""
    r = _Reader(key)
    version = r.i16()
    if version in (0, 1):
        return OffsetKey(r.string(), r.string(), r.i32())
    if version == 2:
        return GroupKey(r.string())
    return None


# -- offset values -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class OffsetValue:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1  # only versions 1 carries one; -1 means "use the retention rules"


def encode_offset_value(v: OffsetValue) -> bytes:
    if v.expire_timestamp >= 0:
        out = bytearray(struct.pack(">hq", OFFSET_VALUE_VERSION_WITH_EXPIRY, v.offset))
        _w_str(out, v.metadata)
        out += struct.pack(">qq", v.commit_timestamp, v.expire_timestamp)
        return bytes(out)
    out = bytearray(struct.pack(">hqi", OFFSET_VALUE_VERSION, v.offset, v.leader_epoch))
    _w_str(out, v.metadata)
    out += struct.pack(">q", v.commit_timestamp)
    return bytes(out)


def decode_offset_value(value: bytes) -> OffsetValue:
    r = _Reader(value)
    version = r.i16()
    if version == 0:
        return OffsetValue(r.i64(), -1, r.string(), r.i64())
    if version == 1:
        offset, metadata, commit_ts, expire_ts = r.i64(), r.string(), r.i64(), r.i64()
        return OffsetValue(offset, -1, metadata, commit_ts, expire_ts)
    if version == 2:
        return OffsetValue(r.i64(), -1, r.string(), r.i64())
    if version == 3:
        return OffsetValue(r.i64(), r.i32(), r.string(), r.i64())
    if version == 4:
        # v3 made flexible (Kafka 4.x may write it, with the topic id as a tagged field).
        v = _flexible(_OFFSET_VALUE, value, version)
        return OffsetValue(v["offset"], v["leader_epoch"], v["metadata"], v["commit_timestamp"])
    raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"bad offset commit value version {version}")


# -- group metadata values ---------------------------------------------------------------------------

@dataclass(frozen=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: tuple[MemberValue, ...] = field(default_factory=tuple)


def encode_group_value(v: GroupValue) -> bytes:
    out = bytearray(struct.pack(">h", GROUP_VALUE_VERSION))
    _w_str(out, v.protocol_type)
    out += struct.pack(">i", v.generation)
    _w_str(out, v.protocol)
    _w_str(out, v.leader)
    out += struct.pack(">q", v.current_state_timestamp)
    out += struct.pack(">i", len(v.members))
    for m in v.members:
        _w_str(out, m.member_id)
        _w_str(out, m.group_instance_id)
        _w_str(out, m.client_id)
        _w_str(out, m.client_host)
        out += struct.pack(">ii", m.rebalance_timeout_ms, m.session_timeout_ms)
        _w_bytes(out, m.subscription)
        _w_bytes(out, m.assignment)
    return bytes(out)


def decode_group_value(value: bytes) -> GroupValue:
    r = _Reader(value)
    version = r.i16()
    if version == 4:
        return _group_value_v4(_flexible(_GROUP_VALUE, value, version))
    if not 0 <= version <= 3:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"group metadata value version {version} is not supported")
    protocol_type = r.string()
    generation = r.i32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    state_ts = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.i32()):
        member_id = r.string()
        instance = r.nullable_string() if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        rebalance = r.i32() if version >= 1 else -1
        session = r.i32()
        if version == 0:
            rebalance = session
        members.append(MemberValue(member_id, instance, client_id, client_host, rebalance, session,
                                   r.bytes_(), r.bytes_()))
    return GroupValue(protocol_type, generation, protocol, leader, state_ts, tuple(members))


def _flexible(schema: MessageSchema, value: bytes, version: int) -> dict[str, Any]:
    try:
        return schema.decode_all(value[2:], version)
    except SchemaError as e:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"{schema.name} v{version}: {e}") from None


def _group_value_v4(v: dict[str, Any]) -> GroupValue:
    members = tuple(
        MemberValue(mv["member_id"], mv["group_instance_id"], mv["client_id"], mv["client_host"],
                    mv["rebalance_timeout"], mv["session_timeout"], mv["subscription"] or b"",
                    mv["assignment"] or b"")
        for mv in v["members"])
    return GroupValue(v["protocol_type"], v["generation"], v["protocol"], v["leader"],
                      v["current_state_timestamp"], members)


def subscribed_topics(protocol_type: str, metadata: bytes) -> set[str] | None:
    """Topics in a consumer's ConsumerProtocolSubscription (any version), or None if not readable."""
    if protocol_type != "consumer" or not metadata:
        return None
    try:
        r = _Reader(metadata)
        r.i16()
        return {r.string() for _ in range(r.i32())}
    except (KafkaError, UnicodeDecodeError, struct.error):
        return None
