"""A schema-driven codec for the Kafka-style JSON schemas we own outside the request registry.

The metadata records, the ``__remote_log_metadata`` records and the KRaft control records are
all described by JSON files under ``kafkapy/protocol/schemas/`` and all encoded here; this module
reads such a file and encodes and decodes struct values as dicts keyed by the fields' snake_case
names.

Both of Kafka's encodings are covered, chosen per version by the schema's ``flexibleVersions``:

* flexible: compact strings, bytes and arrays (unsigned-varint length + 1, 0 for null) and a
  tagged-field section after each struct's fields (count, then tag / size / value for each field
  that differs from its default, in ascending tag order);
* non-flexible: int16-length strings, int32-length bytes and arrays (-1 for null), no tags.

Integers are big-endian, UUIDs 16 raw bytes. A struct-typed field that is not an array (a "plain"
nested struct) is laid out inline, as its own fields followed (when flexible) by its own tagged
section; in versions where it is nullable an int8 comes first (-1 null, 1 present), or, for a
tagged field, an unsigned varint (0 null, 1 present), as Kafka's generated code writes them.
``commonStructs`` are resolved by name, as Kafka's generator does.

kafka-python has its own codec, but it may only be touched through ``kafka_python_adapter`` and
these records need a small, fast, dependency-free subset, so it lives here. The tests check it
byte for byte against hand-built frames and against kafka-python's ``StructField``.
"""

from __future__ import annotations

import re
import struct
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkapy.protocol.schemas import read_json

ZERO_UUID = uuid.UUID(int=0)
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")
_ANY_VERSION = (0, 0x7FFF)

_FIXED: dict[str, struct.Struct] = {
    "int8": struct.Struct(">b"),
    "int16": struct.Struct(">h"),
    "uint16": struct.Struct(">H"),
    "int32": struct.Struct(">i"),
    "uint32": struct.Struct(">I"),
    "int64": struct.Struct(">q"),
    "float64": struct.Struct(">d"),
}
_I8 = _FIXED["int8"]
_I16 = _FIXED["int16"]
_I32 = _FIXED["int32"]


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


def _read_fixed(codec: struct.Struct, buf: bytes, pos: int, what: str) -> tuple[Any, int]:
    end = pos + codec.size
    if end > len(buf):
        raise SchemaError(f"truncated {what}")
    return codec.unpack_from(buf, pos)[0], end


def _read_length(buf: bytes, pos: int, flex: bool, wide: bool, what: str) -> tuple[int, int]:
    """A string/bytes/array length: -1 for null. Compact (varint, +1) when flexible, else an
    int16 (strings) or int32 (bytes, arrays)."""
    if flex:
        n, pos = read_uvarint(buf, pos)
        return n - 1, pos
    n, pos = _read_fixed(_I32 if wide else _I16, buf, pos, f"{what} length")
    if n < -1:
        raise SchemaError(f"{what}: negative length {n}")
    return int(n), pos


def _write_length(out: bytearray, n: int, flex: bool, wide: bool) -> None:
    if flex:
        write_uvarint(out, n + 1)
    else:
        out += (_I32 if wide else _I16).pack(n)


# --------------------------------------------------------------------------------------------
# Schema model

@dataclass(frozen=True)
class Field:
    """One field of a schema struct."""

    name: str              # snake_case
    type: str              # "int32", "string", "[]int32", "[]Struct", "Struct", ...
    versions: tuple[int, int]
    tag: int | None
    tagged_versions: tuple[int, int] | None
    nullable_versions: tuple[int, int] | None
    default: Any
    struct: "Struct | None"  # element struct of a struct array, or the plain nested struct

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def is_plain_struct(self) -> bool:
        return self.struct is not None and not self.is_array

    def present(self, version: int) -> bool:
        return self.versions[0] <= version <= self.versions[1]

    def tagged(self, version: int) -> bool:
        return self.tag is not None and _within(version, self.tagged_versions)

    def nullable(self, version: int) -> bool:
        return _within(version, self.nullable_versions)


