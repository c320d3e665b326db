"""Schema-true, bounded checking of a request body before anything decodes it.

kafka-python's generated decoders trust the wire: an unsigned varint may run on for megabytes
(each byte growing a Python int, so one frame costs time quadratic in its length), an array count
is believed before the bytes behind it exist, and a null length decodes to None whatever the
schema says, so handlers meet None where Kafka's own parser would have refused the request. This
module walks a request body once, against the Kafka JSON schema of its (api key, version), and
refuses it with :class:`InvalidRequestBody` when:

* a varint is longer than 5 bytes (int32/uint32, compact lengths, tags) or 10 bytes (varlong);
* an array count or a string/bytes length exceeds the bytes left in the frame (a count of N
  elements each at least k bytes long needs N*k bytes), checked before anything is allocated;
* a null (length -1, compact length 0, nullable-struct marker -1) appears in a field that is not
  nullable at that version (elements of arrays are never nullable, as in Kafka);
* a compact string is longer than 32767 bytes (Kafka's limit for every string);
* a tagged-field section lies: tags not strictly ascending, a size running past the frame, or a
  known tagged field whose value doesn't fill exactly the size announced;
* the body ends before its last field.

Bytes after the body are left alone, as Kafka does: its parser reads the message off the buffer and
never looks at what remains. Once a body passes, the generated decoder can no longer be made to
loop or allocate beyond the frame's size.

Each (api key, version) is compiled once into a plan (nested tuples of ops, runs of fixed-size
fields merged into one skip) and cached. Pure Python, no I/O.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from kafkapy.protocol.apis import request_class
from kafkapy.protocol.kafka_python_adapter import schema_tree, tagged_fields_of

__all__ = [
    "InvalidRequestBody",
    "Visit",
    "check_request_body",
    "plan_for",
    "read_tagged_fields",
    "read_uvarint",
    "read_uvarlong",
]


class InvalidRequestBody(ValueError):
    """The body breaks its schema; ``str()`` says how and where (for the one log line)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        #: The enclosing fields, outermost first (``topic_data[1]``), filled in as it propagates.
        self.where: list[str] = []

    def __str__(self) -> str:
        return f"{self.message} (in {'.'.join(self.where)})" if self.where else self.message


#: ``visit(path, kind, start, end, compact, nullable)`` is told of every untagged variable-length
#: field a walk passes (and of each string in a string array, path ending in "[]"): ``kind`` is
#: "string", "bytes", "array" or "struct", ``start:end`` its bytes on the wire, length prefix
#: included. Tests use it to find where a field sits in an encoded request.
Visit = Callable[[tuple[str, ...], str, int, int, bool, bool], None]

_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")

MAX_COMPACT_STRING: Final = 0x7FFF

_FIXED_SIZES: Final = {"int8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8,
                       "float64": 8, "bool": 1, "uuid": 16, "bitfield": 4}


