"""Responses to bytes: the response header, the size prefix, and file regions spliced in.

* :func:`encode_response` turns a response message object into one complete frame.
* :func:`encode_response_parts` does the same for a body whose ``records`` fields may hold
  :class:`~kafkapy.protocol.events.FileRegion` objects, returning bytes and regions in order.
* :func:`frame_parts` frames a body that is already encoded (the hand-packed Produce and Fetch
  encoders use it).

Encoding failures are our own bug, never the peer's: they raise :class:`LocalProtocolError`.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from typing import Any, Final

from kafkapy.protocol.apis import ApiKey, ApiMessage, response_class
from kafkapy.protocol.errors import LocalProtocolError
from kafkapy.protocol.events import FileRegion, Part, Request
from kafkapy.protocol.wire import I32, uvarint

__all__ = ["encode_response", "encode_response_parts", "frame_parts", "frame_size"]


def frame_size(parts: list[Part]) -> int:
    """The total length of ``parts`` (file regions count their ``count``)."""
    return sum(p.count if isinstance(p, FileRegion) else len(p) for p in parts)


def _response_header(request: Request, body_len: int) -> bytes:
    # Response header v1 (with an empty tagged-field section) goes with flexible versions, v0
    # otherwise; ApiVersions always uses v0 so that a client that doesn't know our versions yet
    # can read the answer.
    cls = response_class(request.api_key)
    version = request.response_version
    if request.api_key != ApiKey.ApiVersions and cls is not None and cls.flexible_version_q(version):
        return struct.pack(">iib", body_len + 5, request.correlation_id, 0)
    return struct.pack(">ii", body_len + 4, request.correlation_id)


def _check_body(request: Request, body: Any) -> type[ApiMessage]:
    cls = response_class(request.api_key)
    if cls is None or not isinstance(body, cls):
        raise LocalProtocolError(
            f"response to {request.api_key.message_name} must be a {cls.__name__ if cls else '?'}, "
            f"not {type(body).__name__}")
    return cls


def _encode_body(body: Any, version: int) -> bytes:
    try:
        return body.encode(version=version)  # type: ignore[no-any-return]
    except LocalProtocolError:
        raise
    except Exception as exc:
        raise LocalProtocolError(
            f"cannot encode {type(body).__name__} v{version}: {type(exc).__name__}: {exc}") from exc


def encode_response(request: Request, body: Any) -> bytes:
    """The complete frame (size prefix, response header, body) answering ``request``.

    ``body`` must be an instance of the request's response class; it is encoded at
    ``request.response_version``. Encoding failures raise :class:`LocalProtocolError`.
    """
    _check_body(request, body)
    payload = _encode_body(body, request.response_version)
    return _response_header(request, len(payload)) + payload


def frame_parts(request: Request, body_parts: list[Part]) -> list[Part]:
    """Frame an already encoded response body: prepend the size prefix and response header.

    ``body_parts`` is the body at ``request.response_version`` as bytes and file regions, in order.
    """
    header = _response_header(request, frame_size(body_parts))
    if body_parts and not isinstance(body_parts[0], FileRegion):
        return [header + bytes(body_parts[0]), *body_parts[1:]]
    return [header, *body_parts]


# ---------------------------------------------------------------------------------------------
# File regions inside a message object
# ---------------------------------------------------------------------------------------------

# Each region found in a body is swapped, for the length of one encode, for a marker of this
# nonce and the region's index: the generic encoder then writes the marker (and its length) where
# the records go, and the frame is cut at the markers afterwards.
_MARKER_MAGIC: Final = os.urandom(12)
_MARKER_SIZE: Final = 16

# Where ``records`` fields sit in a response schema, by (api key, version): a tree of
# (attribute, kind, subtree) with kind "array", "struct" or "records"; empty when there are none.
_RecordsTree = tuple[tuple[str, str, Any], ...]
_RECORDS_TREES: dict[tuple[int, int], _RecordsTree] = {}


def _records_tree(node: Any, version: int) -> _RecordsTree:
    out: list[tuple[str, str, Any]] = []
    for f in node.fields.values():
        if not f.for_version_q(version):
            continue
        if f.is_struct_array():
            sub = _records_tree(f.array_of, version)
            if sub:
                out.append((f.name, "array", sub))
        elif f.is_struct():
            sub = _records_tree(f, version)
            if sub:
                out.append((f.name, "struct", sub))
        elif f.type_str == "records":
            out.append((f.name, "records", None))
    return tuple(out)


def _records_tree_of(cls: Any, version: int) -> _RecordsTree:
    key = (cls.API_KEY, version)
    tree = _RECORDS_TREES.get(key)
    if tree is None:
        tree = _RECORDS_TREES[key] = _records_tree(cls, version)
    return tree


def _swap_regions(obj: Any, tree: _RecordsTree, regions: list[FileRegion],
                  undo: list[tuple[Any, str, FileRegion]]) -> None:
    """Replace every FileRegion under ``obj`` by a marker, remembering how to put it back."""
    for name, kind, sub in tree:
        value = getattr(obj, name, None)
        if value is None:
            continue
        if kind == "array":
            for item in value:
                _swap_regions(item, sub, regions, undo)
        elif kind == "struct":
            _swap_regions(value, sub, regions, undo)
        elif isinstance(value, FileRegion):
            undo.append((obj, name, value))
            setattr(obj, name, _MARKER_MAGIC + struct.pack(">I", len(regions)))
            regions.append(value)


def encode_response_parts(request: Request, body: Any) -> list[Part]:
    """Like :func:`encode_response`, but ``records`` fields may hold :class:`FileRegion` objects.

    Returns the frame as a list of byte strings and file regions, in order, ready for
    ``kafkapy.net`` to write (regions go out with ``os.sendfile``). Without regions the list has
    one element. ``body`` is left as it was handed in.
    """
    cls = _check_body(request, body)
    version = request.response_version
    tree = _records_tree_of(cls, version)
    regions: list[FileRegion] = []
    undo: list[tuple[Any, str, FileRegion]] = []
    try:
        if tree:
            _swap_regions(body, tree, regions, undo)
        payload = _encode_body(body, version)
    finally:
        for obj, name, region in undo:
            setattr(obj, name, region)
    if not regions:
        return [_response_header(request, len(payload)) + payload]
    return _splice(request, payload, regions, bool(cls.flexible_version_q(version)))


def _splice(request: Request, payload: bytes, regions: list[FileRegion], compact: bool) -> list[Part]:
    parts: list[Part] = []
    view = memoryview(payload)
    start = 0
    for marker_at, region in _find_markers(payload, regions):
        # The encoder wrote the marker's length (16) in front of it; rewrite it as the region's.
        if compact:
            len_start = marker_at - 1
            if payload[len_start] != _MARKER_SIZE + 1:
                raise LocalProtocolError("file region marker without its compact length")
            length = uvarint(region.count + 1)
        else:
            len_start = marker_at - 4
            if payload[len_start:marker_at] != I32.pack(_MARKER_SIZE):
                raise LocalProtocolError("file region marker without its length")
            length = I32.pack(region.count)
        parts.append(bytes(view[start:len_start]) + length)
        if region.count:
            parts.append(region)
        start = marker_at + _MARKER_SIZE
    parts.append(bytes(view[start:]))
    size = frame_size(parts)
    parts[0] = _response_header(request, size) + parts[0]  # type: ignore[operator]
    return parts


def _find_markers(payload: bytes, regions: list[FileRegion]) -> Iterator[tuple[int, FileRegion]]:
    at = 0
    for expected in range(len(regions)):
        at = payload.find(_MARKER_MAGIC, at)
        if at < 0:
            raise LocalProtocolError("file region marker missing from the encoded response")
        (index,) = struct.unpack_from(">I", payload, at + 12)
        if index != expected:
            raise LocalProtocolError("file region markers out of order")
        yield at, regions[index]
        at += _MARKER_SIZE
