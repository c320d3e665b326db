"""Topic-level compression: rewrite validated batches in the codec ``compression.type`` names.

When a topic's (or the broker's) ``compression.type`` is a codec rather than ``producer``, Kafka's
leader stores every produced batch in that codec, recompressing batches that arrive in another.
A v2 batch's records section is the records themselves, compressed as a whole, so changing codec
only swaps that section and fixes three header fields (length, the codec bits of the attributes,
the CRC); the records are never parsed. Offsets, timestamps and producer fields stay as the
validator assigned them.

This costs a decompress and a compress per batch, paid only by topics configured for it, as in
Kafka; the hot path (``compression.type=producer``, the default) never comes here.
"""

from __future__ import annotations

import struct

from crc32c import crc32c

from kafkapy.records import compression
from kafkapy.records import format as fmt
from kafkapy.records._validate_common import AppendInfo, BatchInfo

# compression.type values that name a codec ("producer" keeps the producer's own).
TARGET_CODECS: dict[str, int] = {
    "uncompressed": fmt.NO_COMPRESSION,
    "gzip": fmt.GZIP,
    "snappy": fmt.SNAPPY,
    "lz4": fmt.LZ4,
    "zstd": fmt.ZSTD,
}

_I32 = struct.Struct(">i")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")


def target_codec(compression_type: str) -> int | None:
    """The codec id ``compression_type`` asks the log to store, or None for ``producer``."""
    return TARGET_CODECS.get(compression_type)


def needs_recompression(buf: bytes | bytearray | memoryview, info: AppendInfo, codec: int) -> bool:
    """Whether any batch of ``buf`` is stored in a codec other than ``codec``."""
    view = memoryview(buf)
    return any(view[b.position + fmt.ATTRIBUTES + 1] & fmt.COMPRESSION_MASK != codec
               for b in info.batches)


def recompress(buf: bytes | bytearray | memoryview, info: AppendInfo, codec: int, *,
               gzip_level: int = -1) -> tuple[bytearray, AppendInfo]:
    """Return ``buf`` with every batch in ``codec``, and ``info`` with positions/sizes updated.

    ``gzip_level`` is compression.gzip.level; -1 means the JDK's default deflate level (6), which
    is what Kafka writes. (The lz4 and zstd levels are not applied: the codec library takes
    none, so those use the library's defaults.) Batches already in ``codec`` are copied as they are.

    Raises ``KafkaError(CORRUPT_MESSAGE)`` when a batch's records section does not decompress.
    """
    view = memoryview(buf).cast("B")
    out = bytearray()
    batches: list[BatchInfo] = []
    for b in info.batches:
        start = len(out)
        src = view[b.position:b.position + b.size]
        attributes = _U16.unpack_from(src, fmt.ATTRIBUTES)[0]
        current = attributes & fmt.COMPRESSION_MASK
        if current == codec:
            out += src
        else:
            records = compression.decompress(current, src[fmt.HEADER_SIZE:])
            payload = compression.compress(codec, records,
                                           gzip_level=6 if gzip_level < 0 else gzip_level)
            out += src[:fmt.HEADER_SIZE]
            out += payload
            _I32.pack_into(out, start + fmt.BATCH_LENGTH,
                           fmt.HEADER_SIZE + len(payload) - fmt.LOG_OVERHEAD)
            _U16.pack_into(out, start + fmt.ATTRIBUTES,
                           (attributes & ~fmt.COMPRESSION_MASK) | codec)
            _U32.pack_into(out, start + fmt.CRC,
                           crc32c(memoryview(out)[start + fmt.CRC_START:]))
        batches.append(b._replace(position=start, size=len(out) - start))
    return out, info._replace(batches=batches)
