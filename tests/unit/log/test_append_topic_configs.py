"""Per-topic append settings on the leader: compression.type, max.message.bytes, timestamp bounds.

Each test opens a log with the topic config a user would set and checks what a consumer would
read back (codec, records, timestamps) or the error a producer would get.
"""

from __future__ import annotations

import struct

import pytest

from kafkapy.config import BROKER_CONFIGS, TOPIC_CONFIGS
from kafkapy.log.config import LogConfig
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.records import format as fmt
from kafkapy.records import record_checks
from kafkapy.records.builder import Record, build_batch
from kafkapy.records.record_checks import RecordValidationError
from kafkapy.records.reader import iter_batches, iter_records

NOW = 1_700_000_000_000
HOUR = 3_600_000


def batch(n: int = 20, *, codec: int = fmt.NO_COMPRESSION, ts: int = NOW, pid: int = -1,
          seq: int = -1, value: bytes = b"value-" * 20) -> bytearray:
    recs = [Record(b"k%d" % i, value + b"%d" % i, (("h", b"%d" % i),), ts + i)
            for i in range(n)]
    return bytearray(build_batch(recs, compression=codec, producer_id=pid,
                                 producer_epoch=0 if pid >= 0 else -1, base_sequence=seq))


def stored(log) -> list[tuple[fmt.BatchHeader, list]]:
    data = log.read(log.local_log_start_offset, 1 << 24).read_bytes()
    return [(h, list(iter_records(b))) for h, b in iter_batches(data)]


@pytest.mark.parametrize("target", ["gzip", "snappy", "lz4", "zstd", "uncompressed"])
@pytest.mark.parametrize("sent", [fmt.NO_COMPRESSION, fmt.GZIP, fmt.ZSTD])
def test_compression_type_recompresses_to_the_topic_codec(open_log, target: str, sent: int) -> None:
    log = open_log(compression_type=target)
    original = batch(codec=sent, pid=9, seq=0)
    expected = list(iter_records(bytes(original)))
    result = log.append_as_leader(original, now_ms=NOW, leader_epoch=3)
    assert (result.first_offset, result.last_offset) == (0, 19)
    [(h, recs)] = stored(log)
    assert fmt.CODEC_NAMES[h.compression] == {"uncompressed": "none"}.get(target, target)
    # Producer identity, sequence and offsets survive; every record is byte-for-byte the same.
    assert (h.producer_id, h.base_sequence, h.base_offset, h.partition_leader_epoch) == (9, 0, 0, 3)
    assert [(r.key, r.value, r.headers, r.timestamp) for r in recs] == [
        (r.key, r.value, r.headers, r.timestamp) for r in expected]
    assert h.crc == fmt.compute_crc(log.read(0, 1 << 24).read_bytes(), 0, h.size)
    # The next append lands after it: sizes and positions in the index are the stored ones.
    log.append_as_leader(batch(codec=sent, pid=9, seq=20), now_ms=NOW, leader_epoch=3)
    assert [r.offset for _, rs in stored(log) for r in rs] == list(range(40))


def test_producer_codec_is_kept_by_default(open_log) -> None:
    log = open_log()
    log.append_as_leader(batch(codec=fmt.LZ4), now_ms=NOW, leader_epoch=0)
    [(h, _)] = stored(log)
    assert h.compression == fmt.LZ4


def test_a_retried_batch_is_still_a_duplicate_after_recompression(open_log) -> None:
    log = open_log(compression_type="gzip")
    first = log.append_as_leader(batch(pid=5, seq=0), now_ms=NOW, leader_epoch=0)
    again = log.append_as_leader(batch(pid=5, seq=0), now_ms=NOW, leader_epoch=0)
    assert again.duplicate and (again.first_offset, again.last_offset) == (
        first.first_offset, first.last_offset)
    assert log.log_end_offset == 20


def test_max_message_bytes_is_per_topic(open_log, tmp_path) -> None:
    small = open_log(max_message_bytes=1000)
    with pytest.raises(KafkaError) as ei:
        small.append_as_leader(batch(), now_ms=NOW, leader_epoch=0)
    assert ei.value.code == ErrorCode.MESSAGE_TOO_LARGE and "1000" in ei.value.message
    assert small.log_end_offset == 0
    # As in Kafka the limit is on the batch as sent (a topic codec that would shrink it does not
    # help), so a producer that compresses gets it in.
    small.update_config(LogConfig.from_props({"max.message.bytes": "1000",
                                              "compression.type": "gzip"}))
    with pytest.raises(KafkaError):
        small.append_as_leader(batch(), now_ms=NOW, leader_epoch=0)
    small.append_as_leader(batch(codec=fmt.GZIP), now_ms=NOW, leader_epoch=0)
    assert small.log_end_offset == 20


