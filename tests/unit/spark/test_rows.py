"""The Arrow batches the Spark source hands over: the columnar fast path equals the object path."""

from __future__ import annotations

import pyarrow as pa

from kafkapy.records import format as fmt
from kafkapy.records.builder import Record, build_batch
from kafkapy.records.reader import iter_batches, iter_records
from kafkapy.spark import rows


def test_columnar_batches_equal_the_per_record_path() -> None:
    data = (build_batch([Record(b"k%d" % i, b"v" * i, (), 1_700_000_000_000 + i) for i in range(5)])
            + build_batch([Record(None, None, (), 7), Record(b"", b"", (), 8)], base_offset=5,
                          compression=fmt.ZSTD)
            + build_batch([Record(b"l", b"x", (), 1)], base_offset=7, timestamp_type=1,
                          max_timestamp=1_700_000_001_000))
    batches = [(h, b, 2) for h, b in iter_batches(data)]
    fast = rows.batches_to_arrow("orders", 3, batches, until=8)
    decoded = [(r, int(h.is_log_append_time)) for h, b in iter_batches(data) for r in iter_records(b)
               if 2 <= r.offset < 8]
    slow = rows.to_arrow("orders", 3, [r for r, _ in decoded], timestamp_types=[t for _, t in decoded])
    assert fast.schema == slow.schema == rows.ARROW_SCHEMA
    assert fast.equals(slow)
    assert fast.column("offset").to_pylist() == [2, 3, 4, 5, 6, 7]
    assert fast.column("key").to_pylist()[3:5] == [None, b""]
    assert fast.column("timestampType").to_pylist()[-1] == 1
    assert rows.batches_to_arrow("orders", 3, batches, until=2) is None


def test_headers_schema() -> None:
    recs = list(iter_records(build_batch([Record(b"k", b"v", (("a", b"1"), ("b", None)), 5)])))
    out = rows.to_arrow("t", 0, recs, timestamp_types=[0], include_headers=True)
    assert out.schema == rows.ARROW_SCHEMA_WITH_HEADERS
    assert out.column("headers").to_pylist() == [[{"key": "a", "value": b"1"}, {"key": "b", "value": None}]]
    assert isinstance(out.column("timestamp").type, pa.TimestampType)
