"""The Kafka JSON schema of a request, walked over real bytes and used to write sample requests.

Mutations that lie about a length or a count need to know where the lengths and counts are. The
message classes carry Kafka's JSON schema (``schema_json(cls)``); :func:`spots` walks a request frame
with it and returns every length, count, nullable-or-not field and records field it passes, by
byte offset. :func:`sample_body` writes a plausible request of any api key and version from the
same schema (one element per array, names from a caller's list), for the hand-built seeds.

This is a mutation aid, not a validator: it stops at the first thing it cannot read and returns
what it found so far.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafkapy.protocol.apis import request_class
from kafkapy.protocol.kafka_python_adapter import schema_json

_FIXED = {"int8": 1, "bool": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8,
          "float64": 8, "uuid": 16}


@dataclass(frozen=True, slots=True)
class Spot:
    """One place in a frame a mutation can aim at.

    ``kind``: ``len16``/``len32`` (a string's or bytes' int16/int32 length), ``count32`` (an array's
    int32 count), ``uvarint`` (a compact length or count, or a tagged-field count/size),
    ``records`` (the content of a records field: ``offset`` and ``width`` give its bytes).
    ``nullable``: whether the schema allows null here at this version (for lengths and counts).
    ``null``: the bytes that mean null at this position (``ffff``, ``ffffffff`` or ``00``).
    """

    offset: int
    width: int
    kind: str
    field: str
    nullable: bool
    null: bytes


def versions_match(spec: str | None, version: int) -> bool:
    """Whether ``version`` is inside a schema version range (``"3+"``, ``"0-12"``, ``"none"``)."""
    if not spec or spec == "none":
        return False
    if spec.endswith("+"):
        return version >= int(spec[:-1])
    if "-" in spec:
        lo, hi = spec.split("-")
        return int(lo) <= version <= int(hi)
    return version == int(spec)


class _Stop(Exception):
    pass


class _Walker:
    def __init__(self, data: bytes, flexible: bool, version: int, common: dict[str, Any]) -> None:
        self.data = data
        self.flexible = flexible
        self.version = version
        self.common = common
        self.spots: list[Spot] = []

    def need(self, pos: int, n: int) -> None:
        if pos + n > len(self.data) or n < 0:
            raise _Stop

    def uvarint(self, pos: int, field: str, nullable: bool = False) -> tuple[int, int]:
        value, shift, start = 0, 0, pos
        while True:
            self.need(pos, 1)
            b = self.data[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
            if shift > 63:
                raise _Stop
        self.spots.append(Spot(start, pos - start, "uvarint", field, nullable, b"\x00"))
        return value, pos

    def length(self, pos: int, field: str, nullable: bool, wide: bool) -> tuple[int, int]:
        """A string/bytes/array length or count: (value, -1 for null), position after it."""
        if self.flexible:
            n, pos = self.uvarint(pos, field, nullable)
            return n - 1, pos
        fmt, width = (">i", 4) if wide else (">h", 2)
        self.need(pos, width)
        (n,) = struct.unpack_from(fmt, self.data, pos)
        kind = ("count32" if wide == "count" else "len32") if wide else "len16"
        self.spots.append(Spot(pos, width, kind, field, nullable, b"\xff" * width))
        return n, pos + width

    def fields(self, fields: list[dict[str, Any]], pos: int) -> int:
        for f in fields:
            if not versions_match(f.get("versions"), self.version):
                continue
            if self.flexible and versions_match(f.get("taggedVersions"), self.version):
                continue  # written in the tagged section
            pos = self.field(f, pos)
        if self.flexible:
            count, pos = self.uvarint(pos, "tagged fields")
            for _ in range(count):
                _, pos = self.uvarint(pos, "tag")
                size, pos = self.uvarint(pos, "tag size")
                self.need(pos, size)
                pos += size
        return pos

    def field(self, f: dict[str, Any], pos: int) -> int:
        name, typ = f["name"], f["type"]
        nullable = versions_match(f.get("nullableVersions"), self.version)
        if typ.startswith("[]"):
            elem = typ[2:]
            n, pos = self.length(pos, name, nullable, "count")
            if n > len(self.data):
                raise _Stop
            sub = f.get("fields") or (self.common.get(elem) or {}).get("fields")
            for _ in range(max(n, 0)):
                if sub is not None:
                    pos = self.fields(sub, pos)
                elif elem in _FIXED:
                    self.need(pos, _FIXED[elem])
                    pos += _FIXED[elem]
                else:
                    pos = self.field({"name": name, "type": elem, "versions": "0+"}, pos)
            return pos
        if typ in _FIXED:
            self.need(pos, _FIXED[typ])
            return pos + _FIXED[typ]
        if typ == "string":
            n, pos = self.length(pos, name, nullable, False)
        elif typ in ("bytes", "records"):
            n, pos = self.length(pos, name, nullable, True)
        else:  # a struct, inline or common
            sub = f.get("fields") or (self.common.get(typ) or {}).get("fields")
            if sub is None:
                raise _Stop
            if nullable:  # a nullable struct starts with a presence byte (-1: null)
                self.need(pos, 1)
                self.spots.append(Spot(pos, 1, "marker", name, True, b"\xff"))
                if self.data[pos] == 0xFF:
                    return pos + 1
                pos += 1
            return self.fields(sub, pos)
        if n > 0:
            self.need(pos, n)
            if typ == "records":
                self.spots.append(Spot(pos, n, "records", name, nullable, b""))
            pos += n
        return pos


def header_end(frame: bytes, flexible: bool) -> int:
    """Where the body starts in a framed request (size prefix included)."""
    (n,) = struct.unpack_from(">h", frame, 12)
    pos = 14 + max(n, 0)
    if flexible:
        pos += 1  # no tagged header fields in the requests we record or build
    return pos


def spots(frame: bytes, api_key: int, version: int) -> list[Spot]:
    """Every length, count and records field of a framed request, as far as it can be read."""
    cls = request_class(api_key)
    if cls is None or len(frame) < 14:
        return []
    flexible = bool(cls.flexible_version_q(version))
    schema = schema_json(cls)
    common = {s["name"]: s for s in schema.get("commonStructs", [])}
    walker = _Walker(frame, flexible, version, common)
    try:
        walker.fields(schema["fields"], header_end(frame, flexible))
    except (_Stop, struct.error, ValueError):
        pass
    return walker.spots


# -- sample requests -------------------------------------------------------------------------------

def uvarint(n: int) -> bytes:
    """``n`` as an unsigned varint."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


