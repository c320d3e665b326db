"""__consumer_offsets records: byte layouts, round trips, and the coordinator core staying sans-I/O."""

from __future__ import annotations

import ast
import struct
from pathlib import Path

from kafkapy.coordinator import schema

CORE = Path(__file__).resolve().parents[3] / "kafkapy" / "coordinator"


def test_offset_key_layout():
    key = schema.encode_offset_key("g", "t", 3)
    assert key == struct.pack(">hh", 1, 1) + b"g" + struct.pack(">h", 1) + b"t" + struct.pack(">i", 3)
    assert schema.decode_key(key) == schema.OffsetKey("g", "t", 3)


def test_group_key_layout():
    key = schema.encode_group_key("grp")
    assert key == struct.pack(">hh", 2, 3) + b"grp"
    assert schema.decode_key(key) == schema.GroupKey("grp")
    assert schema.decode_key(struct.pack(">h", 9)) is None


def test_offset_value_v3_and_v1_layouts():
    v = schema.OffsetValue(42, 7, "md", 1234)
    raw = schema.encode_offset_value(v)
    assert raw == struct.pack(">hqi", 3, 42, 7) + struct.pack(">h", 2) + b"md" + struct.pack(">q", 1234)
    assert schema.decode_offset_value(raw) == v
    e = schema.OffsetValue(42, -1, "", 10, 99)
    raw = schema.encode_offset_value(e)
    assert raw[:2] == struct.pack(">h", 1)
    assert schema.decode_offset_value(raw) == e
    v0 = struct.pack(">hq", 0, 5) + struct.pack(">h", 0) + struct.pack(">q", 8)
    assert schema.decode_offset_value(v0) == schema.OffsetValue(5, -1, "", 8)


def test_group_value_v3_round_trip():
    v = schema.GroupValue("consumer", 4, "range", "m1", 77, (
        schema.MemberValue("m1", "inst", "client", "/1.2.3.4", 300000, 45000, b"sub", b"asg"),
        schema.MemberValue("m2", None, "client", "/1.2.3.5", 300000, 45000, b"", b""),
    ))
    raw = schema.encode_group_value(v)
    assert raw[:2] == struct.pack(">h", 3)
    assert schema.decode_group_value(raw) == v
    empty = schema.GroupValue("consumer", 5, None, None, 88, ())
    assert schema.decode_group_value(schema.encode_group_value(empty)) == empty


def test_java_string_hash():
    # Values of String.hashCode() in Java.
    assert schema.java_string_hash("") == 0
    assert schema.java_string_hash("a") == 97
    assert schema.java_string_hash("hello") == 99162322
    assert schema.java_string_hash("console-consumer-12345") == java_like("console-consumer-12345")
    assert schema.java_string_hash("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE
    assert schema.partition_for("polygenelubricants", 50) == 0


def java_like(s: str) -> int:
    h = 0
    for ch in s:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - 2**32 if h >= 2**31 else h


def test_subscribed_topics():
    sub = struct.pack(">hi", 1, 2) + struct.pack(">h", 1) + b"a" + struct.pack(">h", 1) + b"b" + struct.pack(">i", -1)
    assert schema.subscribed_topics("consumer", sub) == {"a", "b"}
    assert schema.subscribed_topics("connect", sub) is None
    assert schema.subscribed_topics("consumer", b"\x00") is None


def test_core_modules_are_sans_io():
    forbidden = {"trio", "socket", "time", "asyncio", "selectors"}
    for name in ("group.py", "schema.py"):
        tree = ast.parse((CORE / name).read_text())
        mods = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                mods.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                mods.add(node.module.split(".")[0])
        assert not mods & forbidden, (name, mods & forbidden)
