"""Log compaction of transactional and idempotent data, as Kafka's LogCleaner does it: aborted
data removed, the offset map built from what was not aborted, nothing cleaned at or past the last
stable offset, end markers and tombstones removed after a delete horizon stamped by the first
clean that could remove them (KIP-534), and each producer's last batch kept for its sequence."""

from __future__ import annotations

import glob
import os

import pytest

from kafkapy.log import files
from kafkapy.log.cleaner import LogCleaner, clean_log
from kafkapy.log.partition_log import PartitionLog
from kafkapy.log.transaction_index import AbortedTxn
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.records import format as fmt
from kafkapy.records.builder import Record, build_batch
from kafkapy.records.control import marker_batch, read_marker
from kafkapy.records.reader import iter_batches, iter_records

A, B, C, P = 1000, 2000, 3000, 4000
DAY = 86_400_000
T0 = 1_000_000  # when the writes happen


class Writer:
    """Appends to one log as producers and a transaction coordinator would."""

    def __init__(self, log: PartitionLog) -> None:
        self.log = log
        self.seq: dict[int, int] = {}

    def txn(self, pid: int, key: bytes, value: bytes | None) -> int:
        return self._producer(pid, key, value, transactional=True)

    def idempotent(self, pid: int, key: bytes, value: bytes | None) -> int:
        return self._producer(pid, key, value, transactional=False)

    def _producer(self, pid: int, key: bytes, value: bytes | None, *, transactional: bool) -> int:
        seq = self.seq.get(pid, 0)
        self.seq[pid] = seq + 1
        buf = bytearray(build_batch([Record(key, value, timestamp=T0)], producer_id=pid,
                                    producer_epoch=0, base_sequence=seq,
                                    transactional=transactional))
        return self.log.append_as_leader(buf, now_ms=T0, leader_epoch=0).first_offset

    def plain(self, key: bytes, value: bytes | None) -> int:
        buf = bytearray(build_batch([Record(key, value, timestamp=T0)]))
        return self.log.append_as_leader(buf, now_ms=T0, leader_epoch=0).first_offset

    def end(self, pid: int, *, commit: bool) -> int:
        buf = bytearray(marker_batch(producer_id=pid, producer_epoch=0, commit=commit,
                                     coordinator_epoch=0, now_ms=T0))
        return self.log.append_as_leader(buf, now_ms=T0, leader_epoch=0,
                                         from_client=False).first_offset


def all_batches(log: PartitionLog) -> list[tuple[fmt.BatchHeader, bytes]]:
    out = []
    for seg in log.segments:
        for ref in seg.iter_batches():
            out.append((ref.header, bytes(seg.read_batch(ref))))
    return out


Rec = tuple[int, bytes | None, bytes | None]


def read_uncommitted(log: PartitionLog) -> list[Rec]:
    return [(r.offset, r.key, r.value) for h, data in all_batches(log)
            if not h.is_control and h.base_offset < log.high_watermark
            for r in iter_records(data)]


def read_committed(log: PartitionLog) -> list[Rec]:
    """What a READ_COMMITTED consumer keeps: up to the LSO, aborted transactions (as the log
    lists them) left out, as Kafka's fetcher filters them."""
    lso = log.last_stable_offset
    pending = sorted(log.collect_aborted_transactions(log.log_start_offset, lso),
                     key=lambda t: t.first_offset)
    aborted: set[int] = set()
    out = []
    for h, data in all_batches(log):
        if h.base_offset >= lso:
            break
        while pending and pending[0].first_offset <= h.last_offset:
            aborted.add(pending.pop(0).producer_id)
        if h.is_control:
            marker = read_marker(data)
            if marker is not None and not marker.commit:
                aborted.discard(h.producer_id)
            continue
        if h.is_transactional and h.producer_id in aborted:
            continue
        out.extend((r.offset, r.key, r.value) for r in iter_records(data))
    return out


def markers(log: PartitionLog) -> list[int]:
    return [h.base_offset for h, _ in all_batches(log) if h.is_control and h.record_count]


