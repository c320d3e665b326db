"""The stretch recipes' promises and the RPO/RTO/split-brain arithmetic (no processes)."""

from __future__ import annotations

from kafkapy.testing.ledger import Ack
from kafkapy.testing.stretch.measure import Read, Stored, compute_outcome, value_of
from kafkapy.testing.stretch.recipes import RECIPES, TWO_AND_A_HALF_DC, TWO_DC, TWO_DC_DYNAMIC


def test_recipes_say_which_sites_keep_writing():
    assert TWO_DC.layout.controllers == 3 and TWO_DC.layout.broker_count() == 4
    assert TWO_DC.writable_without("east") == ("west",)
    assert TWO_DC.writable_without("west") == ()  # the controller majority is gone
    assert TWO_DC.writable_in_split("west", "east") == ("west",)
    assert TWO_AND_A_HALF_DC.layout.controllers == 5
    assert TWO_AND_A_HALF_DC.writable_without("west") == ("east",)
    assert TWO_AND_A_HALF_DC.writable_in_split("west", "east") == ("west", "east")
    assert all(r.sync_replicas == 2 for r in RECIPES.values())
    assert len(TWO_AND_A_HALF_DC.layout.roles()) == 5  # processes on a 2-core machine
    # The spare controller is no voter until added: the west still holds the majority.
    assert (TWO_DC_DYNAMIC.voters_in("west"), TWO_DC_DYNAMIC.voters_in("east")) == (2, 1)
    assert TWO_DC_DYNAMIC.writable_without("west") == ()


def final(*records: tuple[int, str, float]) -> dict[int, list[Stored]]:
    return {0: [Stored(o, v, int(t * 1000)) for o, v, t in records]}


def test_a_record_resent_under_a_new_producer_epoch_is_a_duplicate_of_its_own_kind():
    acks = {"west": {0: [Ack(0, 0, 0, 99.0), Ack(0, 2, 1, 105.0)]}}
    log = {0: [Stored(0, value_of("west", 0, 0), 98_900, epoch=0),
               Stored(1, value_of("west", 0, 1), 99_000, epoch=0),  # its ack was lost
               Stored(2, value_of("west", 0, 1), 99_000, epoch=1)]}  # re-sent after a bump
    out = compute_outcome("2.5dc", "split-west-east", 100.0, 200.0, acks, {}, log)
    assert (out.rpo, out.duplicated, out.duplicated_across_epochs) == (0, 1, 1)
    assert "duplicated=1 across_epochs=1" in out.line()


def test_an_outcome_counts_lost_misplaced_duplicated_and_measures_recovery():
    fault, back = 100.0, 200.0
    acks = {"west": {0: [Ack(0, 0, 0, 99.0), Ack(0, 1, 1, 99.5), Ack(0, 3, 2, 104.0),
                         Ack(0, -1, 3, 104.0), Ack(0, 9, 4, 210.0)]},
            "east": {0: [Ack(0, 2, 0, 99.9)]}}
    log = final((0, value_of("west", 0, 0), 98.9), (1, value_of("west", 0, 1), 99.4),
                (2, value_of("east", 0, 0), 99.8), (3, value_of("west", 0, 2), 101.0),
                (4, value_of("west", 0, 3), 101.1), (5, value_of("west", 0, 3), 101.1))
    reads = {"west": [Read(0, 3, 101_000, 103.0, value_of("west", 0, 2))], "east": []}
    out = compute_outcome("2dc", "lose-east", fault, back, acks, reads, log, 7.0)
    assert (out.acked, out.missing, out.misplaced, out.duplicated) == (6, 1, 0, 1)
    assert out.rpo == 1 and out.rto_produce == {"west": 4.0, "east": None}
    assert out.rto_consume == {"west": 3.0, "east": None}
    assert out.writes_during_fault == {"west": 2, "east": 0} and out.writable_sites() == ["west"]
    assert "rpo=1 rto_produce=4.0s rto_consume=3.0s writable=west duplicated=1" in out.line()


def test_two_sides_acking_one_partition_or_one_offset_is_split_brain():
    acks = {"west": {0: [Ack(0, 0, 0, 101.0)]}, "east": {0: [Ack(0, 0, 0, 101.5)]}}
    log = final((0, value_of("west", 0, 0), 100.5), (1, value_of("east", 0, 0), 100.6))
    out = compute_outcome("2dc", "split-west-east", 100.0, 200.0, acks, {}, log)
    assert out.two_sided_partitions == [0] and out.conflicting_acks == 1
    assert out.misplaced == 1 and "split_brain=2" in out.line()