def _default(type_: str, raw: Any) -> Any:
    if type_.startswith("[]"):
        return None if raw == "null" else ()
    if type_ == "bool":
        return str(raw).lower() == "true" if raw not in (None, "") else False
    if type_ == "float64":
        return float(raw) if raw not in (None, "") else 0.0
    if type_ in _FIXED:
        if raw in (None, ""):
            return 0
        return int(raw, 0) if isinstance(raw, str) else int(raw)
    if type_ == "uuid":
        return ZERO_UUID
    if type_ in ("string", "bytes", "records"):
        if raw == "null":
            return None
        return (raw or "") if type_ == "string" else b""
    raise ValueError(f"unsupported field type {type_}")


def _struct_type_name(type_: str) -> str | None:
    inner = type_[2:] if type_.startswith("[]") else type_
    return inner if inner[:1].isupper() else None


@dataclass(frozen=True)
class Struct:
    """A struct: its fields in schema order, and the versions in which it is flexible (those of
    the message it belongs to; None when never)."""

    fields: tuple[Field, ...]
    flexible: tuple[int, int] | None = None
    # Per-version decode plans (see ``_plan``), built on first use. A metadata snapshot of 100k
    # partitions decodes 100k records: resolving each field's type and version once per
    # version rather than once per record roughly halves the decode time.
    _plans: dict[int, "_Plan"] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_json(cls, fields_json: list[dict[str, Any]], flexible: tuple[int, int] | None = _ANY_VERSION,
                  common: Mapping[str, list[dict[str, Any]]] | None = None) -> "Struct":
        common = common or {}
        fields = []
        for f in fields_json:
            type_ = f["type"]
            nested_json = f.get("fields")
            struct_name = _struct_type_name(type_)
            if nested_json is None and struct_name is not None:
                if struct_name not in common:
                    raise ValueError(f"{f['name']}: struct type {struct_name} has no fields")
                nested_json = common[struct_name]
            nested = None
            default: Any
            if nested_json is not None:
                nested = cls.from_json(nested_json, flexible, common)
                if type_.startswith("[]") or f.get("default") == "null":
                    default = None if f.get("default") == "null" else ()
                else:  # a plain struct defaults to a struct of its fields' defaults
                    default = {sf.name: sf.default for sf in nested.fields}
            else:
                default = _default(type_, f.get("default"))
            tag = f.get("tag")
            fields.append(Field(
                name=snake_name(f["name"]), type=type_, versions=_versions(f["versions"]) or (0, -1),
                tag=None if tag is None else int(tag),
                tagged_versions=_versions(f.get("taggedVersions")),
                nullable_versions=_versions(f.get("nullableVersions")),
                default=default, struct=nested))
        return cls(tuple(fields), flexible)

    def is_flexible(self, version: int) -> bool:
        return _within(version, self.flexible)

    # -- encode ------------------------------------------------------------------------------

    def encode(self, values: object, version: int, out: bytearray) -> None:
        # ``values``: a mapping of field names, or an object with the fields as attributes.
        flex = self.is_flexible(version)
        tagged: list[tuple[int, Field, Any]] = []
        for f in self.fields:
            if not f.present(version):
                continue
            value = values.get(f.name, f.default) if isinstance(values, Mapping) else getattr(values, f.name)
            if f.tag is not None and flex and f.tagged(version):
                if _same(value, f.default):
                    continue  # tagged fields at their default are not written
                tagged.append((f.tag, f, value))
                continue
            _encode_value(f, value, version, flex, out)
        if not flex:
            return
        tagged.sort(key=lambda tfv: tfv[0])
        write_uvarint(out, len(tagged))
        for tag, f, value in tagged:
            body = bytearray()
            _encode_value(f, value, version, flex, body, tagged=True)
            write_uvarint(out, tag)
            write_uvarint(out, len(body))
            out += body

    # -- decode ------------------------------------------------------------------------------

    def _plan(self, version: int) -> "_Plan":
        plan = self._plans.get(version)
        if plan is None:
            flex = self.is_flexible(version)
            regular = []
            by_tag: dict[int, tuple[str, _Reader]] = {}
            defaults: dict[str, Any] = {}
            for f in self.fields:
                if not f.present(version):
                    continue
                if f.tag is not None and flex and f.tagged(version):
                    by_tag[f.tag] = (f.name, _reader(f, version, True, tagged=True))
                    defaults[f.name] = f.default
                else:
                    regular.append((f.name, _reader(f, version, flex)))
            plan = self._plans[version] = _Plan(tuple(regular), by_tag, defaults, flex)
        return plan

    def decode(self, buf: bytes, pos: int, version: int) -> tuple[dict[str, Any], int]:
        plan = self._plan(version)
        values: dict[str, Any] = {}
        for name, read in plan.regular:
            values[name], pos = read(buf, pos)
        if not plan.flexible:
            return values, pos
        values.update(plan.tagged_defaults)
        by_tag = plan.by_tag
        count, pos = read_uvarint(buf, pos)
        for _ in range(count):
            tag, pos = read_uvarint(buf, pos)
            size, pos = read_uvarint(buf, pos)
            end = pos + size
            if end > len(buf):
                raise SchemaError("tagged field overruns the buffer")
            known = by_tag.get(tag)
            if known is not None:  # unknown tags are skipped
                name, read = known
                values[name], used = read(buf[:end], pos)
                if used != end:
                    raise SchemaError(f"tagged field {tag} has {end - used} stray byte(s)")
            pos = end
        return values, pos


