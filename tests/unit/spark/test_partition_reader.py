"""read_range: one partition's [start, until) as Spark's consumer reads it, over a fake leader."""

from __future__ import annotations

import pytest

from kafkapy.records.builder import Record, build_batch
from kafkapy.spark.kafka_access import FetchedData, OffsetOutOfRange
from kafkapy.spark.options import EARLIEST
from kafkapy.spark.partition_reader import DataLossError, read_range

TP = ("t", 0)


class FakeLeader:
    """Batches at fixed offsets; answers Fetch and ListOffsets as a leader would."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, int, bytes]] = []  # (base, last, bytes)
        self.log_start = 0
        self.aborted: tuple[tuple[int, int], ...] = ()
        self.fetches = 0

    def add(self, base: int, values: list[bytes], **kw) -> None:
        recs = [Record(b"k", v, (), 1000 + base + i) for i, v in enumerate(values)]
        self.batches.append((base, base + len(values) - 1, build_batch(recs, base_offset=base, **kw)))

    @property
    def end(self) -> int:
        return self.batches[-1][1] + 1 if self.batches else 0

    def fetch(self, tp, offset, *, max_bytes, read_committed):
        self.fetches += 1
        if offset < self.log_start or offset > self.end:
            raise OffsetOutOfRange(str(offset))
        data = b"".join(b for base, last, b in self.batches if last >= offset)
        return FetchedData(data[:max_bytes] if len(data) > max_bytes else data, self.end, self.end,
                           self.log_start, self.aborted)

    def list_offsets(self, tps, ts, read_committed=False):
        return {tp: self.log_start if ts == EARLIEST else self.end for tp in tps}


def offsets(leader, start, until, **kw) -> list[int]:
    return [r.offset for recs, _ in read_range(leader, TP, start, until, poll_timeout_ms=200, **kw)
            for r in recs]


def test_exact_range_across_batches() -> None:
    leader = FakeLeader()
    leader.add(0, [b"a", b"b", b"c"])
    leader.add(3, [b"d", b"e"])
    leader.add(5, [b"f"])
    assert offsets(leader, 1, 5) == [1, 2, 3, 4]
    assert offsets(leader, 0, 6) == list(range(6))
    assert offsets(leader, 6, 6) == []


def test_gaps_from_compaction_are_not_loss() -> None:
    leader = FakeLeader()
    leader.add(0, [b"a"])
    leader.add(5, [b"b", b"c"])
    assert offsets(leader, 0, 7) == [0, 5, 6]


def test_control_batches_and_aborted_transactions() -> None:
    leader = FakeLeader()
    leader.add(0, [b"committed"], producer_id=7, producer_epoch=0, base_sequence=0, transactional=True)
    leader.add(1, [b"marker"], producer_id=7, producer_epoch=0, transactional=True, control=True)
    leader.add(2, [b"aborted1", b"aborted2"], producer_id=8, producer_epoch=0, base_sequence=0,
               transactional=True)
    leader.add(4, [b"marker"], producer_id=8, producer_epoch=0, transactional=True, control=True)
    leader.add(5, [b"plain"])
    leader.aborted = ((8, 2),)
    assert offsets(leader, 0, 6, read_committed=True) == [0, 5]
    assert offsets(leader, 0, 6) == [0, 2, 3, 5]  # read_uncommitted sees aborted data


def test_data_loss_fails_or_skips_per_fail_on_data_loss() -> None:
    leader = FakeLeader()
    leader.add(0, [b"a", b"b"])
    leader.add(2, [b"c", b"d"])
    leader.log_start = 2  # retention took the first batch
    with pytest.raises(DataLossError, match="failOnDataLoss"):
        offsets(leader, 0, 4)
    assert offsets(leader, 0, 4, fail_on_data_loss=False) == [2, 3]


def test_a_range_beyond_what_arrives_times_out_as_loss() -> None:
    leader = FakeLeader()
    leader.add(0, [b"a"])
    with pytest.raises(DataLossError, match=r"\[1, 3\)"):
        offsets(leader, 0, 3)
    assert offsets(leader, 0, 3, fail_on_data_loss=False) == [0]


def test_timestamp_types_follow_the_batch() -> None:
    leader = FakeLeader()
    leader.add(0, [b"a"])
    leader.add(1, [b"b"], timestamp_type=1, max_timestamp=99)
    got = list(read_range(leader, TP, 0, 2))
    assert [t for _, types in got for t in types] == [0, 1]
    assert [r.timestamp for recs, _ in got for r in recs] == [1000, 99]
