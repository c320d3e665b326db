"""Loading after clean and unclean shutdowns: torn tails, garbage, corrupt indexes."""

from __future__ import annotations

import os

from kafkapy.log import files
from kafkapy.log.config import LogConfig
from kafkapy.log.partition_log import PartitionLog
from kafkapy.records.reader import iter_batches

from .helpers import make_batch


def fill(log, n: int, records: int = 2, epoch: int = 0) -> None:
    for i in range(n):
        log.append_as_leader(make_batch(records, ts=1000 + i, value_size=50), now_ms=0,
                             leader_epoch=epoch)


def crash(log) -> None:
    """Drop the log without any of close()'s bookkeeping (as kill -9 would)."""
    for seg in log.segments:
        seg.close_handlers()
    log.closed = True


def all_offsets(log) -> list[int]:
    out = []
    off = log.local_log_start_offset
    while off < log.log_end_offset:
        s = log.read(off, 1 << 20)
        hs = [h for h, _ in iter_batches(s.read_bytes())]
        out += [o for h in hs for o in range(h.base_offset, h.last_offset + 1)]
        off = hs[-1].last_offset + 1
    return out


def test_clean_reopen_keeps_everything(open_log):
    log = open_log(segment_bytes=500, index_interval_bytes=100)
    fill(log, 20)
    leo, nsegs = log.log_end_offset, len(log.segments)
    log.close()
    again = open_log(segment_bytes=500, index_interval_bytes=100)
    assert again.log_end_offset == leo and len(again.segments) == nsegs
    assert all_offsets(again) == list(range(leo))
    fill(again, 1)
    assert again.log_end_offset == leo + 2


def test_torn_tail_is_truncated(open_log, log_dir):
    log = open_log(index_interval_bytes=100)
    fill(log, 10)
    crash(log)
    path = files.log_file(log_dir, 0)
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(size - 7)  # mid-batch
    again = open_log(recover=True, index_interval_bytes=100)
    assert again.log_end_offset == 18
    assert os.path.getsize(path) < size - 7
    assert all_offsets(again) == list(range(18))
    r = again.append_as_leader(make_batch(1), now_ms=0, leader_epoch=0)
    assert r.first_offset == 18


def test_garbage_after_last_batch_is_removed(open_log, log_dir):
    log = open_log()
    fill(log, 5)
    crash(log)
    path = files.log_file(log_dir, 0)
    good = os.path.getsize(path)
    with open(path, "ab") as f:
        f.write(os.urandom(300))
    again = open_log(recover=True)
    assert again.log_end_offset == 10 and os.path.getsize(path) == good


def test_corrupt_crc_in_middle_truncates_there(open_log, log_dir):
    log = open_log(segment_bytes=100_000)
    fill(log, 6)
    seg = log.active
    refs = list(seg.iter_batches())
    positions = [r.position for r in refs]
    crash(log)
    path = files.log_file(log_dir, 0)
    with open(path, "r+b") as f:
        f.seek(positions[3] + 70)  # inside batch 3's records
        b = f.read(1)
        f.seek(positions[3] + 70)
        f.write(bytes([b[0] ^ 0xFF]))
    again = open_log(recover=True)
    assert again.log_end_offset == 6
    assert os.path.getsize(path) == positions[3]


def test_zero_filled_tail_is_removed(open_log, log_dir):
    log = open_log()
    fill(log, 3)
    crash(log)
    path = files.log_file(log_dir, 0)
    with open(path, "ab") as f:
        f.write(bytes(4096))  # a preallocated or partially flushed tail
    again = open_log(recover=True)
    assert again.log_end_offset == 6


def test_corrupt_index_is_rebuilt_even_after_clean_shutdown(open_log, log_dir):
    log = open_log(index_interval_bytes=100, segment_bytes=2000)
    fill(log, 30)
    assert len(log.segments) > 1
    log.close()
    idx = files.index_file(log_dir, 0)
    good = open(idx, "rb").read()
    assert len(good) >= 16
    with open(idx, "wb") as f:
        f.write(good + b"\x01\x02\x03")  # not a whole number of entries
    os.remove(files.time_index_file(log_dir, 0))  # and a missing time index
    again = open_log(index_interval_bytes=100, segment_bytes=2000)
    assert open(idx, "rb").read() == good
    assert os.path.exists(files.time_index_file(log_dir, 0))
    assert all_offsets(again) == list(range(60))


