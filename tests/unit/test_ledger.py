"""kafkapy.testing.ledger finds every way a replicated log can break acks=all."""

from __future__ import annotations

from kafkapy.log.config import LogConfig
from kafkapy.log.partition_log import PartitionLog
from kafkapy.records.builder import Record, build_batch
from kafkapy.testing.ledger import (
    Ack, problems, read_high_watermarks, read_ledger, read_replica, read_replica_log, unavailability)


def replica(tmp_path, node: int, values: list[bytes]):
    data = tmp_path / f"node-{node}"
    plog = PartitionLog.open(str(data / "t-0"), LogConfig(), now_ms=0, recover=False)
    for v in values:
        plog.append_as_leader(bytearray(build_batch([Record(v, v)], now_ms=0)), now_ms=0, leader_epoch=0)
    plog.close()
    return read_replica(data, "t", 0)


def test_a_faithful_log_has_no_problems_and_each_failure_is_named(tmp_path):
    acks = {0: [Ack(0, 0, 0, 1.0), Ack(0, 1, 1, 2.0)]}
    good = replica(tmp_path, 1, [b"0:0", b"0:1"])
    assert good.log_end_offset == 2
    assert problems(acks, {0: {1: good, 2: replica(tmp_path, 2, [b"0:0", b"0:1"])}}) == []

    lost = replica(tmp_path, 3, [b"0:0"])
    assert any("ends at 1" in p for p in problems(acks, {0: {1: good, 3: lost}}))
    twice = replica(tmp_path, 4, [b"0:0", b"0:0", b"0:1"])
    found = problems(acks, {0: {4: twice}})
    assert any("stored 2 times" in p for p in found) and any("stored at 2" in p for p in found)
    other = replica(tmp_path, 5, [b"0:0", b"0:9"])
    assert any("differs between nodes 1 and 5" in p for p in problems(acks, {0: {1: good, 5: other}}))
    # A short first replica does not hide a disagreement between the two after it.
    short = replica(tmp_path, 0, [b"0:0"])
    found = problems(acks, {0: {0: short, 1: good, 5: other}})
    assert any("batch 1 (base offset 1 on node 1, 1 on node 5) differs between nodes 1 and 5" in p
               for p in found)
    swapped = replica(tmp_path, 6, [b"0:1", b"0:0"])
    assert any("seq 0 stored after seq 1" in p for p in problems(
        {0: [Ack(0, 1, 0, 1.0), Ack(0, 0, 1, 2.0)]}, {0: {6: swapped}}))


def test_replica_log_reads_keys_and_values_from_the_segment_files(tmp_path):
    replica(tmp_path, 1, [b"0:0", b"0:1"])
    assert read_replica_log(tmp_path / "node-1", "t", 0) == [(0, b"0:0", b"0:0"), (1, b"0:1", b"0:1")]
    assert read_replica_log(tmp_path / "node-1", "t", 7) == []


def test_ledger_lines_and_unavailability(tmp_path):
    path = tmp_path / "acks"
    path.write_text("0 0 0 10.0\n0 1 1 10.5\n0 2 2 14.0\n0 3\n")  # the last line was cut short
    acks = read_ledger(path)
    assert [a.offset for a in acks[0]] == [0, 1, 2]
    assert unavailability(acks, [10.6]) == {0: [3.5]}
    # Each failover is charged only up to the next kill, not with the stalls of later ones.
    steady = {0: [Ack(0, i, i, t) for i, t in enumerate([0.0, 1.0, 4.0, 5.0, 6.0, 15.0])]}
    assert unavailability(steady, [0.5, 4.5, 6.5]) == {0: [3.0, 1.0, 9.0]}
    # No ack before the next kill: stalled from the last ack until that kill.
    assert unavailability(steady, [1.5, 2.5]) == {0: [1.5, 9.0]}


def test_high_watermarks_come_from_the_replication_checkpoint(tmp_path):
    from kafkapy.log.checkpoint import write_offsets_checkpoint

    assert read_high_watermarks(tmp_path) == {}
    write_offsets_checkpoint(str(tmp_path / "replication-offset-checkpoint"), {("t", 0): 7, ("t", 2): 3})
    assert read_high_watermarks(tmp_path) == {("t", 0): 7, ("t", 2): 3}


def test_an_implicit_ack_without_offset_is_checked_for_presence_only(tmp_path):
    # librdkafka acks records a lost response covered once a later batch is acked, without
    # their offset: older ledgers wrote "None", acked_producer writes -1.
    path = tmp_path / "acks"
    path.write_text("0 0 0 1.0\n0 None 1 2.0\n0 -1 2 2.0\n0 3 3 2.0\n")
    acks = read_ledger(path)
    assert [a.offset for a in acks[0]] == [0, -1, -1, 3]
    log = replica(tmp_path, 1, [b"0:0", b"0:1", b"0:2", b"0:3"])
    assert problems(acks, {0: {1: log}}) == []
    short = replica(tmp_path, 2, [b"0:0", b"0:2", b"0:3", b"x"])
    assert any("seq 1 (offset -1) is missing" in p for p in problems(acks, {0: {2: short}}))
