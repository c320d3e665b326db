"""Transactions in the partition log: the last stable offset, end markers, the ``.txnindex``
and what a READ_COMMITTED fetch learns from it (Kafka's ProducerStateManager, TransactionIndex
and LocalLog.collectAbortedTransactions)."""

from __future__ import annotations

import logging
import os
import struct

import pytest

from kafkapy.log import files
from kafkapy.log.cleaner import clean_log
from kafkapy.log.config import LogConfig
from kafkapy.log.partition_log import PartitionLog
from kafkapy.log.transaction_index import AbortedTxn
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.records.builder import Record, build_batch
from kafkapy.records.control import marker_batch

A, B, C = 1000, 2000, 3000


class Writer:
    """Appends to one log as its clients and its transaction coordinator would."""

    def __init__(self, log: PartitionLog) -> None:
        self.log = log
        self.seq: dict[int, int] = {}

    def txn(self, pid: int, n: int = 1, *, epoch: int = 0, key: bytes = b"k") -> int:
        """A transactional batch of ``n`` records; its first offset."""
        seq = self.seq.get(pid, 0)
        self.seq[pid] = seq + n
        recs = [Record(key, b"v%d" % i, timestamp=1000) for i in range(n)]
        buf = bytearray(build_batch(recs, producer_id=pid, producer_epoch=epoch,
                                    base_sequence=seq, transactional=True))
        return self.log.append_as_leader(buf, now_ms=1000, leader_epoch=0).first_offset

    def plain(self, n: int = 1, *, key: bytes = b"p") -> int:
        recs = [Record(key, b"x", timestamp=1000) for _ in range(n)]
        return self.log.append_as_leader(bytearray(build_batch(recs)), now_ms=1000,
                                         leader_epoch=0).first_offset

    def end(self, pid: int, *, commit: bool, epoch: int = 0, coordinator_epoch: int = 0) -> int:
        """An end marker appended as the leader does for WriteTxnMarkers; its offset."""
        buf = bytearray(marker_batch(producer_id=pid, producer_epoch=epoch, commit=commit,
                                     coordinator_epoch=coordinator_epoch, now_ms=1000))
        return self.log.append_as_leader(buf, now_ms=1000, leader_epoch=0,
                                         from_client=False).first_offset


def txnindex_path(log: PartitionLog, base: int) -> str:
    return files.txn_index_file(log.dir, base)


def read_txnindex(path: str) -> list[tuple[int, int, int, int, int]]:
    with open(path, "rb") as f:
        data = f.read()
    assert len(data) % 34 == 0
    return [struct.unpack_from(">hqqqq", data, i) for i in range(0, len(data), 34)]


# ---------------------------------------------------------------------- the last stable offset
def test_open_transaction_holds_the_lso_and_a_commit_releases_it(open_log):
    log = open_log()
    w = Writer(log)
    w.plain()
    first = w.txn(A, 2)
    w.plain()
    assert (first, log.high_watermark) == (1, 4)
    assert log.last_stable_offset == 1  # later non-transactional data stays above it
    marker = w.end(A, commit=True)
    assert marker == 4
    assert log.last_stable_offset == log.high_watermark == 5
    assert not os.path.exists(txnindex_path(log, 0))  # commits leave no index entry
    assert log.collect_aborted_transactions(0, 5) == []


def test_abort_writes_kafkas_four_offsets(open_log):
    log = open_log()
    w = Writer(log)
    w.plain()
    w.txn(A)          # 1
    w.txn(B)          # 2
    w.end(A, commit=False)  # 3: B still open, so the LSO it records is B's first offset
    assert log.last_stable_offset == 2
    w.end(B, commit=False)  # 4: nothing else open: marker + 1
    assert log.last_stable_offset == 5
    assert read_txnindex(txnindex_path(log, 0)) == [(0, A, 1, 3, 2), (0, B, 2, 4, 5)]
    assert log.collect_aborted_transactions(0, 5) == [AbortedTxn(A, 1, 3, 2),
                                                      AbortedTxn(B, 2, 4, 5)]


