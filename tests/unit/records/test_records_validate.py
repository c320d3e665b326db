"""validate_and_assign: Kafka's leader-append rules, on both the pure and the Cython twin."""

from __future__ import annotations

import os
import struct
from types import ModuleType

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.records import format as fmt
from kafkapy.records.builder import Record, build_batch, encode_record
from kafkapy.records.reader import iter_batches, iter_records
from kafkapy.records.varint import varint_bytes

MAX = 1 << 20
NOW = 1_700_000_000_000


def run(impl: ModuleType, buf: bytearray, **kw: object):
    args = dict(next_offset=0, now_ms=NOW, partition_leader_epoch=7, max_batch_bytes=MAX)
    args.update(kw)
    return impl.validate_and_assign(buf, **args)


def fix_crc(buf: bytearray, pos: int = 0) -> None:
    size = struct.unpack_from(">i", buf, pos + fmt.BATCH_LENGTH)[0] + fmt.LOG_OVERHEAD
    struct.pack_into(">I", buf, pos + fmt.CRC, fmt.compute_crc(buf, pos, size))


def raw_batch(body: bytes, count: int, *, last_delta: int | None = None, attributes: int = 0,
              base_ts: int = 1000, max_ts: int = 1000, producer_id: int = -1,
              base_sequence: int = -1) -> bytearray:
    """A batch around hand-written record bytes, with a correct CRC."""
    buf = bytearray(fmt.HEADER_SIZE) + body
    fmt.HEADER_STRUCT.pack_into(
        buf, 0, 0, len(buf) - fmt.LOG_OVERHEAD, -1, 2, 0, attributes,
        count - 1 if last_delta is None else last_delta, base_ts, max_ts, producer_id,
        0 if producer_id >= 0 else -1, base_sequence, count)
    fix_crc(buf)
    return buf


def record_bytes(fields: bytes) -> bytes:
    return varint_bytes(len(fields)) + fields


def expect(impl: ModuleType, buf: bytearray, code: ErrorCode, fragment: str, **kw: object) -> None:
    before = bytes(buf)
    with pytest.raises(KafkaError) as ei:
        run(impl, buf, **kw)
    assert ei.value.code == code, ei.value.message
    assert fragment in ei.value.message
    assert bytes(buf) == before, "a failed validation must not write"


def test_facade_picks_the_expected_implementation() -> None:
    from kafkapy.records import validate

    if os.environ.get("KAFKAPY_NO_EXTENSIONS") == "1":
        assert validate.IMPLEMENTATION == "kafkapy.records._pure"
    elif os.environ.get("KAFKAPY_REQUIRE_EXTENSIONS") == "1":
        assert validate.IMPLEMENTATION == "kafkapy.records._fast"
    assert validate.AppendInfo is not None and validate.BatchInfo is not None


def test_assigns_offsets_epoch_and_keeps_crc(impl: ModuleType) -> None:
    recs = [Record(b"k%d" % i, b"v" * i, (("h", b"x"),), 100 + (i * 7) % 5) for i in range(5)]
    b1 = build_batch(recs, producer_id=4, producer_epoch=2, base_sequence=10)
    b2 = build_batch(recs[:2], compression=fmt.GZIP)
    buf = bytearray(b1 + b2)
    info = run(impl, buf, next_offset=42)
    assert (info.first_offset, info.last_offset, info.record_count) == (42, 48, 7)
    assert info.max_timestamp == 104
    # Kafka 3.8+ reports the last offset of the first batch holding the max timestamp.
    assert info.offset_of_max_timestamp == 46
    headers = [h for h, _ in iter_batches(buf)]
    assert [h.base_offset for h in headers] == [42, 47]
    assert [h.partition_leader_epoch for h in headers] == [7, 7]
    assert [h.crc for h in headers] == [fmt.parse_header(b1).crc, fmt.parse_header(b2).crc]
    assert [r.offset for _, v in iter_batches(buf) for r in iter_records(v)] == list(range(42, 49))
    bi = info.batches[0]
    assert (bi.position, bi.size, bi.base_offset, bi.last_offset, bi.max_timestamp) == (
        0, len(b1), 42, 46, 104)
    assert (bi.producer_id, bi.producer_epoch, bi.base_sequence, bi.record_count) == (4, 2, 10, 5)
    assert info.batches[1].position == len(b1)


