"""Log compaction: latest value per key, tombstones after delete.retention.ms, crash-safe swaps."""

from __future__ import annotations

import os

import pytest

from kafkapy.log import files
from kafkapy.log.cleaner import LogCleaner, clean_log
from kafkapy.records.builder import Record, build_batch
from kafkapy.records.reader import iter_batches, iter_records

DAY = 86_400_000


def put(log, pairs, *, ts: int, now_ms: int | None = None) -> None:
    recs = [Record(k, v, timestamp=ts) for k, v in pairs]
    log.append_as_leader(bytearray(build_batch(recs)), now_ms=now_ms if now_ms is not None else ts,
                         leader_epoch=0, from_client=False)


def contents(log) -> list[tuple[int, bytes | None, bytes | None]]:
    out = []
    offset = log.local_log_start_offset
    while offset < log.log_end_offset:
        got = log.read(offset, 1 << 20)
        if got is None:
            break
        data = got.read_bytes()
        last = offset
        for header, batch in iter_batches(data):
            for rec in iter_records(batch):
                if rec.offset >= offset:
                    out.append((rec.offset, rec.key, rec.value))
            last = header.last_offset + 1
        if last == offset:
            break
        offset = last
    return out


def write_history(log) -> None:
    """Keys a, b, c overwritten over several segments; b deleted; then an active segment."""
    put(log, [(b"a", b"a1"), (b"b", b"b1")], ts=1000)
    log.roll(now_ms=1000)
    put(log, [(b"a", b"a2"), (b"c", b"c1")], ts=2000)
    log.roll(now_ms=2000)
    put(log, [(b"b", None), (b"a", b"a3")], ts=3000)
    log.roll(now_ms=3000)
    put(log, [(b"c", b"c2")], ts=4000)  # active: never cleaned


def test_keeps_latest_value_per_key_with_original_offsets(open_log):
    log = open_log(cleanup_policy="compact")
    write_history(log)
    leo = log.log_end_offset
    result = clean_log(log, now_ms=5000)
    # tombstone of b is young (delete.retention.ms is a day): kept; b1, a1, a2 are gone
    assert contents(log) == [(3, b"c", b"c1"), (4, b"b", None), (5, b"a", b"a3"), (6, b"c", b"c2")]
    assert result.records_removed == 3 and result.tombstones_kept == 1
    assert result.segments_after == 1  # three small segments merged into one
    assert log.log_end_offset == leo and len(log.segments) == 2
    # reads from an offset that was compacted away start at the next record
    assert log.read(0, 1 << 20) is not None
    put(log, [(b"d", b"d1")], ts=6000)
    assert contents(log)[-1] == (7, b"d", b"d1")


def test_tombstones_removed_after_delete_retention(open_log):
    log = open_log(cleanup_policy="compact")
    write_history(log)
    # As Kafka since KIP-534: the first clean that keeps a tombstone stamps its batch with a
    # delete horizon (now + delete.retention.ms); a clean after the horizon removes it.
    first = clean_log(log, now_ms=10_000)
    assert first.tombstones_kept == 1 and first.next_horizon_ms == 10_000 + DAY
    clean_log(log, now_ms=10_000 + DAY - 1)
    assert (4, b"b") in [(o, k) for o, k, _ in contents(log)]
    clean_log(log, now_ms=10_000 + DAY)
    assert [(o, k) for o, k, _ in contents(log)] == [(3, b"c"), (5, b"a"), (6, b"c")]


def test_min_compaction_lag_keeps_recent_records(open_log):
    log = open_log(cleanup_policy="compact", min_compaction_lag_ms=3500)
    write_history(log)
    clean_log(log, now_ms=5000)  # records newer than t=1500 are not compacted away
    assert [o for o, _k, _v in contents(log)] == [2, 3, 4, 5, 6]


def test_compacted_log_reopens_identically(open_log, log_dir):
    log = open_log(cleanup_policy="compact")
    write_history(log)
    clean_log(log, now_ms=5000)
    before = contents(log)
    log.close()
    again = open_log(recover=True, cleanup_policy="compact")
    assert contents(again) == before
    assert not [n for n in os.listdir(log_dir) if n.endswith((files.CLEANED_SUFFIX, files.SWAP_SUFFIX))]


def test_crash_with_cleaned_file_left_over_keeps_old_segments(open_log, log_dir):
    log = open_log(cleanup_policy="compact")
    write_history(log)
    before = contents(log)
    log.close()
    # a crash while the cleaned segment was still being written
    with open(files.log_file(log_dir, 0) + files.CLEANED_SUFFIX, "wb") as f:
        f.write(b"partial")
    again = open_log(recover=True, cleanup_policy="compact")
    assert contents(again) == before


def test_crash_after_swap_rename_completes_the_swap(open_log, log_dir, tmp_path):
    log = open_log(cleanup_policy="compact")
    write_history(log)
    # Clean a copy to get the bytes of the cleaned segment, then stage the crash state on the
    # original: a .swap file next to every old segment.
    import shutil
    copy_dir = os.path.join(str(tmp_path), "copy-0")
    log.flush()
    shutil.copytree(log_dir, copy_dir)
    log.close()
    from kafkapy.log.config import LogConfig
    from kafkapy.log.partition_log import PartitionLog
    cfg = LogConfig.from_props({"cleanup.policy": "compact"})
    copy = PartitionLog.open(copy_dir, cfg, now_ms=0, recover=False)
    clean_log(copy, now_ms=5000)
    expected = contents(copy)
    copy.close()
    with open(files.log_file(copy_dir, 0), "rb") as src, \
            open(files.log_file(log_dir, 0) + files.SWAP_SUFFIX, "wb") as dst:
        dst.write(src.read())
    again = open_log(recover=True, cleanup_policy="compact")
    assert contents(again) == expected
    assert len(again.segments) == 2


