"""Creating many brand-new logs at once (``bulk_create`` and LogManager's entry points)."""

from __future__ import annotations

import os
import uuid

from kafkapy.log import files
from kafkapy.log.bulk_create import NewLog, create_new_logs
from kafkapy.log.config import LogConfig
from kafkapy.log.log_manager import LogManager
from kafkapy.log.partition_log import PartitionLog
from kafkapy.log.partition_metadata import read_partition_metadata
from kafkapy.log.storage_errors import LogStorageError
from kafkapy.protocol.errors import ErrorCode, KafkaError

TOPIC_ID = uuid.UUID("12345678-1234-5678-1234-567812345678")


def specs(log_dir: str, count: int, *, leader_epoch: int = -1, topic: str = "bulk") -> list[NewLog]:
    return [NewLog(topic, i, TOPIC_ID, LogConfig(), log_dir, leader_epoch) for i in range(count)]


def test_creates_every_log_with_its_topic_id_in_order(tmp_path):
    results = create_new_logs(specs(str(tmp_path), 20), now_ms=0)
    assert [r.partition for r in results] == list(range(20))  # type: ignore[union-attr]
    for i, plog in enumerate(results):
        assert isinstance(plog, PartitionLog)
        assert plog.dir == os.path.join(str(tmp_path), f"bulk-{i}")
        assert plog.topic_id == TOPIC_ID and plog.log_end_offset == 0
        assert read_partition_metadata(plog.dir) == TOPIC_ID
        assert not plog.leader_epoch_cache.entries  # no leader epoch asked for
        plog.close()


def test_a_leader_from_birth_has_its_epoch_on_disk(tmp_path):
    [plog] = create_new_logs(specs(str(tmp_path), 1, leader_epoch=3), now_ms=0)
    assert isinstance(plog, PartitionLog)
    assert [(e.epoch, e.start_offset) for e in plog.leader_epoch_cache.entries] == [(3, 0)]
    # What becoming leader writes later is already on disk.
    with open(os.path.join(plog.dir, files.LEADER_EPOCH_CHECKPOINT)) as f:
        assert f.read().split() == ["0", "1", "3", "0"]
    plog.close()


def test_one_failure_does_not_stop_the_others(tmp_path):
    # A plain file where partition 1's directory should go: that log cannot be made.
    open(os.path.join(str(tmp_path), "bulk-1"), "w").close()
    results = create_new_logs(specs(str(tmp_path), 3), now_ms=0)
    assert isinstance(results[0], PartitionLog) and isinstance(results[2], PartitionLog)
    # A storage error as the log layer reports them (its dir goes offline unless it is full).
    assert isinstance(results[1], LogStorageError) and results[1].offline
    assert results[1].code == ErrorCode.KAFKA_STORAGE_ERROR
    for r in (results[0], results[2]):
        r.close()  # type: ignore[union-attr]


def test_a_leftover_directory_of_the_same_topic_is_opened(tmp_path):
    [first] = create_new_logs(specs(str(tmp_path), 1), now_ms=0)
    assert isinstance(first, PartitionLog)
    first.close()
    [again] = create_new_logs(specs(str(tmp_path), 1), now_ms=0)
    assert isinstance(again, PartitionLog) and again.topic_id == TOPIC_ID
    again.close()
    other = NewLog("bulk", 0, uuid.uuid4(), LogConfig(), str(tmp_path))
    [refused] = create_new_logs([other], now_ms=0)
    assert isinstance(refused, KafkaError) and refused.code == ErrorCode.INCONSISTENT_TOPIC_ID


CFG_DELAY_PASSED = LogConfig().file_delete_delay_ms


def test_log_manager_places_adopts_and_abandons(tmp_path):
    dirs = [os.path.join(str(tmp_path), d) for d in ("a", "b")]
    lm = LogManager(dirs, LogConfig(), now_ms=0)
    lm.get_or_create("existing", 0, uuid.uuid4())  # in dir a
    placed = lm.place_new_logs(5)
    # The emptiest dir first, then alternating: the counts end up even.
    assert placed == [dirs[1], dirs[0], dirs[1], dirs[0], dirs[1]]
    new = [NewLog("bulk", i, TOPIC_ID, LogConfig(), d) for i, d in enumerate(placed)]
    results = lm.create_new_logs(new, now_ms=0)
    for spec, plog in zip(new, results):
        assert isinstance(plog, PartitionLog)
        assert lm.adopt(plog, spec.log_dir)
        assert lm.get("bulk", spec.partition) is plog
        assert lm.log_dir_of("bulk", spec.partition) == spec.log_dir
    # A second log for an adopted partition is refused and can be thrown away.
    [dup] = create_new_logs([NewLog("bulk", 0, TOPIC_ID, LogConfig(), dirs[0])], now_ms=0)
    assert isinstance(dup, PartitionLog) and not lm.adopt(dup, dirs[0])
    lm.abandon(dup, now_ms=0)
    assert "bulk-0" not in os.listdir(dirs[0])  # renamed for deletion, removed by the next pass
    lm.delete_logs_pass(CFG_DELAY_PASSED)
    assert not any(name.startswith("bulk-0") for name in os.listdir(dirs[0]))
    assert os.path.isdir(os.path.join(dirs[1], "bulk-0"))  # the adopted one stays
    lm.shutdown()
    # Adopted logs are part of the manager: checkpointed, closed and loaded again.
    again = LogManager(dirs, LogConfig(), now_ms=0)
    assert sorted(p for t, p in again.all_logs() if t == "bulk") == list(range(5))
    again.shutdown()