def write_interleaved(log: PartitionLog) -> Writer:
    """Committed, aborted and open transactions among plain writes, over three segments."""
    w = Writer(log)
    w.plain(b"k1", b"p1")        # 0
    w.txn(A, b"k1", b"a1")       # 1  committed
    w.txn(B, b"k2", b"b1")       # 2  aborted
    w.plain(b"k2", b"p2")        # 3
    w.end(A, commit=True)        # 4
    w.end(B, commit=False)       # 5
    log.roll(now_ms=T0)
    w.txn(B, b"k1", b"b2")       # 6  aborted: later than a1, but must not win
    w.end(B, commit=False)       # 7
    w.plain(b"k3", b"p3")        # 8
    w.txn(C, b"k3", b"c1")       # 9  open: the LSO
    w.plain(b"k1", b"p4")        # 10 past the LSO: not used to compact
    log.roll(now_ms=T0)
    w.plain(b"k4", b"x")         # 11 the active segment
    return w


def test_interleaved_transactions_read_as_kafka_leaves_them(open_log):
    log = open_log(cleanup_policy="compact")
    write_interleaved(log)
    assert log.last_stable_offset == 9
    before = all_batches(log)
    result = clean_log(log, now_ms=T0 + 1000)

    assert read_committed(log) == [(1, b"k1", b"a1"), (3, b"k2", b"p2"), (8, b"k3", b"p3")]
    assert read_uncommitted(log) == [(1, b"k1", b"a1"), (3, b"k2", b"p2"), (8, b"k3", b"p3"),
                                     (9, b"k3", b"c1"), (10, b"k1", b"p4"), (11, b"k4", b"x")]
    assert result.aborted_records_removed == 2 and result.records_removed == 3
    assert result.first_uncleanable == 9
    # At and after the LSO the batches are as they were written.
    assert [b for b in all_batches(log) if b[0].base_offset >= 9] == \
        [b for b in before if b[0].base_offset >= 9]
    # Markers whose transactions had data in this pass stay, the aborts with their entries;
    # B's second aborted batch is its last: kept, empty, for its sequence.
    assert markers(log) == [4, 5, 7]
    empty = [h for h, _ in all_batches(log) if h.record_count == 0]
    assert [(h.base_offset, h.producer_id, h.base_sequence) for h in empty] == [(6, B, 1)]
    assert [s.base_offset for s in log.segments] == [0, 11]
    assert log.segments[0].txn_index.entries == [AbortedTxn(B, 2, 5, 6), AbortedTxn(B, 6, 7, 8)]
    assert log.log_end_offset == 12


@pytest.mark.parametrize("recover", [False, True])
def test_a_cleaned_log_reads_the_same_after_a_restart(open_log, log_dir, recover):
    log = open_log(cleanup_policy="compact")
    write_interleaved(log)
    clean_log(log, now_ms=T0 + 1000)
    committed, uncommitted = read_committed(log), read_uncommitted(log)
    lso = log.last_stable_offset
    log.close()
    if recover:  # an unclean shutdown: indexes and producer state rebuilt from the log
        for name in os.listdir(log_dir):
            if name.endswith((files.PRODUCER_SNAPSHOT_SUFFIX, ".index", ".timeindex")):
                os.remove(os.path.join(log_dir, name))
    log = open_log(cleanup_policy="compact", recover=recover, now_ms=T0 + 2000)
    assert log.last_stable_offset == lso == 9
    assert read_committed(log) == committed
    assert read_uncommitted(log) == uncommitted


