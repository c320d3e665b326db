"""``protocol/schema_codec.py`` against kafka-python's ``StructField``, over every schema we own.

Every JSON schema in ``kafkapy/protocol/schemas/`` (rpc, metadata, tiered, control) is encoded at
every valid version with values generated from the schema itself, once with every field set and
once at the minimum (nulls, empty arrays, tagged fields at their defaults), and must give the same
bytes as kafka-python's codec over the same file; both must read those bytes back whole. A
synthetic schema covers what our files do not (yet): non-flexible versions, nullable plain
structs, float64. kafka-python may only be imported by protocol/ in the package; a test may use it
as a reference.
"""

from __future__ import annotations

import io
import random
import uuid
import zipfile
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.schemas import StructField, load_json

from kafkapy.protocol import schemas
from kafkapy.protocol.schema_codec import (
    MessageSchema,
    SchemaError,
    Struct,
    load_schema,
    schema_from_json,
)

CASES = [(subtree, name) for subtree in schemas.SUBTREES for name in schemas.schema_names(subtree)]


def _simple(t: str, rnd: random.Random, minimal: bool) -> Any:
    if t in ("int8", "int16", "int32", "int64"):
        bits = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}[t]
        return 0 if minimal else rnd.choice([-1, 1, 100, 2 ** (bits - 1) - 1, -(2 ** (bits - 1))])
    if t == "uint16":
        return 0 if minimal else rnd.choice([1, 300, 65535])
    if t == "float64":
        return 0.0 if minimal else rnd.choice([1.5, -2.25, 1e300])
    if t == "bool":
        return not minimal
    if t == "uuid":
        return uuid.UUID(int=rnd.getrandbits(128) | 1)
    if t == "string":
        return "" if minimal else rnd.choice(["a", "ünïcode", "x" * 130])
    if t in ("bytes", "records"):
        return b"" if minimal else bytes(rnd.getrandbits(8) for _ in range(rnd.choice([1, 5, 140])))
    raise AssertionError(f"no sample for type {t}")


def sample(struct: Struct, version: int, rnd: random.Random, minimal: bool,
           in_tagged: bool = False) -> dict[str, Any]:
    """Values for ``struct`` at ``version``: untagged fields first, then the tagged ones in tag
    order (kafka-python writes tags in the order of the dict). Inside a tagged field kafka-python
    writes no nested tags, so none are set there."""
    flexible = struct.is_flexible(version)
    values: dict[str, Any] = {}
    tagged = []
    for f in struct.fields:
        if not f.present(version):
            continue
        is_tagged = f.tag is not None and flexible and f.tagged(version)
        if is_tagged and (minimal or in_tagged):
            continue  # left at its default: not written
        nested_tagged = in_tagged or is_tagged
        if f.struct is not None and not f.is_array:
            value: Any = (None if minimal and f.nullable(version)
                          else sample(f.struct, version, rnd, minimal, nested_tagged))
        elif f.is_array:
            if minimal:
                value = None if f.nullable(version) else []
            elif f.struct is not None:
                value = [sample(f.struct, version, rnd, False, nested_tagged) for _ in range(2)]
            else:
                value = [_simple(f.type[2:], rnd, False) for _ in range(3)]
        elif minimal and f.nullable(version) and f.type in ("string", "bytes", "records"):
            value = None
        else:
            value = _simple(f.type, rnd, minimal)
        if is_tagged:
            tagged.append((f.tag, f.name, value))
        else:
            values[f.name] = value
    for _tag, name, value in sorted(tagged, key=lambda t: t[0]):
        values[name] = value
    return values


def _contains(decoded: Any, expected: Any) -> bool:
    """``decoded`` holds ``expected`` (lists read back as tuples; tagged defaults filled in)."""
    if isinstance(expected, dict):
        return isinstance(decoded, dict) and all(
            k in decoded and _contains(decoded[k], v) for k, v in expected.items())
    if isinstance(expected, list):
        return (isinstance(decoded, tuple) and len(decoded) == len(expected)
                and all(_contains(d, e) for d, e in zip(decoded, expected)))
    return bool(decoded == expected)


def _check(ours: MessageSchema, theirs: StructField, seed: str) -> int:
    checked = 0
    lo, hi = ours.valid_versions
    for version in range(lo, hi + 1):
        flexible = ours.struct.is_flexible(version)
        for minimal in (False, True):
            values = sample(ours.struct, version, random.Random(f"{seed}/{version}"), minimal)
            data = ours.encode(values, version)
            where = f"{seed} v{version} {'minimal' if minimal else 'full'}"
            assert data == theirs.encode(values, version=version, compact=flexible, tagged=flexible), where
            stream = io.BytesIO(data)
            theirs.decode(stream, version=version, compact=flexible, tagged=flexible)
            assert stream.tell() == len(data), f"{where}: kafka-python left bytes unread"
            decoded = ours.decode_all(data, version)
            assert _contains(decoded, values), where
            assert ours.encode(decoded, version) == data, where
            checked += 1
    return checked


@pytest.mark.parametrize("subtree, name", CASES, ids=[f"{s}/{n}" for s, n in CASES])
def test_same_bytes_as_kafka_python(subtree: str, name: str) -> None:
    package = schemas.package(subtree)
    ours = load_schema(name, package)
    if not ours.struct.fields:  # kafka-python cannot build a struct of no fields (NoOpRecord)
        assert ours.encode({}, 0) == b"\x00" and ours.decode_all(b"\x00", 0) == {}
        return
    theirs = StructField(load_json(name, package=package))
    assert _check(ours, theirs, f"{subtree}/{name}") >= 2


