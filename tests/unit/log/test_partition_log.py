"""PartitionLog: append/read round trips, indexes, rolling, bounds, timestamps, truncation."""

from __future__ import annotations

import os
import struct

import pytest

from kafkapy.log import files
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.records import format as fmt
from kafkapy.records.reader import iter_batches, iter_records

from .helpers import make_batch


def batches_of(data: bytes) -> list[fmt.BatchHeader]:
    return [h for h, _ in iter_batches(data)]


def test_append_and_read_round_trip(open_log):
    log = open_log()
    assert (log.local_log_start_offset, log.log_end_offset) == (0, 0)
    r1 = log.append_as_leader(make_batch(3), now_ms=5, leader_epoch=0)
    r2 = log.append_as_leader(make_batch(2), now_ms=5, leader_epoch=0)
    assert (r1.first_offset, r1.last_offset, r1.record_count) == (0, 2, 3)
    assert (r2.first_offset, r2.last_offset) == (3, 4)
    assert r1.log_append_time == -1 and not r1.duplicate
    assert log.log_end_offset == 5 and log.high_watermark == 5
    data = log.read(0, 1 << 20, max_offset=log.high_watermark).read_bytes()
    hs = batches_of(data)
    assert [(h.base_offset, h.last_offset) for h in hs] == [(0, 2), (3, 4)]
    recs = [r for _, b in iter_batches(data) for r in iter_records(b)]
    assert [r.offset for r in recs] == [0, 1, 2, 3, 4]
    assert log.read(5, 100, max_offset=5) is None  # at the log end


def test_log_append_time(open_log):
    log = open_log(message_timestamp_type="LogAppendTime")
    r = log.append_as_leader(make_batch(2, ts=1), now_ms=777, leader_epoch=0)
    assert r.log_append_time == 777
    h = batches_of(log.read(0, 1 << 20).read_bytes())[0]
    assert h.max_timestamp == 777 and h.is_log_append_time


def test_read_mid_batch_returns_whole_batch(open_log):
    log = open_log()
    log.append_as_leader(make_batch(5), now_ms=0, leader_epoch=0)
    log.append_as_leader(make_batch(5), now_ms=0, leader_epoch=0)
    s = log.read(7, 1 << 20)
    hs = batches_of(s.read_bytes())
    assert [h.base_offset for h in hs] == [5]
    assert s.size == hs[0].size


def test_read_out_of_range(open_log):
    log = open_log()
    log.append_as_leader(make_batch(3), now_ms=0, leader_epoch=0)
    with pytest.raises(KafkaError) as e:
        log.read(4, 100)
    assert e.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    with pytest.raises(KafkaError) as e:
        log.read(-1, 100)
    assert e.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert log.read(3, 100) is None


