"""A transactional id's life through the shard: init, add, commit/abort, markers, fencing,
KIP-360 re-init, epoch exhaustion, EndTxn retries, failed appends."""

from __future__ import annotations

from kafkapy.coordinator.schema import partition_for
from kafkapy.coordinator.transaction import (
    EndTxnAnswer,
    InitProducerIdAnswer,
    TransactionConfig,
    TransactionState,
    TxnMarkers,
    error_for_version,
)
from kafkapy.coordinator.transaction import records as rec
from kafkapy.coordinator.transaction.metadata import TxnTransition
from kafkapy.protocol.errors import ErrorCode, KafkaError
from tests.unit.coordinator.transaction.harness import Harness

E = ErrorCode
S = TransactionState
A0, A1, B0 = ("a", 0), ("a", 1), ("b", 0)


def state_of(h: Harness, txn_id: str) -> tuple[str, int, int]:
    d = h.shard.describe(txn_id)
    return d.transaction_state, d.producer_id, d.producer_epoch


def test_full_life_commit_then_next_transaction_aborts() -> None:
    h = Harness()
    assert h.init("t", 10) == InitProducerIdAnswer(E.NONE, 1000, 0)
    assert h.add("t", 1000, 0, [A0, A1], 20) == E.NONE
    assert h.apply(h.shard.add_offsets("t", 1000, 0, "group-1", 25)) == E.NONE
    offsets = ("__consumer_offsets", partition_for("group-1", 50))
    d = h.shard.describe("t")
    assert (d.transaction_state, d.transaction_start_time_ms) == ("Ongoing", 20)
    assert d.topics == (("__consumer_offsets", (offsets[1],)), ("a", (0, 1)))

    answer, markers = h.end("t", 1000, 0, True, 30)
    assert answer == EndTxnAnswer(E.NONE, 1000, 0)
    assert markers == [TxnMarkers("t", 1000, 0, True, 3, frozenset({A0, A1, offsets}))]
    assert state_of(h, "t") == ("PrepareCommit", 1000, 0)
    # While the markers are out, everything else waits.
    assert h.init("t", 31) == InitProducerIdAnswer(E.CONCURRENT_TRANSACTIONS)
    assert h.add("t", 1000, 0, [B0], 31) == E.CONCURRENT_TRANSACTIONS
    assert h.end("t", 1000, 0, True, 31)[0] == EndTxnAnswer(E.CONCURRENT_TRANSACTIONS)
    assert h.end("t", 1000, 0, False, 31)[0] == EndTxnAnswer(E.CONCURRENT_TRANSACTIONS)

    [done] = h.deliver(markers, 40)
    assert len(done.records) == 1 and rec.decode_value("t", done.records[0][1] or b"").state is S.COMPLETE_COMMIT
    assert state_of(h, "t") == ("CompleteCommit", 1000, 0)
    assert h.shard.describe("t").topics == ()

    # The next transaction on the same epoch: its clock starts at its first partition.
    assert h.add("t", 1000, 0, [B0], 50) == E.NONE
    assert h.shard.describe("t").transaction_start_time_ms == 50
    answer, markers = h.end("t", 1000, 0, False, 60)
    assert answer.error == E.NONE and markers[0].commit is False and markers[0].partitions == {B0}
    h.deliver(markers, 70)
    assert state_of(h, "t") == ("CompleteAbort", 1000, 0)
    # init, add, add-offsets, prepare, complete, add, prepare, complete: one record each.
    assert [rec.decode_key(k) for k, _ in h.log] == ["t"] * 8


def test_adding_partitions_already_in_writes_nothing() -> None:
    h = Harness()
    h.init("t", 0)
    h.add("t", 1000, 0, [A0, A1], 1)
    res = h.shard.add_partitions("t", 1000, 0, [A1], 2)
    assert res.response == E.NONE and res.records == []