def test_every_subtree_has_schemas() -> None:
    counts = {subtree: len(schemas.schema_names(subtree)) for subtree in schemas.SUBTREES}
    assert counts["control"] == 5 and all(counts.values()), counts


# --------------------------------------------------------------------------------------------
# What our files do not use yet: non-flexible versions, nullable plain structs, float64.

SYNTHETIC: dict[str, Any] = {
    "apiKey": 90, "type": "request", "name": "SyntheticRequest",
    "validVersions": "0-3", "flexibleVersions": "2+",
    "fields": [
        {"name": "Id", "type": "int32", "versions": "0+"},
        {"name": "Ratio", "type": "float64", "versions": "1+"},
        {"name": "Name", "type": "string", "versions": "0+", "nullableVersions": "1+"},
        {"name": "Blob", "type": "bytes", "versions": "0+", "nullableVersions": "0+"},
        {"name": "Flag", "type": "bool", "versions": "0+"},
        {"name": "Port", "type": "uint16", "versions": "0+"},
        {"name": "Ids", "type": "[]int64", "versions": "0+", "nullableVersions": "3+"},
        {"name": "Owner", "type": "Owner", "versions": "0+", "fields": [
            {"name": "OwnerId", "type": "uuid", "versions": "0+"},
            {"name": "Host", "type": "string", "versions": "0+"},
            {"name": "Extra", "type": "int16", "versions": "2+", "taggedVersions": "2+", "tag": 0},
        ]},
        {"name": "Lease", "type": "Lease", "versions": "1+", "nullableVersions": "1+", "fields": [
            {"name": "Epoch", "type": "int32", "versions": "1+"},
            {"name": "Holders", "type": "[]Holder", "versions": "1+", "fields": [
                {"name": "HolderId", "type": "int32", "versions": "1+"},
                {"name": "Where", "type": "Where", "versions": "1+", "fields": [
                    {"name": "Rack", "type": "string", "versions": "1+"}]},
            ]},
        ]},
        {"name": "Note", "type": "string", "versions": "2+", "taggedVersions": "2+", "tag": 3},
        {"name": "Hint", "type": "Hint", "versions": "3+", "taggedVersions": "3+", "tag": 1,
         "fields": [{"name": "Leader", "type": "int32", "versions": "3+"}]},
    ],
}


def test_synthetic_schema_same_bytes_as_kafka_python() -> None:
    assert _check(schema_from_json(SYNTHETIC), StructField(SYNTHETIC), "synthetic") == 8


def test_non_flexible_layout_by_hand() -> None:
    ours = schema_from_json(SYNTHETIC)
    values = {"id": 7, "name": "ab", "blob": None, "flag": True, "port": 9093, "ids": [5],
              "owner": {"owner_id": uuid.UUID(int=1), "host": "h"}}
    assert ours.encode(values, 0) == (
        b"\x00\x00\x00\x07" + b"\x00\x02ab" + b"\xff\xff\xff\xff" + b"\x01" + b"\x23\x85"
        + b"\x00\x00\x00\x01" + (5).to_bytes(8, "big") + uuid.UUID(int=1).bytes + b"\x00\x01h")
    v1 = ours.encode({**values, "ratio": 0.5, "name": None, "lease": None}, 1)
    assert b"\xff\xff" in v1 and v1.endswith(b"\x00\x01h\xff")  # null string; null struct marker -1
    with pytest.raises(ValueError, match="name is not nullable in version 0"):
        ours.encode({**values, "name": None}, 0)
    with pytest.raises(SchemaError, match="negative length"):
        ours.decode_all(b"\x00\x00\x00\x07\xff\xfe", 0)


# --------------------------------------------------------------------------------------------
# The control schemas carry Kafka's protocol facts (checked against the jar where installed).

KAFKA_JAR = Path(__file__).resolve().parents[3] / ".tools" / "java" / "kafka-clients.jar"
_FACTS = ("type", "versions", "nullableVersions", "taggedVersions", "tag", "default", "mapKey",
          "entityType")


def _resolved(obj: dict[str, Any]) -> list[dict[str, Any]]:
    common = {s["name"]: s["fields"] for s in obj.get("commonStructs", ())}

    def walk(fields: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for f in fields:
            inner = f["type"][2:] if f["type"].startswith("[]") else f["type"]
            nested = f.get("fields", common.get(inner))
            out.append({**{k: f.get(k) for k in ("name", *_FACTS)},
                        "fields": walk(nested) if nested else None})
        return out

    return walk(obj["fields"])


@pytest.mark.skipif(not KAFKA_JAR.exists(), reason="kafka-clients jar not installed (make tools)")
@pytest.mark.parametrize("name", schemas.schema_names("control"))
def test_control_schemas_match_kafka_jar(name: str) -> None:
    import json
    import re

    ours = schemas.schema_json("control", name)
    with zipfile.ZipFile(KAFKA_JAR) as jar:
        theirs = json.loads(re.sub(r"(?m)^\s*//.*$", "", jar.read(f"common/message/{name}.json").decode()))
    for key in ("type", "name", "validVersions", "flexibleVersions"):
        assert ours.get(key) == theirs.get(key), key
    assert _resolved(ours) == _resolved(theirs)
