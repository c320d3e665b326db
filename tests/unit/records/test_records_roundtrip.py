"""Round trips of builder → reader and cross-checks against kafka-python's batch v2 code."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.records import format as fmt
from kafkapy.records.builder import Record, build_batch
from kafkapy.records.compression import compress, decompress
from kafkapy.records.reader import iter_batches, iter_records
from kafkapy.records.varint import decode_varint, decode_varlong, varint_bytes

CODECS = [fmt.NO_COMPRESSION, fmt.GZIP, fmt.SNAPPY, fmt.LZ4, fmt.ZSTD]

opt_bytes = st.one_of(st.none(), st.binary(max_size=40))
records_st = st.lists(
    st.builds(
        Record,
        key=opt_bytes,
        value=opt_bytes,
        headers=st.lists(st.tuples(st.text(max_size=8), opt_bytes), max_size=3).map(tuple),
        timestamp=st.integers(0, 2**42),
    ),
    min_size=1,
    max_size=12,
)


def test_varint_matches_kafka_examples() -> None:
    assert varint_bytes(0) == b"\x00"
    assert varint_bytes(-1) == b"\x01"
    assert varint_bytes(1) == b"\x02"
    assert varint_bytes(300) == b"\xd8\x04"
    for v in (0, 1, -1, 63, -64, 64, 2**31 - 1, -(2**31)):
        enc = varint_bytes(v)
        assert decode_varint(enc, 0, len(enc)) == (v, len(enc))
    for v in (2**63 - 1, -(2**63), 2**40):
        enc = varint_bytes(v)
        assert decode_varlong(enc, 0, len(enc)) == (v, len(enc))


@pytest.mark.parametrize("codec", CODECS)
def test_compression_round_trip(codec: int) -> None:
    data = b"kafka " * 1000
    assert decompress(codec, compress(codec, data)) == data


def test_snappy_accepts_raw_and_xerial() -> None:
    import snappy

    data = b"abc" * 5000
    assert decompress(fmt.SNAPPY, snappy.compress(data)) == data
    assert compress(fmt.SNAPPY, data).startswith(b"\x82SNAPPY\x00")
    assert decompress(fmt.SNAPPY, compress(fmt.SNAPPY, data)) == data


def test_decompress_garbage_is_corrupt() -> None:
    with pytest.raises(KafkaError) as ei:
        decompress(fmt.GZIP, b"not gzip")
    assert ei.value.code == ErrorCode.CORRUPT_MESSAGE
    with pytest.raises(KafkaError) as ei:
        decompress(7, b"x")
    assert ei.value.code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


@pytest.mark.parametrize("codec", CODECS)
@settings(max_examples=15, deadline=None)
@given(records=records_st, base_offset=st.integers(0, 2**40))
def test_build_then_read(codec: int, records: list[Record], base_offset: int) -> None:
    batch = build_batch(records, base_offset=base_offset, compression=codec,
                        producer_id=7, producer_epoch=1, base_sequence=3, partition_leader_epoch=5)
    ((header, view),) = list(iter_batches(batch))
    assert bytes(view) == batch
    assert header.size == len(batch)
    assert header.crc == fmt.compute_crc(batch, 0, len(batch))
    assert header.record_count == len(records)
    assert header.last_offset_delta == len(records) - 1
    assert header.compression == codec
    assert header.base_timestamp == records[0].timestamp
    assert header.max_timestamp == max(r.timestamp for r in records)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 1, 3)
    decoded = list(iter_records(batch))
    assert [d.offset for d in decoded] == list(range(base_offset, base_offset + len(records)))
    assert [(d.key, d.value, d.headers, d.timestamp) for d in decoded] == [
        (r.key, r.value, r.headers, r.timestamp) for r in records
    ]


def _kafka_python_builder(records: list[Record], codec: int) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 30)
    for i, r in enumerate(records):
        b.append(i, timestamp=r.timestamp, key=r.key, value=r.value, headers=list(r.headers))
    return bytes(b.build())


@pytest.mark.parametrize("codec", CODECS)
@settings(max_examples=15, deadline=None)
@given(records=records_st)
def test_cross_check_kafka_python(codec: int, records: list[Record]) -> None:
    # Theirs → ours.
    theirs = _kafka_python_builder(records, codec)
    decoded = list(iter_records(theirs))
    assert [(d.offset, d.key, d.value, d.headers, d.timestamp) for d in decoded] == [
        (i, r.key, r.value, r.headers, r.timestamp) for i, r in enumerate(records)
    ]
    # Ours → theirs.
    ours = build_batch(records, compression=codec)
    kb = DefaultRecordBatch(ours)
    assert kb.validate_crc()
    got = [(m.offset, m.key, m.value, tuple((k, v) for k, v in m.headers), m.timestamp)
           for m in kb]
    assert got == [(i, r.key, r.value, r.headers, r.timestamp) for i, r in enumerate(records)]
    # Uncompressed, both builders must produce byte-identical batches (compressed output may
    # differ only in codec framing choices).
    if codec == fmt.NO_COMPRESSION:
        theirs_patched = bytearray(theirs)
        # kafka-python writes partitionLeaderEpoch 0 where we write -1 (outside the CRC).
        theirs_patched[fmt.PARTITION_LEADER_EPOCH : fmt.PARTITION_LEADER_EPOCH + 4] = b"\xff" * 4
        assert ours == bytes(theirs_patched)


def test_now_ms_fills_missing_timestamps() -> None:
    batch = build_batch([Record(b"k", b"v"), Record(None, None, timestamp=5)], now_ms=1000)
    assert [d.timestamp for d in iter_records(batch)] == [1000, 5]
    with pytest.raises(ValueError):
        build_batch([Record(b"k", b"v")])


def test_log_append_time_records_report_max_timestamp() -> None:
    batch = build_batch([Record(b"a", b"b", timestamp=1)], timestamp_type=1, max_timestamp=99)
    assert [d.timestamp for d in iter_records(batch)] == [99]


def test_iter_batches_stops_at_partial_tail() -> None:
    b1 = build_batch([Record(b"a", b"1", timestamp=1)])
    b2 = build_batch([Record(b"b", b"2", timestamp=2)], base_offset=1)
    buf = b1 + b2
    for cut in range(len(b1), len(buf)):
        assert [h.base_offset for h, _ in iter_batches(buf[:cut])] == [0]
    assert [h.base_offset for h, _ in iter_batches(buf)] == [0, 1]
    assert list(iter_batches(b"")) == []


def test_iter_batches_rejects_bad_magic_and_length() -> None:
    b = bytearray(build_batch([Record(b"a", b"1", timestamp=1)]))
    b[fmt.MAGIC] = 1
    with pytest.raises(KafkaError) as ei:
        list(iter_batches(b))
    assert ei.value.code == ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT
    b[fmt.BATCH_LENGTH : fmt.BATCH_LENGTH + 4] = (10).to_bytes(4, "big")
    with pytest.raises(KafkaError) as ei:
        list(iter_batches(b))
    assert ei.value.code == ErrorCode.CORRUPT_MESSAGE


def test_control_and_transactional_flags() -> None:
    batch = build_batch([Record(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00", timestamp=3)],
                        producer_id=9, producer_epoch=0, transactional=True, control=True)
    header = fmt.parse_header(batch)
    assert header.is_control and header.is_transactional
