"""The high watermark of a replicated log: restored on open, kept by appends and truncation, and
the follower's way of taking the leader's log start offset."""

from __future__ import annotations

import pytest

from kafkapy.log.partition_log import PartitionLog
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.records.builder import Record, build_batch

from .helpers import make_batch


def _follower_batch(base: int, n: int, epoch: int = 0) -> bytes:
    return build_batch([Record(None, b"x", timestamp=1)] * n, base_offset=base,
                       partition_leader_epoch=epoch)


def _reopen(log: PartitionLog, **kwargs) -> PartitionLog:
    log.close()
    return PartitionLog.open(log.dir, log.config, now_ms=0, recover=False, **kwargs)


@pytest.mark.parametrize("checkpointed,expected", [(None, 10), (4, 4), (0, 3), (-1, 3), (99, 10)])
def test_open_clamps_the_checkpointed_high_watermark_into_the_log(open_log, checkpointed, expected):
    log = open_log()
    log.append_as_leader(make_batch(10), now_ms=0, leader_epoch=0)
    log.maybe_increment_log_start_offset(3)
    log = _reopen(log, high_watermark=checkpointed, log_start_offset=3)
    try:
        assert (log.local_log_start_offset, log.log_end_offset) == (3, 10)
        assert log.high_watermark == expected
    finally:
        log.close()


def test_a_replicated_log_keeps_its_high_watermark_through_appends(open_log):
    log = open_log()
    log.hw_follows_leo = False
    log.append_as_leader(make_batch(4), now_ms=0, leader_epoch=0)
    assert log.high_watermark == 0
    log.update_high_watermark(2)
    log.append_as_follower(_follower_batch(4, 3))
    assert (log.high_watermark, log.log_end_offset) == (2, 7)
    # What consumers may read stops at the high watermark, not at the log end.
    assert log.last_stable_offset == 2


def test_truncation_lowers_the_high_watermark_only_to_the_new_log_end(open_log):
    log = open_log()
    log.hw_follows_leo = False
    log.append_as_follower(_follower_batch(0, 3) + _follower_batch(3, 3) + _follower_batch(6, 3))
    log.update_high_watermark(5)
    assert log.truncate_to(6)
    assert (log.log_end_offset, log.high_watermark) == (6, 5)
    assert log.truncate_to(3)
    assert (log.log_end_offset, log.high_watermark) == (3, 3)


def test_truncate_fully_moves_the_high_watermark_to_the_new_start(open_log):
    log = open_log()
    log.hw_follows_leo = False
    log.append_as_follower(_follower_batch(0, 5))
    log.update_high_watermark(2)
    log.truncate_fully_and_start_at(40)
    assert (log.local_log_start_offset, log.log_end_offset, log.high_watermark) == (40, 40, 40)
    log.truncate_fully_and_start_at(7)
    assert (log.local_log_start_offset, log.log_end_offset, log.high_watermark) == (7, 7, 7)


def test_follower_takes_the_leaders_log_start_below_its_high_watermark(open_log):
    log = open_log()
    log.hw_follows_leo = False
    log.append_as_follower(_follower_batch(0, 5) + _follower_batch(5, 5))
    log.update_high_watermark(8)
    assert log.maybe_increment_log_start_offset_from_leader(6)
    assert (log.local_log_start_offset, log.high_watermark) == (6, 8)
    with pytest.raises(KafkaError):
        log.read(5, 1 << 20)
    assert not log.maybe_increment_log_start_offset_from_leader(6)  # already there
    assert not log.maybe_increment_log_start_offset_from_leader(2)  # never backwards
    assert log.local_log_start_offset == 6


def test_follower_takes_the_leaders_log_start_past_its_high_watermark(open_log):
    log = open_log()
    log.hw_follows_leo = False
    log.append_as_follower(_follower_batch(0, 5) + _follower_batch(5, 5))
    log.update_high_watermark(3)
    # The leader deleted up to 7, so 7 was committed: the follower's HW rises with it.
    assert log.maybe_increment_log_start_offset_from_leader(7)
    assert (log.local_log_start_offset, log.high_watermark, log.log_end_offset) == (7, 7, 10)
    # A leader start past our log end is capped there: we keep no offset the leader dropped.
    assert log.maybe_increment_log_start_offset_from_leader(25)
    assert (log.local_log_start_offset, log.high_watermark, log.log_end_offset) == (10, 10, 10)
    log.append_as_follower(_follower_batch(10, 2))
    assert log.log_end_offset == 12 and log.local_log_start_offset == 10


def test_the_leader_variant_still_refuses_to_pass_the_high_watermark(open_log):
    log = open_log()
    log.hw_follows_leo = False
    log.append_as_follower(_follower_batch(0, 5))
    log.update_high_watermark(2)
    with pytest.raises(KafkaError):
        log.maybe_increment_log_start_offset(4)
    assert log.local_log_start_offset == 0