def test_a_marker_closing_no_transaction_leaves_no_entry(open_log):
    log = open_log()
    w = Writer(log)
    w.plain()
    w.end(A, commit=False)  # as Kafka 4.x: only a transaction with data completes
    assert log.last_stable_offset == log.high_watermark == 2
    assert log.collect_aborted_transactions(0, 2) == []
    assert not os.path.exists(txnindex_path(log, 0))


def test_lso_stays_at_a_completed_transaction_until_the_hw_passes_its_marker(open_log):
    log = open_log()
    log.hw_follows_leo = False  # a replicated log: the replica manager moves the HW
    w = Writer(log)
    w.plain()                 # 0
    w.txn(A)                  # 1
    w.plain()                 # 2
    w.end(A, commit=True)     # 3
    w.plain()                 # 4
    assert log.high_watermark == 0 and log.last_stable_offset == 0
    log.maybe_increment_high_watermark(2)
    assert log.last_stable_offset == 1
    log.maybe_increment_high_watermark(3)  # the marker itself is not below the HW yet
    assert log.last_stable_offset == 1
    log.maybe_increment_high_watermark(4)
    assert log.last_stable_offset == 4
    log.update_high_watermark(5)
    assert log.last_stable_offset == 5


def test_lso_never_below_the_log_start(open_log):
    log = open_log()
    w = Writer(log)
    w.txn(A)      # 0, stays open
    w.plain(3)    # 1..3
    log.maybe_increment_log_start_offset(2)
    assert log.last_stable_offset == 2


# ---------------------------------------------------------------------- fencing
def test_marker_with_an_old_producer_epoch_is_refused_and_writes_nothing(open_log):
    log = open_log()
    w = Writer(log)
    w.txn(A, epoch=3)
    leo = log.log_end_offset
    with pytest.raises(KafkaError) as e:
        w.end(A, commit=False, epoch=2)
    assert e.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert log.log_end_offset == leo and log.last_stable_offset == 0
    assert not os.path.exists(txnindex_path(log, 0))


def test_marker_from_an_old_coordinator_epoch_is_fenced_and_writes_nothing(open_log):
    log = open_log()
    w = Writer(log)
    w.txn(A)
    w.end(A, commit=True, coordinator_epoch=5)
    first = w.txn(A)
    leo = log.log_end_offset
    with pytest.raises(KafkaError) as e:
        w.end(A, commit=False, coordinator_epoch=4)
    assert e.value.code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert log.log_end_offset == leo
    assert log.last_stable_offset == first  # the transaction is still open
    assert not os.path.exists(txnindex_path(log, 0))
    w.end(A, commit=False, coordinator_epoch=6)  # a newer coordinator is fine
    assert log.collect_aborted_transactions(0, log.log_end_offset) == [
        AbortedTxn(A, first, leo, leo + 1)]


def replicated(pid: int, offset: int, seq: int) -> bytes:
    return build_batch([Record(b"k", b"v", timestamp=1000)], base_offset=offset, producer_id=pid,
                       producer_epoch=0, base_sequence=seq, transactional=True)


def replicated_marker(pid: int, offset: int, *, commit: bool, coordinator_epoch: int) -> bytes:
    buf = bytearray(marker_batch(producer_id=pid, producer_epoch=0, commit=commit,
                                 coordinator_epoch=coordinator_epoch, now_ms=1000))
    struct.pack_into(">q", buf, 0, offset)  # the base offset sits outside the CRC
    return bytes(buf)


def test_follower_takes_what_the_leader_wrote_even_a_fenced_looking_marker(tmp_path):
    cfg = LogConfig.from_props({})
    follower = PartitionLog.open(str(tmp_path / "topic-b-0"), cfg, now_ms=0, recover=False)
    try:
        follower.append_as_follower(replicated(A, 0, 0)
                                    + replicated_marker(A, 1, commit=True, coordinator_epoch=5))
        follower.append_as_follower(replicated(A, 2, 1))
        assert follower.last_stable_offset == 2
        # An older coordinator epoch: a leader would refuse it, a follower logs and takes it.
        follower.append_as_follower(replicated_marker(A, 3, commit=False, coordinator_epoch=3))
        assert follower.collect_aborted_transactions(0, 4) == [AbortedTxn(A, 2, 3, 4)]
        assert follower.last_stable_offset == 4
    finally:
        follower.close()


