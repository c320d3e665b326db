"""The rows the source returns, in the built-in connector's schema, as Arrow record batches.

Columns: key, value (binary), topic (string), partition (int), offset (long), timestamp
(timestamp), timestampType (int: 0 CreateTime, 1 LogAppendTime), and with ``includeHeaders``
headers (array<struct<key: string, value: binary>>). Building whole Arrow columns keeps the
per-record Python work to decoding; Spark takes the batches without converting rows.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

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
