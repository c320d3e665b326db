"""SharePartition driven deterministically: batch headers in, acquired ranges and states out."""

from __future__ import annotations

import pytest

from kafkapy.protocol.errors import ErrorCode as E
from kafkapy.share.partition import (
    AbortedTransaction,
    AcknowledgementBatch,
    AcquiredRecords,
    FetchedBatch,
    PartitionState,
    RecordState,
    SharePartition,
    SharePartitionConfig,
    StateBatch,
)

AV, AQ, ACK, ARC = (RecordState.AVAILABLE, RecordState.ACQUIRED, RecordState.ACKNOWLEDGED,
                    RecordState.ARCHIVED)
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4
LOCK = 30_000


def part(start: int = 0, **cfg: int | bool) -> SharePartition:
    return SharePartition(SharePartitionConfig(**cfg), start)  # type: ignore[arg-type]


def batches(*ranges: tuple[int, int]) -> list[FetchedBatch]:
    return [FetchedBatch(a, b) for a, b in ranges]


def acq(p: SharePartition, member: str = "m1", *ranges: tuple[int, int], now: int = 0,
        max_records: int = 500, **kw: object) -> list[tuple[int, int, int]]:
    got = p.acquire(member, batches(*(ranges or ((0, 9),))), now, max_records=max_records,
                    **kw)  # type: ignore[arg-type]
    return [(a.first_offset, a.last_offset, a.delivery_count) for a in got]


def ack(p: SharePartition, member: str, first: int, last: int, *types: int) -> E:
    return p.acknowledge(member, [AcknowledgementBatch(first, last, tuple(types))])


def states(p: SharePartition) -> list[tuple[int, int, RecordState, int]]:
    return [(a, b, s, c) for a, b, s, c, _m in p.runs()]


# -- acquisition -------------------------------------------------------------------------------

def test_acquire_new_records_whole_batches() -> None:
    p = part()
    assert acq(p, "m1", (0, 4), (5, 9)) == [(0, 9, 1)]
    assert states(p) == [(0, 9, AQ, 1)]
    assert (p.start_offset, p.end_offset, p.next_fetch_offset()) == (0, 9, 10)
    assert p.record_state(3) == (AQ, 1, "m1")
    assert p.next_deadline() == LOCK


def test_acquired_records_are_not_acquired_twice() -> None:
    p = part()
    acq(p, "m1", (0, 9))
    assert acq(p, "m2", (0, 9)) == []
    assert acq(p, "m2", (0, 9), (10, 14)) == [(10, 14, 1)]
    assert p.record_state(12)[2] == "m2"


@pytest.mark.parametrize(("max_records", "expected"), [
    (1, [(0, 4, 1)]),      # soft limit: the whole first batch
    (5, [(0, 4, 1)]),
    (6, [(0, 9, 1)]),      # one record into the second batch takes all of it
    (100, [(0, 14, 1)]),
])
def test_max_records_rounds_up_to_a_batch_boundary(max_records: int,
                                                   expected: list[tuple[int, int, int]]) -> None:
    p = part()
    assert acq(p, "m1", (0, 4), (5, 9), (10, 14), max_records=max_records) == expected
    assert p.end_offset == expected[-1][1]


@pytest.mark.parametrize(("max_records", "expected"), [
    (1, [(0, 0, 1)]),      # record_limit (KIP-1206): a hard limit, cutting the batch
    (7, [(0, 6, 1)]),
    (100, [(0, 14, 1)]),
])
def test_strict_max_records_cuts_batches(max_records: int, expected: list[tuple[int, int, int]]) -> None:
    p = part()
    assert acq(p, "m1", (0, 4), (5, 9), (10, 14), max_records=max_records, strict=True) == expected
    # The rest of a cut batch goes to the next fetch.
    assert p.next_fetch_offset() == expected[-1][1] + 1


def test_strict_max_records_limits_released_records() -> None:
    p = part()
    acq(p, "m1", (0, 9))
    ack(p, "m1", 0, 9, RELEASE)
    assert acq(p, "m2", (0, 9), max_records=3, strict=True) == [(0, 2, 2)]
    assert states(p) == [(0, 2, AQ, 2), (3, 9, AV, 1)]