_Reader = Callable[[bytes, int], tuple[Any, int]]


@dataclass(frozen=True)
class _Plan:
    """How to decode a struct at one version: its untagged fields in order, each with its
    reader, then (when flexible) the tagged fields' names and readers by tag, and their defaults."""

    regular: tuple[tuple[str, _Reader], ...]
    by_tag: dict[int, tuple[str, _Reader]]
    tagged_defaults: dict[str, Any]
    flexible: bool


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


def _simple_reader(f: Field, t: str, version: int, flex: bool) -> _Reader:
    if t in _FIXED:
        return _fixed_reader(f, t)
    if t == "uuid":
        return _uuid_reader(f)
    return lambda buf, pos: _decode_simple(t, f, buf, pos, version, flex)


def _plain_struct_reader(f: Field, s: "Struct", version: int, tagged: bool) -> _Reader:
    nullable = f.nullable(version)

    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        if nullable and tagged:
            marker, pos = read_uvarint(buf, pos)
            if marker == 0:
                return None, pos
        elif nullable:
            marker, pos = _read_fixed(_I8, buf, pos, f"{f.name} null marker")
            if marker < 0:
                return None, pos
        return s.decode(buf, pos, version)

    return read


def _reader(f: Field, version: int, flex: bool, tagged: bool = False) -> _Reader:
    """The decoder of ``f`` at ``version``, with the type dispatch done up front."""
    t = f.type
    struct_ = f.struct
    if struct_ is not None and not f.is_array:
        return _plain_struct_reader(f, struct_, version, tagged)
    if not t.startswith("[]"):
        return _simple_reader(f, t, version, flex)
    nullable = f.nullable(version)
    item_reader: _Reader = (
        (lambda buf, pos: struct_.decode(buf, pos, version)) if struct_ is not None
        else _simple_reader(f, t[2:], version, flex))

    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        n, pos = _read_length(buf, pos, flex, True, f.name)
        if n < 0:
            if not nullable:
                raise SchemaError(f"{f.name} is null but not nullable")
            return None, pos
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


def _encode_value(f: Field, value: Any, version: int, flex: bool, out: bytearray, tagged: bool = False) -> None:
    t = f.type
    if f.struct is not None and not f.is_array:
        if f.nullable(version) and tagged:
            # Kafka's generated code marks a tagged nullable struct with an unsigned varint:
            # 0 for null, 1 for present (an untagged one with an int8, -1 or 1).
            write_uvarint(out, 0 if value is None else 1)
            if value is None:
                return
        elif f.nullable(version):
            if value is None:
                out += _I8.pack(-1)
                return
            out += _I8.pack(1)
        elif value is None:
            raise ValueError(f"{f.name} is not nullable in version {version}")
        f.struct.encode(value, version, out)
        return
    if t.startswith("[]"):
        if value is None:
            if not f.nullable(version):
                raise ValueError(f"{f.name} is not nullable in version {version}")
            _write_length(out, -1, flex, True)
            return
        _write_length(out, len(value), flex, True)
        inner = t[2:]
        for item in value:
            if f.struct is not None:
                f.struct.encode(item, version, out)
            else:
                _encode_simple(inner, item, f, version, flex, out)
        return
    _encode_simple(t, value, f, version, flex, out)