def test_a_reopened_log_holds_the_lso_below_its_checkpointed_high_watermark(log_dir):
    cfg = LogConfig.from_props({})
    log = PartitionLog.open(log_dir, cfg, now_ms=0, recover=False)
    w = Writer(log)
    w.txn(A)                 # 0
    w.plain()                # 1
    w.end(A, commit=True)    # 2
    w.plain()                # 3
    log.close()
    # As in Kafka, the snapshot written at close knows only open transactions: A is decided.
    log = PartitionLog.open(log_dir, cfg, now_ms=0, recover=False, high_watermark=2)
    assert log.last_stable_offset == 2
    log.close_handlers()
    # Replaying the log (no snapshot) completes A again, its marker not below the HW.
    for name in os.listdir(log_dir):
        if name.endswith(".snapshot"):
            os.remove(os.path.join(log_dir, name))
    log = PartitionLog.open(log_dir, cfg, now_ms=0, recover=False, high_watermark=2)
    try:
        log.hw_follows_leo = False
        assert log.last_stable_offset == 0
        log.maybe_increment_high_watermark(3)
        assert log.last_stable_offset == 3
    finally:
        log.close()


def test_non_transactional_write_inside_an_open_transaction_is_refused(open_log):
    log = open_log()
    w = Writer(log)
    w.txn(A)
    buf = bytearray(build_batch([Record(b"k", b"v", timestamp=1000)], producer_id=A,
                                producer_epoch=0, base_sequence=1))
    with pytest.raises(KafkaError) as e:
        log.append_as_leader(buf, now_ms=1000, leader_epoch=0)
    assert e.value.code == ErrorCode.INVALID_TXN_STATE


# ---------------------------------------------------------------------- collecting across segments
def three_segments(log: PartitionLog) -> Writer:
    """seg 0: A opens (0), B opens (1), plain (2) | seg 3: abort A (3), plain (4) |
    seg 5: abort B (5), C opens (6), abort C (7)."""
    w = Writer(log)
    w.txn(A)
    w.txn(B)
    w.plain()
    log.roll(now_ms=1000)
    w.end(A, commit=False)
    w.plain()
    log.roll(now_ms=1000)
    w.end(B, commit=False)
    w.txn(C)
    w.end(C, commit=False)
    return w


TA, TB, TC = AbortedTxn(A, 0, 3, 1), AbortedTxn(B, 1, 5, 6), AbortedTxn(C, 6, 7, 8)


@pytest.mark.parametrize(("start", "upper", "expected"), [
    (0, 8, [TA, TB, TC]),
    (0, 3, [TA, TB]),     # B's entry (its LSO 6 >= 3) ends the search: C is never looked at
    (0, 1, [TA]),         # A's entry records LSO 1: nothing later can start below 1
    (4, 5, [TB]),         # fetching inside B, which spans all three segments
    (6, 8, [TC]),         # B ended at 5, before the fetch
    (8, 9, []),
])
def test_collect_aborted_transactions_across_segments(open_log, start, upper, expected):
    log = open_log()
    three_segments(log)
    assert [s.base_offset for s in log.segments] == [0, 3, 5]
    assert read_txnindex(txnindex_path(log, 3)) == [(0, *TA)]
    assert read_txnindex(txnindex_path(log, 5)) == [(0, *TB), (0, *TC)]
    assert log.collect_aborted_transactions(start, upper) == expected


# ---------------------------------------------------------------------- the index's lifecycle
def test_truncation_below_a_marker_removes_its_entry_and_reopens_the_transaction(open_log):
    log = open_log()
    w = Writer(log)
    w.txn(A)            # 0
    w.plain()           # 1
    w.end(A, commit=False)  # 2
    w.txn(B)            # 3
    w.end(B, commit=False)  # 4
    assert len(read_txnindex(txnindex_path(log, 0))) == 2
    log.truncate_to(4)
    assert read_txnindex(txnindex_path(log, 0)) == [(0, A, 0, 2, 3)]
    log.truncate_to(2)
    assert read_txnindex(txnindex_path(log, 0)) == []
    assert log.producer_state.last_entry(A).current_txn_first_offset == 0
    assert log.last_stable_offset == 0
    w.end(A, commit=False)  # the transaction can be closed again
    assert log.collect_aborted_transactions(0, 3) == [AbortedTxn(A, 0, 2, 3)]


