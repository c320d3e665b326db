"""Where a follower truncates when the leader reports a diverging epoch."""

from __future__ import annotations

from kafkapy.log.leader_epoch import LeaderEpochCache
from kafkapy.replication.truncation import divergence_truncation


def cache(*entries: tuple[int, int]) -> LeaderEpochCache:
    c = LeaderEpochCache(None)
    for epoch, start in entries:
        c.assign(epoch, start)
    return c


def test_a_restarted_ex_leader_drops_what_the_new_leader_never_had():
    # We led epoch 3 from offset 10 to 15; the new leader (epoch 4) only had epoch 3 up to 12.
    local = cache((0, 0), (3, 10))
    assert divergence_truncation(local, 15, 12, diverging_epoch=3, diverging_end_offset=12) == (12, True)


def test_an_epoch_we_never_saw_truncates_to_our_end_of_the_one_before_then_fetches_again():
    local = cache((0, 0), (2, 8))
    # The leader's epoch 1 ended at 9; our largest epoch <= 1 is 0, which ended at 8.
    assert divergence_truncation(local, 12, 5, diverging_epoch=1, diverging_end_offset=9) == (8, False)


def test_undefined_answers_fall_back_safely():
    local = cache((0, 0))
    assert divergence_truncation(local, 10, 6, diverging_epoch=-1, diverging_end_offset=-1) == (6, True)
    assert divergence_truncation(local, 10, 6, diverging_epoch=-1, diverging_end_offset=7) == (7, True)
    assert divergence_truncation(cache(), 10, 6, diverging_epoch=2, diverging_end_offset=7) == (7, True)


def test_an_ex_leaders_epoch_the_new_leader_never_saw_is_cut_at_the_new_leaders_epoch():
    # We led epoch 3 and wrote 10..14; the new leader (epoch 4) never had any of epoch 3, so its
    # largest epoch <= 3 is 0, ending where its epoch 4 starts (10).
    local = cache((0, 0), (3, 10))
    assert divergence_truncation(local, 15, 10, diverging_epoch=0, diverging_end_offset=10) == (10, True)


def test_a_higher_local_epoch_takes_two_rounds_when_the_epochs_in_between_differ():
    # New leader: 0@0, 2@5, 4@10. Us (ex-leader of epoch 3): 0@0, 3@10, log end 15.
    local = cache((0, 0), (3, 10))
    # Round 1: the leader's largest epoch <= 3 is 2, ending at 10; we never had epoch 2.
    assert divergence_truncation(local, 15, 4, diverging_epoch=2, diverging_end_offset=10) == (10, False)
    local.truncate_from_end(10)
    # Round 2: our last epoch is now 0; the leader's epoch 0 ended at 5.
    assert divergence_truncation(local, 10, 4, diverging_epoch=0, diverging_end_offset=5) == (5, True)


def test_never_truncates_past_the_log_end():
    local = cache((0, 0), (1, 4))
    assert divergence_truncation(local, 6, 2, diverging_epoch=1, diverging_end_offset=9) == (6, True)