def _encode_simple(t: str, value: Any, f: Field, version: int, flex: bool, out: bytearray) -> None:
    codec = _FIXED.get(t)
    if codec is not None:
        out += codec.pack(value)
    elif t == "bool":
        out.append(1 if value else 0)
    elif t == "uuid":
        out += (value or ZERO_UUID).bytes
    elif t in ("string", "bytes", "records"):
        wide = t != "string"
        if value is None:
            if not f.nullable(version):
                raise ValueError(f"{f.name} is not nullable in version {version}")
            _write_length(out, -1, flex, wide)
            return
        data = value.encode("utf-8") if t == "string" else bytes(value)
        _write_length(out, len(data), flex, wide)
        out += data
    else:
        raise ValueError(f"unsupported field type {t}")


def _decode_simple(t: str, f: Field, buf: bytes, pos: int, version: int, flex: bool) -> tuple[Any, int]:
    codec = _FIXED.get(t)
    if codec is not None:
        return _read_fixed(codec, buf, pos, f"{f.name}: {t}")
    if t == "bool":
        if pos >= len(buf):
            raise SchemaError(f"{f.name}: truncated bool")
        return buf[pos] != 0, pos + 1
    if t == "uuid":
        return _uuid_reader(f)(buf, pos)
    if t in ("string", "bytes", "records"):
        n, pos = _read_length(buf, pos, flex, t != "string", f.name)
        if n < 0:
            if not f.nullable(version):
                raise SchemaError(f"{f.name} is null but not nullable")
            return None, pos
        end = pos + n
        if end > len(buf):
            raise SchemaError(f"{f.name}: truncated {t}")
        raw = bytes(buf[pos:end])
        if t != "string":
            return raw, end
        try:
            return raw.decode("utf-8"), end
        except UnicodeDecodeError as e:
            raise SchemaError(f"{f.name}: invalid UTF-8") from e
    raise SchemaError(f"unsupported field type {t}")


# --------------------------------------------------------------------------------------------

NO_API_KEY = -1


@dataclass(frozen=True)
class MessageSchema:
    """A top-level schema file: api key (``NO_API_KEY`` for the control records, which have
    none), valid versions and the root struct."""

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

    def decode_all(self, data: bytes | bytearray | memoryview, version: int) -> dict[str, Any]:
        """Decode ``data`` as exactly one message: SchemaError on trailing bytes."""
        buf = bytes(data)
        values, pos = self.struct.decode(buf, 0, version)
        if pos != len(buf):
            raise SchemaError(f"{len(buf) - pos} trailing byte(s) after {self.name}")
        return values


def schema_from_json(obj: Mapping[str, Any]) -> MessageSchema:
    """A MessageSchema from a parsed JSON schema (Kafka's message-schema format)."""
    name = obj["name"]
    valid = _versions(obj["validVersions"])
    if valid is None:
        raise ValueError(f"{name}: no valid versions")
    common = {s["name"]: s["fields"] for s in obj.get("commonStructs", ())}
    struct_ = Struct.from_json(obj.get("fields", []), _versions(obj.get("flexibleVersions")), common)
    api_key = obj.get("apiKey")
    return MessageSchema(name, NO_API_KEY if api_key is None else int(api_key), valid, struct_)


def load_schema(name: str, package: str) -> MessageSchema:
    """Read ``<package>/<name>.json`` (a package of ``kafkapy.protocol.schemas``, see
    ``kafkapy.protocol.schemas.package``)."""
    return schema_from_json(read_json(name, package))


__all__ = ["Field", "MessageSchema", "NO_API_KEY", "SchemaError", "Struct", "load_schema", "read_uvarint",
           "schema_from_json", "snake_name", "write_uvarint"]
