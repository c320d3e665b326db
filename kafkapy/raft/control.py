"""KRaft control records: the LeaderChange batch a new leader writes first in its epoch, and the
SnapshotHeader / SnapshotFooter batches that open and close a snapshot (KIP-630).

A control record's key is Kafka's ``ControlRecordType`` key (int16 version 0, int16 type); its
value for LEADER_CHANGE is ``LeaderChangeMessage`` v0 serialized without a version prefix (the
message carries its own ``Version`` field) in the flexible encoding: compact arrays (unsigned
varint length + 1) and an empty tagged-field section after each struct. The batch has the
control attribute bit and the leader's epoch as partition leader epoch, as
``MemoryRecords.withLeaderChangeMessage`` writes it.

SnapshotHeaderRecord v0 (int16 Version, int64 LastContainedLogTimestamp) and SnapshotFooterRecord
v0 (int16 Version) are flexible too and likewise carry no version prefix. All three values are
encoded by ``kafkapy.protocol.schema_codec`` from ``kafkapy/protocol/schemas/control/``. Their
batches are what Kafka 3.9's ``RecordsSnapshotWriter`` writes: uncompressed CreateTime control batches, the
snapshot's epoch as partition leader epoch, no producer id; the header batch starts at offset 0.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Any, NamedTuple

from kafkapy.protocol.schema_codec import MessageSchema, SchemaError, load_schema
from kafkapy.protocol.schemas import control as _schemas_pkg
from kafkapy.records.builder import Record, build_batch
from kafkapy.records.reader import iter_records

# ControlRecordType ids (Kafka's ControlRecordType enum).
ABORT = 0
COMMIT = 1
LEADER_CHANGE = 2
SNAPSHOT_HEADER = 3
SNAPSHOT_FOOTER = 4
KRAFT_VERSION = 5
KRAFT_VOTERS = 6

# ControlRecordUtils.SNAPSHOT_HEADER_CURRENT_VERSION / SNAPSHOT_FOOTER_CURRENT_VERSION in 3.9.
SNAPSHOT_HEADER_VERSION = 0
SNAPSHOT_FOOTER_VERSION = 0

# ControlRecordUtils.LEADER_CHANGE_CURRENT_VERSION: what we write, and the version Kafka reads
# every LeaderChange value at (the value has no version prefix).
LEADER_CHANGE_VERSION = 0

_KEY = struct.Struct(">hh")


def control_schema(name: str) -> MessageSchema:
    """The schema of a control record value (``kafkapy/protocol/schemas/control/<name>.json``)."""
    return load_schema(name, _schemas_pkg.__name__)


_LEADER_CHANGE = control_schema("LeaderChangeMessage")
_SNAPSHOT_HEADER = control_schema("SnapshotHeaderRecord")
_SNAPSHOT_FOOTER = control_schema("SnapshotFooterRecord")


def decode_exactly(schema: MessageSchema, data: bytes | bytearray | memoryview,
                   version: int = 0) -> dict[str, Any]:
    """``data`` decoded as one ``schema`` value at ``version``; ValueError (naming the record) if
    it is truncated, malformed or followed by stray bytes. Unknown tagged fields are skipped, as
    Kafka's generated readers do."""
    try:
        return schema.decode_all(data, version)
    except SchemaError as e:
        raise ValueError(f"malformed {schema.name}: {e}") from None


class LeaderChange(NamedTuple):
    """Kafka's ``LeaderChangeMessage``: who leads, the voters, and who voted for it."""

    leader_id: int
    voters: tuple[int, ...]
    granting_voters: tuple[int, ...]


def control_key(record_type: int) -> bytes:
    return _KEY.pack(0, record_type)


def control_type(key: bytes) -> int:
    """The ControlRecordType of a control record key."""
    _version, record_type = _KEY.unpack_from(key)
    return int(record_type)


def encode_leader_change(msg: LeaderChange) -> bytes:
    return _LEADER_CHANGE.encode({
        "version": LEADER_CHANGE_VERSION,
        "leader_id": msg.leader_id,
        "voters": [{"voter_id": v} for v in msg.voters],
        "granting_voters": [{"voter_id": v} for v in msg.granting_voters],
    }, LEADER_CHANGE_VERSION)


def decode_leader_change(data: bytes) -> LeaderChange:
    """Parse a LeaderChangeMessage value (at version 0, as Kafka reads it; bytes after the
    message are ignored, as Kafka's reader does); ValueError if it is malformed."""
    try:
        v, _end = _LEADER_CHANGE.decode(bytes(data), 0, LEADER_CHANGE_VERSION)
    except SchemaError as e:
        raise ValueError(f"malformed LeaderChangeMessage: {e}") from None
    return LeaderChange(v["leader_id"], tuple(x["voter_id"] for x in v["voters"]),
                        tuple(x["voter_id"] for x in v["granting_voters"]))


def build_leader_change_batch(
    *, base_offset: int, epoch: int, leader_id: int, voters: Iterable[int],
    granting_voters: Iterable[int], now_ms: int,
) -> bytes:
    """One control batch holding a LEADER_CHANGE record, written in ``epoch``."""
    value = encode_leader_change(LeaderChange(leader_id, tuple(sorted(voters)),
                                              tuple(sorted(granting_voters))))
    return build_batch([Record(control_key(LEADER_CHANGE), value, (), now_ms)],
                       base_offset=base_offset, partition_leader_epoch=epoch, control=True,
                       now_ms=now_ms)