def test_in_flight_window_limits_new_records() -> None:
    p = part(max_record_locks=100)
    assert acq(p, "m1", (0, 49), (50, 99), (100, 149)) == [(0, 99, 1)]
    assert not p.can_acquire()
    assert acq(p, "m2", (100, 149)) == []
    # Finishing the first batch moves the SPSO and opens the window again.
    assert ack(p, "m1", 0, 49, ACCEPT) is E.NONE
    assert p.start_offset == 50 and p.can_acquire()
    assert acq(p, "m2", (100, 149), (150, 199)) == [(100, 149, 1)]


def test_released_records_can_be_acquired_even_with_a_full_window() -> None:
    p = part(max_record_locks=100)
    acq(p, "m1", (0, 99))
    assert ack(p, "m1", 10, 19, RELEASE) is E.NONE
    assert p.can_acquire() and p.next_fetch_offset() == 10
    assert acq(p, "m2", (10, 19), (20, 99), (100, 109)) == [(10, 19, 2)]


def test_released_records_come_before_new_ones_and_keep_their_count() -> None:
    p = part()
    acq(p, "m1", (0, 9))
    ack(p, "m1", 0, 9, *([ACCEPT] * 3 + [RELEASE] * 2 + [ACCEPT] * 5))
    assert p.next_fetch_offset() == 3
    assert acq(p, "m2", (0, 9), (10, 19)) == [(3, 4, 2), (10, 19, 1)]


def test_released_records_respect_max_records() -> None:
    p = part()
    acq(p, "m1", (0, 9), (10, 19))
    ack(p, "m1", 0, 19, RELEASE)
    assert acq(p, "m2", (0, 9), (10, 19), max_records=3) == [(0, 9, 2)]
    assert states(p) == [(0, 9, AQ, 2), (10, 19, AV, 1)]


def test_offsets_no_batch_covers_are_archived() -> None:
    # Compaction removed 3-5 and 10-11: nothing to deliver, the SPSO walks over them.
    p = part(3)
    assert acq(p, "m1", (6, 9), (12, 14)) == [(6, 9, 1), (12, 14, 1)]
    assert states(p) == [(6, 9, AQ, 1), (10, 11, ARC, 0), (12, 14, AQ, 1)]
    assert p.start_offset == 6
    ack(p, "m1", 6, 9, ACCEPT)
    assert p.start_offset == 12


def test_released_records_compacted_away_are_archived() -> None:
    # 0-9 were released, then compacted: the read from 0 starts at 10, so 0-9 can never be
    # delivered again and must not hold the fetch offset back.
    p = part()
    acq(p, "m1", (0, 4), (5, 9), (10, 14))
    ack(p, "m1", 0, 9, RELEASE)
    assert p.next_fetch_offset() == 0
    assert acq(p, "m2", (15, 19)) == [(15, 19, 1)]
    assert p.next_fetch_offset() == 20
    assert states(p) == [(10, 14, AQ, 1), (15, 19, AQ, 1)] and p.start_offset == 10


def test_fetch_from_the_middle_of_a_batch() -> None:
    p = part(5)
    assert acq(p, "m1", (0, 9)) == [(5, 9, 1)]


def test_end_offset_bounds_new_records_lso() -> None:
    p = part(read_committed=True)
    assert acq(p, "m1", (0, 4), (5, 9), (10, 14), end_offset=10) == [(0, 9, 1)]
    assert p.end_offset == 9
    assert acq(p, "m1", (10, 14), end_offset=10) == []
    assert acq(p, "m1", (10, 14), end_offset=15) == [(10, 14, 1)]


def test_read_committed_archives_aborted_batches() -> None:
    p = part(read_committed=True)
    fetched = [
        FetchedBatch(0, 4),
        FetchedBatch(5, 9, producer_id=7, is_transactional=True),    # aborted
        FetchedBatch(10, 12, producer_id=8, is_transactional=True),  # committed
        FetchedBatch(13, 13, producer_id=7, is_transactional=True, is_control=True),  # abort marker
        FetchedBatch(14, 16, producer_id=7, is_transactional=True),  # a later transaction
    ]
    got = p.acquire("m1", fetched, 0, max_records=100, aborted=[AbortedTransaction(7, 5)])
    assert got == [AcquiredRecords(0, 4, 1), AcquiredRecords(10, 16, 1)]
    assert p.record_state(7)[0] is ARC


