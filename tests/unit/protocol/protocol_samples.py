"""Builds a populated message of any schema at any version, for round-trip and fuzz tests.

Every array gets one element, every nested struct is filled, tagged fields get non-default values
so they are actually on the wire.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any


SAMPLE_UUID = uuid.UUID("12345678-1234-5678-1234-567812345678")

_SIMPLE = {
    "int8": 7,
    "int16": 3,
    "uint16": 9,
    "int32": 42,
    "int64": 1234567890123,
    "float64": 1.5,
    "bool": True,
    "string": "s\u00e9",
    "bytes": b"\x00\x01\x02",
    "records": b"\x10\x11\x12\x13",
    "uuid": SAMPLE_UUID,
}


def _simple_value(type_str: str) -> Any:
    if type_str.startswith("[]"):
        return [_simple_value(type_str[2:])] * 2
    return _SIMPLE[type_str]


def build(struct_field: Any, data_class: Any, version: int) -> Any:
    """A ``data_class`` instance with every field of ``struct_field`` present at ``version`` set."""
    values: dict[str, Any] = {}
    for f in struct_field._fields:
        if not f.for_version_q(version):
            continue
        if f.is_struct_array():
            values[f.name] = [build(f.array_of, f.data_class, version)]
        elif f.is_struct():
            values[f.name] = build(f, f.data_class, version)
        elif f.type_str == "bitfield":
            values[f.name] = {1, 3}
        else:
            values[f.name] = _simple_value(f.type_str)
    return data_class(version=version, **values)


def sample(cls: Any, version: int) -> Any:
    """A fully populated message of class ``cls`` at ``version``."""
    return build(cls._struct, cls, version)


def null_probes(cls: Any, version: int) -> list[tuple[str, bool, bytes]]:
    """Copies of a populated ``cls`` request body at ``version``, each with one untagged string,
    bytes or array field (or one element of a string array) replaced by null on the wire.

    Returns (dotted field path, whether the schema allows null there, body bytes). Positions come
    from the request validator's walk, so every field the schema puts on the wire is covered.
    """
    from kafkapy.protocol.validate import check_request_body

    body = bytes(sample(cls, version).encode(version=version))
    spans: list[tuple[tuple[str, ...], str, int, int, bool, bool]] = []
    check_request_body(cls.API_KEY, version, body, 0,
                       visit=lambda *span: spans.append(span))  # type: ignore[arg-type]
    probes = []
    for path, kind, start, end, compact, nullable in spans:
        if kind == "struct":
            continue  # a non-nullable struct has no null marker to set
        if compact:
            null = b"\x00"
        elif kind == "string":
            null = b"\xff\xff"
        else:
            null = b"\xff\xff\xff\xff"
        probes.append((".".join(path), nullable, body[:start] + null + body[end:]))
    return probes


def frame_request(cls: Any, version: int, body: bytes, correlation_id: int = 1,
                  client_id: bytes = b"t") -> bytes:
    """``body`` (an encoded ``cls`` request at ``version``) with a request header and size prefix."""
    header = struct.pack(">hhih", cls.API_KEY, version, correlation_id, len(client_id)) + client_id
    if cls.flexible_version_q(version):
        header += b"\x00"  # no header tagged fields
    payload = header + body
    return struct.pack(">i", len(payload)) + payload
