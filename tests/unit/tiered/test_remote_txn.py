"""Transactions and tiered storage: segments go remote with their ``.txnindex``, and a
read_committed fetch served from remote storage lists the aborted transactions overlapping what
it read, from the remote indexes and then the local log's (Kafka's
RemoteLogManager.collectAbortedTransactions); the copier never uploads past the last stable
offset."""

from __future__ import annotations

import threading
import uuid
from types import SimpleNamespace
from typing import Any

import pytest
import trio

from kafkapy.log.config import LogConfig
from kafkapy.log.partition_log import PartitionLog
from kafkapy.log.transaction_index import parse_entries
from kafkapy.records.builder import Record, build_batch
from kafkapy.records.control import marker_batch
from kafkapy.records.reader import iter_batches
from kafkapy.tiered.copier import copy_pass
from kafkapy.tiered.local_dir_storage import LocalDirRemoteStorage
from kafkapy.tiered.metadata_cache import RemoteLogMetadataCache
from kafkapy.tiered.remote_fetch import RemoteFetcher
from kafkapy.tiered.remote_metadata import RemoteLogSegmentState, TopicIdPartition
from kafkapy.tiered.remote_reader import RemoteReader
from kafkapy.tiered.remote_txn import RemoteTxnIndexes, following_segments
from kafkapy.tiered.storage import IndexType, ObjectKind
from kafkapy.tiered.tracking import TrackedPartition

NOW = 1_700_000_000_000
TIP = TopicIdPartition(uuid.uuid4(), "t", 0)
A, B, C, D = 1000, 2000, 3000, 4000
FINISHED = RemoteLogSegmentState.COPY_SEGMENT_FINISHED


class Writer:
    """Appends as transactional producers and their coordinator's markers would."""

    def __init__(self, log: PartitionLog) -> None:
        self.log = log
        self.seq: dict[int, int] = {}

    def _append(self, buf: bytes, *, from_client: bool = True) -> int:
        return self.log.append_as_leader(bytearray(buf), now_ms=NOW, leader_epoch=0,
                                         from_client=from_client).first_offset

    def txn(self, pid: int) -> int:
        seq = self.seq.get(pid, 0)
        self.seq[pid] = seq + 1
        return self._append(build_batch([Record(b"k", b"t" * 20, timestamp=NOW)], producer_id=pid,
                                        producer_epoch=0, base_sequence=seq, transactional=True))

    def plain(self) -> int:
        return self._append(build_batch([Record(b"p", b"x" * 20, timestamp=NOW)]))

    def end(self, pid: int, *, commit: bool) -> int:
        return self._append(marker_batch(producer_id=pid, producer_epoch=0, commit=commit,
                                         coordinator_epoch=0, now_ms=NOW), from_client=False)

    def roll(self) -> None:
        self.log.roll(now_ms=NOW)


def open_log(tmp_path) -> PartitionLog:
    cfg = LogConfig.from_props({"remote.storage.enable": "true", "local.retention.bytes": "1"})
    plog = PartitionLog.open(str(tmp_path / "logs" / "t-0"), cfg, now_ms=NOW, recover=False)
    plog.update_remote_state(enabled=True)
    return plog


def write_transactions(plog: PartitionLog) -> None:
    """Four closed segments and an active one:

    seg 0 [0-3]:   0 plain, 1 A, 2 B, 3 ABORT A (lso 2: B open)
    seg 4 [4-7]:   4 D, 5 C, 6 ABORT B (lso 4: D open), 7 COMMIT C
    seg 8 [8-9]:   8 plain, 9 ABORT D (lso 10)
    seg 10 [10-11]: 10 A, 11 ABORT A (lso 12)
    active [12]:   12 plain
    """
    w = Writer(plog)
    w.plain(), w.txn(A), w.txn(B), w.end(A, commit=False), w.roll()
    w.txn(D), w.txn(C), w.end(B, commit=False), w.end(C, commit=True), w.roll()
    w.plain(), w.end(D, commit=False), w.roll()
    w.txn(A), w.end(A, commit=False), w.roll()
    w.plain()
    assert [s.base_offset for s in plog.segments] == [0, 4, 8, 10, 12]
    assert plog.last_stable_offset == plog.log_end_offset == 13