def test_truncating_segments_removes_or_empties_their_txnindex(open_log):
    log = open_log()
    w = three_segments(log)
    log.truncate_to(6)
    assert read_txnindex(txnindex_path(log, 5)) == [(0, *TB)]
    log.truncate_to(4)  # the segment at 5 goes with its index
    assert not os.path.exists(txnindex_path(log, 5))
    assert log.collect_aborted_transactions(0, 4) == [TA]
    w.plain()
    assert log.last_stable_offset == 1  # B is open again
    assert log.collect_aborted_transactions(0, 5) == [TA]
    w.end(B, commit=True)
    assert log.last_stable_offset == log.log_end_offset


def test_retention_renames_then_unlinks_the_txnindex(open_log):
    log = open_log()
    three_segments(log)
    log.maybe_increment_log_start_offset(5)
    assert log.delete_old_segments(now_ms=1000) == 2
    retired = sorted(os.path.basename(p) for p in log.take_files_to_delete())
    assert files.filename_prefix(3) + ".txnindex.deleted" in retired
    assert not os.path.exists(txnindex_path(log, 3))
    assert log.collect_aborted_transactions(5, 8) == [TB, TC]


def test_sync_deletion_removes_the_txnindex(open_log):
    log = open_log()
    three_segments(log)
    log.maybe_increment_log_start_offset(5)
    log.delete_segments_below_start()
    assert not os.path.exists(txnindex_path(log, 3))
    assert os.path.exists(txnindex_path(log, 5))


def test_roll_drops_a_stale_txnindex_left_at_the_new_base(open_log):
    log = open_log()
    w = Writer(log)
    w.plain()
    with open(txnindex_path(log, 1), "wb") as f:
        f.write(AbortedTxn(9, 1, 1, 2).encode())
    log.roll(now_ms=1000)
    assert log.collect_aborted_transactions(0, 10) == []


def test_entries_and_open_transactions_survive_a_restart(open_log, log_dir):
    log = open_log()
    three_segments(log)
    w = Writer(log)
    w.seq = {A: 1}
    open_first = w.txn(A)
    log.close()
    log = open_log()
    assert log.collect_aborted_transactions(0, 8) == [TA, TB, TC]
    assert log.last_stable_offset == open_first  # from the producer snapshot
    w = Writer(log)
    w.end(A, commit=False)
    assert log.last_stable_offset == log.log_end_offset


def test_recovery_rebuilds_a_missing_txnindex(log_dir):
    cfg = LogConfig.from_props({})
    log = PartitionLog.open(log_dir, cfg, now_ms=0, recover=False)
    three_segments(log)
    with open(txnindex_path(log, 5), "rb") as f:
        before = f.read()
    log.close()
    os.remove(txnindex_path(log, 5))
    # Without recovery a missing .txnindex reads as empty, as in Kafka.
    log = PartitionLog.open(log_dir, cfg, now_ms=0, recover=False)
    assert log.collect_aborted_transactions(5, 8) == []
    log.close()
    # Recovering the segment rebuilds it; B started two segments earlier.
    log = PartitionLog.open(log_dir, cfg, now_ms=0, recover=True, recovery_point=5)
    try:
        with open(txnindex_path(log, 5), "rb") as f:
            assert f.read() == before
        assert log.collect_aborted_transactions(0, 8) == [TA, TB, TC]
    finally:
        log.close()


