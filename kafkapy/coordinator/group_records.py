"""The byte codecs of the ``__consumer_offsets`` records of consumer groups (types 3-8, 16) and
share groups (types 10-15), bound to the cores' typed records.

Each key is an int16 record type then the key struct (version 0, not flexible); each value an
int16 version (0) then the value struct (flexible). A null value is a tombstone, which the cores
see as their own ``Tombstone`` of that record type. Layouts come from the JSON schemas under
``kafkapy/protocol/schemas/coordinator/`` through the one schema codec, as the transaction
coordinator's records do.

Type 4 (ConsumerGroupPartitionMetadata) is read and dropped: Kafka 4.0 wrote it, later versions
replaced it by the metadata hash of type 3, which the consumer core keeps.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

from kafkapy.coordinator.consumer import records as crec
from kafkapy.coordinator.consumer.partitions import Assignment, TopicId
from kafkapy.coordinator.share_group import records as srec
from kafkapy.protocol import schemas
from kafkapy.protocol.schema_codec import MessageSchema, SchemaError, load_schema

_PACKAGE = schemas.package("coordinator")
_I16 = struct.Struct(">h")

_NAMES = {
    3: "ConsumerGroupMetadata", 4: "ConsumerGroupPartitionMetadata", 5: "ConsumerGroupMemberMetadata",
    6: "ConsumerGroupTargetAssignmentMetadata", 7: "ConsumerGroupTargetAssignmentMember",
    8: "ConsumerGroupCurrentMemberAssignment", 10: "ShareGroupMemberMetadata", 11: "ShareGroupMetadata",
    12: "ShareGroupTargetAssignmentMetadata", 13: "ShareGroupTargetAssignmentMember",
    14: "ShareGroupCurrentMemberAssignment", 15: "ShareGroupStatePartitionMetadata",
    16: "ConsumerGroupRegularExpression",
}
_KEYS: dict[int, MessageSchema] = {t: load_schema(n + "Key", _PACKAGE) for t, n in _NAMES.items()}
_VALUES: dict[int, MessageSchema] = {t: load_schema(n + "Value", _PACKAGE) for t, n in _NAMES.items()}

#: Record types whose key carries a second string (member id, or the regex for 16).
_SUB_KEY_FIELD = {5: "member_id", 7: "member_id", 8: "member_id", 10: "member_id", 13: "member_id",
                  14: "member_id", 16: "regular_expression"}

CONSUMER_TYPES = frozenset({3, 4, 5, 6, 7, 8, 16})
SHARE_TYPES = frozenset({10, 11, 12, 13, 14, 15})
#: Streams groups (KIP-1071): not served; their records are skipped on load.
STREAMS_TYPES = frozenset(range(17, 24))

GroupRecord = crec.GroupRecord | srec.ShareGroupRecord


class ObsoleteRecord:
    """A record read but not kept (type 4): the caller ignores it."""

    __slots__ = ("group_id",)

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id


# -- helpers ------------------------------------------------------------------------------------

def _topic_partitions(a: Mapping[TopicId, frozenset[int]]) -> list[dict[str, Any]]:
    return [{"topic_id": t, "partitions": sorted(ps)} for t, ps in sorted(a.items(), key=lambda kv: str(kv[0]))]


def _assignment(items: list[dict[str, Any]] | None) -> Assignment:
    out: Assignment = {}
    for item in items or ():
        parts = frozenset(item["partitions"])
        if parts:
            out[item["topic_id"]] = out.get(item["topic_id"], frozenset()) | parts
    return out


def _key(record_type: int, group_id: str, sub_key: str = "") -> bytes:
    values: dict[str, Any] = {"group_id": group_id}
    field = _SUB_KEY_FIELD.get(record_type)
    if field is not None:
        values[field] = sub_key
    return _I16.pack(record_type) + _KEYS[record_type].encode(values, 0)


def _value(record_type: int, values: dict[str, Any]) -> bytes:
    return _I16.pack(0) + _VALUES[record_type].encode(values, 0)


def _classic(c: crec.ClassicMemberMetadata | None) -> dict[str, Any] | None:
    # A classic-protocol member's JoinGroup details: without them a reloaded mixed-mode group
    # would forget which members speak the classic protocol.
    if c is None:
        return None
    return {"session_timeout_ms": c.session_timeout_ms,
            "supported_protocols": [{"name": n, "metadata": m} for n, m in c.supported_protocols]}


def _classic_of(v: dict[str, Any] | None) -> crec.ClassicMemberMetadata | None:
    if v is None:
        return None
    return crec.ClassicMemberMetadata(v["session_timeout_ms"], tuple(
        (p["name"], bytes(p["metadata"])) for p in v["supported_protocols"]))


# -- encoding -----------------------------------------------------------------------------------

def encode(record: GroupRecord) -> tuple[bytes, bytes | None]:
    """The (key, value) of a core's record; a tombstone has a null value."""
    if isinstance(record, (crec.Tombstone, srec.Tombstone)):
        return _key(record.record_type, record.group_id, record.sub_key), None
    rt: int = record.RECORD_TYPE
    if isinstance(record, (crec.GroupMetadata, srec.GroupMetadata)):
        return _key(rt, record.group_id), _value(rt, {"epoch": record.epoch, "metadata_hash": record.metadata_hash})
    if isinstance(record, crec.MemberMetadata):
        return _key(rt, record.group_id, record.member_id), _value(rt, {
            "instance_id": record.instance_id, "rack_id": record.rack_id, "client_id": record.client_id,
            "client_host": record.client_host, "subscribed_topic_names": list(record.subscribed_topic_names),
            "subscribed_topic_regex": record.subscribed_topic_regex,
            "rebalance_timeout_ms": record.rebalance_timeout_ms, "server_assignor": record.server_assignor,
            "classic_member_metadata": _classic(record.classic)})
    if isinstance(record, (crec.TargetAssignmentMetadata, srec.TargetAssignmentMetadata)):
        return _key(rt, record.group_id), _value(rt, {
            "assignment_epoch": record.assignment_epoch,
            "assignment_timestamp": record.assignment_timestamp_ms})
    if isinstance(record, (crec.TargetAssignmentMember, srec.TargetAssignmentMember)):
        return _key(rt, record.group_id, record.member_id), _value(
            rt, {"topic_partitions": _topic_partitions(record.partitions)})
    if isinstance(record, crec.CurrentMemberAssignment):
        return _key(rt, record.group_id, record.member_id), _value(rt, {
            "member_epoch": record.member_epoch, "previous_member_epoch": record.previous_member_epoch,
            "state": record.state, "assigned_partitions": _topic_partitions(record.assigned_partitions),
            "partitions_pending_revocation": _topic_partitions(record.partitions_pending_revocation)})
    if isinstance(record, srec.CurrentMemberAssignment):
        return _key(rt, record.group_id, record.member_id), _value(rt, {
            "member_epoch": record.member_epoch, "previous_member_epoch": record.previous_member_epoch,
            "state": record.state, "assigned_partitions": _topic_partitions(record.assigned_partitions)})
    if isinstance(record, crec.RegularExpression):
        return _key(rt, record.group_id, record.regex), _value(rt, {
            "topics": list(record.topics), "version": record.version, "timestamp": record.timestamp_ms})
    if isinstance(record, srec.MemberMetadata):
        return _key(rt, record.group_id, record.member_id), _value(rt, {
            "rack_id": record.rack_id, "client_id": record.client_id, "client_host": record.client_host,
            "subscribed_topic_names": list(record.subscribed_topic_names)})
    if isinstance(record, srec.StatePartitionMetadata):
        def infos(m: Mapping[TopicId, tuple[str, frozenset[int]]]) -> list[dict[str, Any]]:
            return [{"topic_id": t, "topic_name": n, "partitions": sorted(ps)}
                    for t, (n, ps) in sorted(m.items(), key=lambda kv: str(kv[0]))]
        return _key(rt, record.group_id), _value(rt, {
            "initializing_topics": infos(record.initializing), "initialized_topics": infos(record.initialized),
            "deleting_topics": [{"topic_id": t, "topic_name": n}
                                for t, n in sorted(record.deleting.items(), key=lambda kv: str(kv[0]))]})
    raise TypeError(f"not a group record: {record!r}")