def test_log_append_time_rewrites_type_max_timestamp_and_crc(impl: ModuleType) -> None:
    buf = bytearray(build_batch([Record(b"a", b"1", timestamp=5), Record(b"b", b"2", timestamp=9)]))
    info = run(impl, buf, next_offset=10, log_append_time=True)
    h = fmt.parse_header(buf)
    assert h.is_log_append_time and h.max_timestamp == NOW and h.base_timestamp == 5
    assert h.crc == fmt.compute_crc(buf, 0, len(buf))
    assert (info.max_timestamp, info.offset_of_max_timestamp) == (NOW, 11)
    assert [r.timestamp for r in iter_records(buf)] == [NOW, NOW]


def test_create_time_fixes_a_wrong_max_timestamp(impl: ModuleType) -> None:
    buf = bytearray(build_batch([Record(b"a", b"1", timestamp=5)], max_timestamp=3))
    info = run(impl, buf)
    h = fmt.parse_header(buf)
    assert h.max_timestamp == 5 == info.max_timestamp
    assert h.crc == fmt.compute_crc(buf, 0, len(buf))


def test_accepts_kafka_python_batches(impl: ModuleType) -> None:
    for codec in range(5):
        kb = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, 1 << 20)
        for i in range(20):
            kb.append(i, timestamp=1000 + i, key=None, value=b"x" * 100, headers=[("a", b"b")])
        buf = bytearray(kb.build())
        info = run(impl, buf, next_offset=5)
        assert (info.first_offset, info.last_offset, info.max_timestamp) == (5, 24, 1019)


@pytest.mark.parametrize("buf, code, fragment", [
    (b"", ErrorCode.INVALID_RECORD, "no record batch"),
    (b"\x00" * 16, ErrorCode.CORRUPT_MESSAGE, "truncated"),
])
def test_framing_errors(impl: ModuleType, buf: bytes, code: ErrorCode, fragment: str) -> None:
    expect(impl, bytearray(buf), code, fragment)


def test_header_errors(impl: ModuleType) -> None:
    good = build_batch([Record(b"k", b"v", timestamp=1)])

    def edit(pos: int, fmt_: str, value: int, crc: bool = False) -> bytearray:
        b = bytearray(good)
        struct.pack_into(fmt_, b, pos, value)
        if crc:
            fix_crc(b)
        return b

    for magic in (0, 1):
        expect(impl, edit(fmt.MAGIC, ">b", magic), ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT,
               f"magic {magic}")
    expect(impl, edit(fmt.MAGIC, ">b", 3), ErrorCode.CORRUPT_MESSAGE, "invalid magic 3")
    expect(impl, edit(fmt.MAGIC, ">b", -1), ErrorCode.CORRUPT_MESSAGE, "invalid magic -1")
    expect(impl, edit(fmt.BATCH_LENGTH, ">i", 48), ErrorCode.CORRUPT_MESSAGE, "minimum of 49")
    expect(impl, edit(fmt.BATCH_LENGTH, ">i", -5), ErrorCode.CORRUPT_MESSAGE, "minimum of 49")
    expect(impl, edit(fmt.BATCH_LENGTH, ">i", len(good)), ErrorCode.CORRUPT_MESSAGE,
           "bytes follow")
    expect(impl, edit(fmt.BASE_OFFSET, ">q", 3), ErrorCode.INVALID_RECORD, "base offset 3")
    expect(impl, bytearray(good), ErrorCode.MESSAGE_TOO_LARGE, "over the limit",
           max_batch_bytes=len(good) - 1)
    run(impl, bytearray(good), max_batch_bytes=len(good))
    expect(impl, edit(fmt.CRC, ">I", 1), ErrorCode.CORRUPT_MESSAGE, "stored crc 1")
    expect(impl, edit(fmt.ATTRIBUTES, ">h", 5, crc=True), ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
           "id 5")
    expect(impl, edit(fmt.LAST_OFFSET_DELTA, ">i", -1, crc=True), ErrorCode.INVALID_RECORD,
           "lastOffsetDelta -1")
    expect(impl, edit(fmt.RECORD_COUNT, ">i", 0, crc=True), ErrorCode.INVALID_RECORD,
           "record count 0")
    expect(impl, edit(fmt.RECORD_COUNT, ">i", 2, crc=True), ErrorCode.INVALID_RECORD,
           "does not match record count 2")
    expect(impl, edit(fmt.ATTRIBUTES, ">h", fmt.CONTROL_MASK, crc=True), ErrorCode.INVALID_RECORD,
           "control batch")
    expect(impl, edit(fmt.PRODUCER_ID, ">q", 9, crc=True), ErrorCode.INVALID_RECORD,
           "producer id 9 but invalid base sequence -1")
    lat = edit(fmt.ATTRIBUTES, ">h", fmt.TIMESTAMP_TYPE_MASK, crc=True)
    expect(impl, lat, ErrorCode.INVALID_TIMESTAMP, "LogAppendTime", log_append_time=True)
    # On a CreateTime topic a LogAppendTime batch passes, and is turned back into CreateTime.
    run(impl, lat)
    assert not fmt.parse_header(lat).is_log_append_time
    lat_no_ts = edit(fmt.ATTRIBUTES, ">h", fmt.TIMESTAMP_TYPE_MASK)
    struct.pack_into(">q", lat_no_ts, fmt.MAX_TIMESTAMP, -1)
    fix_crc(lat_no_ts)
    expect(impl, lat_no_ts, ErrorCode.INVALID_TIMESTAMP, "LogAppendTime")


