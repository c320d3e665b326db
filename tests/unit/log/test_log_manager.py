"""LogManager: loading log dirs, checkpoints, clean shutdown marker, deletion."""

from __future__ import annotations

import json
import logging
import os
import uuid

import pytest

from kafkapy.log import files
from kafkapy.log.checkpoint import read_offsets_checkpoint, write_offsets_checkpoint
from kafkapy.log.config import LogConfig
from kafkapy.log.log_manager import LogManager
from kafkapy.log.partition_log import PartitionLog
from kafkapy.protocol.errors import ErrorCode, KafkaError

from .helpers import make_batch

CFG = LogConfig()


@pytest.fixture
def dirs(tmp_path):
    return [str(tmp_path / "d1"), str(tmp_path / "d2")]


def test_create_spread_and_reload_after_clean_shutdown(dirs):
    lm = LogManager(dirs, CFG, now_ms=0)
    tid = uuid.uuid4()
    logs = [lm.get_or_create("orders", p, tid) for p in range(4)]
    assert {os.path.dirname(log.dir) for log in logs} == set(dirs)  # spread over the dirs
    for log in logs:
        log.append_as_leader(make_batch(3), now_ms=0, leader_epoch=0)
    assert lm.get_or_create("orders", 0, tid) is logs[0]
    lm.shutdown()
    for d in dirs:
        marker = os.path.join(d, files.CLEAN_SHUTDOWN_FILE)
        assert json.load(open(marker))["version"] == 0
        rps = read_offsets_checkpoint(os.path.join(d, files.RECOVERY_POINT_CHECKPOINT))
        assert set(rps.values()) == {3} and len(rps) == 2
        assert open(os.path.join(d, files.RECOVERY_POINT_CHECKPOINT)).read().startswith("0\n2\n")
    lm2 = LogManager(dirs, CFG, now_ms=0)
    assert all(lm2.had_clean_shutdown.values())
    assert not any(os.path.exists(os.path.join(d, files.CLEAN_SHUTDOWN_FILE)) for d in dirs)
    for p in range(4):
        log = lm2.get("orders", p)
        assert log.log_end_offset == 3 and log.topic_id == tid
    with pytest.raises(KafkaError) as e:
        lm2.get_or_create("orders", 0, uuid.uuid4())
    assert e.value.code == ErrorCode.INCONSISTENT_TOPIC_ID
    lm2.shutdown()


def test_unclean_start_recovers_from_checkpoint(dirs):
    lm = LogManager(dirs[:1], CFG, now_ms=0)
    log = lm.get_or_create("t", 0)
    log.append_as_leader(make_batch(2), now_ms=0, leader_epoch=0)
    lm.flush_all()
    log.append_as_leader(make_batch(2), now_ms=0, leader_epoch=0)
    rp = read_offsets_checkpoint(os.path.join(dirs[0], files.RECOVERY_POINT_CHECKPOINT))
    assert rp == {("t", 0): 2}
    for seg in log.segments:  # crash
        seg.close_handlers()
    path = files.log_file(log.dir, 0)
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 1)
    lm2 = LogManager(dirs[:1], CFG, now_ms=0)
    assert lm2.had_clean_shutdown == {os.path.abspath(dirs[0]): False}
    assert lm2.get("t", 0).log_end_offset == 2
    lm2.shutdown()


def test_ignores_other_dirs_and_skips_metadata_log(dirs):
    d = dirs[0]
    os.makedirs(os.path.join(d, "lost+found"))
    os.makedirs(os.path.join(d, "not_a_partition"))
    open(os.path.join(d, "meta.properties"), "w").write("version=1\n")
    meta = PartitionLog.open(os.path.join(d, "__cluster_metadata-0"), CFG, now_ms=0,
                             recover=False)
    meta.append_as_leader(make_batch(1), now_ms=0, leader_epoch=0)
    meta.close()
    lm = LogManager([d], CFG, now_ms=0)
    assert lm.all_logs() == {}
    lm.shutdown()
    lm2 = LogManager([d], CFG, now_ms=0, skip_topics=())
    assert lm2.get("__cluster_metadata", 0).log_end_offset == 1
    lm2.shutdown()


def test_delete_renames_then_removes(dirs, monkeypatch):
    lm = LogManager(dirs[:1], CFG, now_ms=0)
    log = lm.get_or_create("to-go", 1)
    log.append_as_leader(make_batch(1), now_ms=0, leader_epoch=0)
    renamed = []
    orig = PartitionLog.rename_dir
    monkeypatch.setattr(PartitionLog, "rename_dir",
                        lambda self, new: renamed.append(new) or orig(self, new))
    assert lm.delete("to-go", 1, now_ms=0)
    assert lm.get("to-go", 1) is None and not lm.delete("to-go", 1)
    lm.delete_logs_pass(0)  # the background pass renames at once, removes later
    name = os.path.basename(renamed[0])
    assert files.parse_special_dir_name(name)[:2] == ("to-go", 1)
    assert name.endswith("-delete")
    assert lm.pending_log_deletes() == renamed
    lm.delete_logs_pass(CFG.file_delete_delay_ms)
    assert os.listdir(dirs[0]) and not any(n.startswith("to-go") for n in os.listdir(dirs[0]))
    lm.shutdown()