def test_end_txn_retries_and_wrong_states() -> None:
    h = Harness()
    assert h.end("t", 1000, 0, True, 0)[0] == EndTxnAnswer(E.INVALID_PRODUCER_ID_MAPPING)
    h.init("t", 0)
    assert h.end("t", 1000, 0, True, 1)[0] == EndTxnAnswer(E.INVALID_TXN_STATE)  # Empty: nothing to end
    assert h.end("t", 1001, 0, True, 1)[0] == EndTxnAnswer(E.INVALID_PRODUCER_ID_MAPPING)
    h.add("t", 1000, 0, [A0], 2)
    _, markers = h.end("t", 1000, 0, True, 3)
    h.deliver(markers, 4)
    # A retry of the completed commit succeeds again; the other outcome is refused.
    assert h.end("t", 1000, 0, True, 5)[0] == EndTxnAnswer(E.NONE, 1000, 0)
    assert h.end("t", 1000, 0, False, 5)[0] == EndTxnAnswer(E.INVALID_TXN_STATE)
    assert h.end("", 1000, 0, True, 5)[0] == EndTxnAnswer(E.INVALID_REQUEST)


def test_zombie_is_fenced_by_a_second_init() -> None:
    h = Harness()
    h.init("t", 0)
    h.add("t", 1000, 0, [A0], 1)
    # A second producer with the same id: the open transaction is aborted under epoch 1 first.
    res = h.shard.init_producer_id("t", 60_000, 2)
    assert h.apply(res) == InitProducerIdAnswer(E.CONCURRENT_TRANSACTIONS)
    assert res.markers == [TxnMarkers("t", 1000, 1, False, 3, frozenset({A0}))]
    assert rec.decode_value("t", res.records[0][1] or b"").state is S.PREPARE_ABORT
    # The zombie (epoch 0) is fenced from now on; old clients hear INVALID_PRODUCER_EPOCH.
    assert h.add("t", 1000, 0, [A1], 3) == E.PRODUCER_FENCED
    assert error_for_version("AddPartitionsToTxn", 1, E.PRODUCER_FENCED) == E.INVALID_PRODUCER_EPOCH
    assert error_for_version("AddPartitionsToTxn", 2, E.PRODUCER_FENCED) == E.PRODUCER_FENCED
    assert error_for_version("InitProducerId", 3, E.PRODUCER_FENCED) == E.INVALID_PRODUCER_EPOCH
    assert h.end("t", 1000, 0, True, 3)[0] == EndTxnAnswer(E.PRODUCER_FENCED)
    assert error_for_version("EndTxn", 1, E.PRODUCER_FENCED) == E.INVALID_PRODUCER_EPOCH
    # Until the abort completes the new producer keeps retrying; then it gets epoch 2.
    assert h.init("t", 4) == InitProducerIdAnswer(E.CONCURRENT_TRANSACTIONS)
    h.deliver(res.markers, 5)
    assert state_of(h, "t") == ("CompleteAbort", 1000, 1)
    assert h.init("t", 6) == InitProducerIdAnswer(E.NONE, 1000, 2)
    # The zombie's KIP-360 recovery attempt with its old epoch is fenced too.
    assert h.init("t", 7, pid=1000, epoch=0) == InitProducerIdAnswer(E.PRODUCER_FENCED)


def test_init_on_an_idle_id_bumps_the_epoch() -> None:
    h = Harness()
    assert h.init("t", 0) == InitProducerIdAnswer(E.NONE, 1000, 0)
    assert h.init("t", 1) == InitProducerIdAnswer(E.NONE, 1000, 1)
    assert h.add("t", 1000, 0, [A0], 2) == E.PRODUCER_FENCED
    assert h.add("t", 999, 1, [A0], 2) == E.INVALID_PRODUCER_ID_MAPPING


def test_kip_360_reinit_with_the_current_producer_id_and_epoch() -> None:
    h = Harness()
    h.init("t", 0)
    assert h.init("t", 1, pid=1000, epoch=0) == InitProducerIdAnswer(E.NONE, 1000, 1)
    # The same request again (its answer was lost): the same epoch, nobody fenced.
    assert h.init("t", 2, pid=1000, epoch=0) == InitProducerIdAnswer(E.NONE, 1000, 1)
    assert h.init("t", 3, pid=1000, epoch=5) == InitProducerIdAnswer(E.PRODUCER_FENCED)
    assert h.init("t", 3, pid=77, epoch=1) == InitProducerIdAnswer(E.PRODUCER_FENCED)
    assert h.init("t", 3, pid=1000, epoch=-1) == InitProducerIdAnswer(E.INVALID_REQUEST)
    # A new id accepts whatever the producer had (it is recovering from UNKNOWN_PRODUCER_ID).
    assert h.init("u", 4, pid=55, epoch=9) == InitProducerIdAnswer(E.NONE, 1001, 0)