def test_a_moved_log_start_survives_a_restart_with_the_high_watermark(open_log):
    log = open_log(segment_bytes=200)
    log.hw_follows_leo = False
    for base in range(0, 20, 4):
        log.append_as_follower(_follower_batch(base, 4, epoch=base // 8))
    log.update_high_watermark(6)
    assert log.maybe_increment_log_start_offset_from_leader(9)
    start, hw = log.local_log_start_offset, log.high_watermark
    log = _reopen(log, log_start_offset=start, high_watermark=hw)
    try:
        assert (log.local_log_start_offset, log.high_watermark, log.log_end_offset) == (9, 9, 20)
        assert log.leader_epoch_cache.entries[0].start_offset == 9
    finally:
        log.close()


def test_closed_logs_refuse_to_move_their_start(open_log):
    log = open_log()
    log.close()
    with pytest.raises(KafkaError) as e:
        log.maybe_increment_log_start_offset_from_leader(1)
    assert e.value.code == ErrorCode.KAFKA_STORAGE_ERROR


def test_truncating_below_the_log_start_brings_the_start_down_with_it(open_log):
    # A follower that took the leader's log start and then meets a new leader whose log ends
    # below it (unclean election) must end up with start <= end, as Kafka's truncateTo.
    log = open_log()
    log.hw_follows_leo = False
    log.append_as_follower(_follower_batch(0, 3) + _follower_batch(3, 3) + _follower_batch(6, 3))
    log.update_high_watermark(8)
    assert log.maybe_increment_log_start_offset_from_leader(7)
    assert log.truncate_to(3)
    assert (log.local_log_start_offset, log.high_watermark, log.log_end_offset) == (3, 3, 3)
    log.append_as_follower(_follower_batch(3, 2, epoch=1))
    assert (log.local_log_start_offset, log.log_end_offset) == (3, 5)


def test_delete_records_below_the_local_start_of_a_tiered_log_moves_the_whole_log_start(open_log):
    log = open_log(segment_bytes=200)
    for base in range(0, 20, 4):
        log.append_as_leader(make_batch(4), now_ms=0, leader_epoch=0)
    # As if local retention had dropped what is remote (that moves only the local start).
    log.maybe_increment_log_start_offset(12)
    assert log.delete_old_segments(now_ms=0) > 0
    log.update_remote_state(enabled=True)
    # The remote part not known yet: the local start, which followers must not hear.
    assert (log.log_start_offset, log.replicated_log_start_offset) == (12, -1)
    log.update_remote_state(earliest_offset=-1)  # known: nothing remote
    assert (log.log_start_offset, log.replicated_log_start_offset) == (12, 12)
    log.update_remote_state(earliest_offset=0)
    assert log.log_start_offset == 0
    # DeleteRecords inside the remote part: the local log is untouched, the whole log moves.
    assert log.maybe_increment_log_start_offset(5)
    assert (log.local_log_start_offset, log.log_start_offset, log.replicated_log_start_offset) == (12, 5, 5)
    assert not log.maybe_increment_log_start_offset(3)  # never backwards
    # Remote retention removed more than that: the earliest remote offset wins.
    log.update_remote_state(earliest_offset=8)
    assert log.log_start_offset == 8
    log.update_remote_state(earliest_offset=0)
    # It outlives the local files: the checkpoint keeps it and the reopened log starts there.
    assert log.checkpoint_log_start_offset == 5
    log = _reopen(log, log_start_offset=log.checkpoint_log_start_offset)
    try:
        log.update_remote_state(enabled=True, earliest_offset=0)
        assert (log.local_log_start_offset, log.log_start_offset) == (12, 5)
        # A follower takes the leader's whole start the same way; above the local start the
        # local log moves and takes the whole start with it.
        assert log.maybe_increment_log_start_offset_from_leader(7)
        assert log.log_start_offset == 7
        assert log.maybe_increment_log_start_offset(14)
        assert (log.local_log_start_offset, log.log_start_offset, log.checkpoint_log_start_offset) == (14, 14, 14)
    finally:
        log.close()


def test_a_log_without_remote_storage_ignores_offsets_below_its_start(open_log):
    log = open_log()
    log.append_as_leader(make_batch(10), now_ms=0, leader_epoch=0)
    log.maybe_increment_log_start_offset(6)
    log.update_remote_state(earliest_offset=0)
    assert not log.maybe_increment_log_start_offset(3)
    assert (log.local_log_start_offset, log.log_start_offset, log.checkpoint_log_start_offset) == (6, 6, 6)


def test_an_append_reports_the_whole_log_start_as_kafka_does(open_log):
    # Produce responses carry Kafka's logStartOffset: on a tiered log that is the whole log's
    # start, below the local one, not the first offset this broker holds.
    log = open_log(segment_bytes=200)
    for _ in range(5):
        log.append_as_leader(make_batch(4), now_ms=0, leader_epoch=0)
    log.maybe_increment_log_start_offset(12)
    log.delete_old_segments(now_ms=0)
    log.update_remote_state(enabled=True, earliest_offset=2)
    result = log.append_as_leader(make_batch(1), now_ms=0, leader_epoch=0)
    assert (log.local_log_start_offset, log.log_start_offset, result.log_start_offset) == (12, 2, 2)