def test_leftover_delete_dir_is_removed_at_startup(dirs):
    d = dirs[0]
    left = os.path.join(d, files.delete_dir_name("x", 0, uuid.uuid4().hex))
    os.makedirs(left)
    lm = LogManager([d], CFG, now_ms=0)
    assert lm.get("x", 0) is None and lm.pending_log_deletes() == [left]
    lm.delete_logs_pass(0)  # the first pass, whatever the clock says
    assert not os.path.exists(left)
    lm.shutdown()


def test_topic_configs_apply_at_load(dirs):
    lm = LogManager(dirs[:1], CFG, now_ms=0)
    lm.get_or_create("small", 0)
    lm.shutdown()
    small = LogConfig.from_props({"segment.bytes": "1000"})
    lm2 = LogManager(dirs[:1], CFG, now_ms=0,
                     topic_configs=lambda t: small if t == "small" else None)
    assert lm2.get("small", 0).config.segment_bytes == 1000
    lm2.shutdown()


def test_move_to_another_log_dir_keeps_the_log_and_survives_a_restart(dirs):
    lm = LogManager(dirs, CFG, now_ms=0)
    tid = uuid.uuid4()
    plog = lm.get_or_create("moving", 0, tid)
    plog.append_as_leader(make_batch(5), now_ms=0, leader_epoch=0)
    src = lm.log_dir_of("moving", 0)
    dest = next(d for d in dirs if d != src)
    assert lm.move("moving", 0, src) is False            # already there
    assert lm.move("moving", 0, dest) is True
    assert lm.log_dir_of("moving", 0) == dest and plog.dir == os.path.join(dest, "moving-0")
    assert not os.path.exists(os.path.join(src, "moving-0"))
    # The open log keeps working after the move: appends and reads land in the new dir.
    plog.append_as_leader(make_batch(2), now_ms=0, leader_epoch=0)
    assert plog.log_end_offset == 7
    for bad, code in ((os.path.join(dest, "elsewhere"), ErrorCode.LOG_DIR_NOT_FOUND),):
        with pytest.raises(KafkaError) as e:
            lm.move("moving", 0, bad)
        assert e.value.code == code
    with pytest.raises(KafkaError) as e:
        lm.move("absent", 0, dest)
    assert e.value.code == ErrorCode.REPLICA_NOT_AVAILABLE
    # A crash right after the move (no clean shutdown) finds the partition in its new dir.
    lm2 = LogManager(dirs, CFG, now_ms=0)
    assert lm2.log_dir_of("moving", 0) == dest and lm2.get("moving", 0).log_end_offset == 7
    lm2.shutdown()


def test_high_watermarks_are_checkpointed_and_restored_for_replicated_logs(tmp_path):
    dirs = [str(tmp_path / "d")]
    lm = LogManager(dirs, CFG, now_ms=0, restore_high_watermarks=True)
    tid = uuid.uuid4()
    a, b = lm.get_or_create("orders", 0, tid), lm.get_or_create("orders", 1, tid)
    for log in (a, b):
        log.hw_follows_leo = False  # a replicated log: the replica manager moves the HW
        log.append_as_leader(make_batch(5), now_ms=0, leader_epoch=0)
    a.update_high_watermark(3), b.update_high_watermark(4)
    lm.shutdown()
    path = os.path.join(dirs[0], files.REPLICATION_OFFSET_CHECKPOINT)
    assert read_offsets_checkpoint(path) == {("orders", 0): 3, ("orders", 1): 4}
    # Partition 1 goes missing from the file (an older broker wrote it, say).
    with open(path, "w") as f:
        f.write("0\n1\norders 0 3\n")
    lm2 = LogManager(dirs, CFG, now_ms=0, restore_high_watermarks=True)
    # What followers may not have stays invisible after a restart: the checkpointed HW, not the
    # log end; a log missing from the checkpoint starts at its log start offset.
    assert [lm2.get("orders", p).high_watermark for p in (0, 1)] == [3, 0]
    assert lm2.get("orders", 0).log_end_offset == 5
    lm2.shutdown()
    # Without replication in mind (a plain LogManager) the HW is the log end, as before.
    lm3 = LogManager(dirs, CFG, now_ms=0)
    assert lm3.get("orders", 0).high_watermark == 5
    lm3.shutdown()


def _replicated_log(lm: LogManager, topic: str, partition: int, batches: list[int], hw: int):
    """A log as the replica manager keeps it: HW moved by replication, not by appends."""
    plog = lm.get_or_create(topic, partition)
    plog.hw_follows_leo = False
    for n in batches:
        plog.append_as_leader(make_batch(n), now_ms=0, leader_epoch=0)
    plog.update_high_watermark(hw)
    return plog


def _hw_file(d: str) -> str:
    return os.path.join(d, files.REPLICATION_OFFSET_CHECKPOINT)


