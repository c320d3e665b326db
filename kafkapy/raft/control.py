"""KRaft control records: the LeaderChange batch a new leader writes first in its epoch.

A control record's key is Kafka's ``ControlRecordType`` key (int16 version 0, int16 type); its
value for LEADER_CHANGE is ``LeaderChangeMessage`` v0 serialized without a version prefix (the
message carries its own ``Version`` field) in the flexible encoding: compact arrays (unsigned
varint length + 1) and an empty tagged-field section after each struct. The batch has the
control attribute bit and the leader's epoch as partition leader epoch, as
``MemoryRecords.withLeaderChangeMessage`` writes it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import NamedTuple

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

_KEY = struct.Struct(">hh")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


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
    return record_type


def _uvarint(n: int, out: bytearray) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _read_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def encode_leader_change(msg: LeaderChange) -> bytes:
    out = bytearray(_I16.pack(0))
    out += _I32.pack(msg.leader_id)
    for voters in (msg.voters, msg.granting_voters):
        _uvarint(len(voters) + 1, out)
        for v in voters:
            out += _I32.pack(v)
            out.append(0)  # the Voter struct's tagged fields
    out.append(0)  # the message's tagged fields
    return bytes(out)


def decode_leader_change(data: bytes) -> LeaderChange:
    pos = 2  # the Version field
    (leader_id,) = _I32.unpack_from(data, pos)
    pos += 4
    lists: list[tuple[int, ...]] = []
    for _ in range(2):
        n, pos = _read_uvarint(data, pos)
        ids = []
        for _i in range(n - 1):
            ids.append(_I32.unpack_from(data, pos)[0])
            pos += 4
            tagged, pos = _read_uvarint(data, pos)
            if tagged:
                raise ValueError("tagged fields in a Voter are not supported")
        lists.append(tuple(ids))
    return LeaderChange(leader_id, lists[0], lists[1])


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


__all__ = [
    "ABORT", "COMMIT", "KRAFT_VERSION", "KRAFT_VOTERS", "LEADER_CHANGE", "LeaderChange",
    "SNAPSHOT_FOOTER", "SNAPSHOT_HEADER", "build_leader_change_batch", "control_key",
    "control_type", "decode_leader_change", "encode_leader_change", "read_leader_change",
]
