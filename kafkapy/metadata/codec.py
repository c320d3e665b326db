"""A small codec for Kafka-style JSON schemas in their flexible encoding.

Metadata records are flexible from version 0: compact strings and arrays (unsigned-varint
length + 1, 0 for null), raw 16-byte UUIDs, big-endian integers, and a tagged-field section
after each struct's fields (count, then tag / size / value for each field that differs from its
default, in ascending tag order). This module reads our schema files in
``kafkapy/metadata/schemas/`` and encodes and decodes struct values as dicts keyed by the fields'
snake_case names.

Only ``protocol/`` may use kafka-python (our layering rule), and the metadata records need just
this subset of the format, so it lives here, small and dependency-free. The tests check it
byte for byte against hand-built frames and against kafka-python's ``StructField``.
"""

from __future__ import annotations

import json
import re
import struct
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

ZERO_UUID = uuid.UUID(int=0)
_COMMENT = re.compile(r"^\s*//.*$", re.MULTILINE)
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")

_FIXED: dict[str, struct.Struct] = {
    "int8": struct.Struct(">b"),
    "int16": struct.Struct(">h"),
    "uint16": struct.Struct(">H"),
    "int32": struct.Struct(">i"),
    "int64": struct.Struct(">q"),
}


class SchemaError(ValueError):
    """Malformed input for a schema (raised by ``decode`` for corrupt bytes)."""


def snake_name(name: str) -> str:
    """``LeaderRecoveryState`` -> ``leader_recovery_state`` (kafka-python's naming too)."""
    return _CAMEL.sub("_", name).lower()


def _versions(text: str | None) -> tuple[int, int] | None:
    if text is None or not text.strip() or text.strip() == "none":
        return None
    text = text.strip()
    if text.endswith("+"):
        return int(text[:-1]), 0x7FFF
    if "-" in text:
        lo, hi = text.split("-")
        return int(lo), int(hi)
    return int(text), int(text)


def _within(v: int, rng: tuple[int, int] | None) -> bool:
    return rng is not None and rng[0] <= v <= rng[1]


# --------------------------------------------------------------------------------------------
# Varints