def test_trailing_bytes_and_partial_batches_are_corrupt(impl: ModuleType) -> None:
    good = build_batch([Record(b"k", b"v", timestamp=1)])
    for extra in (b"\x00", b"\x00" * 16, good[:17], good[:60], good[:-1]):
        expect(impl, bytearray(good + extra), ErrorCode.CORRUPT_MESSAGE, "position")


def test_failure_in_a_later_batch_writes_nothing(impl: ModuleType) -> None:
    good = build_batch([Record(b"k", b"v", timestamp=1)])
    bad = bytearray(good)
    struct.pack_into(">i", bad, fmt.RECORD_COUNT, 2)
    fix_crc(bad)
    expect(impl, bytearray(good + bad), ErrorCode.INVALID_RECORD, "position 70", next_offset=9,
           log_append_time=True)


def _fields(off_delta: int = 0, key: bytes = b"\x02k", value: bytes = b"\x02v",
            headers: bytes = b"\x00", ts_delta: bytes = b"\x00") -> bytes:
    return b"\x00" + ts_delta + varint_bytes(off_delta) + key + value + headers


@pytest.mark.parametrize("body, count, fragment", [
    (record_bytes(_fields()), 2, "record 1 of the batch at position 0 runs past the end"),
    (record_bytes(_fields()) + b"\x00", 1, "bytes left after its 1 declared records"),
    (b"\x01" + _fields(), 1, "has invalid size -1"),
    (b"\xff\xff\xff\xff\x7f" + _fields(), 1, "invalid size"),
    (b"\xff\xff\xff\xff\xff" + _fields(), 1, "varint longer than allowed"),
    (varint_bytes(100) + _fields(), 1, "runs past the end of the batch"),
    (b"\x00" + _fields(), 1, "do not fill exactly its size 0"),
    (record_bytes(_fields(off_delta=1)), 1, "offset delta 1, expected 0"),
    (record_bytes(_fields(key=varint_bytes(50) + b"k")), 1, "do not fill exactly its size"),
    (record_bytes(_fields(headers=b"\x01")), 1, "invalid header count -1"),
    (record_bytes(_fields(headers=b"\x02\x01\x00")), 1, "header with a null key"),
    (record_bytes(_fields(headers=b"\x02")), 1, "do not fill exactly"),
    (record_bytes(_fields() + b"\x00"), 1, "do not fill exactly its size 9"),
    (record_bytes(_fields(ts_delta=b"\xff" * 10)), 1, "varint longer than allowed"),
    (record_bytes(_fields(ts_delta=b"\xff" * 9 + b"\x7f")), 1, None),
    (record_bytes(_fields(key=b"\x01", value=b"\x05")), 1, None),  # null key, value -3 = null
    (record_bytes(_fields(headers=b"\x02\x02h\x01")), 1, None),  # one header, null value
])
def test_record_walk(impl: ModuleType, body: bytes, count: int, fragment: str | None) -> None:
    buf = raw_batch(body, count)
    if fragment is None:
        assert run(impl, buf).record_count == count
    else:
        expect(impl, buf, ErrorCode.INVALID_RECORD, fragment)


def test_compressed_batches_are_stored_as_sent(impl: ModuleType) -> None:
    # A compressed payload is not opened: garbage inside passes, as long as the CRC holds.
    buf = raw_batch(b"not really gzip", 3, attributes=fmt.GZIP, max_ts=77)
    info = run(impl, buf, next_offset=1)
    assert (info.last_offset, info.max_timestamp, info.offset_of_max_timestamp) == (3, 77, 3)
    assert buf[fmt.HEADER_SIZE:] == b"not really gzip"


