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
    assert log.local_log_start_offset == log.segments[0].base_offset > 0
    assert not os.path.exists(files.log_file(log_dir, 0))
    with pytest.raises(KafkaError) as e:
        log.read(0, 100)
    assert e.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    # Everything expired: the log rolls and keeps its end offset.
    leo = log.log_end_offset
    log.delete_old_segments(now_ms=10**9)
    assert len(log.segments) == 1 and log.active.size == 0
    assert log.local_log_start_offset == log.log_end_offset == leo
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
    log.update_high_watermark(log.segments[1].base_offset)
    assert log.delete_old_segments(now_ms=10**9) == 1
    assert log.segments[0].base_offset == log.high_watermark == log.local_log_start_offset


def test_increment_log_start_offset(open_log):
    log = open_log(segment_bytes=300)
    fill(log, 10)
    target = log.segments[2].base_offset + 1
    assert log.maybe_increment_log_start_offset(target)
    assert log.local_log_start_offset == target
    with pytest.raises(KafkaError):
        log.read(target - 1, 100)
    assert log.delete_old_segments(now_ms=0) == 2  # segments wholly below the start go
    assert log.segments[0].base_offset == target - 1
    assert log.local_log_start_offset == target
    with pytest.raises(KafkaError):
        log.maybe_increment_log_start_offset(log.log_end_offset + 1)


# ---------------------------------------------------------------- two-step deletion, crashes
from kafkapy.log.checkpoint import read_offsets_checkpoint  # noqa: E402
from kafkapy.log.config import LogConfig  # noqa: E402
from kafkapy.log.log_manager import LogManager  # noqa: E402
from kafkapy.records import reader  # noqa: E402


def record_offsets(log, start: int | None = None) -> list[int]:
    """Every record offset readable from ``start`` (the log start by default) to the end."""
    out: list[int] = []
    offset = log.local_log_start_offset if start is None else start
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20).read_bytes()
        for h, _ in reader.iter_batches(data):
            out.extend(o for o in range(h.base_offset, h.last_offset + 1) if o >= offset)
        offset = h.last_offset + 1
    return out


def dir_names(d: str) -> set[str]:
    return set(os.listdir(d))


def test_retention_renames_to_deleted_and_the_owner_unlinks_later(open_log, log_dir):
    log = open_log(segment_bytes=300, retention_ms=100)
    fill(log, 10, ts0=1000)
    first = log.segments[0]
    held = first.slice(0, first.size)  # an in-flight fetch of the segment about to go
    expected = held.read_bytes()
    assert log.delete_old_segments(now_ms=1103) >= 1
    names = dir_names(log_dir)
    prefix = files.filename_prefix(0)
    assert {prefix + ".log.deleted", prefix + ".index.deleted",
            prefix + ".timeindex.deleted"} <= names
    assert prefix + ".log" not in names and prefix + ".index" not in names
    paths = log.take_files_to_delete()
    assert os.path.join(log_dir, prefix + ".log.deleted") in paths
    assert log.take_files_to_delete() == []  # handed over once
    assert held.read_bytes() == expected      # renamed: the slice still reads
    for p in paths:
        os.remove(p)
    assert held.read_bytes() == expected      # unlinked: the open descriptor still reads
    assert not any(n.endswith(".deleted") for n in dir_names(log_dir))


def test_log_manager_unlinks_after_file_delete_delay(tmp_path):
    cfg = LogConfig.from_props({"segment.bytes": "300", "retention.ms": "100",
                                "file.delete.delay.ms": "1000"})
    lm = LogManager([str(tmp_path)], cfg, now_ms=0)
    log = lm.get_or_create("t", 0)
    fill(log, 10, ts0=1000)
    assert lm.next_file_delete_ms() is None
    n = lm.cleanup_logs(now_ms=1103)
    assert n >= 1 and lm.next_file_delete_ms() == 2103
    pending = lm.pending_file_deletes()
    assert pending and all(p.endswith(".deleted") and os.path.exists(p) for p in pending)
    # The pass checkpointed the moved log start offset... (equal to the first base: not written,
    # as in Kafka, but the recovery point moved with it)
    rps = read_offsets_checkpoint(os.path.join(str(tmp_path), files.RECOVERY_POINT_CHECKPOINT))
    assert rps[("t", 0)] >= log.local_log_start_offset > 0
    assert lm.delete_due_files(now_ms=2102) == 0 and all(os.path.exists(p) for p in pending)
    assert lm.delete_due_files(now_ms=2103) == len(pending)
    assert not any(os.path.exists(p) for p in pending)
    assert lm.next_file_delete_ms() is None and lm.pending_file_deletes() == []
    lm.shutdown()


