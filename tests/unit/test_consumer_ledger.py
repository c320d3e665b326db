"""The consume/commit ledger check the KIP-848 compat tests rely on."""

from kafkapy.testing.consumer_ledger import committed_positions, problems


def rec(t, p, o, member="a"):
    return {"event": "record", "t": t, "p": p, "o": o, "member": member}


def commit(t, offsets, member="a"):
    return {"event": "committed", "t": t, "offsets": {str(p): o for p, o in offsets.items()}, "member": member}


def test_a_clean_handover_has_no_problems():
    events = [rec(1, 0, 0), rec(1, 0, 1), commit(2, {0: 2}),
              rec(5, 0, 2, "b"), commit(6, {0: 3}, "b")]
    assert problems(events, {0: [0, 1, 2]}) == []
    assert committed_positions(events) == {0: 3}


def test_redelivery_of_an_uncommitted_record_is_allowed():
    # "a" consumed offset 2 and died before committing it: "b" may consume it again.
    events = [rec(1, 0, 0), rec(1, 0, 1), rec(1, 0, 2), commit(2, {0: 2}), rec(9, 0, 2, "b")]
    assert problems(events, {0: [0, 1, 2]}) == []


def test_redelivery_after_the_commit_is_reported():
    events = [rec(1, 0, 0), rec(1, 0, 1), commit(2, {0: 2}), rec(9, 0, 1, "b")]
    assert problems(events, {0: [0, 1]}) == [
        "partition 0 offset 1: consumed by b at 9 after offset 2 was committed (first consumed by a at 1)"]


def test_a_commit_going_backwards_and_a_lost_record_are_reported():
    events = [rec(1, 0, 0), rec(1, 0, 1), commit(2, {0: 2}), commit(3, {0: 1}, "b")]
    found = problems(events, {0: [0, 1, 2, 3]})
    assert found == ["partition 0: b committed 1 at 3 after a had committed 2",
                     "partition 0: 2 records never consumed (offsets [2, 3]...)"]