def test_read_uncommitted_delivers_aborted_batches() -> None:
    p = part()
    fetched = [FetchedBatch(0, 4, producer_id=7, is_transactional=True)]
    assert p.acquire("m1", fetched, 0, max_records=10, aborted=[AbortedTransaction(7, 0)]) == [
        AcquiredRecords(0, 4, 1)]


def test_nothing_fetched_nothing_acquired() -> None:
    p = part()
    assert p.acquire("m1", [], 0, max_records=10) == []
    assert acq(p, "m1", (0, 9), max_records=0) == []
    assert p.end_offset == -1 and p.next_deadline() is None


# -- acknowledgement ---------------------------------------------------------------------------

@pytest.mark.parametrize(("ack_type", "state"), [
    (ACCEPT, ACK),
    (REJECT, ARC),
    (GAP, ARC),
    (RELEASE, AV),
])
def test_each_ack_type_moves_acquired_records(ack_type: int, state: RecordState) -> None:
    p = part()
    acq(p, "m1", (0, 9))
    assert ack(p, "m1", 5, 9, ack_type) is E.NONE
    assert states(p) == [(0, 4, AQ, 1), (5, 9, state, 1)]
    assert p.record_state(5) == (state, 1, None)
    # Finishing the prefix moves the SPSO past every finished record, and no further.
    assert ack(p, "m1", 0, 4, ACCEPT) is E.NONE
    assert p.start_offset == (5 if state is AV else 10)


def test_partial_batch_acks_split_and_merge() -> None:
    p = part()
    acq(p, "m1", (0, 9))
    assert ack(p, "m1", 2, 3, ACCEPT) is E.NONE
    assert states(p) == [(0, 1, AQ, 1), (2, 3, ACK, 1), (4, 9, AQ, 1)]
    assert ack(p, "m1", 4, 9, ACCEPT) is E.NONE
    assert states(p) == [(0, 1, AQ, 1), (2, 9, ACK, 1)]
    assert ack(p, "m1", 0, 1, ACCEPT) is E.NONE
    assert states(p) == [] and p.start_offset == 10 and p.end_offset == 9


def test_per_offset_ack_types_with_gaps() -> None:
    p = part()
    acq(p, "m1", (0, 5))
    assert ack(p, "m1", 0, 5, ACCEPT, GAP, GAP, REJECT, RELEASE, ACCEPT) is E.NONE
    assert p.start_offset == 4
    assert states(p) == [(4, 4, AV, 1), (5, 5, ACK, 1)]


@pytest.mark.parametrize(("holder", "first", "last", "error"), [
    ("m2", 0, 9, E.INVALID_RECORD_STATE),   # another member's records
    ("m1", 5, 12, E.INVALID_RECORD_STATE),  # past the SPEO
    ("m1", 20, 25, E.INVALID_RECORD_STATE),
])
def test_ack_errors(holder: str, first: int, last: int, error: E) -> None:
    p = part()
    acq(p, "m1", (0, 9))
    assert ack(p, holder, first, last, ACCEPT) is error
    assert states(p) == [(0, 9, AQ, 1)]


def test_ack_of_a_finished_or_available_record_is_refused() -> None:
    p = part()
    acq(p, "m1", (0, 9))
    ack(p, "m1", 5, 5, ACCEPT)
    assert ack(p, "m1", 5, 5, ACCEPT) is E.INVALID_RECORD_STATE
    ack(p, "m1", 6, 6, RELEASE)
    assert ack(p, "m1", 6, 6, ACCEPT) is E.INVALID_RECORD_STATE