def test_delete_records_then_retention_pass_checkpoints_log_start(tmp_path):
    cfg = LogConfig.from_props({"segment.bytes": "300"})
    lm = LogManager([str(tmp_path)], cfg, now_ms=0)
    log = lm.get_or_create("t", 0)
    fill(log, 10)
    target = log.segments[2].base_offset + 1
    log.maybe_increment_log_start_offset(target)          # what DeleteRecords does
    assert lm.cleanup_logs(now_ms=0) == 2           # segments wholly below it go
    assert log.segments[0].base_offset == target - 1
    lsos = read_offsets_checkpoint(os.path.join(str(tmp_path), files.LOG_START_OFFSET_CHECKPOINT))
    assert lsos[("t", 0)] == target
    # kill -9 now (no shutdown): the reopened log starts at the checkpointed offset.
    lm2 = LogManager([str(tmp_path)], cfg, now_ms=0)
    log2 = lm2.get("t", 0)
    assert log2.local_log_start_offset == target
    assert record_offsets(log2) == list(range(target, 20))
    assert not any(n.endswith(".deleted") for n in dir_names(log2.dir))
    lm2.shutdown()


def test_compacted_logs_are_left_to_the_cleaner(tmp_path):
    cfg = LogConfig.from_props({"segment.bytes": "300", "retention.ms": "0",
                                "cleanup.policy": "compact,delete"})
    lm = LogManager([str(tmp_path)], cfg, now_ms=0)
    log = lm.get_or_create("t", 0)
    fill(log, 10)
    assert lm.cleanup_logs(now_ms=10**9) == 0 and log.local_log_start_offset == 0
    lm.shutdown()


@pytest.mark.parametrize("crash_point", ["log_renamed", "all_renamed", "checkpointed"])
def test_crash_during_deletion_reopens_consistent(tmp_path, crash_point):
    """kill -9 at each point of a retention deletion: reopening removes the leftovers and keeps
    every record at or after the log start offset."""
    cfg = LogConfig.from_props({"segment.bytes": "300", "retention.ms": "100",
                                "file.delete.delay.ms": "60000"})
    lm = LogManager([str(tmp_path)], cfg, now_ms=0)
    log = lm.get_or_create("t", 0)
    fill(log, 10, ts0=1000)
    log.maybe_increment_log_start_offset(3)  # a checkpointed start inside the first segment
    lm.checkpoint()
    leo = log.log_end_offset
    doomed = [s.base_offset for s in log.segments if s.max_timestamp_so_far < 1003]
    assert len(doomed) >= 1
    if crash_point == "log_renamed":
        # The crash hit between the .log rename and the index renames of the first segment.
        os.rename(files.log_file(log.dir, 0), files.log_file(log.dir, 0) + files.DELETED_SUFFIX)
        expect_start = max(3, log.segments[1].base_offset)
    else:
        assert lm.cleanup_logs(now_ms=1103,
                               checkpoint=crash_point == "checkpointed") == len(doomed)
        expect_start = log.local_log_start_offset
    assert any(n.endswith(".deleted") for n in dir_names(log.dir))
    # No shutdown: the next LogManager sees an unclean log dir.
    lm2 = LogManager([str(tmp_path)], cfg, now_ms=0)
    log2 = lm2.get("t", 0)
    assert not lm2.had_clean_shutdown[str(tmp_path)]
    names = dir_names(log2.dir)
    assert not any(n.endswith(".deleted") for n in names)
    bases = {files.offset_from_filename(n) for n in names if n.endswith((".log", ".index"))}
    assert bases == {s.base_offset for s in log2.segments}  # no orphan index files
    assert log2.local_log_start_offset == expect_start >= log2.segments[0].base_offset
    assert log2.log_end_offset == leo
    assert record_offsets(log2) == list(range(expect_start, leo))
    lm2.shutdown()


def test_retention_config_change_applies_on_next_pass(open_log):
    log = open_log(segment_bytes=300)  # retention.ms 7 days
    fill(log, 10, ts0=1000)
    assert log.delete_old_segments(now_ms=6005) == 0
    log.update_config(LogConfig.from_props({"segment.bytes": "300", "retention.ms": "5000"}))
    assert log.delete_old_segments(now_ms=6005) > 0  # max timestamps below 1005 expired
    assert log.local_log_start_offset == log.segments[0].base_offset > 0
    before = log.local_log_start_offset
    log.update_config(LogConfig.from_props({"segment.bytes": "300", "retention.ms": "-1",
                                            "retention.bytes": "0"}))
    log.delete_old_segments(now_ms=6005)
    # retention.bytes=0: everything below the high watermark goes, the log rolls and stays usable.
    assert log.local_log_start_offset == log.log_end_offset > before
    assert len(log.segments) == 1 and log.active.size == 0


def test_metadata_style_owner_deletes_below_start_at_once(open_log, log_dir):
    log = open_log(segment_bytes=300)
    fill(log, 10)
    log.maybe_increment_log_start_offset(log.segments[1].base_offset)
    assert log.delete_segments_below_start() == 1
    assert not any(n.endswith(".deleted") for n in dir_names(log_dir))
    assert log.take_files_to_delete() == []