def read_uvarint(data: Any, pos: int, end: int) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes at ``pos`` (before ``end``): (value, next pos).

    Like Kafka's ``ByteUtils.readUnsignedVarint``: a 5th byte with its high bit set is refused.
    """
    return _read_varint(data, pos, end, 5, "varint")


def read_uvarlong(data: Any, pos: int, end: int) -> tuple[int, int]:
    """An unsigned varlong of at most 10 bytes at ``pos``: (value, next pos)."""
    return _read_varint(data, pos, end, 10, "varlong")


def _read_varint(data: Any, pos: int, end: int, max_bytes: int, what: str) -> tuple[int, int]:
    value = 0
    for shift in range(0, 7 * max_bytes, 7):
        if pos >= end:
            raise InvalidRequestBody(f"{what} runs past the end of the frame")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
    raise InvalidRequestBody(
        f"{what} is too long: the most significant bit in byte {max_bytes} is set")


def read_tagged_fields(data: Any, pos: int, end: int, owner: str
                       ) -> tuple[list[tuple[int, int, int]], int]:
    """A tagged-field section at ``pos``: ([(tag, value start, size)], next pos).

    Refuses a count that can't fit, tags out of strictly ascending order (KIP-482 writes them in
    order) and sizes running past ``end``; values are not looked at.
    """
    count, pos = read_uvarint(data, pos, end)
    if count * 2 > end - pos:  # each tagged field takes at least a tag and a size byte
        raise InvalidRequestBody(
            f"{owner} claims {count} tagged fields but only {end - pos} bytes remain")
    fields = []
    last = -1
    for _ in range(count):
        tag, pos = read_uvarint(data, pos, end)
        size, pos = read_uvarint(data, pos, end)
        if tag <= last:
            raise InvalidRequestBody(f"{owner} has tagged field {tag} after {last}")
        last = tag
        if size > end - pos:
            raise InvalidRequestBody(
                f"tagged field {tag} of {owner} has size {size} but only {end - pos} bytes remain")
        fields.append((tag, pos, size))
        pos += size
    return fields, pos


# ---------------------------------------------------------------------------------------------
# Plans
# ---------------------------------------------------------------------------------------------

# Op kinds (first element of each op tuple).
_SKIP: Final = 0          # (_SKIP, nbytes)
_STRING: Final = 1        # (_STRING, name, nullable, compact)
_BYTES: Final = 2         # (_BYTES, name, nullable, compact)
_ARRAY_FIXED: Final = 3   # (_ARRAY_FIXED, name, nullable, compact, element size)
_ARRAY_STRING: Final = 4  # (_ARRAY_STRING, name, nullable, compact)
_ARRAY_STRUCT: Final = 5  # (_ARRAY_STRUCT, name, nullable, compact, _Struct)
_STRUCT: Final = 6        # (_STRUCT, name, nullable, _Struct)


@dataclass(frozen=True, slots=True)
class _Struct:
    """One struct at one version: its untagged ops in wire order, and its tagged fields."""

    name: str
    ops: tuple[tuple[Any, ...], ...]
    #: None before the flexible versions; else the known tagged fields' ops by tag.
    tagged: dict[int, tuple[Any, ...]] | None
    #: The fewest bytes one instance can take on the wire (for count * size checks).
    min_size: int


def _compile_struct(node: Any, version: int, flexible: bool) -> _Struct:
    ops: list[tuple[Any, ...]] = []
    min_size = 0
    for f in node.untagged_fields(version):
        op, size = _compile_field(f, version, flexible)
        min_size += size
        if op[0] == _SKIP and ops and ops[-1][0] == _SKIP:
            ops[-1] = (_SKIP, ops[-1][1] + op[1])
        else:
            ops.append(op)
    tagged: dict[int, tuple[Any, ...]] | None = None
    if flexible:
        min_size += 1
        tagged = {}
        for f in tagged_fields_of(node, version):
            # Tagged values are always in the compact encoding.
            tagged[f.tag] = _compile_field(f, version, True)[0]
    return _Struct(node.name, tuple(ops), tagged, min_size)


def _compile_field(f: Any, version: int, compact: bool) -> tuple[tuple[Any, ...], int]:
    """(op, minimum wire size) of one field."""
    nullable = bool(f.nullable_for_version_q(version))
    length_size = 1 if compact else 4
    if f.is_struct_array():
        inner = _compile_struct(f.array_of, version, compact)
        return (_ARRAY_STRUCT, f.name, nullable, compact, inner), length_size
    if f.is_array():
        elem = f.type_str[2:]
        if elem == "string":
            return (_ARRAY_STRING, f.name, nullable, compact), length_size
        if elem in _FIXED_SIZES:
            return (_ARRAY_FIXED, f.name, nullable, compact, _FIXED_SIZES[elem]), length_size
        raise ValueError(f"no plan for array field {f.name} of type {f.type_str}")
    if f.is_struct():
        inner = _compile_struct(f, version, compact)
        return (_STRUCT, f.name, nullable, inner), (1 if nullable else inner.min_size)
    t = f.type_str
    if t in _FIXED_SIZES:
        return (_SKIP, _FIXED_SIZES[t]), _FIXED_SIZES[t]
    if t == "string":
        return (_STRING, f.name, nullable, compact), (1 if compact else 2)
    if t in ("bytes", "records"):
        return (_BYTES, f.name, nullable, compact), length_size
    raise ValueError(f"no plan for field {f.name} of type {t}")


_PLANS: dict[tuple[int, int], _Struct] = {}


def plan_for(api_key: int, version: int) -> _Struct:
    """The compiled plan of ``api_key``'s request at ``version`` (cached)."""
    plan = _PLANS.get((api_key, version))
    if plan is None:
        cls = request_class(api_key)
        if cls is None:
            raise ValueError(f"no request schema for api key {api_key}")
        plan = _compile_struct(schema_tree(cls), version, bool(cls.flexible_version_q(version)))
        _PLANS[(api_key, version)] = plan
    return plan