# -- decoding -----------------------------------------------------------------------------------

def record_type(key: bytes | bytearray | memoryview) -> int:
    if len(key) < 2:
        raise SchemaError("__consumer_offsets key shorter than its type")
    kind: int = _I16.unpack_from(bytes(key[:2]))[0]
    return kind


def decode(key: bytes | bytearray | memoryview, value: bytes | bytearray | memoryview | None
           ) -> GroupRecord | ObsoleteRecord:
    """The core record of a (key, value) of types 3-16; SchemaError when unknown or corrupt."""
    kind = record_type(key)
    if kind not in _KEYS:
        raise SchemaError(f"not a consumer or share group record type: {kind}")
    k = _KEYS[kind].decode_all(bytes(key[2:]), 0)
    gid: str = k["group_id"]
    sub: str = k.get(_SUB_KEY_FIELD.get(kind, ""), "") or ""
    if value is None:
        if kind == 4:
            return ObsoleteRecord(gid)
        return (srec.Tombstone if kind in SHARE_TYPES else crec.Tombstone)(kind, gid, sub)
    buf = bytes(value)
    if len(buf) < 2:
        raise SchemaError("__consumer_offsets value shorter than its version")
    (version,) = _I16.unpack_from(buf)
    schema = _VALUES[kind]
    lo, hi = schema.valid_versions
    if not lo <= version <= hi:
        raise SchemaError(f"unknown {schema.name} version {version}")
    v = schema.decode_all(buf[2:], version)
    return _typed(kind, gid, sub, v)