class _Writer:
    def __init__(self, flexible: bool, version: int, common: dict[str, Any],
                 value_for: Callable[[str, str], Any]) -> None:
        self.flexible = flexible
        self.version = version
        self.common = common
        self.value_for = value_for

    def length(self, n: int, wide: bool) -> bytes:
        if self.flexible:
            return uvarint(n + 1)
        return struct.pack(">i" if wide else ">h", n)

    def fields(self, fields: list[dict[str, Any]]) -> bytes:
        out = bytearray()
        for f in fields:
            if not versions_match(f.get("versions"), self.version):
                continue
            if self.flexible and versions_match(f.get("taggedVersions"), self.version):
                continue
            out += self.field(f)
        if self.flexible:
            out += b"\x00"
        return bytes(out)

    def field(self, f: dict[str, Any]) -> bytes:
        name, typ = f["name"], f["type"]
        if typ.startswith("[]"):
            elem = typ[2:]
            sub = f.get("fields") or (self.common.get(elem) or {}).get("fields")
            if sub is not None:
                item = self.fields(sub)
            else:
                item = self.field({"name": name, "type": elem, "versions": "0+"})
            return self.length(1, True) + item
        sub = f.get("fields") or (self.common.get(typ) or {}).get("fields")
        if sub is not None:
            nullable = versions_match(f.get("nullableVersions"), self.version)
            return (b"\x01" if nullable else b"") + self.fields(sub)
        value = self.value_for(name, typ)
        if typ in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
            fmt = {"int8": ">b", "int16": ">h", "int32": ">i", "int64": ">q", "uint16": ">H",
                   "uint32": ">I"}[typ]
            return struct.pack(fmt, int(value))
        if typ == "bool":
            return b"\x01" if value else b"\x00"
        if typ == "float64":
            return struct.pack(">d", float(value))
        if typ == "uuid":
            return value if isinstance(value, bytes) else uuid.UUID(int=int(value)).bytes
        if typ == "string":
            raw = str(value).encode()
            return self.length(len(raw), False) + raw
        raw = bytes(value)  # bytes, records
        return self.length(len(raw), True) + raw


def sample_body(api_key: int, version: int, value_for: Callable[[str, str], Any]) -> bytes:
    """A request body of ``api_key`` at ``version`` with one element per array and the values
    ``value_for(field_name, type)`` picks for leaves."""
    cls = request_class(api_key)
    if cls is None:
        raise ValueError(f"no schema for api key {api_key}")
    schema = schema_json(cls)
    common = {s["name"]: s for s in schema.get("commonStructs", [])}
    return _Writer(bool(cls.flexible_version_q(version)), version, common,
                   value_for).fields(schema["fields"])


def frame(api_key: int, version: int, body: bytes, *, correlation_id: int = 0,
          client_id: str = "fuzz") -> bytes:
    """A framed request: size, header (v1 or v2 by the version's flexibility), ``body``."""
    cls = request_class(api_key)
    flexible = bool(cls.flexible_version_q(version)) if cls is not None else False
    cid = client_id.encode()
    header = struct.pack(">hhih", api_key, version, correlation_id, len(cid)) + cid
    if flexible:
        header += b"\x00"
    payload = header + body
    return struct.pack(">i", len(payload)) + payload
