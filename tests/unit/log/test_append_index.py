"""The log-append indexing twins (``kafkapy.log._pure`` / ``_fast``) agree, and match Kafka's rule.

Hypothesis draws batch layouts (sizes, offset gaps, timestamps that rise, fall and repeat),
index intervals, index capacities and starting states; both twins must return the same state and
write the same index bytes, and both must equal a straightforward reference written the way
``LogSegment.append`` indexed before the twins existed (per batch, through ``OffsetIndex`` /
``TimeIndex`` semantics).
"""

from __future__ import annotations

import importlib
import os
import struct
from types import ModuleType
from typing import NamedTuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy._speedups import extensions_enabled
from kafkapy.log.index import IndexOffsetError


def _modules() -> list[ModuleType]:
    mods = [importlib.import_module("kafkapy.log._pure")]
    if extensions_enabled():
        try:
            mods.append(importlib.import_module("kafkapy.log._fast"))
        except ImportError:
            if os.environ.get("KAFKAPY_REQUIRE_EXTENSIONS") == "1":
                raise
    return mods


IMPLS = _modules()


class Batch(NamedTuple):
    position: int
    size: int
    last_offset: int
    max_timestamp: int


def _reference(batches, physical, interval, bytes_since, max_ts, max_ts_offset, base,
               offset_entries_in, offset_max, time_entries_in, time_max):
    """Kafka's LogSegment.append indexing, one entry list per index (pre-twin segment code)."""
    offset_entries = list(offset_entries_in)
    time_entries = list(time_entries_in)
    for b in batches:
        if b.max_timestamp > max_ts:
            max_ts, max_ts_offset = b.max_timestamp, b.last_offset
        if bytes_since > interval:
            if len(offset_entries) < offset_max:
                offset_entries.append((b.last_offset - base, physical + b.position))
            if len(time_entries) < time_max - 1:
                last_ts = time_entries[-1][0] if time_entries else -1
                if max_ts > last_ts:
                    time_entries.append((max_ts, max_ts_offset - base))
            bytes_since = 0
        bytes_since += b.size
    return bytes_since, max_ts, max_ts_offset, offset_entries, time_entries


@st.composite
def layouts(draw):
    base = draw(st.integers(0, 1 << 40))
    n = draw(st.integers(0, 40))
    physical = draw(st.integers(0, 1 << 20))
    interval = draw(st.sampled_from([0, 1, 100, 4096, 1 << 20]))
    offset_max = draw(st.integers(0, 12))
    time_max = draw(st.integers(0, 12))
    # A consistent starting state: existing entries below the new batches' offsets.
    start_rel = draw(st.integers(0, 1000))
    k = draw(st.integers(0, min(offset_max, 3)))
    offset_entries = [(i, i * 10 + 1) for i in range(k)]
    start_rel = max(start_rel, k)
    kt = draw(st.integers(0, max(0, min(time_max - 1, 3))))
    time_entries = [(1000 + i, i) for i in range(kt)]
    max_ts = time_entries[-1][0] if time_entries else draw(st.sampled_from([-1, 0, 500, 2000]))
    max_ts_offset = base + (time_entries[-1][1] if time_entries else 0)
    bytes_since = draw(st.integers(0, 5000))
    batches = []
    pos = 0
    last = base + start_rel
    for _ in range(n):
        size = draw(st.integers(61, 3000))
        last += draw(st.integers(1, 100))
        ts = draw(st.one_of(st.just(-1), st.integers(0, 3000)))
        batches.append(Batch(pos, size, last, ts))
        pos += size
    return (batches, physical, interval, bytes_since, max_ts, max_ts_offset, base,
            offset_entries, offset_max, time_entries, time_max)


def _buffers(offset_entries, offset_max, time_entries, time_max):
    ob = bytearray(offset_max * 8)
    for i, e in enumerate(offset_entries):
        struct.pack_into(">ii", ob, i * 8, *e)
    tb = bytearray(time_max * 12)
    for i, e in enumerate(time_entries):
        struct.pack_into(">qi", tb, i * 12, *e)
    return ob, tb


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layouts())
def test_twins_match_reference(layout):
    (batches, physical, interval, bytes_since, max_ts, max_ts_offset, base, offset_entries,
     offset_max, time_entries, time_max) = layout
    expected = _reference(batches, physical, interval, bytes_since, max_ts, max_ts_offset, base,
                          offset_entries, offset_max, time_entries, time_max)
    exp_ob, exp_tb = _buffers(expected[3], offset_max, expected[4], time_max)
    for impl in IMPLS:
        ob, tb = _buffers(offset_entries, offset_max, time_entries, time_max)
        got = impl.index_batches(batches, physical, interval, bytes_since, max_ts, max_ts_offset,
                                 base, ob, len(offset_entries), offset_max, tb,
                                 len(time_entries), time_max)
        assert got == (expected[0], expected[1], expected[2], len(expected[3]),
                       len(expected[4])), impl.__name__
        assert ob == exp_ob, impl.__name__
        assert tb == exp_tb, impl.__name__


