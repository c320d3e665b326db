"""The ``__consumer_offsets`` and ``__share_group_state`` record schemas of Kafka 4.4 (issue 25):
each loads through ``schema_codec`` with Kafka's record type and versions, and every version of
every key and value round-trips with distinctive values in every field (and with nulls where a
field is nullable). Byte-for-byte checks against Kafka's classes are in ``test_group_golden.py``;
the values come from ``group_values.py``.
"""

from __future__ import annotations

import pytest
from group_values import (
    OFFSETS_RECORDS,
    RECORD_SCHEMAS,
    RECORDS,
    SHARE_STATE_RECORDS,
    filled_record,
    load_record_schema,
    record_versions,
)

from kafkapy.protocol import schemas

# Value versions other than 0 (keys are all version 0).
VALUE_VERSIONS = {"OffsetCommit": (0, 4), "GroupMetadata": (0, 4)}
CASES = [(sub, name, v) for sub, name in RECORD_SCHEMAS for v in record_versions(sub, name)]


@pytest.mark.parametrize(("sub", "name"), RECORD_SCHEMAS, ids=[n for _, n in RECORD_SCHEMAS])
def test_schema_has_kafkas_record_type_and_versions(sub: str, name: str) -> None:
    schema = load_record_schema(sub, name)
    record_type = next(t for s, t, n in RECORDS if s == sub and name in (n + "Key", n + "Value"))
    assert schema.name == name and schema.api_key == record_type
    if name.endswith("Key"):
        assert schema.valid_versions == (0, 0) and not schema.struct.is_flexible(0)
    else:
        assert schema.valid_versions == VALUE_VERSIONS.get(name[: -len("Value")], (0, 0))
        assert schema.struct.is_flexible(schema.valid_versions[1])  # the newest value is flexible


def test_every_record_type_has_a_schema() -> None:
    assert set(schemas.schema_names("share_state")) == {f"{n}{p}" for n in SHARE_STATE_RECORDS.values()
                                                         for p in ("Key", "Value")}
    have = set(schemas.schema_names("coordinator"))
    assert {f"{n}{p}" for n in OFFSETS_RECORDS.values() for p in ("Key", "Value")} <= have


@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
@pytest.mark.parametrize(("sub", "name", "version"), CASES, ids=[f"{n}-v{v}" for _, n, v in CASES])
def test_every_version_round_trips(sub: str, name: str, version: int, nulls: bool) -> None:
    schema = load_record_schema(sub, name)
    values = filled_record(sub, name, version, nulls)
    wire = schema.encode(values, version)
    assert schema.decode_all(wire, version) == values
    assert schema.encode(schema.decode_all(wire, version), version) == wire


@pytest.mark.parametrize(("sub", "name", "version"), CASES, ids=[f"{n}-v{v}" for _, n, v in CASES])
def test_defaults_round_trip(sub: str, name: str, version: int) -> None:
    schema = load_record_schema(sub, name)
    wire = schema.encode({}, version)
    assert schema.encode(schema.decode_all(wire, version), version) == wire


def test_offset_commit_value_v4_is_flexible_and_v3_is_not() -> None:
    schema = load_record_schema("coordinator", "OffsetCommitValue")
    values = {"offset": 42, "leader_epoch": 3, "metadata": "m", "commit_timestamp": 1000}
    v3, v4 = schema.encode(values, 3), schema.encode(values, 4)
    # v3: int16 string length; v4: compact length and an (empty) tagged-field section.
    assert v3 == (42).to_bytes(8, "big") + (3).to_bytes(4, "big") + b"\x00\x01m" + (1000).to_bytes(8, "big")
    assert v4 == (42).to_bytes(8, "big") + (3).to_bytes(4, "big") + b"\x02m" + (1000).to_bytes(8, "big") + b"\x00"
    assert schema.decode_all(v4, 4)["metadata"] == "m"


def test_a_consumer_protocol_member_writes_its_null_classic_metadata_as_kafka() -> None:
    # ClassicMemberMetadata is a tagged, nullable struct whose default is an empty struct (not
    # null), so Kafka writes null explicitly: tag 0, size 1, then an unsigned-varint marker 0.
    schema = load_record_schema("coordinator", "ConsumerGroupMemberMetadataValue")
    values = {"instance_id": None, "rack_id": None, "client_id": "c", "client_host": "h",
              "subscribed_topic_names": ("t",), "subscribed_topic_regex": None, "rebalance_timeout_ms": 5,
              "server_assignor": None, "classic_member_metadata": None}
    wire = schema.encode(values, 0)
    assert wire.endswith(b"\x00\x00\x00\x00\x05\x00" + b"\x01\x00\x01\x00")
    assert schema.decode_all(wire, 0) == values
    classic = {"session_timeout_ms": 45000, "supported_protocols": ({"name": "range", "metadata": b"m"},)}
    wire = schema.encode({**values, "classic_member_metadata": classic}, 0)
    assert schema.decode_all(wire, 0)["classic_member_metadata"] == classic
