"""Micro-benchmark: validate_and_assign throughput, pure Python vs Cython.

Validates a 1 MiB produce request (one uncompressed batch of 1 KiB records, the shape a Java
producer sends with batch.size=1MiB) and prints MB/s for each implementation. Not a test.

    .venv/bin/python benchmarks/records_validate.py [--seconds 2]
"""

from __future__ import annotations

import argparse
import importlib
import time
from collections.abc import Callable
from types import ModuleType

from kafkapy.records.builder import Record, build_batch

MIB = 1 << 20


def make_request(total: int = MIB, value_size: int = 1024) -> bytes:
    """One batch of ``value_size``-byte records adding up to about ``total`` bytes."""
    n = total // (value_size + 16)
    records = [Record(b"key-%06d" % i, bytes([i % 251]) * value_size, (), 1_700_000_000_000 + i)
               for i in range(n)]
    return build_batch(records)


def measure(fn: Callable[[], object], seconds: float) -> float:
    """Best-of-5 CPU seconds per call, each round running about seconds/5.

    CPU time rather than wall time: the loop is single-threaded and CPU-bound, and CPU time is
    far less disturbed by whatever else shares the machine.
    """
    clock = time.process_time
    fn()
    calls = 1
    while True:
        t0 = clock()
        for _ in range(calls):
            fn()
        if clock() - t0 > 0.05:
            break
        calls *= 2
    best = float("inf")
    per_round = max(1, int(calls * (seconds / 5) / 0.05))
    for _ in range(5):
        t0 = clock()
        for _ in range(per_round):
            fn()
        best = min(best, (clock() - t0) / per_round)
    return best


def bench(impl: ModuleType, data: bytes, seconds: float) -> tuple[float, float]:
    """MB/s for CreateTime (in place, buffer reused) and LogAppendTime (fresh copy each call)."""
    buf = bytearray(data)

    def create_time() -> None:
        # next_offset=0 keeps baseOffset 0, so the same buffer stays a valid request.
        impl.validate_and_assign(buf, next_offset=0, now_ms=1, partition_leader_epoch=1,
                                 max_batch_bytes=2 * MIB)

    def log_append_time() -> None:
        impl.validate_and_assign(bytearray(data), next_offset=0, now_ms=1,
                                 partition_leader_epoch=1, max_batch_bytes=2 * MIB,
                                 log_append_time=True)

    copy = measure(lambda: bytearray(data), seconds)
    ct = measure(create_time, seconds)
    lat = measure(log_append_time, seconds) - copy
    return len(data) / ct / 1e6, len(data) / lat / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="time per measurement")
    args = parser.parse_args()
    data = make_request()
    n = len(list(importlib.import_module("kafkapy.records.reader").iter_records(data)))
    print(f"request: {len(data)} bytes, 1 batch, {n} records of 1 KiB")
    results = {}
    for name in ("kafkapy.records._pure", "kafkapy.records._fast"):
        try:
            impl = importlib.import_module(name)
        except ImportError:
            print(f"{name}: not built")
            continue
        results[name] = bench(impl, data, args.seconds)
        ct, lat = results[name]
        print(f"{name:24s} CreateTime {ct:10.1f} MB/s   LogAppendTime {lat:10.1f} MB/s")
    if len(results) == 2:
        (p_ct, p_lat), (f_ct, f_lat) = results.values()
        print(f"speed-up: CreateTime x{f_ct / p_ct:.0f}, LogAppendTime x{f_lat / p_lat:.0f}")


if __name__ == "__main__":
    main()
