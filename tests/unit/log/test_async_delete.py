"""Deleting partitions: forgotten at once, renamed and checkpointed by the next background pass,
removed after file.delete.delay.ms (Kafka's asyncDelete and kafka-delete-logs task).

The passes are called here directly with the time they run at, so nothing waits on a clock.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import uuid

import pytest

from kafkapy.log import deletion, files, offset_checkpoints
from kafkapy.log.bulk_create import NewLog
from kafkapy.log.checkpoint import read_offsets_checkpoint
from kafkapy.log.config import LogConfig
from kafkapy.log.deletion import RenameHandOff
from kafkapy.log.log_manager import LogManager
from kafkapy.log.partition_log import PartitionLog

from .helpers import make_batch

DELAY_MS = 5_000
CFG = LogConfig.from_props({"file.delete.delay.ms": str(DELAY_MS)})
TOPIC_ID = uuid.UUID(int=7)


@pytest.fixture
def dirs(tmp_path):
    return [str(tmp_path / "d1"), str(tmp_path / "d2")]


@pytest.fixture
def checkpoint_writes(monkeypatch):
    """The paths of every offset checkpoint file written, in order."""
    written: list[str] = []
    real = offset_checkpoints.write_offsets_checkpoint

    def spy(path, offsets):
        written.append(path)
        real(path, offsets)

    monkeypatch.setattr(offset_checkpoints, "write_offsets_checkpoint", spy)
    return written


def live_dirs(d: str, topic: str) -> list[str]:
    return sorted(n for n in os.listdir(d)
                  if (tp := files.parse_dir_name(n)) is not None and tp[0] == topic)


def delete_dirs(d: str, topic: str) -> list[str]:
    return sorted(n for n in os.listdir(d)
                  if (sp := files.parse_special_dir_name(n)) is not None and sp[0] == topic
                  and sp[3] == files.DELETE_DIR_SUFFIX)


def make_logs(lm: LogManager, topic: str, count: int, records: int = 2) -> list[PartitionLog]:
    logs = [lm.get_or_create(topic, p, TOPIC_ID) for p in range(count)]
    for plog in logs:
        plog.append_as_leader(make_batch(records), now_ms=0, leader_epoch=0)
    return logs


def test_delete_returns_at_once_and_the_pass_renames_it_the_kafka_way(dirs, checkpoint_writes):
    lm = LogManager(dirs[:1], CFG, now_ms=0)
    [plog] = make_logs(lm, "orders", 1)
    checkpoint_writes.clear()

    assert lm.delete("orders", 0, now_ms=1_000)
    # Forgotten and closed at once; nothing written to disk yet.
    assert lm.get("orders", 0) is None and plog.closed
    assert not lm.delete("orders", 0)
    assert checkpoint_writes == []

    assert lm.delete_logs_pass(1_000) == 0  # renamed, not removed: the delay has not passed
    [name] = delete_dirs(dirs[0], "orders")
    topic, partition, uuid_hex, suffix = files.parse_special_dir_name(name)
    assert (topic, partition, suffix) == ("orders", 0, "-delete") and len(uuid_hex) == 32
    assert name == f"orders-0.{uuid_hex}-delete"
    assert live_dirs(dirs[0], "orders") == []
    assert files.log_file(os.path.join(dirs[0], name), 0).endswith(".log")
    assert os.path.exists(files.log_file(os.path.join(dirs[0], name), 0))  # files still there
    assert lm.pending_log_deletes() == [os.path.join(dirs[0], name)]
    lm.shutdown()


def test_files_go_once_the_delay_has_passed(dirs, caplog):
    lm = LogManager(dirs[:1], CFG, now_ms=0)
    make_logs(lm, "orders", 2)
    for p in range(2):
        lm.delete("orders", p, now_ms=1_000)
    assert lm.next_delete_pass_ms() == 0  # renames and a checkpoint are owed now
    lm.delete_logs_pass(1_000)
    assert lm.next_delete_pass_ms() == 1_000 + DELAY_MS
    assert lm.delete_logs_pass(1_000 + DELAY_MS - 1) == 0
    assert len(delete_dirs(dirs[0], "orders")) == 2

    with caplog.at_level(logging.INFO, logger="kafkapy.log.log_manager"):
        assert lm.delete_logs_pass(1_000 + DELAY_MS) == 2
    assert delete_dirs(dirs[0], "orders") == [] and live_dirs(dirs[0], "orders") == []
    assert lm.next_delete_pass_ms() is None and lm.pending_log_deletes() == []
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Deleted log")]
    assert len(lines) == 2
    assert lines[0].startswith("Deleted log for partition orders-0 in " + dirs[0])
    lm.shutdown()


def test_checkpoints_are_written_once_per_pass_and_drop_the_deleted(dirs, checkpoint_writes):
    lm = LogManager(dirs, CFG, now_ms=0)
    make_logs(lm, "big", 40)
    [keep] = make_logs(lm, "keep", 1, records=3)
    keep.flush()
    lm.checkpoint()
    checkpoint_writes.clear()

    for p in range(40):
        lm.delete("big", p, now_ms=0)
    assert checkpoint_writes == []  # none per partition

    lm.delete_logs_pass(0)
    # One pass: each of the three offset checkpoint files of each dir, once.
    assert sorted(checkpoint_writes) == sorted(
        os.path.join(d, name) for d in dirs for name in (
            files.REPLICATION_OFFSET_CHECKPOINT, files.RECOVERY_POINT_CHECKPOINT,
            files.LOG_START_OFFSET_CHECKPOINT))
    for d in dirs:
        for name in (files.RECOVERY_POINT_CHECKPOINT, files.REPLICATION_OFFSET_CHECKPOINT):
            listed = read_offsets_checkpoint(os.path.join(d, name))
            assert not any(topic == "big" for topic, _ in listed)
    keep_dir = lm.log_dir_of("keep", 0)
    assert read_offsets_checkpoint(os.path.join(keep_dir, files.RECOVERY_POINT_CHECKPOINT)) == \
        {("keep", 0): 3}

    checkpoint_writes.clear()
    lm.delete_logs_pass(DELAY_MS)  # removes the dirs; no deletion since, so no checkpoint
    assert checkpoint_writes == []
    assert all(delete_dirs(d, "big") == [] for d in dirs)
    lm.shutdown()


def test_leftover_delete_dirs_are_removed_at_startup_and_never_loaded(dirs, caplog):
    d = dirs[0]
    lm = LogManager([d], CFG, now_ms=0)
    make_logs(lm, "keep", 1)
    lm.shutdown()
    # What a crash between the rename and the removal leaves: a full log under a delete name.
    leftover = os.path.join(d, files.delete_dir_name("gone", 3, uuid.uuid4().hex))
    plog = PartitionLog.open(leftover, CFG, now_ms=0, recover=False, topic_id=TOPIC_ID)
    plog.append_as_leader(make_batch(5), now_ms=0, leader_epoch=0)
    plog.close()

    with caplog.at_level(logging.INFO, logger="kafkapy.log.log_manager"):
        lm = LogManager([d], CFG, now_ms=0)
    assert set(lm.all_logs()) == {("keep", 0)}
    assert lm.pending_log_deletes() == [leftover]
    assert any("left by deletions before the restart" in r.getMessage() for r in caplog.records)
    assert lm.next_delete_pass_ms() == 0  # no delay: nothing can be reading it
    assert lm.delete_logs_pass(0) == 1
    assert not os.path.exists(leftover)
    assert lm.get("keep", 0).log_end_offset == 2
    lm.shutdown()


def test_a_topic_recreated_right_after_its_deletion_gets_a_new_dir(dirs):
    lm = LogManager(dirs[:1], CFG, now_ms=0)
    make_logs(lm, "again", 2, records=4)
    for p in range(2):
        lm.delete("again", p, now_ms=0)
    new_id = uuid.UUID(int=8)
    # Before any pass: the inline path takes the name back from the deleted log...
    fresh = lm.get_or_create("again", 0, new_id)
    # ...and so does the bulk path (on a worker thread in the node).
    [made] = lm.create_new_logs([NewLog("again", 1, new_id, CFG, dirs[0])], now_ms=0)
    assert isinstance(made, PartitionLog) and lm.adopt(made, dirs[0])
    for plog in (fresh, made):
        assert plog.topic_id == new_id and plog.log_end_offset == 0
        assert os.path.basename(plog.dir) in live_dirs(dirs[0], "again")
    fresh.append_as_leader(make_batch(1), now_ms=0, leader_epoch=0)
    assert len(delete_dirs(dirs[0], "again")) == 2  # the old ones still wait

    lm.delete_logs_pass(0)
    lm.delete_logs_pass(DELAY_MS)
    assert delete_dirs(dirs[0], "again") == []
    assert live_dirs(dirs[0], "again") == ["again-0", "again-1"]
    assert lm.get("again", 0).log_end_offset == 1
    lm.shutdown()
    reloaded = LogManager(dirs[:1], CFG, now_ms=0)
    assert reloaded.get("again", 0).topic_id == new_id
    assert reloaded.get("again", 0).log_end_offset == 1
    reloaded.shutdown()


def test_shutdown_renames_what_the_pass_has_not(dirs):
    lm = LogManager(dirs[:1], CFG, now_ms=0)
    make_logs(lm, "late", 3)
    for p in range(3):
        lm.delete("late", p, now_ms=0)
    lm.shutdown()  # no pass ran
    assert live_dirs(dirs[0], "late") == [] and len(delete_dirs(dirs[0], "late")) == 3
    again = LogManager(dirs[:1], CFG, now_ms=0)
    assert again.all_logs() == {} and len(again.pending_log_deletes()) == 3
    again.delete_logs_pass(0)
    assert delete_dirs(dirs[0], "late") == []
    again.shutdown()


def test_a_pass_does_a_bounded_amount(dirs):
    lm = LogManager(dirs[:1], CFG, now_ms=0)
    make_logs(lm, "many", 5)
    for p in range(5):
        lm.delete("many", p, now_ms=0)
    lm.delete_logs_pass(0, limit=2)
    assert len(live_dirs(dirs[0], "many")) == 3  # two renamed
    lm.delete_logs_pass(0, limit=2)
    lm.delete_logs_pass(0, limit=2)
    assert live_dirs(dirs[0], "many") == [] and len(delete_dirs(dirs[0], "many")) == 5
    assert [lm.delete_logs_pass(DELAY_MS, limit=2) for _ in range(4)] == [2, 2, 1, 0]
    assert delete_dirs(dirs[0], "many") == []
    lm.shutdown()


@pytest.mark.parametrize("code, offline", [(errno.EACCES, False), (errno.EIO, True)])
def test_a_failed_removal_warns_and_only_a_disk_error_takes_the_dir_offline(
        dirs, monkeypatch, caplog, code, offline):
    lm = LogManager(dirs, CFG, now_ms=0)
    [plog] = make_logs(lm, "stuck", 1)
    d = lm.log_dir_of("stuck", 0)
    lm.delete("stuck", 0, now_ms=0)
    lm.delete_logs_pass(0)
    monkeypatch.setattr(deletion, "remove_tree",
                        lambda path: OSError(code, os.strerror(code), path))
    with caplog.at_level(logging.WARNING):
        assert lm.delete_logs_pass(DELAY_MS) == 0
    assert any(r.levelno == logging.WARNING and "Could not delete log for partition stuck-0"
               in r.getMessage() for r in caplog.records)
    assert (d in lm.offline_dirs) is offline
    assert lm.pending_log_deletes() == []  # not retried: the next start finds the leftover
    lm.shutdown()


def test_a_log_in_an_offline_dir_is_forgotten_and_left_alone(dirs):
    lm = LogManager(dirs, CFG, now_ms=0)
    make_logs(lm, "lost", 1)
    d = lm.log_dir_of("lost", 0)
    lm.mark_dir_offline(d, "test")
    assert lm.delete("lost", 0, now_ms=0)
    assert lm.get("lost", 0) is None
    lm.delete_logs_pass(DELAY_MS)
    assert live_dirs(d, "lost") == ["lost-0"] and delete_dirs(d, "lost") == []
    lm.shutdown()


def test_a_failed_rename_takes_the_dir_offline(dirs, monkeypatch):
    lm = LogManager(dirs, CFG, now_ms=0)
    make_logs(lm, "norename", 1)
    d = lm.log_dir_of("norename", 0)
    lm.delete("norename", 0, now_ms=0)

    def fail(self, new_dir):
        raise OSError(errno.EIO, "Input/output error", self.dir)

    monkeypatch.setattr(PartitionLog, "rename_dir", fail)
    lm.delete_logs_pass(0)
    assert d in lm.offline_dirs
    lm.shutdown()


def test_delete_dir_names_fit_in_a_file_name():
    longest = "t" * 249  # Kafka's longest topic name
    name = files.delete_dir_name(longest, 123456, uuid.uuid4().hex)
    assert len(name) == files.MAX_NAME_LENGTH
    topic, partition, _, suffix = files.parse_special_dir_name(name)
    assert longest.startswith(topic) and partition == 123456 and suffix == "-delete"
    short = files.delete_dir_name("orders", 0, "a" * 32)
    assert short == "orders-0." + "a" * 32 + "-delete"


def test_the_hand_off_lets_a_claim_wait_for_the_rename_in_progress():
    hand_off: RenameHandOff[str, str] = RenameHandOff()
    hand_off.put("a", "old-a")
    hand_off.put("b", "old-b")
    assert hand_off.next() == "old-a"  # the pass is renaming a
    claimed: list[str | None] = []
    waiter = threading.Thread(target=lambda: claimed.append(hand_off.claim("a")))
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive()  # waits until the pass is done with a
    hand_off.finished()
    waiter.join(5)
    assert claimed == [None]  # the pass renamed it; nothing left to do
    assert hand_off.claim("b") == "old-b" and len(hand_off) == 0
    assert hand_off.next() is None