def test_each_dir_checkpoints_its_own_high_watermarks_and_a_crash_restores_them(dirs):
    lm = LogManager(dirs, CFG, now_ms=0, restore_high_watermarks=True)
    logs = [_replicated_log(lm, "t", p, [4], hw=p + 1) for p in range(4)]
    lm.checkpoint_high_watermarks()
    seen: dict[tuple[str, int], int] = {}
    for d in dirs:
        in_dir = read_offsets_checkpoint(_hw_file(d))
        assert in_dir and all(lm.log_dir_of(*tp) == d for tp in in_dir)
        seen.update(in_dir)
    assert seen == {("t", p): p + 1 for p in range(4)}
    # The HW moves on but the broker dies before the next checkpoint: the restart exposes only
    # what was checkpointed (the replica manager learns the rest from the leader).
    logs[0].update_high_watermark(4)
    for plog in logs:
        for seg in plog.segments:
            seg.close_handlers()
    lm2 = LogManager(dirs, CFG, now_ms=0, restore_high_watermarks=True)
    assert not any(lm2.had_clean_shutdown.values())
    assert [lm2.get("t", p).high_watermark for p in range(4)] == [1, 2, 3, 4]
    assert [lm2.get("t", p).log_end_offset for p in range(4)] == [4, 4, 4, 4]
    lm2.shutdown()


def test_a_partition_missing_from_the_checkpoint_starts_at_its_log_start(dirs):
    lm = LogManager(dirs[:1], CFG, now_ms=0, restore_high_watermarks=True)
    plog = lm.get_or_create("t", 0)
    plog.append_as_leader(make_batch(10), now_ms=0, leader_epoch=0)
    assert plog.maybe_increment_log_start_offset(6)
    lm.shutdown()
    write_offsets_checkpoint(_hw_file(dirs[0]), {})
    lm2 = LogManager(dirs[:1], CFG, now_ms=0, restore_high_watermarks=True)
    plog2 = lm2.get("t", 0)
    assert (plog2.local_log_start_offset, plog2.high_watermark, plog2.log_end_offset) == (6, 6, 10)
    lm2.shutdown()


def test_a_corrupt_high_watermark_checkpoint_is_ignored_with_a_warning(dirs, caplog):
    lm = LogManager(dirs[:1], CFG, now_ms=0, restore_high_watermarks=True)
    _replicated_log(lm, "t", 0, [5], hw=3)
    lm.shutdown()
    with open(_hw_file(dirs[0]), "w") as f:
        f.write("0\n1\nt zero 3\n")
    with caplog.at_level(logging.WARNING, logger="kafkapy.log.log_manager"):
        lm2 = LogManager(dirs[:1], CFG, now_ms=0, restore_high_watermarks=True)
    assert any(files.REPLICATION_OFFSET_CHECKPOINT in r.getMessage() for r in caplog.records)
    assert lm2.get("t", 0).high_watermark == 0 and lm2.get("t", 0).log_end_offset == 5
    # Loading rewrote a readable checkpoint, so the next start does not warn again.
    assert read_offsets_checkpoint(_hw_file(dirs[0])) == {("t", 0): 0}
    lm2.shutdown()


def test_truncation_after_a_restart_keeps_the_high_watermark_within_the_log(dirs):
    lm = LogManager(dirs[:1], CFG, now_ms=0, restore_high_watermarks=True)
    _replicated_log(lm, "t", 0, [3, 3, 3], hw=4)
    lm.shutdown()
    lm2 = LogManager(dirs[:1], CFG, now_ms=0, restore_high_watermarks=True)
    plog = lm2.get("t", 0)
    plog.hw_follows_leo = False  # the replica manager takes the log over
    assert (plog.high_watermark, plog.log_end_offset) == (4, 9)
    # A divergent tail above the HW goes; the HW stays where it was.
    assert plog.truncate_to(6)
    assert (plog.high_watermark, plog.log_end_offset) == (4, 6)
    # An unclean election may cut below it: the HW comes down to the new log end.
    assert plog.truncate_to(3)
    assert (plog.high_watermark, plog.log_end_offset) == (3, 3)
    plog.append_as_leader(make_batch(2), now_ms=0, leader_epoch=1)
    assert plog.high_watermark == 3
    lm2.shutdown()
    assert read_offsets_checkpoint(_hw_file(dirs[0])) == {("t", 0): 3}
    lm3 = LogManager(dirs[:1], CFG, now_ms=0, restore_high_watermarks=True)
    assert (lm3.get("t", 0).high_watermark, lm3.get("t", 0).log_end_offset) == (3, 5)
    lm3.shutdown()


def test_the_follower_log_start_move_survives_a_restart(dirs):
    lm = LogManager(dirs[:1], CFG, now_ms=0, restore_high_watermarks=True)
    plog = _replicated_log(lm, "t", 0, [4, 4], hw=2)
    assert plog.maybe_increment_log_start_offset_from_leader(5)  # the leader deleted records up to 5
    lm.shutdown()
    lm2 = LogManager(dirs[:1], CFG, now_ms=0, restore_high_watermarks=True)
    plog2 = lm2.get("t", 0)
    assert (plog2.local_log_start_offset, plog2.high_watermark, plog2.log_end_offset) == (5, 5, 8)
    lm2.shutdown()