# ---------------------------------------------------------------------------------------------
# The walk
# ---------------------------------------------------------------------------------------------


def check_request_body(api_key: int, version: int, data: Any, pos: int, end: int | None = None,
                       visit: Visit | None = None) -> int:
    """Walk the body of an ``api_key`` v``version`` request in ``data[pos:end]``.

    Returns where the body ends (bytes after it are allowed, as in Kafka). Raises
    :class:`InvalidRequestBody` when the body breaks its schema. Without ``visit`` the walk runs
    as a function generated from the plan (several times faster than interpreting it); with it,
    the plan is interpreted so that every field can be reported.
    """
    if end is None:
        end = len(data)
    try:
        if visit is None:
            checker = _CHECKERS.get((api_key, version))
            if checker is None:
                checker = _CHECKERS[(api_key, version)] = _generate(plan_for(api_key, version))
            return checker(data, pos, end)
        return _walk(plan_for(api_key, version), data, pos, end, visit, ())
    except (IndexError, struct.error):
        raise InvalidRequestBody("body ends before its last field") from None


def _too_long(name: str, n: int, left: int) -> InvalidRequestBody:
    return InvalidRequestBody(f"{name} has length {n} but only {left} bytes remain")


def _too_many(name: str, n: int, size: int, left: int) -> InvalidRequestBody:
    return InvalidRequestBody(
        f"array {name} of {n} elements needs at least {n * size} bytes but only {left} remain")


def _null(name: str) -> InvalidRequestBody:
    return InvalidRequestBody(f"non-nullable field {name} was serialized as null")


def _length(data: Any, pos: int, end: int, compact: bool, wide: bool) -> tuple[int, int]:
    """A string/bytes/array length prefix: (length, -1 for null, next pos)."""
    if compact:
        b = data[pos]
        if b < 0x80:
            return b - 1, pos + 1
        value, pos = read_uvarint(data, pos, end)
        return value - 1, pos
    if wide:
        return _I32.unpack_from(data, pos)[0], pos + 4
    return _I16.unpack_from(data, pos)[0], pos + 2


def _walk(plan: _Struct, data: Any, pos: int, end: int, visit: Visit | None,
          path: tuple[str, ...]) -> int:
    for op in plan.ops:
        if op[0] == _SKIP:
            pos += op[1]
            if pos > end:
                raise InvalidRequestBody(f"{plan.name} ends before its last field")
        else:
            pos = _field(op, data, pos, end, visit, path)
    if plan.tagged is not None:
        if pos >= end:
            raise InvalidRequestBody(f"{plan.name} ends before its tagged fields")
        if data[pos] == 0:
            pos += 1
        else:
            pos = _tagged(plan, data, pos, end, path)
    return pos


def _field(op: tuple[Any, ...], data: Any, pos: int, end: int, visit: Visit | None,
           path: tuple[str, ...]) -> int:
    kind = op[0]
    start = pos
    if kind == _STRUCT:
        _, name, nullable, inner = op
        if nullable:
            # KIP-893 nullable struct: a 1-byte marker, -1 null, otherwise present. The decoder
            # only reads 0xff as null, so other negative markers are refused (no client sends them).
            marker = data[pos]
            pos += 1
            if marker == 0xFF:
                if visit is not None:
                    visit((*path, name), "struct", start, pos, False, True)
                return pos
            if marker >= 0x80:
                raise InvalidRequestBody(f"nullable struct {name} has marker {marker - 256}")
        try:
            pos = _walk(inner, data, pos, end, visit, (*path, name) if visit is not None else path)
        except InvalidRequestBody as exc:
            exc.where.insert(0, name)
            raise
        if visit is not None:
            visit((*path, name), "struct", start, pos, False, nullable)
        return pos
    name, nullable, compact = op[1], op[2], op[3]
    n, pos = _length(data, pos, end, compact, kind != _STRING)
    if n < 0:
        # Kafka reads any negative length as null; arrays below -1 would decode as empty lists
        # here, so those are refused outright.
        if not nullable:
            raise _null(name)
        if n < -1 and kind >= _ARRAY_FIXED:
            raise InvalidRequestBody(f"array {name} has count {n}")
    elif kind == _STRING or kind == _BYTES:
        if n > end - pos:
            raise _too_long(name, n, end - pos)
        if kind == _STRING and compact and n > MAX_COMPACT_STRING:
            raise InvalidRequestBody(f"string field {name} had invalid length {n}")
        pos += n
    elif kind == _ARRAY_FIXED:
        if n * op[4] > end - pos:
            raise _too_many(name, n, op[4], end - pos)
        pos += n * op[4]
    elif kind == _ARRAY_STRING:
        smallest = 1 if compact else 2
        if n * smallest > end - pos:
            raise _too_many(name, n, smallest, end - pos)
        for _ in range(n):
            at = pos
            m, pos = _length(data, pos, end, compact, False)
            if m < 0:
                raise _null(name + "[]")
            if m > end - pos or (compact and m > MAX_COMPACT_STRING):
                raise InvalidRequestBody(f"an element of {name} has invalid length {m}")
            pos += m
            if visit is not None:
                visit((*path, name + "[]"), "string", at, pos, compact, False)
    else:  # _ARRAY_STRUCT
        inner = op[4]
        if n * inner.min_size > end - pos:
            raise _too_many(name, n, inner.min_size, end - pos)
        sub = (*path, name) if visit is not None else path
        for i in range(n):
            try:
                pos = _walk(inner, data, pos, end, visit, sub)
            except InvalidRequestBody as exc:
                exc.where.insert(0, f"{name}[{i}]")
                raise
    if visit is not None:
        visit((*path, name), "array" if kind >= _ARRAY_FIXED else ("string" if kind == _STRING
                                                                    else "bytes"),
              start, pos, compact, nullable)
    return pos


