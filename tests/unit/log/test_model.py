"""Seeded random operations against a simple in-memory model of the log."""

from __future__ import annotations

import os
import random

import pytest

from kafkapy.log import files
from kafkapy.log.config import LogConfig
from kafkapy.log.partition_log import PartitionLog
from kafkapy.records.builder import Record, build_batch
from kafkapy.records.reader import iter_batches, iter_records

CFG = LogConfig.from_props({"segment.bytes": "1500", "index.interval.bytes": "200",
                            "segment.index.bytes": "4096"})


def crash(log: PartitionLog) -> None:
    for seg in log.segments:
        seg.close_handlers()
    log.closed = True


def read_all(log: PartitionLog) -> bytes:
    out = bytearray()
    off = log.local_log_start_offset
    while off < log.log_end_offset:
        s = log.read(off, 700)
        data = s.read_bytes()
        hs = [h for h, _ in iter_batches(data)]
        assert hs and hs[0].base_offset <= off <= hs[0].last_offset or hs[0].base_offset >= off
        out += data
        off = hs[-1].last_offset + 1
    return bytes(out)


@pytest.mark.parametrize("seed", range(6))
def test_random_operations_match_model(tmp_path, seed):
    rng = random.Random(seed)
    d = os.path.join(str(tmp_path), "m-0")
    log = PartitionLog.open(d, CFG, now_ms=0, recover=False)
    model: list[bytes] = []  # the stored batches, in order
    records: list[tuple[int, int]] = []  # (offset, timestamp)

    def rebuild_records() -> None:
        records.clear()
        for b in model:
            for _, view in iter_batches(b):
                records.extend((r.offset, r.timestamp) for r in iter_records(view))

    for step in range(120):
        op = rng.random()
        if op < 0.7:
            n = rng.randint(1, 4)
            recs = [Record(None, os.urandom(rng.randint(1, 120)), timestamp=rng.randint(0, 10_000))
                    for _ in range(n)]
            buf = bytearray(build_batch(recs))
            r = log.append_as_leader(buf, now_ms=step, leader_epoch=step // 40)
            assert r.first_offset == (records[-1][0] + 1 if records else 0)
            model.append(bytes(buf))
            rebuild_records()
        elif op < 0.78:
            log.close()
            log = PartitionLog.open(d, CFG, now_ms=step, recover=False)
        elif op < 0.88:
            crash(log)
            if model and rng.random() < 0.5:
                # Tear the tail of the active segment's file.
                seg_path = max(p for p in os.listdir(d) if p.endswith(".log"))
                path = os.path.join(d, seg_path)
                size = os.path.getsize(path)
                cut = rng.randint(1, 100)
                if size > cut:
                    with open(path, "r+b") as f:
                        f.truncate(size - cut)
                    # Drop model batches that no longer fit whole in that file.
                    base = files.offset_from_filename(seg_path)
                    pos = 0
                    kept = []
                    for b in model:
                        first = next(iter_batches(b))[0]
                        if first.base_offset < base:
                            kept.append(b)
                            continue
                        if pos + len(b) <= size - cut:
                            kept.append(b)
                        pos += len(b)
                    model[:] = kept
                    rebuild_records()
            log = PartitionLog.open(d, CFG, now_ms=step, recover=True)
        elif model:
            # Truncate to a batch boundary.
            i = rng.randrange(len(model))
            target = next(iter_batches(model[i]))[0].base_offset
            log.truncate_to(target, now_ms=step)
            del model[i:]
            rebuild_records()

        leo = records[-1][0] + 1 if records else (log.log_end_offset if not model else None)
        assert log.log_end_offset == leo
        assert read_all(log) == b"".join(model)
        if records and step % 10 == 0:
            ts = rng.randint(0, 10_000)
            want = next(((o, t) for o, t in records if t >= ts), None)
            assert log.offset_for_timestamp(ts) == want
            mx = max(t for _, t in records)
            assert log.max_timestamp_and_offset() == (mx, next(o for o, t in records if t == mx))
    log.close()
