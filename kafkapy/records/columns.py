"""Decode record batches straight into columns: no Python object per record.

Readers that hand records on in bulk (the Spark source builds Arrow arrays) need each record's
offset, timestamp, key and value, not a Python object per record. :class:`Columns` holds them as
Arrow-layout buffers (little-endian int64 offsets and timestamps in microseconds, int32 timestamp
types, and for keys and values an int32 offsets buffer, a data buffer and a validity bitmap), and
``append_batch`` adds one batch's records to it.

``append_batch(columns, records, count, base_offset, base_timestamp, log_append_time,
start, until)`` comes from the Cython ``kafkapy.records._columns_fast`` when it is built and
enabled, else from its pure twin ``kafkapy.records._columns_pure``. ``records`` is the batch's
records section, already decompressed; records outside [start, until) are skipped. Headers are not
decoded (readers that want them use :mod:`kafkapy.records.reader`). A malformed record raises
``KafkaError(CORRUPT_MESSAGE)``, with nothing of that batch appended.
"""

from __future__ import annotations

from typing import Protocol

from kafkapy._speedups import load


class Columns:
    """Growing Arrow-layout buffers of decoded records (see the module docstring)."""

    __slots__ = ("count", "offsets", "timestamps_us", "timestamp_types",
                 "key_offsets", "key_data", "key_validity", "key_nulls",
                 "value_offsets", "value_data", "value_validity", "value_nulls")

    def __init__(self) -> None:
        self.count = 0
        self.offsets = bytearray()
        self.timestamps_us = bytearray()
        self.timestamp_types = bytearray()
        # Arrow's variable-size binary layout: count + 1 int32 offsets into the data buffer.
        self.key_offsets = bytearray(4)
        self.key_data = bytearray()
        self.key_validity = bytearray()
        self.key_nulls = 0
        self.value_offsets = bytearray(4)
        self.value_data = bytearray()
        self.value_validity = bytearray()
        self.value_nulls = 0


class _AppendBatch(Protocol):
    def __call__(self, columns: Columns, records: bytes | bytearray | memoryview, count: int,
                 base_offset: int, base_timestamp: int, log_append_time: int, start: int,
                 until: int) -> int: ...


_impl = load("kafkapy.records._columns_fast", "kafkapy.records._columns_pure")

#: Append the records of one batch (``log_append_time`` is the batch's max timestamp for a
#: LogAppendTime batch, else -1); returns how many records were appended.
append_batch: _AppendBatch = _impl.append_batch
IMPLEMENTATION: str = _impl.__name__

__all__ = ["IMPLEMENTATION", "Columns", "append_batch"]
