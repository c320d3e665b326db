"""The state table: Kafka's ids, names and valid previous states."""

from __future__ import annotations

from kafkapy.coordinator.transaction.state import TransactionState as S


def test_ids_and_names_are_kafkas() -> None:
    assert [(int(s), s.display_name) for s in S] == [
        (0, "Empty"), (1, "Ongoing"), (2, "PrepareCommit"), (3, "PrepareAbort"), (4, "CompleteCommit"),
        (5, "CompleteAbort"), (6, "Dead"), (7, "PrepareEpochFence")]
    assert S.from_name("Ongoing") is S.ONGOING and S.from_name("ongoing") is None


def test_valid_previous_states() -> None:
    done = {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    assert S.EMPTY.valid_previous == done
    assert S.ONGOING.valid_previous == done | {S.ONGOING}
    assert S.PREPARE_COMMIT.valid_previous == {S.ONGOING}
    assert S.PREPARE_ABORT.valid_previous == done | {S.ONGOING, S.PREPARE_EPOCH_FENCE}
    assert S.COMPLETE_COMMIT.valid_previous == {S.PREPARE_COMMIT}
    assert S.COMPLETE_ABORT.valid_previous == {S.PREPARE_ABORT}
    assert S.DEAD.valid_previous == done
    assert S.PREPARE_EPOCH_FENCE.valid_previous == {S.ONGOING}
    assert {s for s in S if s.expiration_allowed} == done
