"""Idempotent producers: dedup, sequence and epoch rules, state across restarts."""

from __future__ import annotations

import os

import pytest

from kafkapy.log import files
from kafkapy.log.producer_state import (
    INT32_MAX,
    ProducerBatch,
    ProducerStateManager,
    increment_sequence,
)
from kafkapy.protocol.errors import ErrorCode, KafkaError

from .helpers import make_batch

PID = 4000


def produce(log, n: int, seq: int, epoch: int = 0, pid: int = PID):
    return log.append_as_leader(make_batch(n, pid=pid, epoch=epoch, seq=seq), now_ms=0,
                                leader_epoch=0)


def error_of(fn) -> ErrorCode:
    with pytest.raises(KafkaError) as e:
        fn()
    return e.value.code


def test_in_sequence_appends(open_log):
    log = open_log()
    assert produce(log, 3, 0).first_offset == 0
    assert produce(log, 2, 3).first_offset == 3
    e = log.producer_state.last_entry(PID)
    assert (e.producer_epoch, e.first_seq, e.last_seq, e.last_data_offset) == (0, 0, 4, 4)


def test_duplicate_returns_original_offsets_and_writes_nothing(open_log):
    log = open_log()
    produce(log, 3, 0)
    produce(log, 2, 3)
    log.append_as_leader(make_batch(1), now_ms=0, leader_epoch=0)  # someone else
    size = log.active.size
    r = produce(log, 3, 0)  # retry of the first batch
    assert r.duplicate and (r.first_offset, r.last_offset) == (0, 2)
    assert log.active.size == size and log.log_end_offset == 6
    r = produce(log, 2, 3)
    assert r.duplicate and (r.first_offset, r.last_offset) == (3, 4)


