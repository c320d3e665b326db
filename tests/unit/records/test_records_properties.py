"""Property tests: the pure and Cython validators agree on random valid and damaged requests.

With extensions disabled only the pure twin runs; the properties that do not compare twins
(results match a reader-based oracle, failures write nothing, only KafkaError escapes) still hold.
"""

from __future__ import annotations

import struct
from types import ModuleType

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.protocol.errors import KafkaError
from kafkapy.records import format as fmt
from kafkapy.records.builder import Record, build_batch
from kafkapy.records.reader import iter_batches, iter_records

NOW = 1_700_000_000_000

opt_bytes = st.one_of(st.none(), st.binary(max_size=24))
record_st = st.builds(
    Record,
    key=opt_bytes,
    value=opt_bytes,
    headers=st.lists(st.tuples(st.text(max_size=4), opt_bytes), max_size=3).map(tuple),
    timestamp=st.one_of(st.integers(-3, 2**41), st.just(NOW)),
)


@st.composite
def batch_st(draw: st.DrawFn) -> bytes:
    records = draw(st.lists(record_st, min_size=1, max_size=8))
    codec = draw(st.sampled_from([0, 0, 0, 1, 2, 3, 4]))
    idempotent = draw(st.booleans())
    return build_batch(
        records,
        compression=codec,
        producer_id=draw(st.integers(0, 2**40)) if idempotent else -1,
        producer_epoch=draw(st.integers(0, 100)) if idempotent else -1,
        base_sequence=draw(st.integers(0, 2**31 - 1)) if idempotent else -1,
        transactional=idempotent and draw(st.booleans()),
        max_timestamp=draw(st.one_of(st.none(), st.integers(-1, 2**41))),
        now_ms=NOW,
    )


request_st = st.lists(batch_st(), min_size=1, max_size=3).map(b"".join)
kwargs_st = st.fixed_dictionaries({
    "next_offset": st.integers(0, 2**40),
    "now_ms": st.integers(0, 2**41),
    "partition_leader_epoch": st.integers(-1, 2**31 - 1),
    "max_batch_bytes": st.sampled_from([1 << 20, 1 << 20, 1 << 20, 200]),
    "log_append_time": st.booleans(),
})
# For damaged input, also a compacted topic's rule (every record has a key): the twins must agree
# on which record they refuse first, and why.
damaged_kwargs_st = st.tuples(kwargs_st, st.booleans()).map(
    lambda kw: {**kw[0], "require_keys": kw[1]})


def outcome(impl: ModuleType, data: bytes, kwargs: dict) -> tuple:
    buf = bytearray(data)
    try:
        info = impl.validate_and_assign(buf, **kwargs)
    except KafkaError as exc:
        assert bytes(buf) == data, f"{impl.__name__} wrote before failing"
        return ("error", exc.code, exc.message)
    return ("ok", info, bytes(buf))


def all_agree(validators: list[ModuleType], data: bytes, kwargs: dict) -> tuple:
    results = [outcome(impl, data, kwargs) for impl in validators]
    for r in results[1:]:
        assert r == results[0]
    return results[0]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=request_st, kwargs=kwargs_st)
def test_valid_requests(validators: list[ModuleType], data: bytes, kwargs: dict) -> None:
    result = all_agree(validators, data, kwargs)
    sizes = [h.size for h, _ in iter_batches(data)]
    if max(sizes) > kwargs["max_batch_bytes"]:
        assert result[0] == "error" and result[1].name == "MESSAGE_TOO_LARGE"
        return
    assert result[0] == "ok", result
    _, info, out = result
    first = kwargs["next_offset"]
    counts = [h.record_count for h, _ in iter_batches(data)]
    assert info.first_offset == first
    assert info.record_count == sum(counts)
    assert info.last_offset == first + sum(counts) - 1
    offsets = []
    for (h, view), bi in zip(iter_batches(out), info.batches, strict=True):
        assert h.crc == fmt.compute_crc(view, 0, len(view))
        assert h.partition_leader_epoch == kwargs["partition_leader_epoch"]
        assert (h.base_offset, h.last_offset, h.max_timestamp) == (
            bi.base_offset, bi.last_offset, bi.max_timestamp)
        assert h.is_log_append_time == kwargs["log_append_time"]
        offsets += [r.offset for r in iter_records(view)]
    assert offsets == list(range(first, first + sum(counts)))
    if kwargs["log_append_time"]:
        assert (info.max_timestamp, info.offset_of_max_timestamp) == (
            kwargs["now_ms"], info.last_offset)
    else:
        best = max(bi.max_timestamp for bi in info.batches)
        if best > fmt.NO_TIMESTAMP:
            winner = next(bi for bi in info.batches if bi.max_timestamp == best)
            assert (info.max_timestamp, info.offset_of_max_timestamp) == (best, winner.last_offset)
        else:
            assert (info.max_timestamp, info.offset_of_max_timestamp) == (-1, -1)
        for (h, view), bi in zip(iter_batches(out), info.batches):
            if h.compression == fmt.NO_COMPRESSION:
                stamps = [r.timestamp for r in iter_records(view)]
                assert bi.max_timestamp == max([fmt.NO_TIMESTAMP, *stamps])