def _typed(kind: int, gid: str, sub: str, v: dict[str, Any]) -> GroupRecord | ObsoleteRecord:
    if kind == 3:
        return crec.GroupMetadata(gid, v["epoch"], v["metadata_hash"])
    if kind == 4:
        return ObsoleteRecord(gid)
    if kind == 5:
        return crec.MemberMetadata(
            gid, sub, v["instance_id"], v["rack_id"], v["client_id"], v["client_host"],
            tuple(v["subscribed_topic_names"]), v["subscribed_topic_regex"], v["rebalance_timeout_ms"],
            v["server_assignor"], _classic_of(v.get("classic_member_metadata")))
    if kind == 6:
        return crec.TargetAssignmentMetadata(gid, v["assignment_epoch"], v["assignment_timestamp"])
    if kind == 7:
        return crec.TargetAssignmentMember(gid, sub, _assignment(v["topic_partitions"]))
    if kind == 8:
        return crec.CurrentMemberAssignment(
            gid, sub, v["member_epoch"], v["previous_member_epoch"], v["state"],
            _assignment(v["assigned_partitions"]), _assignment(v["partitions_pending_revocation"]))
    if kind == 10:
        return srec.MemberMetadata(gid, sub, v["rack_id"], v["client_id"], v["client_host"],
                                   tuple(v["subscribed_topic_names"]))
    if kind == 11:
        return srec.GroupMetadata(gid, v["epoch"], v["metadata_hash"])
    if kind == 12:
        return srec.TargetAssignmentMetadata(gid, v["assignment_epoch"], v["assignment_timestamp"])
    if kind == 13:
        return srec.TargetAssignmentMember(gid, sub, _assignment(v["topic_partitions"]))
    if kind == 14:
        return srec.CurrentMemberAssignment(gid, sub, v["member_epoch"], v["previous_member_epoch"], v["state"],
                                            _assignment(v["assigned_partitions"]))
    if kind == 15:
        def infos(items: list[dict[str, Any]] | None) -> dict[TopicId, tuple[str, frozenset[int]]]:
            return {i["topic_id"]: (i["topic_name"], frozenset(i["partitions"])) for i in items or ()}
        return srec.StatePartitionMetadata(
            gid, infos(v["initializing_topics"]), infos(v["initialized_topics"]),
            {i["topic_id"]: i["topic_name"] for i in v["deleting_topics"] or ()})
    if kind == 16:
        return crec.RegularExpression(gid, sub, tuple(v["topics"]), v["version"], v["timestamp"])
    raise SchemaError(f"not a consumer or share group record type: {kind}")


__all__ = ["CONSUMER_TYPES", "SHARE_TYPES", "STREAMS_TYPES", "GroupRecord", "ObsoleteRecord", "decode",
           "encode", "record_type"]
