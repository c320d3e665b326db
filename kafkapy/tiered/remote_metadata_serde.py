"""The values of ``__remote_log_metadata``, byte for byte as Kafka's RemoteLogMetadataSerde writes them.

Each record value is one framed message (Kafka's AbstractApiMessageSerde frame)::

    frame version   unsigned varint  (always 1; 0 was KRaft's 2.8 preview and is refused)
    api key         unsigned varint  (0 segment metadata, 1 segment update, 2 partition delete)
    version         unsigned varint  (0 for all three today)
    body            the message in the flexible encoding of its JSON schema

The schemas live in ``kafkapy/protocol/schemas/tiered/`` and are encoded by
``kafkapy.protocol.schema_codec``, nested structs (a RemoteLogSegmentId holds a TopicIdPartition)
included. Record keys are null; which partition of the topic a record goes to is
``metadata_partition`` below.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping
from typing import Any

from kafkapy.protocol.partitioner import partition_for_key
from kafkapy.protocol.schema_codec import MessageSchema, SchemaError, load_schema, read_uvarint, write_uvarint
from kafkapy.protocol.schemas import tiered as _schemas_pkg
from kafkapy.tiered.remote_metadata import (
    RemoteLogMetadata,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
)

REMOTE_LOG_METADATA_TOPIC = "__remote_log_metadata"
FRAME_VERSION = 1

SEGMENT_METADATA_API_KEY = 0
SEGMENT_METADATA_UPDATE_API_KEY = 1
PARTITION_DELETE_API_KEY = 2


class RemoteLogMetadataSerdeError(ValueError):
    """A value of __remote_log_metadata that does not decode (bad frame, unknown type or state,
    truncated or trailing bytes)."""


def _load(name: str, api_key: int) -> MessageSchema:
    schema = load_schema(name, _schemas_pkg.__name__)
    if schema.api_key != api_key:
        raise ValueError(f"{name}: api key {schema.api_key}, expected {api_key}")
    return schema


_MESSAGES: dict[int, MessageSchema] = {
    SEGMENT_METADATA_API_KEY: _load("RemoteLogSegmentMetadataRecord", SEGMENT_METADATA_API_KEY),
    SEGMENT_METADATA_UPDATE_API_KEY: _load("RemoteLogSegmentMetadataUpdateRecord", SEGMENT_METADATA_UPDATE_API_KEY),
    PARTITION_DELETE_API_KEY: _load("RemotePartitionDeleteMetadataRecord", PARTITION_DELETE_API_KEY),
}


# --------------------------------------------------------------------------------------------
# Values <-> schema dicts

def _tip_entry(tip: TopicIdPartition) -> dict[str, Any]:
    return {"name": tip.topic, "id": tip.topic_id, "partition": tip.partition}


def _segment_id_entry(sid: RemoteLogSegmentId) -> dict[str, Any]:
    return {"topic_id_partition": _tip_entry(sid.topic_id_partition), "id": sid.id}


def _tip_from(entry: Mapping[str, Any]) -> TopicIdPartition:
    if entry["name"] is None:
        raise RemoteLogMetadataSerdeError("topic name is null")
    return TopicIdPartition(entry["id"], entry["name"], entry["partition"])


def _segment_id_from(entry: Mapping[str, Any]) -> RemoteLogSegmentId:
    return RemoteLogSegmentId(_tip_from(entry["topic_id_partition"]), entry["id"])


def _to_fields(metadata: RemoteLogMetadata) -> tuple[int, dict[str, Any]]:
    if isinstance(metadata, RemoteLogSegmentMetadata):
        return SEGMENT_METADATA_API_KEY, {
            "remote_log_segment_id": _segment_id_entry(metadata.remote_log_segment_id),
            "start_offset": metadata.start_offset,
            "end_offset": metadata.end_offset,
            "broker_id": metadata.broker_id,
            "max_timestamp_ms": metadata.max_timestamp_ms,
            "event_timestamp_ms": metadata.event_timestamp_ms,
            # Ascending epoch order, as Kafka's sorted map iterates.
            "segment_leader_epochs": [{"leader_epoch": e, "offset": o}
                                      for e, o in metadata.segment_leader_epochs.items()],
            "segment_size_in_bytes": metadata.segment_size_in_bytes,
            "custom_metadata": metadata.custom_metadata,
            "remote_log_segment_state": int(metadata.state),
        }
    if isinstance(metadata, RemoteLogSegmentMetadataUpdate):
        return SEGMENT_METADATA_UPDATE_API_KEY, {
            "remote_log_segment_id": _segment_id_entry(metadata.remote_log_segment_id),
            "broker_id": metadata.broker_id,
            "event_timestamp_ms": metadata.event_timestamp_ms,
            "custom_metadata": metadata.custom_metadata,
            "remote_log_segment_state": int(metadata.state),
        }
    if isinstance(metadata, RemotePartitionDeleteMetadata):
        return PARTITION_DELETE_API_KEY, {
            "topic_id_partition": _tip_entry(metadata.topic_id_partition),
            "broker_id": metadata.broker_id,
            "event_timestamp_ms": metadata.event_timestamp_ms,
            "remote_partition_delete_state": int(metadata.state),
        }
    raise TypeError(f"not remote log metadata: {type(metadata).__name__}")


def _segment_state(raw: int) -> RemoteLogSegmentState:
    try:
        return RemoteLogSegmentState(raw)
    except ValueError:
        raise RemoteLogMetadataSerdeError(f"unknown remote log segment state id {raw}") from None


def _from_fields(api_key: int, v: Mapping[str, Any]) -> RemoteLogMetadata:
    if api_key == SEGMENT_METADATA_API_KEY:
        epochs: dict[int, int] = {}
        for entry in v["segment_leader_epochs"]:
            epochs[entry["leader_epoch"]] = entry["offset"]  # a repeated epoch: the last wins
        return RemoteLogSegmentMetadata(
            _segment_id_from(v["remote_log_segment_id"]), v["start_offset"], v["end_offset"],
            v["max_timestamp_ms"], v["broker_id"], v["event_timestamp_ms"], v["segment_size_in_bytes"],
            epochs, _segment_state(v["remote_log_segment_state"]), v["custom_metadata"])
    if api_key == SEGMENT_METADATA_UPDATE_API_KEY:
        return RemoteLogSegmentMetadataUpdate(
            _segment_id_from(v["remote_log_segment_id"]), v["event_timestamp_ms"],
            _segment_state(v["remote_log_segment_state"]), v["broker_id"], v["custom_metadata"])
    raw = v["remote_partition_delete_state"]
    try:
        state = RemotePartitionDeleteState(raw)
    except ValueError:
        raise RemoteLogMetadataSerdeError(f"unknown remote partition delete state id {raw}") from None
    return RemotePartitionDeleteMetadata(_tip_from(v["topic_id_partition"]), state,
                                         v["event_timestamp_ms"], v["broker_id"])


# --------------------------------------------------------------------------------------------
# Frame

def serialize(metadata: RemoteLogMetadata, version: int | None = None) -> bytes:
    """The record value for ``metadata`` (at its message's newest version unless ``version``)."""
    api_key, fields = _to_fields(metadata)
    msg = _MESSAGES[api_key]
    lo, hi = msg.valid_versions
    if version is None:
        version = hi
    elif not lo <= version <= hi:
        raise ValueError(f"{msg.name} has no version {version} (valid {lo}-{hi})")
    out = bytearray()
    write_uvarint(out, FRAME_VERSION)
    write_uvarint(out, api_key)
    write_uvarint(out, version)
    msg.struct.encode(fields, version, out)
    return bytes(out)


def _read_short(buf: bytes, pos: int, what: str) -> tuple[int, int]:
    try:
        value, pos = read_uvarint(buf, pos)
    except SchemaError as e:
        raise RemoteLogMetadataSerdeError(f"error reading {what}: {e}") from None
    if value > 0x7FFF:  # Kafka reads these three into a Java short
        raise RemoteLogMetadataSerdeError(f"{what} {value} is too large")
    return value, pos


def deserialize_with_version(data: bytes | bytearray | memoryview) -> tuple[RemoteLogMetadata, int]:
    """Decode one record value; also returns the message version it was written at."""
    buf = bytes(data)
    frame, pos = _read_short(buf, 0, "frame version")
    if frame != FRAME_VERSION:
        raise RemoteLogMetadataSerdeError(
            f"unsupported frame version {frame} (only {FRAME_VERSION} is defined)")
    api_key, pos = _read_short(buf, pos, "api key")
    version, pos = _read_short(buf, pos, "version")
    msg = _MESSAGES.get(api_key)
    if msg is None:
        raise RemoteLogMetadataSerdeError(f"unknown remote log metadata api key {api_key}")
    lo, hi = msg.valid_versions
    if not lo <= version <= hi:
        raise RemoteLogMetadataSerdeError(f"{msg.name} version {version} is not supported ({lo}-{hi})")
    try:
        fields, pos = msg.decode(buf, pos, version)
    except SchemaError as e:
        raise RemoteLogMetadataSerdeError(f"cannot decode {msg.name}: {e}") from None
    if pos != len(buf):
        raise RemoteLogMetadataSerdeError(
            f"{len(buf) - pos} byte(s) of garbage after {msg.name}")
    try:
        return _from_fields(api_key, fields), version
    except RemoteLogMetadataSerdeError:
        raise
    except ValueError as e:  # the value types' own checks (offsets, empty epochs)
        raise RemoteLogMetadataSerdeError(f"invalid {msg.name}: {e}") from None


def deserialize(data: bytes | bytearray | memoryview) -> RemoteLogMetadata:
    """Decode one value of __remote_log_metadata. Raises RemoteLogMetadataSerdeError."""
    return deserialize_with_version(data)[0]


# --------------------------------------------------------------------------------------------
# Partitioning

_INT32 = struct.Struct(">i")


def _java_int(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v & 0x80000000 else v


def _partition_hash(topic_id: uuid.UUID, partition: int) -> int:
    # Kafka hashes the TopicIdPartition as Objects.hash(lsb, msb, partition): Java's list hash
    # (h = 31*h + element hash, from 1) over Long.hashCode of each half of the topic id (the two
    # 32-bit halves XORed) and the partition. Neither the UUID's nor the name's own hash is used,
    # so the mapping is stable across Java versions - and reproducible here.
    msb, lsb = topic_id.int >> 64, topic_id.int & 0xFFFFFFFFFFFFFFFF
    h = 1
    for element in ((lsb ^ (lsb >> 32)), (msb ^ (msb >> 32)), partition):
        h = _java_int(31 * h + _java_int(element))
    return h


def metadata_partition(topic_id_partition: TopicIdPartition, partitions: int) -> int:
    """The partition of __remote_log_metadata (out of ``partitions``) holding the events of
    ``topic_id_partition``: every broker must pick the same one, since the leader of a user
    partition reads only that metadata partition to rebuild its state."""
    if partitions <= 0:
        raise ValueError(f"partition count must be positive, got {partitions}")
    key = _INT32.pack(_partition_hash(topic_id_partition.topic_id, topic_id_partition.partition))
    return partition_for_key(key, partitions)


__all__ = ["FRAME_VERSION", "PARTITION_DELETE_API_KEY", "REMOTE_LOG_METADATA_TOPIC",
           "RemoteLogMetadataSerdeError", "SEGMENT_METADATA_API_KEY", "SEGMENT_METADATA_UPDATE_API_KEY",
           "deserialize", "deserialize_with_version", "metadata_partition", "serialize"]