def test_timestamp_arithmetic_wraps_like_java(impl: ModuleType) -> None:
    body = record_bytes(_fields(ts_delta=varint_bytes(2**62)))
    buf = raw_batch(body, 1, base_ts=2**62, max_ts=0)
    info = run(impl, buf)
    # 2**62 + 2**62 wraps to -2**63, which is below NO_TIMESTAMP: the batch has no max.
    assert info.max_timestamp == -1 and info.offset_of_max_timestamp == -1


def test_rejects_read_only_buffers(impl: ModuleType) -> None:
    with pytest.raises(TypeError, match="writable"):
        run(impl, build_batch([Record(b"k", b"v", timestamp=1)]))


def test_single_record_encoding_is_the_builders() -> None:
    assert encode_record(0, 0, Record(b"k", b"v")) == record_bytes(_fields())


@pytest.mark.parametrize("bad", [
    {"partition_leader_epoch": 2**31}, {"next_offset": -1}, {"now_ms": 1.5},
    {"max_batch_bytes": -1}, {"next_offset": 2**63},
])
def test_bad_arguments_fail_before_anything_is_written(impl: ModuleType, bad: dict) -> None:
    buf = bytearray(build_batch([Record(b"k", b"v", timestamp=1)]))
    with pytest.raises(ValueError, match=next(iter(bad))):
        run(impl, buf, **bad)
    assert buf == build_batch([Record(b"k", b"v", timestamp=1)])


def test_offset_overflow_is_refused(impl: ModuleType) -> None:
    buf = bytearray(build_batch([Record(b"k", b"v", timestamp=1)] * 2))
    run(impl, bytearray(buf), next_offset=2**63 - 2)
    expect(impl, buf, ErrorCode.INVALID_RECORD, "overflows", next_offset=2**63 - 1)


def test_timestamp_bounds_refuse_records_outside_them(impl: ModuleType) -> None:
    recs = [Record(None, b"v", (), ts) for ts in (500, 1500, 900)]
    buf = bytearray(build_batch(recs))
    expect(impl, bytearray(buf), ErrorCode.INVALID_TIMESTAMP,
           "record 1 of the batch at position 0 has timestamp 1500, outside the range [0, 1000]",
           timestamp_floor=0, timestamp_ceiling=1000)
    expect(impl, bytearray(buf), ErrorCode.INVALID_TIMESTAMP, "has timestamp 500",
           timestamp_floor=600)
    info = run(impl, bytearray(buf), timestamp_floor=500, timestamp_ceiling=1500)
    assert info.max_timestamp == 1500
    # A LogAppendTime topic stamps the records itself: the bounds do not apply.
    assert run(impl, bytearray(buf), timestamp_floor=NOW, log_append_time=True).max_timestamp == NOW


def test_timestamp_bounds_must_be_int64(impl: ModuleType) -> None:
    with pytest.raises(ValueError, match="timestamp_floor"):
        run(impl, bytearray(build_batch([Record(None, b"v", (), 5)])), timestamp_floor=-(1 << 64))


def test_require_keys_refuses_the_first_record_without_a_key(impl: ModuleType) -> None:
    from kafkapy.records._validate_common import RecordRefused

    recs = [Record(b"k", b"v", (), 5), Record(b"", b"v", (), 5), Record(None, b"v", (), 5),
            Record(None, b"v", (), 5)]
    first = bytearray(build_batch(recs[:1]))
    buf = first + bytearray(build_batch(recs))
    expect(impl, bytearray(buf), ErrorCode.INVALID_RECORD,
           f"record 2 of the batch at position {len(first)} has no key", require_keys=True)
    with pytest.raises(RecordRefused) as ei:
        run(impl, bytearray(buf), require_keys=True)
    assert ei.value.batch_position == len(first)
    # Without the flag (a delete topic) keyless records pass; an empty key is a key.
    assert run(impl, bytearray(buf)).record_count == 5
    assert run(impl, bytearray(build_batch(recs[:2])), require_keys=True).record_count == 2
    # Compressed batches are the log's to check (record_checks), not the validator's.
    assert run(impl, bytearray(build_batch(recs, compression=fmt.GZIP)),
               require_keys=True).record_count == 4


def test_a_missing_key_is_found_before_a_timestamp_out_of_bounds(impl: ModuleType) -> None:
    buf = bytearray(build_batch([Record(None, b"v", (), 5000)]))
    expect(impl, buf, ErrorCode.INVALID_RECORD, "has no key", require_keys=True,
           timestamp_ceiling=1000)
    expect(impl, buf, ErrorCode.INVALID_TIMESTAMP, "has timestamp 5000", timestamp_ceiling=1000)
