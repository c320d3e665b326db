"""SharePartition's invariants under random acquire / ack / release / expiry / log-start moves."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.share.partition import (
    TERMINAL,
    AcknowledgementBatch,
    FetchedBatch,
    RecordState,
    SharePartition,
    SharePartitionConfig,
)

BATCH = 5  # the log: batches of five records, 0-4, 5-9, ...
MEMBERS = ("a", "b", "c")

op = st.one_of(
    st.tuples(st.just("acquire"), st.sampled_from(MEMBERS), st.integers(1, 30)),
    st.tuples(st.just("ack"), st.sampled_from(MEMBERS), st.integers(0, 3)),
    st.tuples(st.just("tick"), st.integers(0, 40_000)),
    st.tuples(st.just("leave"), st.sampled_from(MEMBERS)),
    st.tuples(st.just("log_start"), st.integers(0, 10)),
)


def check(p: SharePartition) -> None:
    runs = p.runs()
    if not runs:
        assert p.end_offset == p.start_offset - 1
        return
    assert runs[0][0] == p.start_offset and runs[0][2] not in TERMINAL
    assert runs[-1][1] == p.end_offset
    for (_a, b, *_x), (c, _d, *_y) in zip(runs, runs[1:]):
        assert b + 1 == c
    for first, last, state, count, member in runs:
        assert first <= last and count >= 0
        assert (member is not None) == (state is RecordState.ACQUIRED)
        if state is RecordState.AVAILABLE:
            assert count < p.config.delivery_count_limit


@settings(max_examples=150, deadline=None)
@given(st.lists(op, max_size=40))
def test_invariants_hold(ops: list[tuple]) -> None:
    p = SharePartition(SharePartitionConfig(delivery_count_limit=3, max_record_locks=100,
                                            record_lock_duration_ms=15_000), 0)
    now = 0
    for step in ops:
        kind = step[0]
        if kind == "acquire":
            start = p.next_fetch_offset() // BATCH * BATCH
            fetched = [FetchedBatch(b, b + BATCH - 1) for b in range(start, start + 40, BATCH)]
            for got in p.acquire(step[1], fetched, now, max_records=step[2]):
                for offset in (got.first_offset, got.last_offset):
                    assert p.record_state(offset)[:3:2] == (RecordState.ACQUIRED, step[1])
        elif kind == "ack":
            held = [(a, b) for a, b, s, _c, m in p.runs() if m == step[1]]
            if held:
                a, b = held[0]
                assert p.acknowledge(step[1], [AcknowledgementBatch(a, b, (step[2],))]) == 0
        elif kind == "tick":
            now += step[1]
            p.tick(now)
            deadline = p.next_deadline()
            assert deadline is None or deadline > now
        elif kind == "leave":
            p.release_member(step[1])
            assert all(m != step[1] for *_x, m in p.runs())
        else:
            p.update_log_start(p.start_offset + step[1])
        check(p)
        back = SharePartition.from_read_state(p.to_write_state(), p.config, default_start_offset=0)
        assert back.start_offset == p.start_offset
        assert back.next_fetch_offset() <= p.next_fetch_offset() or not p.runs()
