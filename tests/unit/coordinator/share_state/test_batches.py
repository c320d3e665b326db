from kafkapy.coordinator.share_state.batches import combine
from kafkapy.share.partition import StateBatch as B


def test_later_batches_win_where_they_overlap():
    old = [B(0, 9, 0, 1)]
    assert combine(old, [B(3, 5, 2, 1)]) == (B(0, 2, 0, 1), B(3, 5, 2, 1), B(6, 9, 0, 1))


def test_a_new_batch_covering_several_replaces_them():
    old = [B(0, 2, 0, 1), B(3, 5, 4, 2), B(8, 9, 0, 3)]
    assert combine(old, [B(1, 8, 2, 1)]) == (B(0, 0, 0, 1), B(1, 8, 2, 1), B(9, 9, 0, 3))


def test_within_one_write_the_later_batch_wins():
    assert combine([], [B(0, 5, 0, 1), B(2, 3, 4, 5)]) == (B(0, 1, 0, 1), B(2, 3, 4, 5), B(4, 5, 0, 1))


def test_below_the_start_offset_is_pruned_and_a_straddling_batch_trimmed():
    old = [B(0, 4, 2, 1), B(5, 9, 0, 2)]
    assert combine(old, [], start_offset=7) == (B(7, 9, 0, 2),)


def test_touching_equal_batches_merge():
    assert combine([B(0, 4, 2, 1)], [B(5, 9, 2, 1)]) == (B(0, 9, 2, 1),)
    assert combine([B(0, 4, 2, 1)], [B(5, 9, 2, 2)]) == (B(0, 4, 2, 1), B(5, 9, 2, 2))


def test_disjoint_batches_stay_sorted():
    assert combine([B(10, 12, 0, 1)], [B(0, 2, 4, 1), B(20, 21, 2, 1)]) == (
        B(0, 2, 4, 1), B(10, 12, 0, 1), B(20, 21, 2, 1))
