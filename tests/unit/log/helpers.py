"""Shared helpers of the log tests."""

from __future__ import annotations

from kafkapy.records.builder import Record, build_batch


def make_batch(n: int = 1, *, ts: int = 1_000, value_size: int = 10, pid: int = -1,
               epoch: int = -1, seq: int = -1, ts_step: int = 0) -> bytearray:
    """A client batch (base offset 0) of ``n`` records with timestamps ts, ts+step, ..."""
    recs = [Record(b"k%d" % i, b"v" * value_size, timestamp=ts + i * ts_step) for i in range(n)]
    return bytearray(build_batch(recs, producer_id=pid, producer_epoch=epoch, base_sequence=seq))
