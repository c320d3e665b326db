"""The bytes of the ``__share_group_state`` records, as Kafka 4.4 writes them.

* key: int16 record type (0 ShareSnapshot, 1 ShareUpdate) then the key struct v0 (group id,
  topic id, partition);
* value: int16 version (0) then ShareSnapshotValue / ShareUpdateValue v0 (flexible, with the
  KIP-1226 DeliveryCompleteCount as tagged field 0); a null value is a tombstone.

Both layouts come from the JSON schemas under ``kafkapy/protocol/schemas/share_state/``.
"""

from __future__ import annotations

import struct
from typing import Any

from kafkapy.coordinator.share_state.records import ShareSnapshot, ShareStateRecord, ShareUpdate, Tombstone
from kafkapy.protocol import schemas
from kafkapy.protocol.schema_codec import SchemaError, load_schema
from kafkapy.share.partition import StateBatch

_PACKAGE = schemas.package("share_state")
_KEYS = {ShareSnapshot.RECORD_TYPE: load_schema("ShareSnapshotKey", _PACKAGE),
         ShareUpdate.RECORD_TYPE: load_schema("ShareUpdateKey", _PACKAGE)}
_SNAPSHOT_VALUE = load_schema("ShareSnapshotValue", _PACKAGE)
_UPDATE_VALUE = load_schema("ShareUpdateValue", _PACKAGE)
_I16 = struct.Struct(">h")
VALUE_VERSION = 0


def _key(record_type: int, group_id: str, topic_id: Any, partition: int) -> bytes:
    return _I16.pack(record_type) + _KEYS[record_type].encode(
        {"group_id": group_id, "topic_id": topic_id, "partition": partition}, 0)


def _batches(batches: tuple[StateBatch, ...]) -> list[dict[str, int]]:
    return [{"first_offset": b.first_offset, "last_offset": b.last_offset, "delivery_state": b.delivery_state,
             "delivery_count": b.delivery_count} for b in batches]


def _read_batches(values: list[dict[str, int]] | None) -> tuple[StateBatch, ...]:
    return tuple(StateBatch(b["first_offset"], b["last_offset"], b["delivery_state"], b["delivery_count"])
                 for b in values or ())


def encode(record: ShareStateRecord) -> tuple[bytes, bytes | None]:
    """The (key, value) bytes of one record."""
    if isinstance(record, Tombstone):
        return _key(record.record_type, record.group_id, record.topic_id, record.partition), None
    key = _key(record.RECORD_TYPE, record.group_id, record.topic_id, record.partition)
    if isinstance(record, ShareSnapshot):
        value = _SNAPSHOT_VALUE.encode({
            "snapshot_epoch": record.snapshot_epoch, "state_epoch": record.state_epoch,
            "leader_epoch": record.leader_epoch, "start_offset": record.start_offset,
            "delivery_complete_count": record.delivery_complete_count,
            "create_timestamp": record.create_timestamp_ms, "write_timestamp": record.write_timestamp_ms,
            "state_batches": _batches(record.state_batches)}, VALUE_VERSION)
    else:
        value = _UPDATE_VALUE.encode({
            "snapshot_epoch": record.snapshot_epoch, "leader_epoch": record.leader_epoch,
            "start_offset": record.start_offset, "delivery_complete_count": record.delivery_complete_count,
            "state_batches": _batches(record.state_batches)}, VALUE_VERSION)
    return key, _I16.pack(VALUE_VERSION) + value


def decode(key: bytes | bytearray | memoryview | None,
           value: bytes | bytearray | memoryview | None) -> ShareStateRecord | None:
    """The record of a (key, value); None for a key type this coordinator does not know (skipped
    on load, as Kafka does). SchemaError when the bytes are corrupt."""
    if key is None:
        raise SchemaError("__share_group_state record without a key")
    kbuf = bytes(key)
    if len(kbuf) < 2:
        raise SchemaError("__share_group_state key shorter than its type")
    (kind,) = _I16.unpack_from(kbuf)
    schema = _KEYS.get(kind)
    if schema is None:
        return None
    k = schema.decode_all(kbuf[2:], 0)
    group_id, topic_id, partition = k["group_id"], k["topic_id"], k["partition"]
    if value is None:
        return Tombstone(kind, group_id, topic_id, partition)
    vbuf = bytes(value)
    if len(vbuf) < 2:
        raise SchemaError("__share_group_state value shorter than its version")
    (version,) = _I16.unpack_from(vbuf)
    if version != VALUE_VERSION:
        raise SchemaError(f"unknown __share_group_state value version {version}")
    if kind == ShareSnapshot.RECORD_TYPE:
        v = _SNAPSHOT_VALUE.decode_all(vbuf[2:], version)
        return ShareSnapshot(group_id, topic_id, partition, v["snapshot_epoch"], v["state_epoch"], v["leader_epoch"],
                             v["start_offset"], _read_batches(v["state_batches"]), v["create_timestamp"],
                             v["write_timestamp"], v.get("delivery_complete_count", -1))
    v = _UPDATE_VALUE.decode_all(vbuf[2:], version)
    return ShareUpdate(group_id, topic_id, partition, v["snapshot_epoch"], v["leader_epoch"], v["start_offset"],
                       _read_batches(v["state_batches"]), v.get("delivery_complete_count", -1))


__all__ = ["VALUE_VERSION", "decode", "encode"]
