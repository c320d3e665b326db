"""Recovery that never lies: a clean-shutdown marker does not hide a bad tail, every cut is
logged at WARN, a log that cannot be opened takes its dir offline instead of the node down, and
loading reports progress."""

from __future__ import annotations

import logging
import os

from kafkapy.log import files
from kafkapy.log.checkpoint import read_offsets_checkpoint
from kafkapy.log.config import LogConfig
from kafkapy.log.log_manager import LogManager
from kafkapy.protocol.errors import ErrorCode, KafkaError

import pytest

from .helpers import make_batch
from .test_recovery import all_offsets, crash, fill

CFG = LogConfig()


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_clean_close_leaves_a_valid_tail(open_log):
    log = open_log(index_interval_bytes=100)
    fill(log, 30)
    log.close()
    again = open_log(index_interval_bytes=100)
    assert not again.recovered
    assert again.active.validate_tail() is None


@pytest.mark.parametrize("big_batches", [False, True])
def test_torn_tail_despite_clean_marker(open_log, log_dir, caplog, big_batches):
    # One big batch per append (a producer's batching) or many small ones.
    log = open_log(index_interval_bytes=4096)
    for i in range(5 if big_batches else 50):
        log.append_as_leader(make_batch(40 if big_batches else 2, ts=1000 + i, value_size=50),
                             now_ms=0, leader_epoch=0)
    last_whole = log.log_end_offset - (40 if big_batches else 2)
    log.close()  # clean: indexes trimmed, snapshot written
    path = files.log_file(log_dir, 0)
    os.truncate(path, os.path.getsize(path) - 50)
    with caplog.at_level(logging.WARNING):
        again = open_log(recover=False, index_interval_bytes=4096)
    assert again.log_end_offset == last_whole
    warns = _warnings(caplog)
    assert any("despite the clean-shutdown marker" in w for w in warns)
    assert any("Truncated the torn tail of log segment" in w and "topic-a.b-0" in w
               and f"The log now ends at offset {last_whole}" in w for w in warns)
    # A new record gets the next offset and survives a clean restart.
    res = again.append_as_leader(make_batch(1, value_size=5), now_ms=0, leader_epoch=0)
    assert res.first_offset == last_whole
    again.close()
    third = open_log(recover=False, index_interval_bytes=4096)
    assert third.log_end_offset == last_whole + 1
    assert all_offsets(third) == list(range(last_whole + 1))


def test_zero_filled_tail_despite_clean_marker(open_log, log_dir, caplog):
    log = open_log()
    fill(log, 10)
    leo = log.log_end_offset
    log.close()
    with open(files.log_file(log_dir, 0), "ab") as f:
        f.write(bytes(4096))  # a crash after the size grew, before the data landed
    with caplog.at_level(logging.WARNING):
        again = open_log(recover=False)
    assert again.log_end_offset == leo
    assert any("zero-filled tail of 4096 bytes" in w and "4096 bytes in all" in w
               for w in _warnings(caplog))
    assert again.append_as_leader(make_batch(1), now_ms=0, leader_epoch=0).first_offset == leo


