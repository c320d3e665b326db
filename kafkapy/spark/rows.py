"""The rows the source returns, in the built-in connector's schema, as Arrow record batches.

Columns: key, value (binary), topic (string), partition (int), offset (long), timestamp
(timestamp), timestampType (int: 0 CreateTime, 1 LogAppendTime), and with ``includeHeaders``
headers (array<struct<key: string, value: binary>>). Building whole Arrow columns keeps the
per-record Python work to decoding; Spark takes the batches without converting rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pyarrow as pa

from kafkapy.records import format as fmt
from kafkapy.records.columns import Columns, append_batch
from kafkapy.records.compression import decompress
from kafkapy.records.reader import DecodedRecord

SCHEMA_DDL = ("key binary, value binary, topic string, partition int, offset long, "
              "timestamp timestamp, timestampType int")
HEADERS_DDL = "headers array<struct<key: string, value: binary>>"

_HEADER_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
]
ARROW_SCHEMA = pa.schema(_FIELDS)
ARROW_SCHEMA_WITH_HEADERS = pa.schema([*_FIELDS, pa.field("headers", _HEADER_TYPE)])


def schema_ddl(include_headers: bool) -> str:
    return f"{SCHEMA_DDL}, {HEADERS_DDL}" if include_headers else SCHEMA_DDL


def to_arrow(topic: str, partition: int, records: Sequence[DecodedRecord], *,
             timestamp_types: Sequence[int], include_headers: bool = False) -> pa.RecordBatch:
    """One Arrow batch of ``records`` (all from ``topic``-``partition``) with their timestamp
    types (0 CreateTime, 1 LogAppendTime)."""
    n = len(records)
    timestamps = pa.array([r.timestamp * 1000 for r in records], pa.int64())
    columns = [
        pa.array([r.key for r in records], pa.binary()),
        pa.array([r.value for r in records], pa.binary()),
        pa.array([topic] * n, pa.string()),
        pa.array([partition] * n, pa.int32()),
        pa.array([r.offset for r in records], pa.int64()),
        timestamps.cast(pa.timestamp("us", tz="UTC")),
        pa.array(timestamp_types, pa.int32()),
    ]
    schema = ARROW_SCHEMA
    if include_headers:
        columns.append(pa.array([[{"key": k, "value": v} for k, v in r.headers] for r in records],
                                _HEADER_TYPE))
        schema = ARROW_SCHEMA_WITH_HEADERS
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def batches_to_arrow(topic: str, partition: int, batches: Iterable[tuple[fmt.BatchHeader, memoryview, int]],
                     until: int) -> pa.RecordBatch | None:
    """One Arrow batch of the records in the given record batches (each with the offset its
    records count from) below ``until``, decoded straight into Arrow buffers; None if empty.

    This is the fast path, for reads without headers: no Python object per record.
    """
    cols = Columns()
    for header, data, low in batches:
        section = data[fmt.HEADER_SIZE:header.size]
        if header.compression != fmt.NO_COMPRESSION:
            section = memoryview(decompress(header.compression, section))
        append_batch(cols, section, header.record_count, header.base_offset, header.base_timestamp,
                     header.max_timestamp if header.is_log_append_time else -1, low, until)
    n = cols.count
    if n == 0:
        return None
    columns = [
        _binary(n, cols.key_offsets, cols.key_data, cols.key_validity, cols.key_nulls),
        _binary(n, cols.value_offsets, cols.value_data, cols.value_validity, cols.value_nulls),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(cols.offsets)]),
        pa.Array.from_buffers(pa.timestamp("us", tz="UTC"), n, [None, pa.py_buffer(cols.timestamps_us)]),
        pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(cols.timestamp_types)]),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)


def _binary(n: int, offsets: bytearray, data: bytearray, validity: bytearray, nulls: int) -> pa.Array:
    return pa.Array.from_buffers(
        pa.binary(), n, [pa.py_buffer(validity) if nulls else None, pa.py_buffer(offsets),
                         pa.py_buffer(data)], null_count=nulls)