def test_unclean_preallocated_index_is_rebuilt(open_log, log_dir):
    log = open_log(index_interval_bytes=100)
    fill(log, 20)
    entries = log.active.offset_index.entries
    crash(log)  # the active index is left at its preallocated size
    assert os.path.getsize(files.index_file(log_dir, 0)) == 10_485_760
    again = open_log(recover=True, index_interval_bytes=100)
    assert again.active.offset_index.entries == entries
    assert all_offsets(again) == list(range(40))


def test_unclean_recovery_drops_later_segments_after_corruption(open_log, log_dir):
    log = open_log(segment_bytes=400)
    fill(log, 12)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 3
    crash(log)
    p = files.log_file(log_dir, bases[1])
    with open(p, "r+b") as f:
        f.truncate(os.path.getsize(p) - 5)
    again = open_log(recover=True, segment_bytes=400)
    assert [s.base_offset for s in again.segments] == bases[:2]
    assert again.log_end_offset < bases[2]


def test_clean_shutdown_trusts_indexes_and_skips_scan(open_log, log_dir, monkeypatch):
    log = open_log(segment_bytes=500)
    fill(log, 20)
    log.close()
    from kafkapy.log import segment as segmod
    calls = []
    orig = segmod.LogSegment.recover
    monkeypatch.setattr(segmod.LogSegment, "recover",
                        lambda self, *a, **k: calls.append(self.base_offset) or orig(self, *a, **k))
    again = open_log(segment_bytes=500)
    assert calls == []
    assert again.log_end_offset == 40
    again.close()
    open_log(recover=True, segment_bytes=500)
    assert calls  # unclean: scanned from the recovery point


def test_recovery_point_limits_the_scan(log_dir, monkeypatch):
    cfg = LogConfig.from_props({"segment.bytes": "400"})
    log = PartitionLog.open(log_dir, cfg, now_ms=0, recover=False)
    fill(log, 12)
    log.flush()
    rp = log.recovery_point
    fill(log, 3)
    bases = [s.base_offset for s in log.segments]
    crash(log)
    from kafkapy.log import segment as segmod
    calls = []
    orig = segmod.LogSegment.recover
    monkeypatch.setattr(segmod.LogSegment, "recover",
                        lambda self, *a, **k: calls.append(self.base_offset) or orig(self, *a, **k))
    again = PartitionLog.open(log_dir, cfg, now_ms=0, recover=True, recovery_point=rp)
    assert calls and min(calls) == max(b for b in bases if b <= rp)
    assert again.log_end_offset == 30
    again.close()


def test_leader_epochs_rebuilt_from_batches_on_recovery(open_log, log_dir):
    log = open_log()
    fill(log, 2, epoch=1)
    fill(log, 2, epoch=3)
    crash(log)
    os.remove(os.path.join(log_dir, files.LEADER_EPOCH_CHECKPOINT))
    again = open_log(recover=True)
    assert again.leader_epoch_cache.entries == [(1, 0), (3, 4)]


def test_out_of_order_active_index_is_rebuilt(open_log, log_dir):
    log = open_log(index_interval_bytes=100)
    fill(log, 20)
    log.close()
    idx = files.index_file(log_dir, 0)
    good = open(idx, "rb").read()
    with open(idx, "wb") as f:
        f.write(good[8:16] + good[:8] + good[16:])  # two entries swapped
    again = open_log(index_interval_bytes=100)
    assert again.active.offset_index.entries == len(good) // 8
    assert all_offsets(again) == list(range(40))
    again.close()
    assert open(idx, "rb").read() == good


def test_reopened_log_holds_one_descriptor_per_segment(open_log):
    log = open_log(segment_bytes=300)
    fill(log, 12)
    n = len(log.segments)
    log.close()
    before = len(os.listdir("/proc/self/fd"))
    again = open_log(segment_bytes=300)
    # Index files are mapped lazily and keep no descriptor of their own until then.
    assert len(os.listdir("/proc/self/fd")) - before <= n
    assert again.log_end_offset == 24


def test_swap_file_completes_a_replacement(open_log, log_dir):
    log = open_log(segment_bytes=300)
    fill(log, 8)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 3
    # A compacted copy of the first two segments, left as <base>.log.swap by a crash.
    first_two = b"".join(open(files.log_file(log_dir, b), "rb").read() for b in bases[:2])
    log.close()
    with open(files.log_file(log_dir, 0) + ".swap", "wb") as f:
        f.write(first_two)
    open(files.log_file(log_dir, 0) + ".cleaned", "wb").close()
    again = open_log(segment_bytes=300)
    assert [s.base_offset for s in again.segments] == [0] + bases[2:]
    assert not os.path.exists(files.log_file(log_dir, bases[1]))
    assert all_offsets(again) == list(range(16))