def test_acks_are_all_or_nothing() -> None:
    p = part()
    acq(p, "m1", (0, 4))
    acq(p, "m2", (5, 9))
    got = p.acknowledge("m1", [AcknowledgementBatch(0, 4, (ACCEPT,)),
                               AcknowledgementBatch(5, 5, (ACCEPT,))])
    assert got is E.INVALID_RECORD_STATE
    assert states(p) == [(0, 4, AQ, 1), (5, 9, AQ, 1)] and p.start_offset == 0


@pytest.mark.parametrize("bad", [
    [AcknowledgementBatch(5, 4, (ACCEPT,))],                                 # reversed
    [AcknowledgementBatch(0, 4, (ACCEPT, ACCEPT))],                          # wrong type count
    [AcknowledgementBatch(0, 4, (9,))],                                      # unknown type
    [AcknowledgementBatch(0, 4, (4,))],                                      # Renew is v2 only
    [AcknowledgementBatch(0, 4, (ACCEPT,)), AcknowledgementBatch(3, 6, (ACCEPT,))],  # overlap
    [AcknowledgementBatch(5, 6, (ACCEPT,)), AcknowledgementBatch(0, 1, (ACCEPT,))],  # unordered
    [AcknowledgementBatch(-1, 1, (ACCEPT,))],
])
def test_malformed_acks_are_invalid_requests(bad: list[AcknowledgementBatch]) -> None:
    p = part()
    acq(p, "m1", (0, 9))
    assert p.acknowledge("m1", bad) is E.INVALID_REQUEST
    assert states(p) == [(0, 9, AQ, 1)]


def test_acks_below_the_spso_are_skipped() -> None:
    p = part()
    acq(p, "m1", (0, 9))
    p.update_log_start(5)
    assert ack(p, "m1", 0, 9, ACCEPT) is E.NONE
    assert p.start_offset == 10


# -- lock expiry, members leaving, the delivery limit -------------------------------------------

def test_lock_timeout_makes_records_available_for_redelivery() -> None:
    p = part(record_lock_duration_ms=15_000)
    acq(p, "m1", (0, 9), now=1_000)
    assert p.next_deadline() == 16_000
    assert not p.tick(15_999)
    assert p.tick(16_000)
    assert states(p) == [(0, 9, AV, 1)] and p.next_deadline() is None
    assert acq(p, "m2", (0, 9), now=20_000) == [(0, 9, 2)]
    assert p.next_deadline() == 35_000


def test_each_acquisition_has_its_own_lock() -> None:
    p = part()
    acq(p, "m1", (0, 4), now=0)
    acq(p, "m1", (5, 9), now=10_000)
    assert p.tick(LOCK)
    assert states(p) == [(0, 4, AV, 1), (5, 9, AQ, 1)]
    assert p.next_deadline() == 10_000 + LOCK


def test_renew_keeps_records_acquired_with_a_fresh_lock() -> None:
    p = part()
    acq(p, "m1", (0, 9))
    renew = [AcknowledgementBatch(0, 4, (RENEW,))]
    assert p.acknowledge("m2", renew, LOCK - 1, renew=True) is E.INVALID_RECORD_STATE
    assert p.acknowledge("m1", renew, LOCK - 1, renew=True) is E.NONE
    assert p.next_deadline() == LOCK
    p.tick(LOCK)  # only the records not renewed are released
    assert states(p) == [(0, 4, AQ, 1), (5, 9, AV, 1)]
    assert p.record_state(0) == (AQ, 1, "m1")
    assert p.next_deadline() == 2 * LOCK - 1
    assert ack(p, "m1", 0, 4, ACCEPT) is E.NONE


def test_acked_records_do_not_expire() -> None:
    p = part()
    acq(p, "m1", (0, 9))
    ack(p, "m1", 0, 4, ACCEPT)
    p.tick(LOCK)
    assert states(p) == [(5, 9, AV, 1)] and p.start_offset == 5


def test_release_member_frees_only_its_records() -> None:
    p = part()
    acq(p, "m1", (0, 4))
    acq(p, "m2", (5, 9))
    assert p.release_member("m1")
    assert not p.release_member("m3")
    assert states(p) == [(0, 4, AV, 1), (5, 9, AQ, 1)]