def test_recovery_without_snapshots_replays_from_the_log_start(log_dir):
    cfg = LogConfig.from_props({})
    log = PartitionLog.open(log_dir, cfg, now_ms=0, recover=False)
    three_segments(log)
    log.close()
    for name in os.listdir(log_dir):
        if name.endswith((".snapshot", ".txnindex")):
            os.remove(os.path.join(log_dir, name))
    log = PartitionLog.open(log_dir, cfg, now_ms=0, recover=True, recovery_point=0)
    try:
        assert log.collect_aborted_transactions(0, 8) == [TA, TB, TC]
        assert log.last_stable_offset == log.high_watermark == 8
    finally:
        log.close()


def test_unknown_entry_version_makes_the_loader_rebuild_the_index(log_dir, caplog):
    cfg = LogConfig.from_props({})
    log = PartitionLog.open(log_dir, cfg, now_ms=0, recover=False)
    three_segments(log)
    log.close()
    with open(txnindex_path(log, 3), "wb") as f:
        f.write(struct.pack(">hqqqq", 7, A, 0, 3, 1))
    with caplog.at_level(logging.WARNING):
        log = PartitionLog.open(log_dir, cfg, now_ms=0, recover=False)
    try:
        assert log.collect_aborted_transactions(0, 8) == [TA, TB, TC]
        assert "rebuilding" in caplog.text
    finally:
        log.close()


def test_a_hand_built_entry_reads_back(log_dir):
    cfg = LogConfig.from_props({})
    log = PartitionLog.open(log_dir, cfg, now_ms=0, recover=False)
    Writer(log).plain(3)
    log.close()
    # Kafka's layout: int16 version, int64 producer id, first, last, last stable offset.
    entry = bytes.fromhex("0000" "00000000000003e8" "0000000000000000" "0000000000000002"
                          "0000000000000003")
    assert len(entry) == 34
    with open(files.txn_index_file(log_dir, 0), "wb") as f:
        f.write(entry)
    log = PartitionLog.open(log_dir, cfg, now_ms=0, recover=False)
    try:
        assert log.collect_aborted_transactions(0, 3) == [AbortedTxn(1000, 0, 2, 3)]
        assert AbortedTxn(1000, 0, 2, 3).encode() == entry
    finally:
        log.close()


def test_the_directory_rename_moves_the_txnindex_with_its_segment(open_log, tmp_path):
    log = open_log()
    w = Writer(log)
    w.txn(A)
    w.end(A, commit=False)
    new_dir = str(tmp_path / "topic-a.b-0.0123456789abcdef0123456789abcdef-delete")
    log.rename_dir(new_dir)
    w.txn(B)
    w.end(B, commit=False)
    assert read_txnindex(files.txn_index_file(new_dir, 0)) == [(0, A, 0, 1, 2), (0, B, 2, 3, 4)]
    assert log.collect_aborted_transactions(0, 4) == [AbortedTxn(A, 0, 1, 2),
                                                      AbortedTxn(B, 2, 3, 4)]


def test_compaction_keeps_the_index_entries_of_the_segments_it_rewrites(open_log):
    log = open_log(cleanup_policy="compact")
    w = Writer(log)
    w.plain(key=b"x")          # 0
    w.txn(A, key=b"t")         # 1
    w.end(A, commit=False)     # 2
    log.roll(now_ms=1000)
    w.plain(key=b"x")          # 3
    w.txn(B, key=b"u")         # 4
    w.end(B, commit=False)     # 5
    log.roll(now_ms=1000)
    w.plain(key=b"y")          # 6: the active segment
    result = clean_log(log, now_ms=2000)
    assert result.records_removed == 3  # the first x, and the aborted t and u
    assert [s.base_offset for s in log.segments] == [0, 6]
    assert not os.path.exists(txnindex_path(log, 3))
    assert log.collect_aborted_transactions(0, 6) == [AbortedTxn(A, 1, 2, 3),
                                                      AbortedTxn(B, 4, 5, 6)]


def test_expiry_keeps_a_producer_whose_transaction_is_open(open_log):
    log = open_log()
    w = Writer(log)
    w.txn(A)
    w.plain()
    far_future = 10 * 86_400_000
    assert log.producer_state.remove_expired(far_future) == 0
    assert log.last_stable_offset == 0
    w.end(A, commit=True)
    assert log.producer_state.remove_expired(far_future) == 1
    assert log.last_stable_offset == log.high_watermark
