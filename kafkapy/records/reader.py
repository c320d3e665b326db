"""Reads record batches back into Python values: for tests, tools, internal topics and recovery.

Not for the hot path: it creates Python objects per record. Batches are assumed to be magic 2.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.records import format as fmt
from kafkapy.records.compression import decompress
from kafkapy.records.varint import VarintError, decode_varint, decode_varlong

Buffer = bytes | bytearray | memoryview


class DecodedRecord(NamedTuple):
    """One record of a batch with its absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    attributes: int


def iter_batches(buf: Buffer) -> Iterator[tuple[fmt.BatchHeader, memoryview]]:
    """Yield ``(header, batch_bytes)`` for each whole batch in ``buf``.

    Stops silently at a partial trailing batch (fetch responses may end with one). A batch whose
    length field is too small to hold a header raises ``KafkaError(CORRUPT_MESSAGE)``, a magic
    other than 2 ``UNSUPPORTED_FOR_MESSAGE_FORMAT`` (0 and 1) or ``CORRUPT_MESSAGE``.
    """
    view = memoryview(buf).cast("B") if not isinstance(buf, memoryview) else buf.cast("B")
    pos = 0
    end = len(view)
    while end - pos >= fmt.HEADER_SIZE:
        batch_length = int.from_bytes(view[pos + fmt.BATCH_LENGTH : pos + fmt.BATCH_LENGTH + 4],
                                      "big", signed=True)
        size = batch_length + fmt.LOG_OVERHEAD
        if size < fmt.HEADER_SIZE:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE,
                             f"batch at position {pos} has size {size}, smaller than a header")
        if end - pos < size:
            return
        header = fmt.parse_header(view, pos)
        if header.magic != fmt.CURRENT_MAGIC:
            code = (ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT if header.magic in (0, 1)
                    else ErrorCode.CORRUPT_MESSAGE)
            raise KafkaError(code, f"batch at position {pos} has magic {header.magic}")
        yield header, view[pos : pos + size]
        pos += size


def _read_bytes(data: Buffer, pos: int, end: int) -> tuple[bytes | None, int]:
    n, pos = decode_varint(data, pos, end)
    if n < 0:
        return None, pos
    if pos + n > end:
        raise VarintError("field overruns its record")
    return bytes(data[pos : pos + n]), pos + n


def iter_records(batch: Buffer) -> Iterator[DecodedRecord]:
    """Yield every record of one whole batch, decompressing as needed.

    Malformed record framing raises ``KafkaError(CORRUPT_MESSAGE)``. Records of a LogAppendTime
    batch report the batch's maxTimestamp, as Kafka's reader does.
    """
    view = memoryview(batch).cast("B") if not isinstance(batch, memoryview) else batch.cast("B")
    if len(view) < fmt.HEADER_SIZE:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "batch is shorter than its header")
    header = fmt.parse_header(view)
    size = min(header.size, len(view))
    body: Buffer = view[fmt.HEADER_SIZE : size]
    if header.compression != fmt.NO_COMPRESSION:
        body = decompress(header.compression, body)
    log_append = header.is_log_append_time
    pos = 0
    end = len(body)
    try:
        for _ in range(header.record_count):
            length, pos = decode_varint(body, pos, end)
            rec_end = pos + length
            if length < 0 or rec_end > end:
                raise VarintError("record overruns its batch")
            attributes = body[pos]
            pos += 1
            ts_delta, pos = decode_varlong(body, pos, rec_end)
            off_delta, pos = decode_varint(body, pos, rec_end)
            key, pos = _read_bytes(body, pos, rec_end)
            value, pos = _read_bytes(body, pos, rec_end)
            count, pos = decode_varint(body, pos, rec_end)
            if count < 0:
                raise VarintError("negative header count")
            headers = []
            for _h in range(count):
                hkey, pos = _read_bytes(body, pos, rec_end)
                if hkey is None:
                    raise VarintError("null header key")
                hvalue, pos = _read_bytes(body, pos, rec_end)
                headers.append((hkey.decode("utf-8"), hvalue))
            if pos != rec_end:
                raise VarintError("record length does not match its fields")
            yield DecodedRecord(
                offset=header.base_offset + off_delta,
                timestamp=header.max_timestamp if log_append else header.base_timestamp + ts_delta,
                key=key,
                value=value,
                headers=tuple(headers),
                attributes=attributes,
            )
    except (VarintError, IndexError, UnicodeDecodeError) as exc:
        raise KafkaError(
            ErrorCode.CORRUPT_MESSAGE,
            f"malformed record in batch at offset {header.base_offset}: {exc}",
        ) from exc