def _loaded_at_epoch(h: Harness, epoch: int, pid: int = 500) -> None:
    t = TxnTransition(S.COMPLETE_COMMIT, pid, pid, -1, epoch, -1, 60_000, frozenset(), 5, 6, 0)
    h.log.append((rec.encode_key("t"), rec.encode_value(t, 1)))
    h.reload(10)


def test_epoch_exhaustion_rotates_the_producer_id() -> None:
    h = Harness()
    _loaded_at_epoch(h, 32766)  # Short.MAX_VALUE - 1: the last epoch a client may get
    assert h.init("t", 20) == InitProducerIdAnswer(E.NONE, 1000, 0)
    assert h.add("t", 500, 32766, [A0], 21) == E.INVALID_PRODUCER_ID_MAPPING


def test_epoch_exhaustion_with_kip_360_and_its_retry() -> None:
    h = Harness()
    _loaded_at_epoch(h, 32766)
    assert h.init("t", 20, pid=500, epoch=32766) == InitProducerIdAnswer(E.NONE, 1000, 0)
    # A retry naming the old producer id is recognised (its epoch was exhausted).
    assert h.init("t", 21, pid=500, epoch=32766) == InitProducerIdAnswer(E.NONE, 1000, 0)


def test_invalid_requests_and_timeouts() -> None:
    h = Harness(config=TransactionConfig(transaction_max_timeout_ms=1000))
    assert h.init("t", 0, timeout_ms=1001) == InitProducerIdAnswer(E.INVALID_TRANSACTION_TIMEOUT)
    assert h.init("t", 0, timeout_ms=0) == InitProducerIdAnswer(E.INVALID_TRANSACTION_TIMEOUT)
    assert h.init("", 0) == InitProducerIdAnswer(E.INVALID_REQUEST)
    assert h.shard.describe("t").error == E.TRANSACTIONAL_ID_NOT_FOUND
    assert h.init("t", 0, timeout_ms=1000) == InitProducerIdAnswer(E.NONE, 1000, 0)


def test_producer_id_allocation_failure_is_the_clients_retriable_error() -> None:
    h = Harness()

    def no_ids() -> int:
        raise KafkaError(E.COORDINATOR_LOAD_IN_PROGRESS, "waiting for a block")

    h.shard._allocate = no_ids
    assert h.init("t", 0) == InitProducerIdAnswer(E.COORDINATOR_LOAD_IN_PROGRESS)
    assert "t" not in h.shard.txns


# ------------------------------------------------------------------ failed appends
def test_failed_append_changes_nothing() -> None:
    h = Harness()
    res = h.shard.init_producer_id("t", 60_000, 0)
    assert h.apply(res, error=E.NOT_ENOUGH_REPLICAS) == InitProducerIdAnswer(E.COORDINATOR_NOT_AVAILABLE)
    assert h.shard.describe("t").error == E.TRANSACTIONAL_ID_NOT_FOUND and h.log == []
    assert h.init("t", 1).error == E.NONE  # type: ignore[attr-defined]
    pid = h.shard.txns["t"].producer_id

    assert h.apply(h.shard.add_partitions("t", pid, 0, [A0], 2), error=E.NOT_LEADER_OR_FOLLOWER) == E.NOT_COORDINATOR
    assert state_of(h, "t") == ("Empty", pid, 0) and h.shard.txns["t"].partitions == set()
    assert h.add("t", pid, 0, [A0], 3) == E.NONE

    res = h.shard.end_txn("t", pid, 0, True, 4)
    assert h.apply(res, error=E.REQUEST_TIMED_OUT) == EndTxnAnswer(E.COORDINATOR_NOT_AVAILABLE)
    assert res.markers == [] and state_of(h, "t") == ("Ongoing", pid, 0)
    assert h.apply(h.shard.end_txn("t", pid, 0, True, 5), error=E.MESSAGE_TOO_LARGE) == \
        EndTxnAnswer(E.UNKNOWN_SERVER_ERROR)
    answer, markers = h.end("t", pid, 0, True, 6)
    assert answer.error == E.NONE and markers  # type: ignore[attr-defined]


