"""The one module that imports kafka-python and reaches into its internals.

kafka-python supplies the message classes, the schema-driven codec and the murmur2 hash. Where we
need more than its public surface (the generated request decoders, the schema tree and JSON behind
a message class, the metaclass hook that loads our own JSON schemas, which classes are its
versioned aliases), it is done here and nowhere else, so a kafka-python upgrade that moves those
internals breaks exactly this file. The rest of ``protocol/`` uses message classes through their
public methods (``encode``, ``decode``, ``flexible_version_q``, ``fields``) and these functions.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from types import MethodType
from typing import Any

from kafka.partitioner.default import murmur2
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.schemas import StructField
from kafka.protocol.schemas.fields.codecs import Bytes, UnsignedVarInt32

__all__ = ["ApiMessage", "compile_request_decoder", "detach_header", "has_field",
           "kafka_python_message_classes", "message_class_from_schema", "murmur2", "schema_json",
           "schema_tree", "tagged_fields_of"]

# kafka-python groups its message classes in these modules.
_MESSAGE_MODULES = (
    "kafka.protocol.metadata",
    "kafka.protocol.producer",
    "kafka.protocol.consumer",
    "kafka.protocol.admin",
    "kafka.protocol.sasl",
)


# ---------------------------------------------------------------------------------------------
# Message classes and their schemas
# ---------------------------------------------------------------------------------------------


def kafka_python_message_classes() -> Iterator[type[ApiMessage]]:
    """Every request and response class kafka-python ships (its per-version aliases left out)."""
    for module_name in _MESSAGE_MODULES:
        module = importlib.import_module(module_name)
        for attr in getattr(module, "__all__", ()):
            obj = getattr(module, attr)
            if (isinstance(obj, type) and issubclass(obj, ApiMessage) and obj is not ApiMessage
                    and getattr(obj, "_class_version", None) is None):
                yield obj


def message_class_from_schema(name: str, package: str, module: str) -> type[ApiMessage]:
    """A message class from ``<package>/<name>.json`` (Kafka's JSON message-schema format).

    kafka-python's metaclass reads the schema through its ``load_json`` hook, so the class gets
    the same codecs, version handling and nested struct classes as kafka-python's own.
    """
    meta = type(ApiMessage)
    return meta(name, (ApiMessage,), {"__module__": module},  # type: ignore[no-any-return]
                load_json=package)


def schema_json(cls: Any) -> dict[str, Any]:
    """The JSON schema (as a dict) a message class was made from."""
    return cls._json  # type: ignore[no-any-return]


def schema_tree(cls: Any) -> Any:
    """The root ``StructField`` of a message class: its fields, versions and codecs."""
    return cls._struct


def tagged_fields_of(node: Any, version: int) -> list[Any]:
    """The tagged fields of a schema struct at ``version``, in declaration order."""
    return list(node.tagged_fields(version)._fields)


def detach_header(body: Any) -> None:
    """Forget the header kafka-python attaches to a decoded message.

    kafka-python leaves ``_header`` unset on decoded bodies, which breaks re-encoding the object.
    """
    body._header = None


# ---------------------------------------------------------------------------------------------
# Request decoders generated from the schema, adjusted for the broker
# ---------------------------------------------------------------------------------------------


class _RecordsView:
    """A ``records`` codec that decodes to a writable slice of the frame, not a copy.

    Encoding is the ordinary bytes codec's; only the generated decode differs.
    """

    fmt = Bytes.fmt
    size = "variable"
    encode = Bytes.encode
    encode_into = Bytes.encode_into
    emit_encode_into = Bytes.emit_encode_into
    decode = Bytes.decode

    @classmethod
    def emit_decode_from(cls, ctx: Any, var_name: str, indent: str, compact: bool = False) -> None:
        ln = ctx.next_var("ln")
        if compact:
            UnsignedVarInt32.emit_decode_from(ctx, ln, indent)
            ctx.emit(indent, f"{ln} -= 1")
        else:
            ctx.emit(indent, f'{ln} = unpack_from(">i", data, pos)[0]')
            ctx.emit(indent, "pos += 4")
        ctx.emit(indent, f"if {ln} < 0:")
        ctx.emit(indent, f"    {var_name} = None")
        ctx.emit(indent, "else:")
        ctx.emit(indent, f"    {var_name} = data[pos:pos+{ln}]")
        ctx.emit(indent, f"    pos += {ln}")


class _FrameReader:
    """A file-like cursor over the frame for kafka-python's tagged-field decoder.

    Its generated code hands that decoder ``BytesIO(bytes(data[pos:]))``: a copy of the whole rest
    of the frame for every struct that carries tagged fields, which a frame of many small tagged
    structs turns into time quadratic in its size. This reads in place instead; ``tell()`` is what
    the generated code adds to its position.
    """

    __slots__ = ("_data", "_pos", "_start")

    def __init__(self, data: memoryview, pos: int) -> None:
        self._data = data
        self._start = pos
        self._pos = pos

    def read(self, n: int = -1) -> bytes:
        stop = len(self._data) if n is None or n < 0 else self._pos + n
        chunk = bytes(self._data[self._pos:stop])
        self._pos += len(chunk)
        return chunk

    def tell(self) -> int:
        return self._pos - self._start


def _emit_tagged_decode_in_place(node: Any, ctx: Any, var_name: str, indent: str,
                                 version: int) -> None:
    first = len(ctx.lines)
    StructField._emit_tagged_decode(node, ctx, var_name, indent, version)
    for i in range(first, len(ctx.lines)):
        ctx.lines[i] = ctx.lines[i].replace("_BytesIO(bytes(data[pos:]))", "_FrameReader(data, pos)")
    ctx.globs["_FrameReader"] = _FrameReader


def compile_request_decoder(cls: Any, version: int, flexible: bool, *,
                            zero_copy_records: bool = False) -> Callable[..., Any]:
    """``decode(data, pos) -> (body, end)`` for ``cls`` at ``version``, generated from its schema.

    The decoder reads tagged fields in place, and with ``zero_copy_records`` decodes ``records``
    fields to writable memoryviews into ``data``. Its structs build the very same message
    classes as kafka-python's own decoder, so callers can't tell the difference except that
    records are memoryviews.
    """
    tree = StructField(schema_json(cls))
    _graft(tree, schema_tree(cls), zero_copy_records)
    return tree.compiled_decode_from(  # type: ignore[no-any-return]
        version, compact=flexible, tagged=flexible, data_class=cls)


def _graft(new: Any, old: Any, zero_copy_records: bool) -> None:
    # A private copy of the schema tree, pointed at the original's data classes.
    new._emit_tagged_decode = MethodType(_emit_tagged_decode_in_place, new)
    for nf, of in zip(new._fields, old._fields):
        if nf.is_struct_array():
            nf.set_data_class(of.data_class)
            _graft(nf.array_of, of.array_of, zero_copy_records)
        elif nf.is_struct():
            nf.set_data_class(of.data_class)
            _graft(nf, of, zero_copy_records)
        elif nf.type_str == "records" and zero_copy_records:
            nf._type = _RecordsView


def has_field(cls: Any, name: str, version: int) -> bool:
    """Whether message class ``cls`` has the (snake_case) field ``name`` at ``version``."""
    f = schema_tree(cls).fields.get(name) if hasattr(cls, "_struct") else None
    return f is not None and bool(f.for_version_q(version))
