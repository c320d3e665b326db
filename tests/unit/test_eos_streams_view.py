"""The Streams run's view (kafkapy.testing.eos.streams): what two correct runs must share."""

from __future__ import annotations

from kafkapy.testing.eos.streams import build_view, expected_view, view_differences

# Inputs 0..5, 2 buckets, 2 input partitions: bucket 0 gets 0, 2, 4 and bucket 1 gets 1, 3, 5.
OUTPUT = {"0": [b"1:0", b"2:2", b"3:6"], "1": [b"1:1", b"2:4", b"3:9"]}
REPARTITION = {"0": [b"0", b"2", b"4"], "1": [b"1", b"3", b"5"]}


def test_a_correct_run_gives_the_expected_view():
    seen = build_view(OUTPUT, OUTPUT, REPARTITION, {0: 3, 1: 3})
    assert seen == expected_view(6, 2, 2)
    assert seen["output"]["0"] == {"counts": "1..3", "final": "3:6"}


def test_the_view_ignores_how_input_partitions_interleaved():
    # Bucket 1 saw input 3 before input 1: other sums on the way, the same view.
    interleaved = {"0": OUTPUT["0"], "1": [b"1:3", b"2:4", b"3:9"]}
    reordered = {"0": REPARTITION["0"], "1": [b"3", b"1", b"5"]}
    assert not view_differences(build_view(interleaved, interleaved, reordered, {0: 3, 1: 3}),
                                build_view(OUTPUT, OUTPUT, REPARTITION, {0: 3, 1: 3}))


def test_a_repeated_update_or_a_lost_commit_shows_as_a_difference():
    twice = {"0": [b"1:0", b"2:2", b"2:2", b"3:6"], "1": OUTPUT["1"]}
    repartitioned_twice = {"0": [b"0", b"2", b"2", b"4"], "1": REPARTITION["1"]}
    seen = build_view(twice, OUTPUT, repartitioned_twice, {0: 3, 1: 2})
    differences = view_differences(expected_view(6, 2, 2), seen)
    assert differences == [
        "input_committed[1]: 3 != 2",
        "output[0]: {'counts': '1..3', 'final': '3:6'} != "
        "{'counts': '4 updates, 1 repeats, 0 gaps, in order True', 'final': '3:6'}",
        "repartition[0]: {'records': 3, 'distinct': 3, 'sum': 6} != {'records': 4, 'distinct': 3, 'sum': 8}",
    ]
