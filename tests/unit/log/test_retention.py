"""Retention and log start offset movement."""

from __future__ import annotations

import os

import pytest

from kafkapy.log import files
from kafkapy.protocol.errors import ErrorCode, KafkaError

from .helpers import make_batch


def fill(log, n: int, ts0: int = 1000) -> None:
    for i in range(n):
        log.append_as_leader(make_batch(2, ts=ts0 + i, value_size=40), now_ms=0, leader_epoch=0)


def test_retention_ms_deletes_old_segments_but_keeps_log_usable(open_log, log_dir):
    log = open_log(segment_bytes=300, retention_ms=100)
    fill(log, 10, ts0=1000)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) > 2
    assert log.delete_old_segments(now_ms=1050) == 0
    n = log.delete_old_segments(now_ms=1103)  # segments whose max ts < 1003 go
    assert n >= 1
    assert log.log_start_offset == log.segments[0].base_offset > 0
    assert not os.path.exists(files.log_file(log_dir, 0))
    with pytest.raises(KafkaError) as e:
        log.read(0, 100)
    assert e.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    # Everything expired: the log rolls and keeps its end offset.
    leo = log.log_end_offset
    log.delete_old_segments(now_ms=10**9)
    assert len(log.segments) == 1 and log.active.size == 0
    assert log.log_start_offset == log.log_end_offset == leo
    assert log.append_as_leader(make_batch(1), now_ms=0, leader_epoch=0).first_offset == leo


def test_retention_bytes(open_log):
    log = open_log(segment_bytes=300, retention_bytes=600)
    fill(log, 12)
    before = len(log.segments)
    assert log.delete_old_segments(now_ms=0) > 0
    assert len(log.segments) < before
    # Kafka deletes whole segments while the log stays at or above retention.bytes.
    assert log.size_in_bytes - log.segments[0].size < 600


def test_high_watermark_bounds_deletion(open_log):
    log = open_log(segment_bytes=300, retention_ms=0)
    fill(log, 10)
    log.hw_follows_leo = False
    log.high_watermark = log.segments[1].base_offset
    assert log.delete_old_segments(now_ms=10**9) == 1
    assert log.segments[0].base_offset == log.high_watermark == log.log_start_offset


def test_increment_log_start_offset(open_log):
    log = open_log(segment_bytes=300)
    fill(log, 10)
    target = log.segments[2].base_offset + 1
    assert log.increment_log_start_offset(target)
    assert log.log_start_offset == target
    with pytest.raises(KafkaError):
        log.read(target - 1, 100)
    assert log.delete_old_segments(now_ms=0) == 2  # segments wholly below the start go
    assert log.segments[0].base_offset == target - 1
    assert log.log_start_offset == target
    with pytest.raises(KafkaError):
        log.increment_log_start_offset(log.log_end_offset + 1)