def _call(impl, batches, *, base=0, ob=None, oe=0, om=4, tb=None, te=0, tm=4, interval=0,
          bytes_since=1, max_ts=-1, max_ts_offset=0):
    ob = bytearray(om * 8) if ob is None else ob
    tb = bytearray(tm * 12) if tb is None else tb
    return impl.index_batches(batches, 0, interval, bytes_since, max_ts, max_ts_offset, base,
                              ob, oe, om, tb, te, tm)


@pytest.mark.parametrize("impl", IMPLS, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_errors_are_the_same(impl):
    def err(**kw):
        with pytest.raises((IndexOffsetError, ValueError)) as info:
            _call(impl, **kw)
        return type(info.value), str(info.value)

    # An offset below the segment base, one beyond int32, an offset not above the index's last.
    assert err(batches=[Batch(0, 100, 5, 1)], base=10) == (
        IndexOffsetError, "offset 5 is not relative to 10")
    assert err(batches=[Batch(0, 100, 1 << 32, 1)]) == (
        IndexOffsetError, f"offset {1 << 32} is not relative to 0")
    ob = bytearray(32)
    struct.pack_into(">ii", ob, 0, 9, 50)
    assert err(batches=[Batch(0, 100, 9, 1)], ob=ob, oe=1) == (
        IndexOffsetError, "offset 9 is not larger than the last index offset 9")
    tb = bytearray(48)
    struct.pack_into(">qi", tb, 0, 500, 20)
    assert err(batches=[Batch(0, 100, 25, 100)], tb=tb, te=1, om=0, max_ts=100,
               max_ts_offset=25) == (
        IndexOffsetError, "timestamp 100 is below the last time index timestamp 500")
    assert err(batches=[Batch(0, 100, 25, 600)], tb=tb, te=1, om=0, max_ts=600,
               max_ts_offset=10) == (
        IndexOffsetError, "offset 10 is below the last time index offset 20")
    assert err(batches=[Batch(0, 100, 5, 1)], ob=bytearray(8), om=4) == (
        ValueError, "index buffers are smaller than their maximum entries")


@pytest.mark.parametrize("impl", IMPLS, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_no_entry_needs_no_buffer(impl):
    # Below the interval nothing is indexed and the buffers are not touched.
    got = impl.index_batches([Batch(0, 100, 7, 5)], 0, 4096, 0, -1, 0, 0, b"", 0, 10, b"", 0, 10)
    assert got == (100, 5, 7, 0, 0)


def test_both_twins_are_tested():
    if extensions_enabled() and os.environ.get("KAFKAPY_REQUIRE_EXTENSIONS") == "1":
        assert len(IMPLS) == 2


def _old_append(seg, buf, batches):
    """LogSegment.append's indexing as it was written before the twins (the on-disk reference)."""
    from kafkapy.log.segment import _write_all

    physical = seg.size
    _write_all(seg.fd, buf, physical)
    for b in batches:
        if b.max_timestamp > seg.max_timestamp_so_far:
            seg.max_timestamp_so_far = b.max_timestamp
            seg.offset_of_max_timestamp_so_far = b.last_offset
        if seg.bytes_since_last_index_entry > seg.index_interval_bytes:
            if not seg.offset_index.is_full():
                seg.offset_index.append(b.last_offset, physical + b.position)
            if not seg.time_index.is_full():
                seg.time_index.maybe_append(seg.max_timestamp_so_far,
                                            seg.offset_of_max_timestamp_so_far)
            seg.bytes_since_last_index_entry = 0
        seg.bytes_since_last_index_entry += b.size
    seg.size = physical + len(buf)
    seg._next_offset = batches[-1].last_offset + 1


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(st.tuples(st.integers(61, 2000), st.integers(1, 20),
                                   st.integers(-1, 5000)), min_size=1, max_size=8),
                min_size=1, max_size=12),
       st.sampled_from([0, 500, 4096]), st.sampled_from([96, 240, 10 * 1024 * 1024]))
def test_segment_index_files_are_byte_identical(requests, interval, index_bytes):
    import tempfile

    from kafkapy.log.segment import AppendBatch, LogSegment

    with tempfile.TemporaryDirectory(dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as d:
        segs = []
        for name in ("new", "old"):
            os.mkdir(os.path.join(d, name))
            segs.append(LogSegment(os.path.join(d, name), 100, index_interval_bytes=interval,
                                   max_index_size=index_bytes, now_ms=0))
        new, old = segs
        offset = 100
        for request in requests:
            batches, pos = [], 0
            for size, count, ts in request:
                offset += count
                batches.append(AppendBatch(pos, size, offset - 1, ts))
                pos += size
            buf = bytearray(pos)
            new.append(buf, batches)
            _old_append(old, buf, batches)
        for seg in segs:
            seg.close()
        for suffix in (".index", ".timeindex"):
            name = "00000000000000000100" + suffix
            with open(os.path.join(d, "new", name), "rb") as f1, \
                    open(os.path.join(d, "old", name), "rb") as f2:
                assert f1.read() == f2.read(), suffix
