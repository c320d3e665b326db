"""append_batch (records into Arrow-layout columns) on both twins, checked against the reader."""

from __future__ import annotations

import os
import struct
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.records import format as fmt
from kafkapy.records.builder import Record, build_batch
from kafkapy.records.columns import Columns
from kafkapy.records.reader import iter_records


def append(impl: ModuleType, cols: Columns, batch: bytes, start: int = 0, until: int = 1 << 62) -> int:
    h = fmt.parse_header(batch)
    return impl.append_batch(cols, memoryview(batch)[fmt.HEADER_SIZE:h.size], h.record_count,
                             h.base_offset, h.base_timestamp,
                             h.max_timestamp if h.is_log_append_time else -1, start, until)


def unpack(cols: Columns) -> list[tuple[int, int, int, bytes | None, bytes | None]]:
    """(offset, timestamp ms, type, key, value) rows read back from the buffers."""
    n = cols.count
    offsets = struct.unpack(f"<{n}q", cols.offsets)
    ts = struct.unpack(f"<{n}q", cols.timestamps_us)
    types = struct.unpack(f"<{n}i", cols.timestamp_types)

    def binary(offs: bytearray, data: bytearray, validity: bytearray) -> list[bytes | None]:
        o = struct.unpack(f"<{n + 1}i", offs)
        return [bytes(data[o[i]:o[i + 1]]) if validity[i // 8] >> (i % 8) & 1 else None
                for i in range(n)]

    keys = binary(cols.key_offsets, cols.key_data, cols.key_validity)
    values = binary(cols.value_offsets, cols.value_data, cols.value_validity)
    return [(offsets[i], ts[i] // 1000, types[i], keys[i], values[i]) for i in range(n)]


def expected(batch: bytes, start: int = 0, until: int = 1 << 62) -> list:
    lat = fmt.parse_header(batch).is_log_append_time
    return [(r.offset, r.timestamp, int(lat), r.key, r.value) for r in iter_records(batch)
            if start <= r.offset < until]


records_strategy = st.lists(st.tuples(st.one_of(st.none(), st.binary(max_size=40)),
                                      st.one_of(st.none(), st.binary(max_size=300)),
                                      st.integers(0, 1 << 40)), min_size=1, max_size=30)


# The decoder fixture is a stateless module, so sharing it across examples is fine.
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=records_strategy, base=st.integers(0, 1000))
def test_matches_the_reader(decoder, records, base) -> None:
    batch = build_batch([Record(k, v, (("h", b"x"),), ts) for k, v, ts in records], base_offset=base)
    cols = Columns()
    assert append(decoder, cols, batch) == len(records)
    assert unpack(cols) == expected(batch)
    assert cols.key_nulls == sum(k is None for k, _, _ in records)
    assert cols.value_nulls == sum(v is None for _, v, _ in records)


def test_ranges_and_several_batches_accumulate(decoder) -> None:
    b1 = build_batch([Record(b"a%d" % i, b"v%d" % i, (), 100 + i) for i in range(10)], base_offset=0)
    b2 = build_batch([Record(None, b"w%d" % i, (), 200 + i) for i in range(10)], base_offset=10)
    lat = build_batch([Record(b"l", b"x", (), 5)], base_offset=20, timestamp_type=1, max_timestamp=999)
    cols = Columns()
    assert append(decoder, cols, b1, start=4) == 6
    assert append(decoder, cols, b2, until=13) == 3
    assert append(decoder, cols, lat) == 1
    assert unpack(cols) == expected(b1, start=4) + expected(b2, until=13) + expected(lat)
    assert unpack(cols)[-1][1:3] == (999, 1)
    assert append(decoder, cols, b1, start=50) == 0 and cols.count == 10


def test_malformed_records_raise_and_append_nothing(decoder) -> None:
    good = build_batch([Record(b"k", b"v", (), 1)] * 3)
    cols = Columns()
    append(decoder, cols, good)
    before = unpack(cols)
    section = bytearray(good[fmt.HEADER_SIZE:])
    for broken in (section[:-3], section[:1], bytes([0x7f]) + section[1:]):
        with pytest.raises(KafkaError) as ei:
            decoder.append_batch(cols, bytes(broken), 3, 0, 0, -1, 0, 100)
        assert ei.value.code == ErrorCode.CORRUPT_MESSAGE
        assert unpack(cols) == before


def test_facade_picks_the_expected_twin() -> None:
    from kafkapy.records import columns

    if os.environ.get("KAFKAPY_NO_EXTENSIONS") == "1":
        assert columns.IMPLEMENTATION == "kafkapy.records._columns_pure"
    elif os.environ.get("KAFKAPY_REQUIRE_EXTENSIONS") == "1":
        assert columns.IMPLEMENTATION == "kafkapy.records._columns_fast"