def test_read_bounded_by_max_bytes_whole_batches(open_log):
    log = open_log()
    sizes = []
    for _ in range(10):
        b = make_batch(1, value_size=100)
        sizes.append(len(b))
        log.append_as_leader(b, now_ms=0, leader_epoch=0)
    one = sizes[0]
    s = log.read(0, one * 3 + one // 2)
    assert s.size == one * 3  # never a partial batch
    assert len(batches_of(s.read_bytes())) == 3
    # First batch larger than max_bytes: whole when min_one_message, nothing otherwise.
    assert log.read(0, 10).size == one
    assert log.read(0, 10, min_one_message=False) is None


def test_read_bounded_by_max_offset(open_log):
    log = open_log()
    for _ in range(4):
        log.append_as_leader(make_batch(2), now_ms=0, leader_epoch=0)  # 0-1, 2-3, 4-5, 6-7
    s = log.read(0, 1 << 20, max_offset=4)
    assert [h.base_offset for h in batches_of(s.read_bytes())] == [0, 2]
    assert log.read(4, 1 << 20, max_offset=4) is None
    # A batch straddling max_offset is not exposed (Kafka cuts at that batch's position).
    s = log.read(0, 1 << 20, max_offset=5)
    assert [h.base_offset for h in batches_of(s.read_bytes())] == [0, 2]


def test_sparse_offset_index(open_log, log_dir):
    log = open_log(index_interval_bytes=1000)
    size = len(make_batch(1, value_size=300))
    for _ in range(30):
        log.append_as_leader(make_batch(1, value_size=300), now_ms=0, leader_epoch=0)
    idx = log.active.offset_index
    # An entry for each batch that starts once more than 1000 bytes went by since the last
    # one: every k-th batch with k = 1000 // size + 1 (batch 0 at position 0 is never indexed).
    k = 1000 // size + 1
    assert idx.entries == 29 // k
    positions = [idx.entry(i).position for i in range(idx.entries)]
    offsets = [idx.entry(i).offset for i in range(idx.entries)]
    assert all(p % size == 0 for p in positions)
    assert offsets == [p // size for p in positions]  # one record per batch: last offset = index
    assert all(b2 - b1 > 1000 for b1, b2 in zip([0] + positions, positions))
    # Every offset still reads back its own batch.
    for off in range(30):
        h = batches_of(log.read(off, 1).read_bytes())[0]
        assert h.base_offset == off
    log.close()
    raw = open(files.index_file(log_dir, 0), "rb").read()
    assert len(raw) == 8 * len(offsets)
    assert struct.unpack(">ii", raw[:8]) == (offsets[0], positions[0])


def test_time_index_written_on_new_max_timestamps(open_log, log_dir):
    log = open_log(index_interval_bytes=0)
    for ts in (100, 300, 200, 400):
        log.append_as_leader(make_batch(1, ts=ts), now_ms=0, leader_epoch=0)
    log.close()
    raw = open(files.time_index_file(log_dir, 0), "rb").read()
    entries = [struct.unpack_from(">qi", raw, i) for i in range(0, len(raw), 12)]
    # First batch is never indexed (at position 0); 200 is not a new max; roll/close adds none.
    assert entries == [(300, 1), (400, 3)]


def test_roll_by_size(open_log, log_dir):
    b = make_batch(1, value_size=200)
    log = open_log(segment_bytes=len(b) * 3)
    for _ in range(10):
        log.append_as_leader(make_batch(1, value_size=200), now_ms=0, leader_epoch=0)
    bases = [s.base_offset for s in log.segments]
    assert bases == [0, 3, 6, 9]
    assert all(s.size <= len(b) * 3 for s in log.segments)
    names = sorted(os.listdir(log_dir))
    for base in bases:
        assert files.filename_prefix(base) + ".log" in names
        assert files.filename_prefix(base) + ".index" in names
        assert files.filename_prefix(base) + ".timeindex" in names
    for base in bases[1:]:  # a producer snapshot at each roll
        assert files.filename_prefix(base) + ".snapshot" in names
    # Inactive segments' indexes are trimmed; the active one is preallocated.
    assert os.path.getsize(files.index_file(log_dir, 0)) == 0
    assert os.path.getsize(files.index_file(log_dir, 9)) == 10_485_760
    # Reads stay within one segment.
    s = log.read(0, 1 << 20)
    assert [h.base_offset for h in batches_of(s.read_bytes())] == [0, 1, 2]
    s = log.read(4, 1 << 20)
    assert [h.base_offset for h in batches_of(s.read_bytes())] == [4, 5]


def test_roll_by_time_uses_first_batch_timestamp(open_log):
    log = open_log(segment_ms=1000)
    log.append_as_leader(make_batch(1, ts=10_000), now_ms=0, leader_epoch=0)
    log.append_as_leader(make_batch(1, ts=10_900), now_ms=0, leader_epoch=0)
    assert len(log.segments) == 1
    log.append_as_leader(make_batch(1, ts=11_001), now_ms=0, leader_epoch=0)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_roll_by_time_without_timestamps_uses_creation(open_log):
    log = open_log(segment_ms=1000, now_ms=0)
    log.append_as_leader(make_batch(1, ts=5), now_ms=0, leader_epoch=0)
    log.active._rolling_ts = -1  # as if the first batch carried no timestamp
    log.append_as_leader(make_batch(1, ts=5), now_ms=999, leader_epoch=0)
    assert len(log.segments) == 1
    log.append_as_leader(make_batch(1, ts=5), now_ms=1001, leader_epoch=0)
    assert len(log.segments) == 2


def test_roll_when_index_full(open_log):
    log = open_log(segment_index_bytes=8 * 2, index_interval_bytes=0)
    for _ in range(8):
        log.append_as_leader(make_batch(1), now_ms=0, leader_epoch=0)
    assert len(log.segments) > 1
    assert all(s.offset_index.entries <= 2 for s in log.segments)


def test_offset_for_timestamp(open_log):
    log = open_log(index_interval_bytes=0, segment_bytes=400)
    # batch i holds offsets 3i..3i+2 with timestamps 1000+10i, +1, +2
    for i in range(20):
        log.append_as_leader(make_batch(3, ts=1000 + 10 * i, ts_step=1), now_ms=0, leader_epoch=0)
    assert len(log.segments) > 2
    assert log.offset_for_timestamp(0) == (0, 1000)
    assert log.offset_for_timestamp(1000) == (0, 1000)
    assert log.offset_for_timestamp(1001) == (1, 1001)
    assert log.offset_for_timestamp(1003) == (3, 1010)
    assert log.offset_for_timestamp(1112) == (35, 1112)
    assert log.offset_for_timestamp(1192) == (59, 1192)
    assert log.offset_for_timestamp(1193) is None


def test_offset_for_timestamp_out_of_order_records(open_log):
    log = open_log()
    from kafkapy.records.builder import Record, build_batch
    recs = [Record(None, b"x", timestamp=t) for t in (500, 300, 900, 100)]
    log.append_as_leader(bytearray(build_batch(recs)), now_ms=0, leader_epoch=0)
    assert log.offset_for_timestamp(400) == (0, 500)
    assert log.offset_for_timestamp(600) == (2, 900)
    assert log.max_timestamp_and_offset() == (900, 2)


def test_max_timestamp_and_offset(open_log):
    log = open_log(segment_bytes=300)
    assert log.max_timestamp_and_offset() is None
    for ts in (5, 50, 7, 20):
        log.append_as_leader(make_batch(2, ts=ts), now_ms=0, leader_epoch=0)
    r = log.max_timestamp_and_offset()
    assert (r.offset, r.timestamp) == (2, 50)


def test_truncate_to(open_log):
    log = open_log(segment_bytes=300)
    for i in range(10):
        log.append_as_leader(make_batch(2, ts=i), now_ms=0, leader_epoch=i // 3)
    assert len(log.segments) > 2
    log.truncate_to(8)
    assert log.log_end_offset == 8 and log.high_watermark == 8
    assert log.leader_epoch_cache.entries[-1].start_offset < 8
    log.append_as_leader(make_batch(1), now_ms=0, leader_epoch=9)
    assert log.log_end_offset == 9
    data = b"".join(log.read(o, 1 << 20).read_bytes() for o in (0,))
    assert batches_of(data)[0].base_offset == 0
    log.truncate_to(0)
    assert (log.local_log_start_offset, log.log_end_offset, len(log.segments)) == (0, 0, 1)


def test_follower_append_keeps_offsets(open_log):
    log = open_log()
    from kafkapy.records.builder import Record, build_batch
    b1 = build_batch([Record(None, b"a", timestamp=1)] * 3, base_offset=0, partition_leader_epoch=2)
    b2 = build_batch([Record(None, b"b", timestamp=1)] * 2, base_offset=3, partition_leader_epoch=4)
    partial = build_batch([Record(None, b"c", timestamp=1)], base_offset=5)[:-3]
    r = log.append_as_follower(b1 + b2 + partial)
    assert (r.first_offset, r.last_offset, r.record_count) == (0, 4, 5)
    assert log.log_end_offset == 5
    assert log.leader_epoch_cache.entries == [(2, 0), (4, 3)]
    assert log.read(0, 1 << 20).read_bytes() == b1 + b2
    with pytest.raises(KafkaError):
        log.append_as_follower(b1)  # offsets below the log end
    bad = bytearray(build_batch([Record(None, b"d", timestamp=1)], base_offset=5))
    bad[-1] ^= 0xFF
    with pytest.raises(KafkaError) as e:
        log.append_as_follower(bytes(bad))
    assert e.value.code == ErrorCode.CORRUPT_MESSAGE


def test_validation_error_writes_nothing(open_log):
    log = open_log(max_message_bytes=100)
    with pytest.raises(KafkaError) as e:
        log.append_as_leader(make_batch(1, value_size=500), now_ms=0, leader_epoch=0)
    assert e.value.code == ErrorCode.MESSAGE_TOO_LARGE
    assert log.log_end_offset == 0 and log.active.size == 0


def test_fetch_slice_survives_segment_deletion(open_log):
    log = open_log()
    log.append_as_leader(make_batch(3), now_ms=0, leader_epoch=0)
    s = log.read(0, 1 << 20)
    expected = s.read_bytes()
    log.truncate_fully_and_start_at(100)
    assert s.read_bytes() == expected  # the unlinked file is still readable via the slice
    os.fstat(s.fileno())


def test_rolled_segments_flush_and_advance_recovery_point(open_log):
    log = open_log(segment_bytes=300)
    for _ in range(6):
        log.append_as_leader(make_batch(2), now_ms=0, leader_epoch=0)
    assert log.recovery_point == 0 and log.pending_roll_flush == log.active.base_offset
    log.flush_rolled()
    assert log.recovery_point == log.active.base_offset and log.pending_roll_flush is None
    log.flush()
    assert log.recovery_point == log.log_end_offset


def test_flush_messages_triggers_flush(open_log):
    log = open_log(flush_messages=4)
    log.append_as_leader(make_batch(2), now_ms=0, leader_epoch=0)
    assert log.recovery_point == 0
    log.append_as_leader(make_batch(2), now_ms=0, leader_epoch=0)
    assert log.recovery_point == 4
    assert not log.maybe_flush(10)


def test_many_batches_in_one_request_cannot_overflow_the_index(open_log):
    log = open_log(segment_index_bytes=8 * 2, index_interval_bytes=0)
    buf = bytearray(b"".join(bytes(make_batch(1)) for _ in range(10)))
    r = log.append_as_leader(buf, now_ms=0, leader_epoch=0)
    assert (r.first_offset, r.last_offset) == (0, 9)
    assert log.active.offset_index.entries == 2
    assert [h.base_offset for h in batches_of(log.read(7, 1 << 20).read_bytes())][0] == 7


def test_fetch_slice_works_with_sendfile(open_log, tmp_path):
    log = open_log()
    for _ in range(3):
        log.append_as_leader(make_batch(2), now_ms=0, leader_epoch=0)
    s = log.read(2, 1 << 20)
    out = os.open(str(tmp_path / "out"), os.O_WRONLY | os.O_CREAT)
    try:
        sent = 0
        while sent < s.size:
            sent += os.sendfile(out, s.fileno(), s.position + sent, s.size - sent)
    finally:
        os.close(out)
    assert open(tmp_path / "out", "rb").read() == s.read_bytes()
    assert [h.base_offset for h in batches_of(s.read_bytes())] == [2, 4]
