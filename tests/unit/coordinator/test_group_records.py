"""The byte codecs of consumer and share group records round-trip the cores' records, and the v4
(flexible) offset and group values Kafka 4.x may write are read."""

from __future__ import annotations

import uuid

import pytest

from kafkapy.coordinator import group_records as gr
from kafkapy.coordinator import schema
from kafkapy.coordinator.consumer import records as crec
from kafkapy.coordinator.share_group import records as srec
from kafkapy.protocol.schema_codec import SchemaError

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)

RECORDS = [
    crec.GroupMetadata("g", 7, 123456789),
    crec.MemberMetadata("g", "m1", "i1", "r1", "cid", "/1.2.3.4", ("a", "b"), "t.*", 30000, "uniform"),
    crec.MemberMetadata("g", "m2", None, None, "cid", "/h", (), None, 1000, None),
    crec.TargetAssignmentMetadata("g", 7, 1700000000000),
    crec.TargetAssignmentMember("g", "m1", {T1: frozenset({0, 2}), T2: frozenset({1})}),
    crec.CurrentMemberAssignment("g", "m1", 7, 6, 1, {T1: frozenset({0})}, {T2: frozenset({3})}),
    crec.RegularExpression("g", "t.*", ("t1", "t2"), 42, 1700000000001),
    srec.MemberMetadata("s", "m", "r", "cid", "/h", ("x",)),
    srec.GroupMetadata("s", 3, 99),
    srec.TargetAssignmentMetadata("s", 3, 5),
    srec.TargetAssignmentMember("s", "m", {T1: frozenset({0, 1})}),
    srec.CurrentMemberAssignment("s", "m", 3, 2, 0, {T1: frozenset({0, 1})}),
    srec.StatePartitionMetadata("s", {T1: ("x", frozenset({0}))}, {T2: ("y", frozenset({1, 2}))}, {T1: "x"}),
]
TOMBSTONES = [crec.Tombstone(t, "g", sub) for t, sub in
              [(3, ""), (5, "m1"), (6, ""), (7, "m1"), (8, "m1"), (16, "t.*")]] + \
             [srec.Tombstone(t, "s", sub) for t, sub in [(10, "m"), (11, ""), (12, ""), (13, "m"), (14, "m"), (15, "")]]


@pytest.mark.parametrize("record", RECORDS + TOMBSTONES, ids=lambda r: type(r).__module__[-20:] + type(r).__name__)
def test_round_trip(record: object) -> None:
    key, value = gr.encode(record)  # type: ignore[arg-type]
    assert schema.decode_key(key) is None  # not an offset or classic group key
    assert gr.decode(key, value) == record


def test_member_metadata_key_is_kafkas_layout() -> None:
    key, _ = gr.encode(crec.Tombstone(5, "g", "m"))
    assert key == b"\x00\x05\x00\x01g\x00\x01m"


def test_partition_metadata_of_kafka_4_0_is_read_and_dropped() -> None:
    key = b"\x00\x04\x00\x01g"
    assert isinstance(gr.decode(key, None), gr.ObsoleteRecord)


def test_unknown_type_and_value_version_refused() -> None:
    with pytest.raises(SchemaError):
        gr.decode(b"\x00\x11\x00\x01g", None)
    key, value = gr.encode(crec.GroupMetadata("g", 1))
    assert value is not None
    with pytest.raises(SchemaError):
        gr.decode(key, b"\x00\x05" + value[2:])


def _golden(label: str, version: int) -> bytes:
    from pathlib import Path
    text = (Path(__file__).parents[1] / "protocol" / "golden" / "group_messages.txt").read_text()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == label and parts[1] == str(version):
            return bytes.fromhex(parts[2])
    raise LookupError(label)


def test_offset_commit_value_v4_is_read() -> None:
    raw = b"\x00\x04" + _golden("OffsetCommitValue", 4)
    v = schema.decode_offset_value(raw)
    assert v.offset == 0x12A05F201 and v.commit_timestamp == 0x12A05F204


def test_group_metadata_value_v4_is_read() -> None:
    raw = b"\x00\x04" + _golden("GroupMetadataValue", 4)
    v = schema.decode_group_value(raw)
    assert v.generation == 0x11172 and v.current_state_timestamp == 0x12A05F205
    assert len(v.members) == 2 and v.members[0].member_id.startswith("s")


def test_a_classic_members_metadata_survives_the_round_trip():
    from kafkapy.coordinator import group_records as grec
    from kafkapy.coordinator.consumer import records as crecs

    classic = crecs.ClassicMemberMetadata(10_000, (("range", b"\x00\x01sub"), ("roundrobin", b"")))
    r = crecs.MemberMetadata("g", "m", None, None, "c", "/h", ("foo",), None, 30_000, None, classic)
    assert grec.decode(*grec.encode(r)) == r