def _tagged(plan: _Struct, data: Any, pos: int, end: int, path: tuple[str, ...]) -> int:
    fields, pos = read_tagged_fields(data, pos, end, plan.name)
    known = plan.tagged or {}
    for tag, start, size in fields:
        op = known.get(tag)
        if op is not None:
            # Bounded by its own size, so a value can't read into its neighbours; tagged values
            # are not reported to visit (their size prefix would move with them).
            stop = _walk(_Struct(plan.name, (op,), None, 0), data, start, start + size, None, path)
            if stop != start + size:
                raise InvalidRequestBody(
                    f"tagged field {tag} of {plan.name} has size {size} but its value takes "
                    f"{stop - start} bytes")
    return pos


# ---------------------------------------------------------------------------------------------
# The same walk as generated code
# ---------------------------------------------------------------------------------------------

# The interpreter above costs about as much as the decode it guards; straight-line code with the
# plan's loops inlined costs a fraction of it. Tagged-field sections that aren't empty (rare) go
# back to the interpreter. Both must refuse exactly the same bodies: the unit tests feed every
# probe found by the interpreted walk through the generated one.

_CHECKERS: dict[tuple[int, int], Callable[[Any, int, int], int]] = {}


class _Source:
    """Lines of the generated checker, its globals, and fresh variable names."""

    def __init__(self) -> None:
        self.lines = ["def _check(data, pos, end):"]
        self.globs: dict[str, Any] = {
            "_I16": _I16.unpack_from, "_I32": _I32.unpack_from, "_uv": read_uvarint,
            "_E": InvalidRequestBody, "_null": _null, "_too_long": _too_long,
            "_too_many": _too_many, "_tagged": _tagged,
        }
        self._n = 0

    def var(self, prefix: str) -> str:
        self._n += 1
        return f"_{prefix}{self._n}"

    def put(self, depth: int, line: str) -> None:
        self.lines.append("    " * depth + line)


def _generate(plan: _Struct) -> Callable[[Any, int, int], int]:
    src = _Source()
    _gen_struct(src, plan, 1)
    src.put(1, "if pos > end:")
    src.put(2, f"raise _E({plan.name + ' ends before its last field'!r})")
    src.put(1, "return pos")
    exec(compile("\n".join(src.lines), f"<request check {plan.name}>", "exec"), src.globs)
    return src.globs["_check"]  # type: ignore[no-any-return]


def _gen_struct(src: _Source, plan: _Struct, d: int) -> None:
    for op in plan.ops:
        if op[0] == _SKIP:
            src.put(d, f"pos += {op[1]}")
            src.put(d, "if pos > end:")
            src.put(d + 1, f"raise _E({plan.name + ' ends before its last field'!r})")
        else:
            _gen_field(src, op, d)
    if plan.tagged is not None:
        p = src.var("plan")
        src.globs[p] = plan
        src.put(d, "if pos >= end:")
        src.put(d + 1, f"raise _E({plan.name + ' ends before its tagged fields'!r})")
        src.put(d, "if data[pos] == 0:")
        src.put(d + 1, "pos += 1")
        src.put(d, "else:")
        src.put(d + 1, f"pos = _tagged({p}, data, pos, end, ())")