class CountingStorage:
    """Local-directory remote storage that counts index fetches by type."""

    def __init__(self, inner: LocalDirRemoteStorage) -> None:
        self.inner = inner
        self.index_fetches: dict[IndexType, int] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def fetch_index(self, segment, index_type):
        self.index_fetches[index_type] = self.index_fetches.get(index_type, 0) + 1
        return self.inner.fetch_index(segment, index_type)


class Tiered:
    """A log, its remote copies and a RemoteFetcher over them (no broker)."""

    def __init__(self, tmp_path, *, copy_below: int | None = None) -> None:
        self.plog = open_log(tmp_path)
        write_transactions(self.plog)
        self.rsm = CountingStorage(LocalDirRemoteStorage.at(tmp_path / "remote"))
        self.cache = RemoteLogMetadataCache(TIP)
        copied = copy_pass(self.plog, TIP, self.rsm, self.cache, self.cache.apply, broker_id=1,
                           now_ms=lambda: NOW, last_stable_offset=copy_below).copied
        self.copied = copied
        self.plog.update_remote_state(highest_offset=copied[-1].end_offset)
        self.plog.delete_old_segments(NOW)
        assert self.plog.local_log_start_offset == copied[-1].end_offset + 1
        self.tracked = TrackedPartition(TIP)
        self.hosted = SimpleNamespace(topic="t", log=self.plog)
        self.fetcher = RemoteFetcher(self.rsm, RemoteReader(self.rsm), 2, threading.Lock(),
                                     lambda hosted: (self.tracked, self.cache))

    def read_committed(self, offset: int, max_bytes: int = 1 << 20):
        return trio.run(lambda: self.fetcher.read_committed(self.hosted, offset, max_bytes, min_one=True))

    def close(self) -> None:
        self.plog.close()


@pytest.fixture
def tiered(tmp_path):
    made: list[Tiered] = []

    def make(**kw: Any) -> Tiered:
        made.append(Tiered(tmp_path, **kw))
        return made[-1]

    yield make
    for t in made:
        t.close()


def offsets(data: bytes) -> list[int]:
    return [o for h, _ in iter_batches(data) for o in range(h.base_offset, h.last_offset + 1)]


def test_segments_go_remote_with_their_transaction_index(tmp_path) -> None:
    plog = open_log(tmp_path)
    write_transactions(plog)
    rsm = LocalDirRemoteStorage.at(tmp_path / "remote")
    cache = RemoteLogMetadataCache(TIP)
    copied = copy_pass(plog, TIP, rsm, cache, cache.apply, broker_id=1, now_ms=lambda: NOW).copied
    assert [m.start_offset for m in copied] == [0, 4, 8, 10]
    for meta, seg in zip(copied, plog.segments):
        with rsm.fetch_index(meta.remote_log_segment_id, IndexType.TRANSACTION) as f:
            assert parse_entries(f.read(), "remote") == seg.txn_index.entries
    plog.close()


def test_read_committed_remote_fetch_lists_the_overlapping_aborted_transactions(tiered) -> None:
    t = tiered()
    assert t.plog.local_log_start_offset == 12  # every closed segment is remote only
    data, aborted = t.read_committed(0)
    assert offsets(data) == [0, 1, 2, 3]
    # A's and B's: B's ABORT is in the next remote segment, found by continuing there.
    assert aborted == [(A, 1), (B, 2)]
    data, aborted = t.read_committed(5)
    assert offsets(data) == [5, 6, 7]
    assert aborted == [(B, 2), (D, 4)]  # not C: it committed
    data, aborted = t.read_committed(10)
    assert offsets(data) == [10, 11] and aborted == [(A, 10)]


def test_the_upper_bound_is_where_the_read_stopped(tiered) -> None:
    t = tiered()
    # One batch only (max_bytes 1, min_one): [4, 5) overlaps B's (2-6) and D's (4-9), not C's.
    data, aborted = t.read_committed(4, max_bytes=1)
    assert offsets(data) == [4]
    assert aborted == [(B, 2), (D, 4)]
    data, aborted = t.read_committed(8, max_bytes=1)
    assert offsets(data) == [8] and aborted == [(D, 4)]
    data, aborted = t.read_committed(0, max_bytes=1)
    assert offsets(data) == [0] and aborted == []  # A starts at 1: after what was read