def _batch_bounds(data: bytes | bytearray) -> list[tuple[int, int]]:
    bounds, pos = [], 0
    while pos + fmt.HEADER_SIZE <= len(data):
        size = struct.unpack_from(">i", data, pos + fmt.BATCH_LENGTH)[0] + fmt.LOG_OVERHEAD
        if size < fmt.HEADER_SIZE or pos + size > len(data):
            break
        bounds.append((pos, size))
        pos += size
    return bounds


def _fix_crcs(buf: bytearray) -> None:
    for pos, size in _batch_bounds(buf):
        struct.pack_into(">I", buf, pos + fmt.CRC, fmt.compute_crc(buf, pos, size))


@st.composite
def damaged_st(draw: st.DrawFn) -> bytes:
    buf = bytearray(draw(request_st))
    bounds = _batch_bounds(buf)
    # Weighted towards damage behind a valid CRC: that is what reaches the record walk.
    kind = draw(st.sampled_from(["flip", "truncate", "length", "trailing", "insert", "delete",
                                 "insert", "delete", "field", "field", "record", "record",
                                 "record"]))
    pos, size = draw(st.sampled_from(bounds))
    if kind == "flip":
        for _ in range(draw(st.integers(1, 3))):
            i = draw(st.integers(0, len(buf) - 1))
            buf[i] = draw(st.integers(0, 255))
    elif kind == "truncate":
        del buf[draw(st.integers(1, len(buf) - 1)):]
    elif kind == "length":
        old = struct.unpack_from(">i", buf, pos + fmt.BATCH_LENGTH)[0]
        new = draw(st.one_of(st.integers(old - 20, old + 20), st.integers(-(2**31), 2**31 - 1)))
        struct.pack_into(">i", buf, pos + fmt.BATCH_LENGTH, new)
    elif kind in ("insert", "delete"):
        i = draw(st.integers(pos + fmt.HEADER_SIZE, pos + size))
        if kind == "insert":
            buf[i:i] = draw(st.binary(min_size=1, max_size=4))
        else:
            del buf[i : i + draw(st.integers(1, 4))]
        new_len = len(buf) - sum(s for p, s in bounds if p != pos) - fmt.LOG_OVERHEAD
        struct.pack_into(">i", buf, pos + fmt.BATCH_LENGTH, new_len)
    elif kind == "trailing":
        buf += draw(st.binary(min_size=1, max_size=80))
    elif kind == "record":
        for _ in range(draw(st.integers(1, 2))):
            i = draw(st.integers(pos + fmt.HEADER_SIZE, pos + size - 1))
            buf[i] = draw(st.integers(0, 255))
    else:  # rewrite one header field
        off, f = draw(st.sampled_from([
            (fmt.ATTRIBUTES, ">h"), (fmt.LAST_OFFSET_DELTA, ">i"), (fmt.RECORD_COUNT, ">i"),
            (fmt.PRODUCER_ID, ">q"), (fmt.BASE_SEQUENCE, ">i"), (fmt.MAX_TIMESTAMP, ">q"),
            (fmt.BASE_TIMESTAMP, ">q"), (fmt.MAGIC, ">b"), (fmt.BASE_OFFSET, ">q"),
        ]))
        bits = struct.calcsize(f) * 8
        value = draw(st.one_of(st.integers(-3, 3),
                               st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)))
        struct.pack_into(f, buf, pos + off, value)
    if kind in ("insert", "delete", "record", "field") or draw(st.booleans()):
        _fix_crcs(buf)
    return bytes(buf)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=damaged_st(), kwargs=damaged_kwargs_st)
def test_damaged_requests(validators: list[ModuleType], data: bytes, kwargs: dict) -> None:
    all_agree(validators, data, kwargs)


@settings(max_examples=150, deadline=None)
@given(data=st.binary(max_size=200), kwargs=damaged_kwargs_st)
def test_arbitrary_bytes(validators: list[ModuleType], data: bytes, kwargs: dict) -> None:
    all_agree(validators, data, kwargs)