def write_uvarint(out: bytearray, value: int) -> None:
    if value < 0:
        raise ValueError(f"unsigned varint cannot hold {value}")
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise SchemaError("truncated unsigned varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise SchemaError("unsigned varint longer than 5 bytes")


# --------------------------------------------------------------------------------------------
# Schema model

@dataclass(frozen=True)
class Field:
    """One field of a schema struct."""

    name: str              # snake_case
    type: str              # "int32", "string", "[]int32", "[]Struct", ...
    versions: tuple[int, int]
    tag: int | None
    tagged_versions: tuple[int, int] | None
    nullable_versions: tuple[int, int] | None
    default: Any
    struct: "Struct | None"  # element struct of a struct array

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    def present(self, version: int) -> bool:
        return self.versions[0] <= version <= self.versions[1]

    def tagged(self, version: int) -> bool:
        return self.tag is not None and _within(version, self.tagged_versions)


def _default(type_: str, raw: Any) -> Any:
    if type_.startswith("[]"):
        return None if raw == "null" else ()
    if type_ == "bool":
        return str(raw).lower() == "true" if raw not in (None, "") else False
    if type_ in _FIXED:
        if raw in (None, ""):
            return 0
        return int(raw, 0) if isinstance(raw, str) else int(raw)
    if type_ == "uuid":
        return ZERO_UUID
    if type_ in ("string", "bytes"):
        if raw == "null":
            return None
        return (raw or "") if type_ == "string" else b""
    raise ValueError(f"unsupported field type {type_}")


@dataclass(frozen=True)
class Struct:
    """A struct: its fields in schema order."""

    fields: tuple[Field, ...]
    # Per-version decode plans (see ``_plan``), built on first use. A metadata snapshot of 100k
    # partitions decodes 100k records: resolving each field's type and version once per
    # version rather than once per record roughly halves the decode time.
    _plans: dict[int, "_Plan"] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_json(cls, fields_json: list[dict[str, Any]]) -> "Struct":
        fields = []
        for f in fields_json:
            type_ = f["type"]
            nested = None
            if "fields" in f:
                nested = cls.from_json(f["fields"])
                default: Any = None if f.get("default") == "null" else ()
            else:
                default = _default(type_, f.get("default"))
            tag = f.get("tag")
            fields.append(Field(
                name=snake_name(f["name"]), type=type_, versions=_versions(f["versions"]) or (0, -1),
                tag=None if tag is None else int(tag),
                tagged_versions=_versions(f.get("taggedVersions")),
                nullable_versions=_versions(f.get("nullableVersions")),
                default=default, struct=nested))
        return cls(tuple(fields))

    # -- encode ------------------------------------------------------------------------------

    def encode(self, values: object, version: int, out: bytearray) -> None:
        # ``values``: a mapping of field names, or an object with the fields as attributes.
        tagged: list[tuple[int, Field, Any]] = []
        for f in self.fields:
            if not f.present(version):
                continue
            value = values.get(f.name, f.default) if isinstance(values, Mapping) else getattr(values, f.name)
            if f.tag is not None and f.tagged(version):
                if _same(value, f.default):
                    continue  # tagged fields at their default are not written
                tagged.append((f.tag, f, value))
                continue
            _encode_value(f, value, version, out)
        tagged.sort(key=lambda tfv: tfv[0])
        write_uvarint(out, len(tagged))
        for tag, f, value in tagged:
            body = bytearray()
            _encode_value(f, value, version, body)
            write_uvarint(out, tag)
            write_uvarint(out, len(body))
            out += body

    # -- decode ------------------------------------------------------------------------------

    def _plan(self, version: int) -> "_Plan":
        plan = self._plans.get(version)
        if plan is None:
            regular = []
            by_tag: dict[int, Field] = {}
            defaults: dict[str, Any] = {}
            for f in self.fields:
                if not f.present(version):
                    continue
                if f.tagged(version):
                    by_tag[f.tag] = f  # type: ignore[index]
                    defaults[f.name] = f.default
                else:
                    regular.append((f.name, _reader(f, version)))
            plan = self._plans[version] = _Plan(tuple(regular), by_tag, defaults)
        return plan

    def decode(self, buf: bytes, pos: int, version: int) -> tuple[dict[str, Any], int]:
        plan = self._plan(version)
        values: dict[str, Any] = {}
        for name, read in plan.regular:
            values[name], pos = read(buf, pos)
        values.update(plan.tagged_defaults)
        by_tag = plan.by_tag
        count, pos = read_uvarint(buf, pos)
        for _ in range(count):
            tag, pos = read_uvarint(buf, pos)
            size, pos = read_uvarint(buf, pos)
            end = pos + size
            if end > len(buf):
                raise SchemaError("tagged field overruns the buffer")
            f = by_tag.get(tag)
            if f is not None:  # unknown tags are skipped
                values[f.name], used = _decode_value(f, buf[:end], pos, version)
                if used != end:
                    raise SchemaError(f"tagged field {tag} has {end - used} stray byte(s)")
            pos = end
        return values, pos


_Reader = Callable[[bytes, int], tuple[Any, int]]


@dataclass(frozen=True)
class _Plan:
    """How to decode a struct at one version: its untagged fields in order, each with its
    reader, then the tagged fields by tag and their defaults."""

    regular: tuple[tuple[str, _Reader], ...]
    by_tag: dict[int, Field]
    tagged_defaults: dict[str, Any]


def _fixed_reader(f: Field, t: str) -> _Reader:
    codec = _FIXED[t]
    size = codec.size
    unpack = codec.unpack_from

    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        end = pos + size
        if end > len(buf):
            raise SchemaError(f"{f.name}: truncated {t}")
        return unpack(buf, pos)[0], end

    return read


def _uuid_reader(f: Field) -> _Reader:
    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        end = pos + 16
        if end > len(buf):
            raise SchemaError(f"{f.name}: truncated uuid")
        return uuid.UUID(bytes=bytes(buf[pos:end])), end

    return read


def _simple_reader(f: Field, t: str, version: int) -> _Reader:
    if t in _FIXED:
        return _fixed_reader(f, t)
    if t == "uuid":
        return _uuid_reader(f)
    return lambda buf, pos: _decode_simple(t, f, buf, pos, version)


def _reader(f: Field, version: int) -> _Reader:
    """``_decode_value`` for ``f`` at ``version``, with the type dispatch done up front."""
    t = f.type
    if not t.startswith("[]"):
        return _simple_reader(f, t, version)
    nullable = _within(version, f.nullable_versions)
    struct = f.struct
    item_reader: _Reader = (
        (lambda buf, pos: struct.decode(buf, pos, version)) if struct is not None
        else _simple_reader(f, t[2:], version))

    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        n, pos = read_uvarint(buf, pos)
        if n == 0:
            if not nullable:
                raise SchemaError(f"{f.name} is null but not nullable")
            return None, pos
        n -= 1
        if n > len(buf) - pos:  # every element takes at least one byte
            raise SchemaError(f"{f.name}: {n} elements cannot fit")
        items = []
        for _ in range(n):
            item, pos = item_reader(buf, pos)
            items.append(item)
        return tuple(items), pos

    return read


def _same(value: Any, default: Any) -> bool:
    if isinstance(value, (list, tuple)) and isinstance(default, (list, tuple)):
        return tuple(value) == tuple(default)
    return bool(value == default)


def _encode_value(f: Field, value: Any, version: int, out: bytearray) -> None:
    t = f.type
    if t.startswith("[]"):
        if value is None:
            if not _within(version, f.nullable_versions):
                raise ValueError(f"{f.name} is not nullable in version {version}")
            out.append(0)
            return
        write_uvarint(out, len(value) + 1)
        inner = t[2:]
        for item in value:
            if f.struct is not None:
                f.struct.encode(item, version, out)
            else:
                _encode_simple(inner, item, f, version, out)
        return
    _encode_simple(t, value, f, version, out)


def _encode_simple(t: str, value: Any, f: Field, version: int, out: bytearray) -> None:
    codec = _FIXED.get(t)
    if codec is not None:
        out += codec.pack(value)
    elif t == "bool":
        out.append(1 if value else 0)
    elif t == "uuid":
        out += (value or ZERO_UUID).bytes
    elif t in ("string", "bytes"):
        if value is None:
            if not _within(version, f.nullable_versions):
                raise ValueError(f"{f.name} is not nullable in version {version}")
            out.append(0)
            return
        data = value.encode("utf-8") if t == "string" else bytes(value)
        write_uvarint(out, len(data) + 1)
        out += data
    else:
        raise ValueError(f"unsupported field type {t}")


def _decode_value(f: Field, buf: bytes, pos: int, version: int) -> tuple[Any, int]:
    t = f.type
    if t.startswith("[]"):
        n, pos = read_uvarint(buf, pos)
        if n == 0:
            if not _within(version, f.nullable_versions):
                raise SchemaError(f"{f.name} is null but not nullable")
            return None, pos
        n -= 1
        if n > len(buf) - pos:  # every element takes at least one byte
            raise SchemaError(f"{f.name}: {n} elements cannot fit")
        items = []
        inner = t[2:]
        for _ in range(n):
            if f.struct is not None:
                item, pos = f.struct.decode(buf, pos, version)
            else:
                item, pos = _decode_simple(inner, f, buf, pos, version)
            items.append(item)
        return tuple(items), pos
    return _decode_simple(t, f, buf, pos, version)


def _decode_simple(t: str, f: Field, buf: bytes, pos: int, version: int) -> tuple[Any, int]:
    codec = _FIXED.get(t)
    if codec is not None:
        end = pos + codec.size
        if end > len(buf):
            raise SchemaError(f"{f.name}: truncated {t}")
        return codec.unpack_from(buf, pos)[0], end
    if t == "bool":
        if pos >= len(buf):
            raise SchemaError(f"{f.name}: truncated bool")
        return buf[pos] != 0, pos + 1
    if t == "uuid":
        end = pos + 16
        if end > len(buf):
            raise SchemaError(f"{f.name}: truncated uuid")
        return uuid.UUID(bytes=bytes(buf[pos:end])), end
    if t in ("string", "bytes"):
        n, pos = read_uvarint(buf, pos)
        if n == 0:
            if not _within(version, f.nullable_versions):
                raise SchemaError(f"{f.name} is null but not nullable")
            return None, pos
        end = pos + n - 1
        if end > len(buf):
            raise SchemaError(f"{f.name}: truncated {t}")
        raw = bytes(buf[pos:end])
        if t == "bytes":
            return raw, end
        try:
            return raw.decode("utf-8"), end
        except UnicodeDecodeError as e:
            raise SchemaError(f"{f.name}: invalid UTF-8") from e
    raise SchemaError(f"unsupported field type {t}")


# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class MessageSchema:
    """A top-level schema file: api key, valid versions and the root struct."""

    name: str
    api_key: int
    valid_versions: tuple[int, int]
    struct: Struct

    def encode(self, values: object, version: int) -> bytes:
        out = bytearray()
        self.struct.encode(values, version, out)
        return bytes(out)

    def decode(self, buf: bytes, pos: int, version: int) -> tuple[dict[str, Any], int]:
        return self.struct.decode(buf, pos, version)


def load_schema(name: str, package: str) -> MessageSchema:
    """Read ``<package>/<name>.json`` (Kafka's schema format, ``//`` comment lines allowed)."""
    text = resources.files(package).joinpath(name + ".json").read_text(encoding="utf-8")
    obj = json.loads(_COMMENT.sub("", text))
    valid = _versions(obj["validVersions"])
    if valid is None:
        raise ValueError(f"{name}: no valid versions")
    if _versions(obj.get("flexibleVersions")) != (0, 0x7FFF):
        raise ValueError(f"{name}: only schemas flexible from version 0 are supported")
    return MessageSchema(obj["name"], int(obj["apiKey"]), valid, Struct.from_json(obj.get("fields", [])))


__all__ = ["Field", "MessageSchema", "SchemaError", "Struct", "load_schema", "read_uvarint",
           "snake_name", "write_uvarint"]
