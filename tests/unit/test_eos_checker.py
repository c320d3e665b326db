"""The exactly-once checker's verdict on made-up topics (kafkapy.testing.eos.checker.analyse)."""

from __future__ import annotations

from kafkapy.testing.eos.checker import analyse
from kafkapy.testing.eos.layout import transform

# Two input partitions: n at partition n % 2, offsets in order.
INPUTS = {p: [(o, str(2 * o + p).encode()) for o in range(5)] for p in (0, 1)}


def out(p: int, o: int) -> bytes:
    return transform(p, o, str(2 * o + p).encode())


def perfect() -> dict[int, list[bytes]]:
    return {p: [out(p, o) for o in range(5)] for p in (0, 1)}


def test_every_input_once_in_order_is_exactly_once():
    report = analyse("read_committed", INPUTS, perfect())
    assert report.exactly_once
    assert (report.records, report.expected) == (10, 10)


def test_missing_duplicated_and_reordered_records_are_counted_per_input_partition():
    outputs = perfect()
    outputs[0] = [out(0, 0), out(0, 2), out(0, 1), out(0, 2), out(0, 4)]  # 3 missing, 2 twice, 1 late
    report = analyse("read_committed", INPUTS, outputs)
    assert not report.exactly_once
    assert (report.missing, report.duplicates, report.out_of_order) == (1, 1, 1)
    part = report.partitions[0]
    assert part["missing_offsets"] == [3]
    assert part["duplicated_offsets"] == [2]
    assert part["out_of_order_offsets"] == [1]
    assert report.partitions[1]["missing"] == 0


def test_records_that_do_not_match_their_input_are_wrong():
    outputs = perfect()
    outputs[1].append(b"garbage")
    outputs[1].append(b"0:1:999")  # input 0/1 doubled wrongly, and on the wrong partition
    report = analyse("read_uncommitted", INPUTS, outputs)
    assert report.wrong == 2
    assert not report.exactly_once


def test_an_incomplete_read_is_never_exactly_once():
    assert not analyse("read_committed", INPUTS, perfect(), complete=False).exactly_once


def test_streams_sums_without_gap_or_repeat_are_exactly_once():
    from kafkapy.testing.eos.streams import analyse_sums, expected_sums

    expected = expected_sums(6, 2)  # bucket 0: 0+2+4, bucket 1: 1+3+5
    assert expected == {"0": (3, 6), "1": (3, 9)}
    good = {"0": [b"1:0", b"2:2", b"3:6"], "1": [b"1:1", b"2:4", b"3:9"]}
    assert analyse_sums(good, expected)["exactly_once"]
    twice = {"0": [b"1:0", b"2:2", b"2:2", b"3:6"], "1": [b"1:1", b"3:9"]}
    verdict = analyse_sums(twice, expected)
    assert (verdict["repeats"], verdict["gaps"], verdict["done"]) == (1, 1, True)
    assert not verdict["exactly_once"]
    assert not analyse_sums({"0": [b"1:0"], "1": good["1"]}, expected)["done"]