def test_cleaner_runs_only_on_compacted_logs_and_when_something_changed(open_log):
    log = open_log(cleanup_policy="compact")
    write_history(log)
    cleaner = LogCleaner()
    assert [r.records_removed for _t, _p, r in cleaner.run_once([log], now_ms=5000)] == [3]
    assert cleaner.run_once([log], now_ms=6000) == []  # nothing rolled since
    # the kept tombstone is looked at again once delete.retention.ms has passed
    done = cleaner.run_once([log], now_ms=5000 + DAY)
    assert [r.tombstones_removed for _t, _p, r in done] == [1]


def test_cleaner_waits_for_the_dirty_ratio(open_log):
    log = open_log(cleanup_policy="compact", min_cleanable_dirty_ratio="0.5")
    write_history(log)
    cleaner = LogCleaner()
    cleaner.run_once([log], now_ms=3000 + DAY + 1)  # everything dirty: cleaned, tombstone stamped
    clean_size = log.segments[0].size
    # a small new segment: dirty ratio below 0.5, nothing happens
    log.roll(now_ms=5000)
    put(log, [(b"e", b"e1")], ts=5000)
    small = log.segments[-2].size
    assert small / (small + clean_size) < 0.5
    assert cleaner.run_once([log], now_ms=5001) == []
    # enough new data makes the log dirty enough to clean
    for i in range(3):
        put(log, [(b"c", b"c%d" % (i + 3)), (b"a", b"a%d" % (i + 4))], ts=5000 + i)
        log.roll(now_ms=5000 + i)
    done = cleaner.run_once([log], now_ms=6000)
    assert [r.records_removed for _t, _p, r in done] == [7]
    # b's tombstone waits for the delete horizon its first clean stamped (a day after it)
    assert [(k, v) for _o, k, v in contents(log)] == [(b"b", None), (b"e", b"e1"), (b"c", b"c5"),
                                                      (b"a", b"a6")]


def test_cleaner_skips_delete_policy(open_log):
    log = open_log()
    write_history(log)
    assert LogCleaner().run_once([log], now_ms=5000) == []
    assert len(contents(log)) == 7


def test_plan_then_apply_with_appends_and_a_roll_in_between(open_log, log_dir):
    from kafkapy.log.cleaner import CLEANER_TMP_DIR, apply_clean, plan_clean

    log = open_log(cleanup_policy="compact")
    write_history(log)
    plan = plan_clean(log, now_ms=5000)  # what the node runs on a worker thread
    # meanwhile the log takes appends and rolls
    put(log, [(b"a", b"a4")], ts=4500)
    log.roll(now_ms=4500)
    put(log, [(b"z", b"z1")], ts=4600)
    apply_clean(log, plan, now_ms=5000)
    assert contents(log) == [(3, b"c", b"c1"), (4, b"b", None), (5, b"a", b"a3"), (6, b"c", b"c2"),
                             (7, b"a", b"a4"), (8, b"z", b"z1")]
    assert os.listdir(os.path.join(os.path.dirname(log_dir), CLEANER_TMP_DIR)) == []


def test_a_plan_cleans_what_its_inputs_saw_not_what_came_after(open_log):
    from kafkapy.log.cleaner import apply_clean, clean_inputs, plan_clean

    log = open_log(cleanup_policy="compact")
    write_history(log)
    inputs = clean_inputs(log)  # where the log's appends run
    # Before the worker thread starts, the log rolls: the segment it closes holds a newer "a"
    # that this clean did not see, so "a3" stays until the next one.
    put(log, [(b"a", b"a4")], ts=4500)
    log.roll(now_ms=4500)
    apply_clean(log, plan_clean(log, now_ms=5000, inputs=inputs), now_ms=5000)
    assert contents(log) == [(3, b"c", b"c1"), (4, b"b", None), (5, b"a", b"a3"), (6, b"c", b"c2"),
                             (7, b"a", b"a4")]


def test_apply_skips_groups_whose_segments_changed(open_log):
    from kafkapy.log.cleaner import apply_clean, plan_clean

    log = open_log(cleanup_policy="compact")
    write_history(log)
    before = contents(log)
    plan = plan_clean(log, now_ms=5000)
    # The group's second segment is no longer in the log (the same files, another object).
    gone = log.segments[1]
    log.replace_segments([gone], gone.__class__(gone.dir, gone.base_offset,
                                                index_interval_bytes=4096,
                                                max_index_size=1 << 20, now_ms=0))
    apply_clean(log, plan, now_ms=5000)
    assert contents(log) == before


def test_replace_segments_refuses_segments_not_in_the_log(open_log):
    log = open_log(cleanup_policy="compact")
    write_history(log)
    active = log.active
    with pytest.raises(ValueError):
        log.replace_segments([active], None)  # the active segment is never replaced
    with pytest.raises(ValueError):
        log.replace_segments([log.segments[1], log.segments[0]], None)  # not a run in order