def test_recompressed_batch_over_the_limit_is_refused(open_log) -> None:
    # Random-looking values do not compress; "uncompressed" makes a zstd batch grow past it.
    import os
    recs = [Record(None, os.urandom(100) * 1 + b"a" * 400, (), NOW) for _ in range(4)]
    sent = bytearray(build_batch(recs, compression=fmt.ZSTD))
    log = open_log(compression_type="uncompressed", max_message_bytes=len(sent) + 10)
    with pytest.raises(KafkaError) as ei:
        log.append_as_leader(sent, now_ms=NOW, leader_epoch=0)
    assert ei.value.code == ErrorCode.MESSAGE_TOO_LARGE and "recompressed" in ei.value.message
    assert log.log_end_offset == 0


@pytest.mark.parametrize("codec", [fmt.NO_COMPRESSION, fmt.SNAPPY])
def test_timestamps_outside_the_topic_bounds_are_refused(open_log, codec: int) -> None:
    log = open_log(message_timestamp_before_max_ms=HOUR, message_timestamp_after_max_ms=60_000)
    for ts in (NOW - 2 * HOUR, NOW + 120_000):
        with pytest.raises(KafkaError) as ei:
            log.append_as_leader(batch(codec=codec, ts=ts), now_ms=NOW, leader_epoch=0)
        assert ei.value.code == ErrorCode.INVALID_TIMESTAMP
        assert ei.value.message == "One or more records have been rejected due to invalid timestamp"
        # Every record is out of range, and each is listed with Kafka's message.
        errors = ei.value.record_errors
        assert [e.batch_index for e in errors] == list(range(20))
        assert errors[0].message == (
            f"Timestamp {ts} of message with offset 0 is out of range. The timestamp should be "
            f"within [{NOW - HOUR}, {NOW + 60_000}]")
    # Inside the bounds (edges included: the last record of this batch is at NOW + 60 s).
    log.append_as_leader(batch(codec=codec, ts=NOW - HOUR, n=1), now_ms=NOW, leader_epoch=0)
    log.append_as_leader(batch(codec=codec, ts=NOW + 60_000 - 19), now_ms=NOW, leader_epoch=0)
    assert log.log_end_offset == 21


def test_log_append_time_topics_ignore_the_bounds(open_log) -> None:
    log = open_log(message_timestamp_type="LogAppendTime", message_timestamp_before_max_ms=1)
    result = log.append_as_leader(batch(ts=0), now_ms=NOW, leader_epoch=0)
    assert result.log_append_time == NOW
    [(h, recs)] = stored(log)
    assert h.is_log_append_time and {r.timestamp for r in recs} == {NOW}


def test_records_without_a_timestamp_pass_the_bounds(open_log) -> None:
    log = open_log(message_timestamp_before_max_ms=0, message_timestamp_after_max_ms=0)
    no_ts = bytearray(build_batch([Record(None, b"v")], now_ms=fmt.NO_TIMESTAMP))
    log.append_as_leader(no_ts, now_ms=NOW, leader_epoch=0)
    assert log.log_end_offset == 1


@pytest.mark.parametrize("codec", [fmt.NO_COMPRESSION, fmt.LZ4])
@pytest.mark.parametrize("policy", ["compact", "compact,delete"])
def test_compacted_topics_refuse_records_without_a_key(open_log, codec: int, policy) -> None:
    log = open_log(cleanup_policy=policy)
    recs = [Record(b"k", b"v0", (), NOW), Record(None, b"v1", (), NOW),
            Record(b"", b"v2", (), NOW), Record(None, b"v3", (), NOW)]
    with pytest.raises(RecordValidationError) as ei:
        log.append_as_leader(bytearray(build_batch(recs, compression=codec)), now_ms=NOW,
                             leader_epoch=0)
    why = "Compacted topic cannot accept message without key in topic partition topic-a.b-0"
    assert ei.value.code == ErrorCode.INVALID_RECORD
    assert [(e.batch_index, e.code, e.message) for e in ei.value.record_errors] == [
        (1, ErrorCode.INVALID_RECORD, why), (3, ErrorCode.INVALID_RECORD, why)]
    assert ei.value.message == (
        "One or more records have been rejected due to 2 record errors in total, and only "
        f"showing the first three errors at most: [RecordError(batchIndex=1, message='{why}'), "
        f"RecordError(batchIndex=3, message='{why}')]")
    assert log.log_end_offset == 0, "nothing of a refused batch is appended"
    # An empty key is a key.
    log.append_as_leader(bytearray(build_batch([recs[0], recs[2]], compression=codec)),
                         now_ms=NOW, leader_epoch=0)
    assert log.log_end_offset == 2


def test_delete_only_topics_take_records_without_a_key(open_log) -> None:
    log = open_log(cleanup_policy="delete")
    log.append_as_leader(bytearray(build_batch([Record(None, b"v", (), NOW)] * 3)), now_ms=NOW,
                         leader_epoch=0)
    assert log.log_end_offset == 3


