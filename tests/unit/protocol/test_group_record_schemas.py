"""The ``__consumer_offsets`` and ``__share_group_state`` record schemas of Kafka 4.4 (issue 25):
each loads through ``schema_codec`` with Kafka's record type and versions, and every version of
every key and value round-trips with distinctive values in every field (and with nulls where a
field is nullable). Byte-for-byte checks against Kafka's classes are in ``test_group_golden.py``.
"""

from __future__ import annotations

import itertools
import uuid
from typing import Any

import pytest

from kafkapy.protocol import schemas
from kafkapy.protocol.schema_codec import MessageSchema, Struct, load_schema

# Record type -> name, as Kafka 4.4's group coordinator numbers them (streams types 17-23 left out).
OFFSETS_RECORDS = {
    1: "OffsetCommit", 2: "GroupMetadata",
    3: "ConsumerGroupMetadata", 4: "ConsumerGroupPartitionMetadata", 5: "ConsumerGroupMemberMetadata",
    6: "ConsumerGroupTargetAssignmentMetadata", 7: "ConsumerGroupTargetAssignmentMember",
    8: "ConsumerGroupCurrentMemberAssignment", 10: "ShareGroupMemberMetadata", 11: "ShareGroupMetadata",
    12: "ShareGroupTargetAssignmentMetadata", 13: "ShareGroupTargetAssignmentMember",
    14: "ShareGroupCurrentMemberAssignment", 15: "ShareGroupStatePartitionMetadata",
    16: "ConsumerGroupRegularExpression",
}
SHARE_STATE_RECORDS = {0: "ShareSnapshot", 1: "ShareUpdate"}
# Value versions other than 0 only (keys are all version 0).
VALUE_VERSIONS = {"OffsetCommit": (0, 4), "GroupMetadata": (0, 4)}

RECORDS = [("coordinator", t, n) for t, n in OFFSETS_RECORDS.items()] + \
          [("share_state", t, n) for t, n in SHARE_STATE_RECORDS.items()]
SCHEMAS = [(sub, f"{n}{part}") for sub, _, n in RECORDS for part in ("Key", "Value")]


def _load(sub: str, name: str) -> MessageSchema:
    return load_schema(name, schemas.package(sub))


def _versions(schema: MessageSchema) -> range:
    lo, hi = schema.valid_versions
    return range(lo, hi + 1)


CASES = [(sub, name, v) for sub, name in SCHEMAS for v in _versions(_load(sub, name))]


class Filler:
    """Distinctive values: no scalar equals its default or its neighbours."""

    def __init__(self) -> None:
        self._n = itertools.count(1)

    def scalar(self, type_: str) -> Any:
        n = next(self._n)
        values = {
            "bool": True, "int8": n % 100 + 1, "int16": 300 + n, "uint16": 300 + n, "int32": 70_000 + n,
            "int64": 5_000_000_000 + n, "float64": 0.5 + n, "string": f"s{n}-é",
            "uuid": uuid.UUID(int=(0x0A0B << 112) | n),
            "bytes": bytes(range(n % 7, n % 7 + 9)), "records": bytes(range(n % 5, n % 5 + 4)),
        }
        return values[type_]

    def struct(self, struct: Struct, version: int, nulls: bool) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in struct.fields:
            if not f.present(version):
                continue
            if nulls and f.nullable(version):
                out[f.name] = None
            elif f.struct is not None and f.is_array:
                out[f.name] = tuple(self.struct(f.struct, version, nulls) for _ in range(2))
            elif f.struct is not None:
                out[f.name] = self.struct(f.struct, version, nulls)
            elif f.is_array:
                out[f.name] = tuple(self.scalar(f.type[2:]) for _ in range(3))
            else:
                out[f.name] = self.scalar(f.type)
        return out


@pytest.mark.parametrize(("sub", "name"), SCHEMAS, ids=[n for _, n in SCHEMAS])
def test_schema_has_kafkas_record_type_and_versions(sub: str, name: str) -> None:
    schema = _load(sub, name)
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
    schema = _load(sub, name)
    values = Filler().struct(schema.struct, version, nulls)
    wire = schema.encode(values, version)
    assert schema.decode_all(wire, version) == values
    assert schema.encode(schema.decode_all(wire, version), version) == wire


@pytest.mark.parametrize(("sub", "name", "version"), CASES, ids=[f"{n}-v{v}" for _, n, v in CASES])
def test_defaults_round_trip(sub: str, name: str, version: int) -> None:
    schema = _load(sub, name)
    wire = schema.encode({}, version)
    assert schema.encode(schema.decode_all(wire, version), version) == wire


def test_offset_commit_value_v4_is_flexible_and_v3_is_not() -> None:
    schema = _load("coordinator", "OffsetCommitValue")
    values = {"offset": 42, "leader_epoch": 3, "metadata": "m", "commit_timestamp": 1000}
    v3, v4 = schema.encode(values, 3), schema.encode(values, 4)
    # v3: int16 string length; v4: compact length and an (empty) tagged-field section.
    assert v3 == (42).to_bytes(8, "big") + (3).to_bytes(4, "big") + b"\x00\x01m" + (1000).to_bytes(8, "big")
    assert v4 == (42).to_bytes(8, "big") + (3).to_bytes(4, "big") + b"\x02m" + (1000).to_bytes(8, "big") + b"\x00"
    assert schema.decode_all(v4, 4)["metadata"] == "m"