@pytest.mark.parametrize("how", ["release", "timeout", "member"])
def test_archive_at_the_delivery_count_limit(how: str) -> None:
    p = part(delivery_count_limit=3)
    now = 0
    for delivery in range(1, 4):
        assert acq(p, "m1", (0, 9), now=now) == [(0, 9, delivery)]
        if how == "release":
            ack(p, "m1", 0, 9, RELEASE)
        elif how == "timeout":
            now += LOCK
            p.tick(now)
        else:
            p.release_member("m1")
    # The third delivery was the last: the records are archived and the SPSO moves past them.
    assert states(p) == [] and p.start_offset == 10
    assert acq(p, "m1", (0, 9), (10, 14), now=now) == [(10, 14, 1)]


def test_records_below_the_limit_stay_available() -> None:
    p = part(delivery_count_limit=2)
    acq(p, "m1", (0, 9))
    ack(p, "m1", 0, 9, RELEASE)
    assert states(p) == [(0, 9, AV, 1)]


# -- the log start moving ----------------------------------------------------------------------

def test_log_start_moving_archives_below_it() -> None:
    p = part()
    acq(p, "m1", (0, 9))
    ack(p, "m1", 5, 9, RELEASE)
    assert not p.update_log_start(0)
    assert p.update_log_start(7)
    assert p.start_offset == 7
    assert states(p) == [(7, 9, AV, 1)]
    assert p.next_deadline() is None  # the acquired records below the log start are gone


def test_log_start_past_everything_empties_the_partition() -> None:
    p = part()
    acq(p, "m1", (0, 9))
    assert p.update_log_start(50)
    assert states(p) == [] and (p.start_offset, p.end_offset, p.next_fetch_offset()) == (50, 49, 50)
    assert acq(p, "m2", (50, 59)) == [(50, 59, 1)]


# -- persistence -------------------------------------------------------------------------------

def test_write_state_lists_every_delivered_range() -> None:
    p = part()
    p.state_epoch, p.leader_epoch = 3, 7
    acq(p, "m1", (0, 9), (10, 19))
    ack(p, "m1", 0, 9, *([ACCEPT] * 2 + [RELEASE] * 3 + [REJECT] + [ACCEPT] * 4))
    w = p.to_write_state()
    assert w == PartitionState(3, 7, 2, (
        StateBatch(2, 4, 0, 1), StateBatch(5, 5, 4, 1), StateBatch(6, 9, 2, 1),
        StateBatch(10, 19, 0, 1),  # acquired, written as available with its count
    ), delivery_complete_count=5)


def test_read_state_round_trip_and_acquired_becomes_available() -> None:
    cfg = SharePartitionConfig()
    read = PartitionState(2, 5, 10, (
        StateBatch(8, 12, 2, 1),     # partly below the SPSO: clipped
        StateBatch(13, 14, 1, 3),    # ACQUIRED from an old leader: available again
        StateBatch(18, 19, 4, 5),    # 15-17 were never delivered
    ))
    p = SharePartition.from_read_state(read, cfg, default_start_offset=0, leader_epoch=6)
    assert (p.start_offset, p.end_offset, p.state_epoch, p.leader_epoch) == (13, 19, 2, 6)
    assert states(p) == [(13, 14, AV, 3), (15, 17, AV, 0), (18, 19, ARC, 5)]
    assert p.next_fetch_offset() == 13
    again = SharePartition.from_read_state(p.to_write_state(), cfg, default_start_offset=0)
    assert states(again) == states(p)
    assert acq(p, "m1", (13, 17), (18, 19), (20, 24)) == [(13, 14, 4), (15, 17, 1), (20, 24, 1)]


def test_read_state_without_a_start_uses_the_reset_default() -> None:
    p = SharePartition.from_read_state(PartitionState(0, -1, -1), SharePartitionConfig(),
                                       default_start_offset=42)
    assert (p.start_offset, p.end_offset, p.next_fetch_offset()) == (42, 41, 42)


def test_an_unresolved_start_is_refused() -> None:
    with pytest.raises(ValueError):
        SharePartition(SharePartitionConfig(), -1)