def test_a_missing_key_is_reported_before_a_bad_timestamp(open_log) -> None:
    log = open_log(cleanup_policy="compact", message_timestamp_before_max_ms=HOUR)
    recs = [Record(None, b"v0", (), NOW - 2 * HOUR), Record(b"k", b"v1", (), NOW - 2 * HOUR)]
    with pytest.raises(RecordValidationError) as ei:
        log.append_as_leader(bytearray(build_batch(recs)), now_ms=NOW, leader_epoch=0)
    # One error per record; any timestamp error makes the batch's code INVALID_TIMESTAMP.
    assert [(e.batch_index, e.code) for e in ei.value.record_errors] == [
        (0, ErrorCode.INVALID_RECORD), (1, ErrorCode.INVALID_TIMESTAMP)]
    assert ei.value.code == ErrorCode.INVALID_TIMESTAMP


def test_records_more_than_an_hour_ahead_are_refused_by_default() -> None:
    # Kafka 4.0 (KIP-1030): message.timestamp.after.max.ms defaults to one hour, before.max.ms
    # stays unbounded; DescribeConfigs and the log agree on it.
    assert LogConfig().message_timestamp_after_max_ms == HOUR
    assert TOPIC_CONFIGS["message.timestamp.after.max.ms"].default == "3600000"
    assert BROKER_CONFIGS["log.message.timestamp.after.max.ms"].default == "3600000"
    assert LogConfig().message_timestamp_before_max_ms == (1 << 63) - 1


@pytest.mark.parametrize("codec", [fmt.NO_COMPRESSION, fmt.GZIP, fmt.ZSTD])
def test_default_ceiling_refuses_every_record_past_it(open_log, codec: int) -> None:
    log = open_log()
    # Records 0..9 are within the hour, 10..19 past it: the batch is refused and only the
    # latter are listed.
    with pytest.raises(RecordValidationError) as ei:
        log.append_as_leader(batch(codec=codec, ts=NOW + HOUR - 10), now_ms=NOW, leader_epoch=0)
    assert ei.value.code == ErrorCode.INVALID_TIMESTAMP
    assert [e.batch_index for e in ei.value.record_errors] == list(range(11, 20))
    assert ei.value.record_errors[0].message == (
        f"Timestamp {NOW + HOUR + 1} of message with offset 11 is out of range. The timestamp "
        f"should be within [{NOW - ((1 << 63) - 1)}, {NOW + HOUR}]")
    assert log.log_end_offset == 0
    # Up to the ceiling itself is fine.
    log.append_as_leader(batch(codec=codec, ts=NOW + HOUR - 19), now_ms=NOW, leader_epoch=0)
    assert log.log_end_offset == 20


def _no_walk(*args, **kwargs):
    raise AssertionError("a compressed batch was decompressed to check its records")


@pytest.mark.parametrize("props", [{}, {"message_timestamp_after_max_ms": 60_000}])
def test_ceiling_alone_does_not_open_compressed_batches(open_log, monkeypatch, props) -> None:
    log = open_log(**props)
    monkeypatch.setattr(record_checks, "batch_record_errors", _no_walk)
    log.append_as_leader(batch(codec=fmt.LZ4, ts=NOW - 10 * HOUR), now_ms=NOW, leader_epoch=0)
    log.append_as_leader(batch(codec=fmt.GZIP, ts=NOW + 30_000), now_ms=NOW, leader_epoch=0)
    assert log.log_end_offset == 40


def _with_header_max(buf: bytearray, max_timestamp: int) -> bytearray:
    """The batch with its header's maxTimestamp rewritten (and its CRC fixed): a buggy client."""
    struct.pack_into(">q", buf, fmt.MAX_TIMESTAMP, max_timestamp)
    struct.pack_into(">I", buf, fmt.CRC, fmt.compute_crc(buf, 0, len(buf)))
    return buf


def test_a_header_overstating_its_max_timestamp_is_checked_record_by_record(open_log) -> None:
    # Only the header is past the ceiling: its records are opened, found fine and stored, as
    # Kafka (which checks each record) would.
    log = open_log()
    sent = _with_header_max(batch(codec=fmt.GZIP), NOW + 2 * HOUR)
    log.append_as_leader(sent, now_ms=NOW, leader_epoch=0)
    assert log.log_end_offset == 20


@pytest.mark.parametrize("props", [{}, {"message_timestamp_before_max_ms": 10 * HOUR},
                                   {"cleanup_policy": "compact"}])
def test_a_header_understating_its_max_timestamp(open_log, props) -> None:
    # The accepted trade-off: with only the ceiling, a compressed batch is judged by its header,
    # so a client that writes a maxTimestamp below its records' gets them in. A floor (or a
    # compacted topic) makes the log open every compressed batch, and then it is refused.
    log = open_log(**props)
    lying = _with_header_max(batch(codec=fmt.GZIP, ts=NOW + 2 * HOUR), NOW)
    if not props:
        log.append_as_leader(lying, now_ms=NOW, leader_epoch=0)
        assert log.log_end_offset == 20
        return
    with pytest.raises(RecordValidationError) as ei:
        log.append_as_leader(lying, now_ms=NOW, leader_epoch=0)
    assert ei.value.code == ErrorCode.INVALID_TIMESTAMP and len(ei.value.record_errors) == 20