def test_failed_fence_keeps_the_zombie_fenced_and_is_not_bumped_twice() -> None:
    h = Harness()
    h.init("t", 0)
    h.add("t", 1000, 0, [A0], 1)
    res = h.shard.init_producer_id("t", 60_000, 2)
    assert h.apply(res, error=E.NOT_ENOUGH_REPLICAS) == InitProducerIdAnswer(E.COORDINATOR_NOT_AVAILABLE)
    assert res.markers == [] and h.log[-1][0] == rec.encode_key("t")
    # As in Kafka the bumped epoch stays in memory: the zombie is fenced even so.
    assert state_of(h, "t") == ("Ongoing", 1000, 1)
    assert h.add("t", 1000, 0, [A1], 3) == E.PRODUCER_FENCED
    res = h.shard.init_producer_id("t", 60_000, 4)
    assert h.apply(res) == InitProducerIdAnswer(E.CONCURRENT_TRANSACTIONS)
    assert res.markers[0].producer_epoch == 1  # not 2


def test_failed_completion_is_retried() -> None:
    h = Harness()
    h.init("t", 0)
    h.add("t", 1000, 0, [A0], 1)
    _, markers = h.end("t", 1000, 0, True, 2)
    res = h.shard.markers_written("t", {A0: E.NONE}, 3)
    res.write_failed(E.NOT_ENOUGH_REPLICAS)
    assert res.retry and state_of(h, "t")[0] == "PrepareCommit"
    assert h.init("t", 4) == InitProducerIdAnswer(E.CONCURRENT_TRANSACTIONS)
    h.apply(res)
    assert not res.retry and state_of(h, "t")[0] == "CompleteCommit"


# ------------------------------------------------------------------ marker answers
def test_marker_errors_retry_skip_or_stop() -> None:
    h = Harness()
    h.init("t", 0)
    h.add("t", 1000, 0, [A0, A1, B0], 1)
    _, markers = h.end("t", 1000, 0, False, 2)
    res = h.shard.markers_written("t", {A0: E.NONE, A1: E.NOT_LEADER_OR_FOLLOWER}, 3, gone=[B0])
    assert res.records == [] and res.markers == [TxnMarkers("t", 1000, 0, False, 3, frozenset({A1}))]
    res = h.shard.markers_written("t", {A1: E.NONE}, 4)
    h.apply(res)
    assert state_of(h, "t")[0] == "CompleteAbort"

    h.add("t", 1000, 0, [A0], 5)
    h.end("t", 1000, 0, True, 6)
    res = h.shard.markers_written("t", {A0: E.TRANSACTION_COORDINATOR_FENCED}, 7)
    assert res.records == [] and res.markers == [] and "superseded" in res.log[0]
    assert h.shard.markers_written("t", {A0: E.NONE}, 8).records == []  # no longer sent


def test_verify_partitions_for_partition_leaders() -> None:
    h = Harness()
    h.init("t", 0)
    h.add("t", 1000, 0, [A0], 1)
    assert h.shard.verify_partitions("t", 1000, 0, [A0, A1]) == {A0: E.NONE, A1: E.TRANSACTION_ABORTABLE}
    assert h.shard.verify_partitions("t", 1000, 7, [A0]) == {A0: E.PRODUCER_FENCED}
    assert h.shard.verify_partitions("t", 9, 0, [A0]) == {A0: E.INVALID_PRODUCER_ID_MAPPING}
    assert h.shard.verify_partitions("x", 1000, 0, [A0]) == {A0: E.INVALID_PRODUCER_ID_MAPPING}
    h.end("t", 1000, 0, True, 2)
    assert h.shard.verify_partitions("t", 1000, 0, [A0]) == {A0: E.CONCURRENT_TRANSACTIONS}
    assert h.shard.verify_partitions("", 1000, 0, [A0]) == {A0: E.INVALID_REQUEST}
