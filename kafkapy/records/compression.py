"""Batch compression codecs (attribute bits 0-2), delegating to kafka-python's ``kafka.codec``.

Snappy is written in xerial framing, as the Java client's ``SnappyOutputStream`` writes it; reading
accepts both xerial-framed and raw snappy, since some clients (librdkafka, older Go clients) send
raw blocks. LZ4 is the LZ4 frame format with independent blocks (KIP-57).
"""

from __future__ import annotations

from typing import Protocol, cast

from kafka import codec as _kafka_codec

from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.records import format as fmt

Buffer = bytes | bytearray | memoryview


class _Codecs(Protocol):
    """The part of kafka-python's untyped ``kafka.codec`` we call, with its types."""

    def gzip_encode(self, payload: bytes, compresslevel: int | None = None) -> bytes: ...
    def gzip_decode(self, payload: bytes) -> bytes: ...
    def snappy_encode(self, payload: bytes, xerial_compatible: bool = True) -> bytes: ...
    def snappy_decode(self, payload: bytes) -> bytes: ...
    def lz4_encode(self, payload: bytes) -> bytes: ...
    def lz4_decode(self, payload: bytes) -> bytes: ...
    def zstd_encode(self, payload: bytes) -> bytes: ...
    def zstd_decode(self, payload: bytes) -> bytes: ...


_codec = cast(_Codecs, _kafka_codec)


def compress(codec: int, data: Buffer, *, gzip_level: int | None = None) -> bytes:
    """Compress ``data`` with Kafka codec id ``codec`` (0 returns the bytes unchanged).

    ``gzip_level`` is a deflate level (compression.gzip.level; None or -1 is zlib's default).
    """
    raw = bytes(data)
    if codec == fmt.NO_COMPRESSION:
        return raw
    if codec == fmt.GZIP:
        if gzip_level is None or gzip_level < 0:
            return _codec.gzip_encode(raw)
        return _codec.gzip_encode(raw, compresslevel=gzip_level)
    if codec == fmt.SNAPPY:
        return _codec.snappy_encode(raw, xerial_compatible=True)
    if codec == fmt.LZ4:
        return _codec.lz4_encode(raw)
    if codec == fmt.ZSTD:
        return _codec.zstd_encode(raw)
    raise ValueError(f"unknown compression codec {codec}")


def decompress(codec: int, data: Buffer) -> bytes:
    """Decompress a batch's records section.

    Raises ``KafkaError(UNSUPPORTED_COMPRESSION_TYPE)`` for an unknown codec id and
    ``KafkaError(CORRUPT_MESSAGE)`` when the payload does not decode.
    """
    if codec == fmt.NO_COMPRESSION:
        return bytes(data)
    raw = bytes(data)
    try:
        if codec == fmt.GZIP:
            return _codec.gzip_decode(raw)
        if codec == fmt.SNAPPY:
            return _codec.snappy_decode(raw)
        if codec == fmt.LZ4:
            return _codec.lz4_decode(raw)
        if codec == fmt.ZSTD:
            return _codec.zstd_decode(raw)
    except Exception as exc:  # codecs raise assorted types (OSError, RuntimeError, ZstdError...)
        raise KafkaError(
            ErrorCode.CORRUPT_MESSAGE,
            f"failed to decompress {fmt.CODEC_NAMES[codec]} batch: {exc}",
        ) from exc
    raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"unknown compression type id {codec}")
