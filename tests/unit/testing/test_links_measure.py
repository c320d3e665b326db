"""The tokyo/osaka measurements: lag, RPO, RTO, a consumer group moved (no processes)."""

from __future__ import annotations

from kafkapy.records.builder import Record, build_batch
from kafkapy.testing.ledger import Ack
from kafkapy.testing.links.measure import (
    DisasterOutcome,
    acked_end,
    consumer_switch,
    first_ack_after,
    first_difference,
    link_lag,
    lost_acks,
    reads_within,
    records_of,
)
from kafkapy.testing.stretch.measure import Read


def test_link_lag_sums_what_the_mirror_lacks_over_the_sources_partitions():
    assert link_lag({0: 10, 1: 7}, {0: 8, 1: 7}) == 2
    assert link_lag({0: 10, 1: 7}, {0: 10}) == 7  # a partition the mirror lacks counts whole
    assert link_lag({0: 5}, {0: 9}) == 0  # never negative


def test_rpo_counts_acked_records_missing_or_moved_on_the_destination():
    acks = {0: [Ack(0, 0, 0, 1.0), Ack(0, 1, 1, 1.1), Ack(0, 2, 2, 1.2), Ack(0, -1, 3, 1.3)],
            1: [Ack(1, 0, 0, 1.0)]}
    log = {0: [(0, b"tokyo/0:0"), (1, b"tokyo/0:1"), (2, b"osaka/0:0"), (3, b"tokyo/0:3")],
           1: [(0, b"osaka/1:0"), (1, b"tokyo/1:0")]}
    missing, misplaced = lost_acks(acks, "tokyo/", log)
    # 0:2 was overwritten by osaka's own record; 0:3 (an implicit ack) is there somewhere;
    # 1:0 is stored one offset later than acked.
    assert missing == ["tokyo/0:2 acked at offset 2 is missing"]
    assert misplaced == ["tokyo/1:0 acked at offset 0 is at 1"]
    assert acked_end(acks) == {0: 3, 1: 1}


def test_rto_is_the_first_ack_after_the_kill():
    acks = {0: [Ack(0, 5, 0, 104.5), Ack(0, 6, 1, 103.0)], 1: [Ack(1, 0, 0, 99.0)]}
    assert first_ack_after(acks, 100.0) == 3.0
    assert first_ack_after(acks, 200.0) is None


def read(partition: int, offset: int, at: float, value: str = "") -> Read:
    return Read(partition, offset, 0, at, value or f"v{partition}:{offset}")


def test_a_moved_consumer_group_counts_duplicates_and_skips():
    before = [read(0, o, 10.0 + o / 10) for o in range(10)] + [read(1, o, 10.0) for o in range(5)]
    # Partition 0 resumes at the synced 7 (three read again); partition 1 at 6 (5 skipped).
    after = [read(0, o, 20.0) for o in range(7, 12)] + [read(1, o, 20.0) for o in range(6, 8)]
    switch = consumer_switch(before, after)
    assert switch.duplicated == {0: 3, 1: 0} and switch.duplicated_count == 3
    assert switch.skipped == {1: [5]} and switch.skipped_count == 1
    assert switch.resumed_at == {0: 7, 1: 6} and switch.differing == 0
    # A record lost with tokyo: osaka holds another one at its offset.
    lost = consumer_switch([read(0, 0, 1.0), read(0, 1, 1.0, "lost")], [read(0, 1, 2.0, "new")])
    assert lost.duplicated == {0: 1} and lost.differing == 1
    assert reads_within(before, end=10.9, window_s=0.15) == 2  # offsets 8 and 9 of partition 0


def test_raw_logs_are_compared_batch_for_batch_and_read_back_as_records():
    one = build_batch([Record(None, b"a", (), 1000), Record(None, b"b", (), 1001)], now_ms=1000)
    two = build_batch([Record(None, b"c", (), 1002)], now_ms=1002, base_offset=2)
    assert records_of([bytes(one), bytes(two)]) == [(0, b"a"), (1, b"b"), (2, b"c")]
    assert first_difference({0: [bytes(one)]}, {0: [bytes(one)]}) is None
    assert first_difference({0: [bytes(one), bytes(two)]}, {0: [bytes(one)]}) == "partition 0: 2 batches against 1"
    other = build_batch([Record(None, b"X", (), 1002)], now_ms=1002, base_offset=2)
    assert first_difference({0: [bytes(one), bytes(two)]}, {0: [bytes(one), bytes(other)]}) == (
        "partition 0: batch 1 (base offset 2) differs")


def test_a_disaster_prints_its_numbers_on_one_line():
    out = DisasterOutcome(lag_before=7, acked_after_sample=2, lag_at_kill=3, acked_source=500,
                          acked_destination=1200, missing=["a", "b"], misplaced=[], lost_on_destination=[],
                          failover_s=1.2, rto_s=2.6, catch_up_s=None, identical_after_failback=True)
    assert out.rpo == 2 and out.rpo_bound == 9
    assert out.line() == ("lag_before=7 (+2 acked after) lag_at_kill=3 rpo=2 rto=2.6s failover=1.2s "
                          "failback_catch_up=none identical_after_failback=yes acked_tokyo=500 acked_osaka=1200")