def _gen_length(src: _Source, v: str, d: int, compact: bool, wide: bool) -> None:
    if compact:
        # One- and two-byte varints inline (lengths below 16 KiB); longer ones through _uv.
        src.put(d, f"{v} = data[pos]")
        src.put(d, f"if {v} < 0x80:")
        src.put(d + 1, "pos += 1")
        src.put(d, "elif data[pos + 1] < 0x80:")
        src.put(d + 1, f"{v} = ({v} & 0x7F) | (data[pos + 1] << 7)")
        src.put(d + 1, "pos += 2")
        src.put(d, "else:")
        src.put(d + 1, f"{v}, pos = _uv(data, pos, end)")
        src.put(d, f"{v} -= 1")
    else:
        src.put(d, f"{v} = {'_I32' if wide else '_I16'}(data, pos)[0]")
        src.put(d, f"pos += {4 if wide else 2}")


def _gen_where(src: _Source, d: int, label: str) -> None:
    src.put(d, "except _E as exc:")
    src.put(d + 1, f"exc.where.insert(0, {label})")
    src.put(d + 1, "raise")


def _gen_field(src: _Source, op: tuple[Any, ...], d: int) -> None:
    kind = op[0]
    if kind == _STRUCT:
        _, name, nullable, inner = op
        if nullable:
            m = src.var("m")
            src.put(d, f"{m} = data[pos]")
            src.put(d, "pos += 1")
            src.put(d, f"if {m} >= 0x80 and {m} != 0xFF:")
            src.put(d + 1, f"raise _E('nullable struct {name} has marker ' + str({m} - 256))")
            src.put(d, f"if {m} != 0xFF:")
            d += 1
        src.put(d, "try:")
        _gen_struct(src, inner, d + 1)
        _gen_where(src, d, repr(name))
        return
    name, nullable, compact = op[1], op[2], op[3]
    n = src.var("n")
    _gen_length(src, n, d, compact, kind != _STRING)
    src.put(d, f"if {n} < 0:")
    if not nullable:
        src.put(d + 1, f"raise _null({name!r})")
    elif kind >= _ARRAY_FIXED:
        src.put(d + 1, f"if {n} < -1:")
        src.put(d + 2, f"raise _E('array {name} has count ' + str({n}))")
    else:
        src.put(d + 1, "pass")
    src.put(d, "else:")
    d += 1
    if kind == _STRING or kind == _BYTES:
        src.put(d, f"if {n} > end - pos:")
        src.put(d + 1, f"raise _too_long({name!r}, {n}, end - pos)")
        if kind == _STRING and compact:
            src.put(d, f"if {n} > {MAX_COMPACT_STRING}:")
            src.put(d + 1, f"raise _E('string field {name} had invalid length ' + str({n}))")
        src.put(d, f"pos += {n}")
    elif kind == _ARRAY_FIXED:
        src.put(d, f"if {n} * {op[4]} > end - pos:")
        src.put(d + 1, f"raise _too_many({name!r}, {n}, {op[4]}, end - pos)")
        src.put(d, f"pos += {n} * {op[4]}")
    elif kind == _ARRAY_STRING:
        smallest = 1 if compact else 2
        src.put(d, f"if {n} * {smallest} > end - pos:")
        src.put(d + 1, f"raise _too_many({name!r}, {n}, {smallest}, end - pos)")
        w = src.var("w")
        src.put(d, f"for _ in range({n}):")
        _gen_length(src, w, d + 1, compact, False)
        src.put(d + 1, f"if {w} < 0:")
        src.put(d + 2, f"raise _null({name + '[]'!r})")
        limit = f" or {w} > {MAX_COMPACT_STRING}" if compact else ""
        src.put(d + 1, f"if {w} > end - pos{limit}:")
        src.put(d + 2, f"raise _E('an element of {name} has invalid length ' + str({w}))")
        src.put(d + 1, f"pos += {w}")
    else:  # _ARRAY_STRUCT
        inner = op[4]
        src.put(d, f"if {n} * {inner.min_size} > end - pos:")
        src.put(d + 1, f"raise _too_many({name!r}, {n}, {inner.min_size}, end - pos)")
        i = src.var("i")
        src.put(d, f"for {i} in range({n}):")
        src.put(d + 1, "try:")
        _gen_struct(src, inner, d + 2)
        _gen_where(src, d + 1, f"'{name}[' + str({i}) + ']'")
