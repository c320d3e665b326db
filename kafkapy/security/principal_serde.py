"""A principal as bytes, the way Kafka's DefaultKafkaPrincipalBuilder serializes it for forwarding.

A broker forwarding a client's request to the controller puts the client's principal in the
Envelope (KIP-590) as a version-prefixed ``DefaultPrincipalData``: int16 version 0, then the
flexible v0 body (compact string Type, compact string Name, bool TokenAuthenticated, no tagged
fields). Bytes that do not parse are refused: a controller must never authorize a guess.
"""

from __future__ import annotations

import struct

from kafkapy.protocol.schema_codec import read_uvarint, write_uvarint
from kafkapy.security.principal import KafkaPrincipal

_VERSION = struct.Struct(">h")


class PrincipalSerdeError(ValueError):
    """Bytes that are not a serialized principal."""


def serialize_principal(principal: KafkaPrincipal) -> bytes:
    out = bytearray(_VERSION.pack(0))
    for text in (principal.principal_type, principal.name):
        raw = text.encode("utf-8")
        write_uvarint(out, len(raw) + 1)
        out += raw
    out.append(0)  # TokenAuthenticated: delegation tokens are not supported
    out.append(0)  # no tagged fields
    return bytes(out)


def deserialize_principal(data: bytes) -> KafkaPrincipal:
    buf = bytes(data)
    try:
        (version,) = _VERSION.unpack_from(buf, 0)
        if version != 0:
            raise PrincipalSerdeError(f"unsupported principal data version {version}")
        pos = _VERSION.size
        texts = []
        for _ in range(2):
            n, pos = read_uvarint(buf, pos)
            if n == 0 or pos + n - 1 > len(buf):
                raise PrincipalSerdeError("principal type or name is null or truncated")
            texts.append(buf[pos:pos + n - 1].decode("utf-8"))
            pos += n - 1
        if pos >= len(buf):
            raise PrincipalSerdeError("truncated principal data")
        pos += 1  # TokenAuthenticated
        tags, pos = read_uvarint(buf, pos)
        if tags != 0 or pos != len(buf):
            raise PrincipalSerdeError("unexpected bytes after the principal")
    except (struct.error, IndexError, UnicodeDecodeError, ValueError) as exc:
        if isinstance(exc, PrincipalSerdeError):
            raise
        raise PrincipalSerdeError(f"malformed principal data: {exc}") from None
    return KafkaPrincipal(texts[0], texts[1])


__all__ = ["PrincipalSerdeError", "deserialize_principal", "serialize_principal"]