def test_markers_go_after_delete_retention_once_their_data_is_gone(open_log):
    log = open_log(cleanup_policy="compact")
    w = Writer(log)
    w.txn(A, b"k1", b"v1")       # 0  committed, then overwritten by A's next transaction
    w.end(A, commit=True)        # 1
    w.txn(A, b"k1", b"v2")       # 2
    w.end(A, commit=True)        # 3
    w.txn(B, b"k2", b"gone")     # 4  aborted
    w.end(B, commit=False)       # 5
    w.txn(B, b"k3", b"kept")     # 6
    w.end(B, commit=True)        # 7
    log.roll(now_ms=T0)
    w.plain(b"z", b"z")          # 8  active
    view = [(2, b"k1", b"v2"), (6, b"k3", b"kept"), (8, b"z", b"z")]

    t1 = T0 + 1000
    r1 = clean_log(log, now_ms=t1)  # the data of 0 and 4 goes; their markers saw it: kept
    assert markers(log) == [1, 3, 5, 7]
    assert log.collect_aborted_transactions(0, 8) == [AbortedTxn(B, 4, 5, 6)]
    assert r1.markers_kept == 0 and r1.next_horizon_ms is None
    assert read_committed(log) == view == read_uncommitted(log)

    t2 = T0 + 2000
    r2 = clean_log(log, now_ms=t2)  # no data left under 1 and 5: stamped with a horizon
    assert markers(log) == [1, 3, 5, 7]
    assert r2.markers_kept == 2 and r2.next_horizon_ms == t2 + DAY
    stamped = {h.base_offset: h for h, _ in all_batches(log) if h.is_control}
    assert stamped[1].attributes & fmt.DELETE_HORIZON_MASK and stamped[1].base_timestamp == t2 + DAY
    assert not stamped[3].attributes & fmt.DELETE_HORIZON_MASK
    # the abort's data is gone, so no READ_COMMITTED reader needs its entry any more
    assert log.collect_aborted_transactions(0, 8) == []
    assert not os.path.exists(files.txn_index_file(log.dir, 0))

    clean_log(log, now_ms=t2 + DAY - 1)
    assert markers(log) == [1, 3, 5, 7]
    r4 = clean_log(log, now_ms=t2 + DAY)
    assert markers(log) == [3, 7] and r4.markers_removed == 2
    assert read_committed(log) == view


def test_the_cleaner_looks_again_when_a_marker_horizon_passes(open_log):
    log = open_log(cleanup_policy="compact", min_cleanable_dirty_ratio="0.01")
    w = Writer(log)
    w.txn(A, b"k", b"v1")        # 0
    w.end(A, commit=True)        # 1
    w.txn(A, b"k", b"v2")        # 2
    w.end(A, commit=True)        # 3
    log.roll(now_ms=T0)
    w.plain(b"z", b"z")
    cleaner = LogCleaner()
    assert len(cleaner.run_once([log], now_ms=T0)) == 1
    log.roll(now_ms=T0)          # dirty again: the second pass stamps marker 1
    w.plain(b"y", b"y")
    assert len(cleaner.run_once([log], now_ms=T0 + 10)) == 1
    assert cleaner.run_once([log], now_ms=T0 + 20) == []
    done = cleaner.run_once([log], now_ms=T0 + 10 + DAY)
    assert [r.markers_removed for _t, _p, r in done] == [1]
    assert markers(log) == [3]


def test_a_duplicate_retried_after_cleaning_is_still_detected(open_log, log_dir):
    log = open_log(cleanup_policy="compact")
    w = Writer(log)
    w.idempotent(P, b"k", b"v1")  # 0: P's only batch, then overwritten
    w.plain(b"k", b"v2")          # 1
    log.roll(now_ms=T0)
    w.plain(b"z", b"z")           # 2
    clean_log(log, now_ms=T0 + 1000)
    assert read_uncommitted(log) == [(1, b"k", b"v2"), (2, b"z", b"z")]
    kept = [h for h, _ in all_batches(log) if h.producer_id == P]
    assert [(h.base_offset, h.last_offset, h.base_sequence, h.record_count) for h in kept] == \
        [(0, 0, 0, 0)]
    # A restart without producer snapshots rebuilds P's state from the log: from the empty batch.
    log.close()
    for path in glob.glob(os.path.join(log_dir, "*" + files.PRODUCER_SNAPSHOT_SUFFIX)):
        os.remove(path)
    log = open_log(cleanup_policy="compact", now_ms=T0 + 2000)
    retry = bytearray(build_batch([Record(b"k", b"v1", timestamp=T0)], producer_id=P,
                                  producer_epoch=0, base_sequence=0))
    got = log.append_as_leader(retry, now_ms=T0 + 2000, leader_epoch=0)
    assert got.duplicate and got.first_offset == 0
    gap = bytearray(build_batch([Record(b"k", b"v3", timestamp=T0)], producer_id=P,
                                producer_epoch=0, base_sequence=5))
    with pytest.raises(KafkaError) as err:
        log.append_as_leader(gap, now_ms=T0 + 2000, leader_epoch=0)
    assert err.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    w = Writer(log)
    w.seq[P] = 1
    assert w.idempotent(P, b"k", b"v4") == 3