def read_leader_change(batch: bytes) -> LeaderChange | None:
    """The LeaderChange in a control batch, or None if it holds none."""
    for rec in iter_records(batch):
        if rec.key is not None and control_type(rec.key) == LEADER_CHANGE and rec.value:
            return decode_leader_change(rec.value)
    return None


# --------------------------------------------------------------------------------------------
# Snapshot header and footer (KIP-630)

class SnapshotHeader(NamedTuple):
    """Kafka's ``SnapshotHeaderRecord``: the first control record of every snapshot.
    ``last_contained_log_timestamp`` is the append time of the last log batch the snapshot
    covers."""

    version: int
    last_contained_log_timestamp: int


class SnapshotFooter(NamedTuple):
    """Kafka's ``SnapshotFooterRecord``: the last control record of a complete snapshot."""

    version: int


def encode_snapshot_header(header: SnapshotHeader) -> bytes:
    return _SNAPSHOT_HEADER.encode(header._asdict(), SNAPSHOT_HEADER_VERSION)


def decode_snapshot_header(data: bytes) -> SnapshotHeader:
    """Parse a SnapshotHeaderRecord value; ValueError if it is malformed."""
    v = decode_exactly(_SNAPSHOT_HEADER, data)
    return SnapshotHeader(v["version"], v["last_contained_log_timestamp"])


def encode_snapshot_footer(footer: SnapshotFooter) -> bytes:
    return _SNAPSHOT_FOOTER.encode(footer._asdict(), SNAPSHOT_FOOTER_VERSION)


def decode_snapshot_footer(data: bytes) -> SnapshotFooter:
    """Parse a SnapshotFooterRecord value; ValueError if it is malformed."""
    return SnapshotFooter(decode_exactly(_SNAPSHOT_FOOTER, data)["version"])


def build_snapshot_header_batch(
    *, epoch: int, last_contained_log_timestamp: int, now_ms: int, base_offset: int = 0,
) -> bytes:
    """The control batch opening a snapshot of ``epoch``: one SNAPSHOT_HEADER record stamped
    ``now_ms`` (Kafka stamps it when the writer is created). At kraft.version 0, which is what we
    run, Kafka puts nothing else in it; at kraft.version 1 KRaftVersion and Voters records would
    follow the header in the same batch."""
    value = encode_snapshot_header(SnapshotHeader(SNAPSHOT_HEADER_VERSION,
                                                  last_contained_log_timestamp))
    return build_batch([Record(control_key(SNAPSHOT_HEADER), value, (), now_ms)],
                       base_offset=base_offset, partition_leader_epoch=epoch, control=True,
                       now_ms=now_ms)


def build_snapshot_footer_batch(*, base_offset: int, epoch: int, now_ms: int) -> bytes:
    """The control batch closing a snapshot: one SNAPSHOT_FOOTER record at ``base_offset`` (the
    offset after the snapshot's last record), as ``MemoryRecords.withSnapshotFooterRecord``."""
    value = encode_snapshot_footer(SnapshotFooter(SNAPSHOT_FOOTER_VERSION))
    return build_batch([Record(control_key(SNAPSHOT_FOOTER), value, (), now_ms)],
                       base_offset=base_offset, partition_leader_epoch=epoch, control=True,
                       now_ms=now_ms)


def read_snapshot_header(batch: bytes) -> SnapshotHeader | None:
    """The SnapshotHeader a control batch starts with, or None if its first record is not one
    (Kafka requires the header to be the first record of the first batch)."""
    for rec in iter_records(batch):
        if rec.key is not None and control_type(rec.key) == SNAPSHOT_HEADER and rec.value:
            return decode_snapshot_header(rec.value)
        return None
    return None


def read_snapshot_footer(batch: bytes) -> SnapshotFooter | None:
    """The SnapshotFooter in a control batch, or None if it holds none."""
    for rec in iter_records(batch):
        if rec.key is not None and control_type(rec.key) == SNAPSHOT_FOOTER and rec.value:
            return decode_snapshot_footer(rec.value)
    return None


__all__ = [
    "ABORT", "COMMIT", "KRAFT_VERSION", "KRAFT_VOTERS", "LEADER_CHANGE", "LeaderChange",
    "SNAPSHOT_FOOTER", "SNAPSHOT_FOOTER_VERSION", "SNAPSHOT_HEADER", "SNAPSHOT_HEADER_VERSION",
    "LEADER_CHANGE_VERSION", "SnapshotFooter", "SnapshotHeader", "build_leader_change_batch",
    "build_snapshot_footer_batch", "build_snapshot_header_batch", "control_key", "control_schema",
    "control_type", "decode_exactly", "decode_leader_change", "decode_snapshot_footer", "decode_snapshot_header",
    "encode_leader_change", "encode_snapshot_footer", "encode_snapshot_header",
    "read_leader_change", "read_snapshot_footer", "read_snapshot_header",
]