def test_index_pointing_elsewhere_despite_clean_marker(open_log, log_dir, caplog):
    # The file was rewritten under the index (another process appended and it was cut back).
    log = open_log(index_interval_bytes=100)
    fill(log, 20)
    log.close()
    path = files.log_file(log_dir, 0)
    data = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(data[: len(data) // 2])
    with caplog.at_level(logging.WARNING):
        again = open_log(index_interval_bytes=100)
    assert again.recovered
    assert all_offsets(again) == list(range(again.log_end_offset))


def test_mid_segment_corruption_is_logged_with_offsets_and_bytes(open_log, log_dir, caplog):
    log = open_log(index_interval_bytes=100)
    fill(log, 100)  # 200 records
    crash(log)
    path = files.log_file(log_dir, 0)
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.seek(size // 2)
        f.write(bytes(b ^ 0xFF for b in f.read(16)))  # 16 flipped bytes mid-segment
    with caplog.at_level(logging.WARNING):
        again = open_log(recover=True, index_interval_bytes=100)
    kept = again.log_end_offset
    assert 0 < kept < 200
    line = next(w for w in _warnings(caplog) if "Found invalid messages in log segment" in w)
    assert "topic-a.b-0" in line and path in line
    assert f"Kept offsets 0..{kept - 1}" in line
    assert f"dropped offsets {kept}..199" in line  # the headers past the damage still parse
    assert f"{size - os.path.getsize(path)} bytes in all" in line


def test_later_segments_dropped_after_corruption_are_counted(open_log, log_dir, caplog):
    log = open_log(segment_bytes=1000, index_interval_bytes=100)
    fill(log, 40)
    assert len(log.segments) > 3
    second = log.segments[1].base_offset
    crash(log)
    path = files.log_file(log_dir, second)
    with open(path, "r+b") as f:
        f.seek(100)
        f.write(b"\xff" * 16)
    with caplog.at_level(logging.WARNING):
        again = open_log(recover=True, segment_bytes=1000, index_interval_bytes=100)
    line = next(w for w in _warnings(caplog) if "Found invalid messages" in w)
    assert "later segment(s) from offset" in line
    assert len(again.segments) == 2


def test_torn_tail_after_crash_is_logged(open_log, log_dir, caplog):
    log = open_log()
    fill(log, 10)
    crash(log)
    path = files.log_file(log_dir, 0)
    os.truncate(path, os.path.getsize(path) - 7)
    with caplog.at_level(logging.WARNING):
        again = open_log(recover=True)
    assert again.log_end_offset == 18
    assert any("Truncated the torn tail" in w and "dropped offsets 18" in w
               for w in _warnings(caplog))


# ---------------------------------------------------------------- LogManager: isolation, progress

def _two_dirs(tmp_path) -> list[str]:
    return [str(tmp_path / "d1"), str(tmp_path / "d2")]


def _populate(dirs: list[str]) -> dict[str, list[tuple[str, int]]]:
    lm = LogManager(dirs, CFG, now_ms=0)
    for p in range(6):
        lm.get_or_create("t", p).append_as_leader(make_batch(3), now_ms=0, leader_epoch=0)
    placed = {d: sorted(tp for tp in lm.all_logs() if lm.log_dir_of(*tp) == d) for d in dirs}
    lm.shutdown()
    return placed


def test_a_log_that_cannot_open_takes_its_dir_offline_only(tmp_path, caplog):
    dirs = _two_dirs(tmp_path)
    placed = _populate(dirs)
    bad_dir, good_dir = dirs
    topic, part = placed[bad_dir][0]
    seg = files.log_file(os.path.join(bad_dir, files.dir_name(topic, part)), 0)
    os.remove(seg)
    os.mkdir(seg)  # opening the segment now fails with an OS error
    rp_before = open(os.path.join(bad_dir, files.RECOVERY_POINT_CHECKPOINT), "rb").read()
    with caplog.at_level(logging.INFO):
        lm = LogManager(dirs, CFG, now_ms=0, recovery_threads=2)
    assert lm.offline_dirs.keys() == {os.path.abspath(bad_dir)}
    assert f"{topic}-{part}" in lm.offline_dirs[os.path.abspath(bad_dir)]
    assert any(r.levelno == logging.ERROR and "is offline" in r.getMessage() for r in caplog.records)
    assert sorted(lm.all_logs()) == placed[good_dir]  # the other dir serves on
    for tp in placed[good_dir]:
        assert lm.get(*tp).log_end_offset == 3
    # A partition of the offline dir is not silently recreated empty elsewhere.
    with pytest.raises(KafkaError) as e:
        lm.get_or_create(*placed[bad_dir][1])
    assert e.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    lm.get_or_create("new", 0)  # new partitions go to the online dir
    assert lm.log_dir_of("new", 0) == os.path.abspath(good_dir)
    # Nothing is written into the offline dir: no checkpoints, no clean-shutdown marker.
    lm.shutdown()
    assert open(os.path.join(bad_dir, files.RECOVERY_POINT_CHECKPOINT), "rb").read() == rp_before
    assert os.path.exists(os.path.join(good_dir, files.CLEAN_SHUTDOWN_FILE))
    assert "new" in {tp[0] for tp in read_offsets_checkpoint(
        os.path.join(good_dir, files.RECOVERY_POINT_CHECKPOINT))}


def test_loading_reports_progress_and_a_summary(tmp_path, caplog):
    d = str(tmp_path / "d1")
    lm = LogManager([d], CFG, now_ms=0)
    for p in range(20):
        lm.get_or_create("t", p)
    lm.flush_all()  # no shutdown: the next load is unclean
    ticks = iter(range(10_000))
    with caplog.at_level(logging.INFO, logger="kafkapy.log.log_manager"):
        lm2 = LogManager([d], CFG, now_ms=0, recovery_threads=3, progress_interval_s=5,
                         monotonic=lambda: next(ticks) * 2.0)
    assert len(lm2.all_logs()) == 20
    lines = [r.getMessage() for r in caplog.records]
    assert any(line.startswith("Loaded ") and "/20 logs in " in line and "%)" in line
               for line in lines)
    summary = [line for line in lines if line.startswith("Loaded 20 logs in")]
    assert summary and "unclean shutdown; 20 recovered" in summary[0]


def test_loaded_logs_hold_one_descriptor_each(tmp_path):
    # 10k partitions must load under an ordinary open-files limit: an idle mapped index pins a
    # descriptor (Python's mmap keeps a duplicate), so loading leaves the indexes unmapped.
    d = str(tmp_path / "d1")
    cfg = LogConfig.from_props({"index.interval.bytes": "100"})
    lm = LogManager([d], cfg, now_ms=0)
    for p in range(30):
        plog = lm.get_or_create("t", p)
        for _ in range(5):
            plog.append_as_leader(make_batch(3, value_size=50), now_ms=0, leader_epoch=0)
    lm.checkpoint()  # then a crash: indexes stay preallocated, the next load recovers
    for plog in lm.all_logs().values():
        for seg in plog.segments:
            seg.close_handlers()
    before = len(os.listdir("/proc/self/fd"))
    lm2 = LogManager([d], cfg, now_ms=0, recovery_threads=2)
    assert all(plog.recovered for plog in lm2.all_logs().values())
    assert len(os.listdir("/proc/self/fd")) - before <= 30 + 5
