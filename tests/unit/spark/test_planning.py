"""Offset planning of the Spark source, against a fake ListOffsets."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from kafkapy.spark.options import EARLIEST, LATEST, OffsetSpec
from kafkapy.spark.planning import OffsetRange, batch_ranges, rate_limit, resolve, split

TPS = [("t", 0), ("t", 1)]
EARLY = {("t", 0): 10, ("t", 1): 0}
LATE = {("t", 0): 100, ("t", 1): 40}
# Partition 0 holds timestamps 1000.. at offsets 10..; partition 1 ends before 2000.
BY_TS = {("t", 0): {1500: 60, 2500: None}, ("t", 1): {1500: 30, 2500: None}}


def lookup(tps: list, spec: int | Mapping) -> dict:
    out = {}
    for tp in tps:
        ts = spec[tp] if isinstance(spec, Mapping) else spec
        out[tp] = EARLY[tp] if ts == EARLIEST else LATE[tp] if ts == LATEST else BY_TS[tp][ts]
    return out


def test_earliest_latest_and_json_with_specials() -> None:
    assert resolve(OffsetSpec.earliest(), TPS, lookup) == EARLY
    assert resolve(OffsetSpec.latest(), TPS, lookup) == LATE
    spec = OffsetSpec("offsets", offsets={("t", 0): 42, ("t", 1): EARLIEST})
    assert resolve(spec, TPS, lookup) == {("t", 0): 42, ("t", 1): 0}


def test_offsets_json_must_name_every_partition() -> None:
    with pytest.raises(ValueError, match="every partition.*t-1"):
        resolve(OffsetSpec("offsets", offsets={("t", 0): 1}), TPS, lookup)


def test_timestamps_and_the_strategy_for_unmatched_ones() -> None:
    assert resolve(OffsetSpec("timestamp", timestamp=1500), TPS, lookup) == {("t", 0): 60, ("t", 1): 30}
    with pytest.raises(ValueError, match="No offset matched the timestamp 2500"):
        resolve(OffsetSpec("timestamp", timestamp=2500), TPS, lookup)
    assert resolve(OffsetSpec("timestamp", timestamp=2500), TPS, lookup,
                   timestamp_strategy_latest=True) == LATE
    # An ending timestamp past every record ends at the latest offset.
    assert resolve(OffsetSpec("timestamp", timestamp=2500), TPS, lookup, ending=True) == LATE
    per = OffsetSpec("timestamps", offsets={("t", 0): 1500, ("t", 1): 2500})
    assert resolve(per, TPS, lookup, ending=True) == {("t", 0): 60, ("t", 1): 40}


def test_batch_ranges_refuse_a_start_after_the_end() -> None:
    assert batch_ranges(EARLY, LATE) == [OffsetRange("t", 0, 10, 100), OffsetRange("t", 1, 0, 40)]
    with pytest.raises(ValueError, match="after its ending offset"):
        batch_ranges({("t", 0): 5}, {("t", 0): 4})


def test_rate_limit_shares_by_backlog() -> None:
    start = {("t", 0): 0, ("t", 1): 0}
    latest = {("t", 0): 300, ("t", 1): 100}
    assert rate_limit(start, latest, 1000) == latest
    assert rate_limit(start, latest, 100) == {("t", 0): 75, ("t", 1): 25}
    # A partition with a tiny share still moves by one record; none moves past its latest.
    assert rate_limit({("t", 0): 0, ("t", 1): 99}, latest, 10) == {("t", 0): 9, ("t", 1): 100}


def test_split_for_min_partitions() -> None:
    ranges = [OffsetRange("t", 0, 0, 90), OffsetRange("t", 1, 0, 10), OffsetRange("t", 2, 5, 5)]
    assert split(ranges, None) == ranges[:2]
    parts = split(ranges, 10)
    assert len(parts) == 10
    for tp in (("t", 0), ("t", 1)):
        mine = [r for r in parts if r.tp == tp]
        assert mine[0].start == ranges[tp[1]].start and mine[-1].until == ranges[tp[1]].until
        assert all(a.until == b.start for a, b in zip(mine, mine[1:]))