def test_tombstones_in_transactions_wait_for_their_horizon(open_log):
    log = open_log(cleanup_policy="compact")
    w = Writer(log)
    w.plain(b"k", b"v")          # 0
    w.txn(A, b"k", None)         # 1  a committed delete
    w.end(A, commit=True)        # 2
    w.plain(b"other", b"o")      # 3  A's producer state is in batch 1, which must stay
    log.roll(now_ms=T0)
    w.plain(b"z", b"z")
    clean_log(log, now_ms=T0)
    assert read_committed(log) == [(1, b"k", None), (3, b"other", b"o"), (4, b"z", b"z")]
    clean_log(log, now_ms=T0 + DAY)
    # the tombstone is gone; A's last batch stays, empty, and its marker with it
    assert read_committed(log) == [(3, b"other", b"o"), (4, b"z", b"z")]
    kept = [h for h, _ in all_batches(log) if h.producer_id == A]
    assert [(h.base_offset, h.record_count) for h in kept] == [(1, 0), (2, 1)]


def test_iter_batches_accepts_the_empty_batches_the_cleaner_writes(open_log):
    log = open_log(cleanup_policy="compact")
    w = Writer(log)
    w.idempotent(P, b"k", b"v1")
    w.plain(b"k", b"v2")
    log.roll(now_ms=T0)
    w.plain(b"z", b"z")
    clean_log(log, now_ms=T0)
    data = log.read(0, 1 << 20).read_bytes()
    headers = [h for h, _ in iter_batches(data)]
    assert [(h.base_offset, h.record_count) for h in headers] == [(0, 0), (1, 1)]


def test_an_open_transaction_holds_the_cleaner_back_until_it_ends(open_log):
    log = open_log(cleanup_policy="compact", min_cleanable_dirty_ratio="0.01")
    w = Writer(log)
    w.plain(b"k", b"v1")         # 0
    w.txn(C, b"t", b"c1")        # 1  open: nothing from here on is cleaned
    w.plain(b"k", b"v2")         # 2
    log.roll(now_ms=T0)
    w.plain(b"k", b"v3")         # 3
    log.roll(now_ms=T0)
    w.plain(b"z", b"z")          # 4
    cleaner = LogCleaner()
    done = cleaner.run_once([log], now_ms=T0)  # only below the LSO: v1 has no later value there
    assert [(r.records_removed, r.first_uncleanable) for _t, _p, r in done] == [(0, 1)]
    assert cleaner.due([log], now_ms=T0) == []  # a hanging transaction: nothing cleanable
    assert [o for o, _k, _v in read_uncommitted(log)] == [0, 1, 2, 3, 4]
    w.end(C, commit=True)        # 5
    assert log.last_stable_offset == 6
    log.roll(now_ms=T0)
    w.plain(b"y", b"y")
    done = cleaner.run_once([log], now_ms=T0)
    assert [r.records_removed for _t, _p, r in done] == [2]
    assert read_committed(log) == [(1, b"t", b"c1"), (3, b"k", b"v3"), (4, b"z", b"z"),
                                   (6, b"y", b"y")]


def test_aborted_data_goes_when_its_marker_is_in_the_active_segment(open_log):
    log = open_log(cleanup_policy="compact")
    w = Writer(log)
    w.plain(b"k", b"v1")         # 0
    w.txn(B, b"k", b"aborted")   # 1
    w.txn(A, b"j", b"a")         # 2
    log.roll(now_ms=T0)
    w.end(B, commit=False)       # 3  in the active segment, with its .txnindex entry
    w.end(A, commit=True)        # 4
    before = read_committed(log)
    assert before == [(0, b"k", b"v1"), (2, b"j", b"a")]
    clean_log(log, now_ms=T0)
    assert read_committed(log) == before
    assert read_uncommitted(log) == before
    assert log.collect_aborted_transactions(0, 5) == [AbortedTxn(B, 1, 3, 2)]
    assert markers(log) == [3, 4]