def test_only_last_five_batches_are_remembered(open_log):
    log = open_log()
    for i in range(6):
        produce(log, 1, i)
    assert error_of(lambda: produce(log, 1, 0)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce(log, 1, 1).duplicate


def test_out_of_order_sequence(open_log):
    log = open_log()
    produce(log, 2, 0)
    assert error_of(lambda: produce(log, 1, 5)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert error_of(lambda: produce(log, 1, 1)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.log_end_offset == 2
    assert produce(log, 1, 2).first_offset == 2


def test_unknown_producer_may_start_anywhere(open_log):
    log = open_log()
    # As Kafka since KIP-360: no state for the producer (e.g. expired) → any sequence accepted.
    assert produce(log, 1, 42).first_offset == 0
    assert error_of(lambda: produce(log, 1, 44)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_epoch_bump_must_restart_at_zero(open_log):
    log = open_log()
    produce(log, 2, 0, epoch=1)
    assert error_of(lambda: produce(log, 1, 2, epoch=2)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce(log, 1, 0, epoch=2).first_offset == 2
    # Fenced: a lower epoch than the current one.
    assert error_of(lambda: produce(log, 1, 2, epoch=1)) == ErrorCode.INVALID_PRODUCER_EPOCH
    # An old-epoch retry is not a duplicate any more either.
    assert error_of(lambda: produce(log, 2, 0, epoch=1)) == ErrorCode.INVALID_PRODUCER_EPOCH


def test_sequence_wraps_at_int32_max():
    assert increment_sequence(INT32_MAX, 1) == 0
    assert increment_sequence(INT32_MAX - 1, 3) == 1
    psm = ProducerStateManager(None)
    b1 = ProducerBatch(PID, 0, INT32_MAX - 1, 0, 1, 0, False, False)  # seqs MAX-1, MAX
    psm.commit(psm.prepare([b1], from_client=True), 2)
    b2 = ProducerBatch(PID, 0, 0, 2, 3, 0, False, False)
    psm.commit(psm.prepare([b2], from_client=True), 4)
    assert psm.last_entry(PID).last_seq == 1
    assert psm.prepare([b1], from_client=True).duplicate is not None
    bad = ProducerBatch(PID, 0, 5, 4, 4, 0, False, False)
    with pytest.raises(KafkaError):
        psm.prepare([bad], from_client=True)


def test_follower_appends_skip_checks_but_track_state():
    psm = ProducerStateManager(None)
    psm.commit(psm.prepare([ProducerBatch(PID, 3, 10, 0, 0, 0, False, False)],
                           from_client=False), 1)
    psm.commit(psm.prepare([ProducerBatch(PID, 1, 99, 1, 1, 0, False, False)],
                           from_client=False), 2)  # lower epoch from the leader: accepted
    assert psm.last_entry(PID).last_seq == 99


def test_state_recovered_from_snapshot_after_clean_restart(open_log, log_dir):
    log = open_log()
    produce(log, 3, 0)
    produce(log, 2, 3)
    log.close()
    assert os.path.exists(files.snapshot_file(log_dir, 5))
    again = open_log()
    e = again.producer_state.last_entry(PID)
    assert e is not None and e.last_seq == 4
    assert produce(again, 2, 3).duplicate  # the last batch survives in the snapshot
    assert error_of(lambda: produce(again, 1, 9)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce(again, 1, 5).first_offset == 5


def test_state_recovered_without_snapshot_by_replaying_the_log(open_log, log_dir):
    log = open_log()
    produce(log, 3, 0)
    produce(log, 2, 3)
    produce(log, 1, 0, pid=PID + 1, epoch=7)
    for seg in log.segments:
        seg.close_handlers()
    log.closed = True  # crash: no snapshot written
    assert not any(n.endswith(".snapshot") for n in os.listdir(log_dir))
    again = open_log(recover=True)
    assert produce(again, 3, 0).duplicate
    assert produce(again, 2, 3).duplicate
    assert again.producer_state.last_entry(PID + 1).producer_epoch == 7
    assert error_of(lambda: produce(again, 1, 0, pid=PID + 1, epoch=6)) == \
        ErrorCode.INVALID_PRODUCER_EPOCH
    assert produce(again, 1, 5).first_offset == 6


def test_snapshot_then_replay_of_later_batches(open_log, log_dir):
    log = open_log(segment_bytes=300)
    for i in range(6):
        produce(log, 1, i)
    assert len(log.segments) > 1
    for seg in log.segments:
        seg.close_handlers()
    log.closed = True
    snaps = sorted(n for n in os.listdir(log_dir) if n.endswith(".snapshot"))
    assert snaps  # written at each roll
    again = open_log(recover=True, segment_bytes=300)
    assert again.producer_state.last_entry(PID).last_seq == 5
    assert produce(again, 1, 5).duplicate
    assert produce(again, 1, 6).first_offset == 6


def test_corrupt_snapshot_falls_back_to_older_one_or_log(open_log, log_dir):
    log = open_log()
    produce(log, 2, 0)
    log.close()
    path = files.snapshot_file(log_dir, 2)
    with open(path, "r+b") as f:
        f.seek(12)
        f.write(b"\xff")
    again = open_log()
    assert not os.path.exists(path)
    assert again.producer_state.last_entry(PID).last_seq == 1  # rebuilt from the log


def test_truncation_rebuilds_producer_state(open_log):
    log = open_log()
    produce(log, 1, 0)
    produce(log, 1, 1)
    produce(log, 1, 2)
    log.truncate_to(2)
    assert log.producer_state.last_entry(PID).last_seq == 1
    assert produce(log, 1, 2).first_offset == 2


def test_transaction_marker_from_broker_closes_transaction(open_log):
    import struct as _s

    from kafkapy.records.builder import Record, build_batch
    log = open_log()
    txn = build_batch([Record(None, b"x", timestamp=1)] * 2, producer_id=PID, producer_epoch=0,
                      base_sequence=0, transactional=True)
    log.append_as_leader(bytearray(txn), now_ms=0, leader_epoch=0)
    assert log.producer_state.last_entry(PID).current_txn_first_offset == 0
    log.append_as_leader(make_batch(1), now_ms=0, leader_epoch=0)
    assert log.last_stable_offset == 0 and log.high_watermark == 3
    marker = build_batch([Record(_s.pack(">hh", 0, 1), _s.pack(">hi", 0, 17), timestamp=2)],
                         producer_id=PID, producer_epoch=0, transactional=True, control=True)
    with pytest.raises(KafkaError):
        log.append_as_leader(bytearray(marker), now_ms=0, leader_epoch=0)  # not from clients
    r = log.append_as_leader(bytearray(marker), now_ms=0, leader_epoch=0, from_client=False)
    assert r.first_offset == 3
    assert log.last_stable_offset == log.high_watermark == 4
    e = log.producer_state.last_entry(PID)
    assert e.current_txn_first_offset == -1 and e.coordinator_epoch == 17
    log.close()
    again = open_log()
    e = again.producer_state.last_entry(PID)
    assert e.coordinator_epoch == 17 and e.last_seq == 1