def test_the_search_continues_into_the_local_log(tiered) -> None:
    # Only the first two segments went remote: D's ABORT (offset 9) is in a local segment.
    t = tiered(copy_below=8)
    assert [m.start_offset for m in t.copied] == [0, 4] and t.plog.local_log_start_offset == 8
    data, aborted = t.read_committed(5)
    assert offsets(data) == [5, 6, 7]
    assert aborted == [(B, 2), (D, 4)]
    # B's came from the remote index, D's from the local one.
    assert [(x.producer_id, x.first_offset) for x in t.plog.collect_aborted_transactions(5, 8)] == [(D, 4)]


def test_a_segment_uploaded_without_a_transaction_index_has_none(tmp_path) -> None:
    plog = open_log(tmp_path)
    w = Writer(plog)
    w.plain(), w.txn(A), w.end(A, commit=True), w.roll(), w.plain()
    rsm = CountingStorage(LocalDirRemoteStorage.at(tmp_path / "remote"))
    cache = RemoteLogMetadataCache(TIP)
    (meta,) = copy_pass(plog, TIP, rsm, cache, cache.apply, broker_id=1, now_ms=lambda: NOW).copied
    sid = meta.remote_log_segment_id
    assert ObjectKind.TRANSACTION_INDEX.value not in {k.value for k in rsm.inner._manifest(sid)}
    indexes = RemoteTxnIndexes(rsm, RemoteReader(rsm).chunks)
    assert indexes.entries(meta) == [] and indexes.entries(meta) == []
    assert rsm.index_fetches[IndexType.TRANSACTION] == 1  # "none" is cached too
    assert indexes.collect([meta], 0, 3).aborted == []
    plog.close()


def test_remote_transaction_indexes_are_fetched_once(tiered) -> None:
    t = tiered()
    first = t.read_committed(0)
    assert t.rsm.index_fetches[IndexType.TRANSACTION] == 2  # segments 0 and 4
    for _ in range(3):
        assert t.read_committed(0) == first
    t.read_committed(5)
    assert t.rsm.index_fetches[IndexType.TRANSACTION] == 3  # segment 8's, once


def test_read_uncommitted_remote_fetch_is_unchanged(tiered) -> None:
    t = tiered()
    data = trio.run(lambda: t.fetcher.read(t.hosted, 0, 1 << 20, min_one=True))
    assert offsets(data) == [0, 1, 2, 3]
    assert IndexType.TRANSACTION not in t.rsm.index_fetches


def test_following_segments_walks_the_remote_log_up_to_the_local_start(tiered) -> None:
    t = tiered()
    first = t.cache.segments_in_state(FINISHED)[0]
    assert [s.start_offset for s in following_segments(t.cache, first, 12)] == [0, 4, 8, 10]
    assert [s.start_offset for s in following_segments(t.cache, first, 8)] == [0, 4]


def test_the_copier_never_uploads_past_the_last_stable_offset(tmp_path) -> None:
    plog = open_log(tmp_path)
    w = Writer(plog)
    w.plain(), w.roll()
    w.txn(A), w.roll()                         # segment 1 holds an open transaction
    w.plain(), w.roll(), w.plain()
    assert plog.last_stable_offset == 1
    rsm = LocalDirRemoteStorage.at(tmp_path / "remote")
    cache = RemoteLogMetadataCache(TIP)
    copied = copy_pass(plog, TIP, rsm, cache, cache.apply, broker_id=1, now_ms=lambda: NOW).copied
    assert [m.start_offset for m in copied] == [0]
    # A marker written but not yet below the high watermark still holds the LSO (the
    # transaction is complete but not stable): nothing more goes.
    plog.hw_follows_leo = False
    marker = w.end(A, commit=False)
    w.roll(), w.plain()
    assert plog.high_watermark <= marker and plog.last_stable_offset == 1
    assert copy_pass(plog, TIP, rsm, cache, cache.apply, broker_id=1, now_ms=lambda: NOW).copied == ()
    # Once replicated past the marker, the segments up to the new LSO go.
    plog.update_high_watermark(plog.log_end_offset)
    assert plog.last_stable_offset == plog.log_end_offset
    again = copy_pass(plog, TIP, rsm, cache, cache.apply, broker_id=1, now_ms=lambda: NOW).copied
    assert [m.start_offset for m in again] == [1, 2, 3]
    plog.close()
