"""Loading a partition, timed-out transactions, transactional id expiry, Describe/ListTransactions."""

from __future__ import annotations

from kafkapy.coordinator.transaction import (
    DescribedTransaction,
    EndTxnAnswer,
    InitProducerIdAnswer,
    ListedTransaction,
    TransactionConfig,
    TxnMarkers,
)
from kafkapy.coordinator.transaction import records as rec
from kafkapy.protocol.errors import ErrorCode
from tests.unit.coordinator.transaction.harness import Harness

E = ErrorCode
A0, A1 = ("a", 0), ("a", 1)


def test_timed_out_transaction_is_aborted_under_a_bumped_epoch() -> None:
    h = Harness()
    h.init("t", 0, timeout_ms=10_000)
    h.add("t", 1000, 0, [A0], 1_000)
    assert h.shard.next_timeout_ms() == 11_001
    assert h.shard.abort_timed_out(11_000).records == []  # not yet: start + timeout must be passed
    res = h.shard.abort_timed_out(11_001)
    h.apply(res)
    assert res.markers == [TxnMarkers("t", 1000, 1, False, 3, frozenset({A0}))]
    assert "timed out" in res.log[0]
    # The producer that let it time out is fenced.
    assert h.end("t", 1000, 0, True, 11_002)[0] == EndTxnAnswer(E.PRODUCER_FENCED)
    h.deliver(res.markers, 11_003)
    d = h.shard.describe("t")
    assert (d.transaction_state, d.producer_epoch) == ("CompleteAbort", 1)
    assert h.shard.next_timeout_ms() is None
    assert h.init("t", 11_004) == InitProducerIdAnswer(E.NONE, 1000, 2)


def test_idle_ids_expire_with_a_tombstone() -> None:
    h = Harness(config=TransactionConfig(transactional_id_expiration_ms=1_000))
    h.init("idle", 0)
    h.init("busy", 0)
    h.add("busy", 1001, 0, [A0], 10)
    assert h.shard.expire_transactional_ids(999).records == []
    res = h.shard.expire_transactional_ids(1_000)
    assert res.records == [(rec.encode_key("idle"), None)]  # Ongoing ids never expire
    assert h.init("idle", 1_001) == InitProducerIdAnswer(E.CONCURRENT_TRANSACTIONS)  # being expired
    h.apply(res)
    assert h.shard.describe("idle").error == E.TRANSACTIONAL_ID_NOT_FOUND
    assert "Expired transactionalId idle" in res.log[0]
    # A failed tombstone leaves the id as it was.
    h.end("busy", 1001, 0, False, 20)
    h.deliver([TxnMarkers("busy", 1001, 0, False, 3, frozenset({A0}))], 30)
    res = h.shard.expire_transactional_ids(2_000)
    h.apply(res, error=E.NOT_ENOUGH_REPLICAS)
    assert h.shard.describe("busy").transaction_state == "CompleteAbort"
    # The tombstone removes the id on reload too.
    h.apply(h.shard.expire_transactional_ids(2_000))
    h.reload(3_000)
    assert set(h.shard.txns) == set()


def test_load_replays_the_log_and_resends_markers_of_prepared_transactions() -> None:
    h = Harness()
    h.init("done", 0)
    h.init("gone", 0)
    h.apply(h.shard.expire_transactional_ids(10**10))  # both tombstoned
    h.init("done", 1)
    h.add("done", 1002, 0, [A0], 2)
    _, markers = h.end("done", 1002, 0, False, 3)
    h.deliver(markers, 4)
    h.init("open", 5)
    h.add("open", 1003, 0, [A0, A1], 6)
    h.end("open", 1003, 0, True, 7)  # the markers never get out: the leader dies

    loaded = h.reload(100, coordinator_epoch=4)
    assert loaded.markers == [TxnMarkers("open", 1003, 0, True, 4, frozenset({A0, A1}))]
    assert sorted(h.shard.txns) == ["done", "open"]
    assert h.shard.describe("done") == DescribedTransaction("done", E.NONE, "CompleteAbort", 60_000, 2, 1002, 0)
    assert h.shard.describe("open").transaction_state == "PrepareCommit"
    assert h.end("open", 1003, 0, True, 101)[0] == EndTxnAnswer(E.CONCURRENT_TRANSACTIONS)
    h.deliver(loaded.markers, 102)
    assert h.shard.describe("open").transaction_state == "CompleteCommit"
    assert h.end("open", 1003, 0, True, 103)[0] == EndTxnAnswer(E.NONE, 1003, 0)
    # The last producer epoch is not in the log: a loaded id has none (as in Kafka).
    assert h.shard.txns["open"].last_producer_epoch == -1


def test_loading_skips_unreadable_records() -> None:
    h = Harness()
    h.init("t", 0)
    h.log.insert(0, (b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x01", b"offsets?"))
    h.log.append((rec.encode_key("t"), b"\x00"))
    loaded = h.reload(10)
    assert h.shard.describe("t").transaction_state == "Empty"
    assert sum("Skipping" in line for line in loaded.log) == 2


def test_requests_while_loading_and_after_unloading() -> None:
    h = Harness()
    h.init("t", 0)
    fresh = h.new_shard()
    assert fresh.init_producer_id("t", 60_000, 1).response == InitProducerIdAnswer(E.COORDINATOR_LOAD_IN_PROGRESS)
    assert fresh.describe("t").error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert fresh.list_transactions(1)[0] == E.COORDINATOR_LOAD_IN_PROGRESS
    # A write in flight when leadership goes answers NOT_COORDINATOR and sends nothing.
    res = h.shard.add_partitions("t", 1000, 0, [A0], 1)
    h.shard.unload()
    h.apply(res)
    assert res.response == E.NOT_COORDINATOR and res.markers == []
    assert h.shard.end_txn("t", 1000, 0, True, 2).response == EndTxnAnswer(E.NOT_COORDINATOR)
    assert h.shard.abort_timed_out(10**9).records == []


def test_describe_and_list() -> None:
    h = Harness()
    h.init("app-1", 0)
    h.init("app-2", 0)
    h.init("other", 0)
    h.add("app-2", 1001, 0, [A1, A0, ("b", 3)], 100)
    assert h.shard.describe("app-2") == DescribedTransaction(
        "app-2", E.NONE, "Ongoing", 60_000, 100, 1001, 0, (("a", (0, 1)), ("b", (3,))))
    assert h.shard.describe("nope").error == E.TRANSACTIONAL_ID_NOT_FOUND
    assert h.shard.describe("").error == E.INVALID_REQUEST

    everything = h.shard.list_transactions(1_000)
    assert everything == (E.NONE, [], [ListedTransaction("app-1", 1000, "Empty"),
                                       ListedTransaction("app-2", 1001, "Ongoing"),
                                       ListedTransaction("other", 1002, "Empty")])
    err, unknown, listed = h.shard.list_transactions(1_000, state_filters=["Ongoing", "Bogus"])
    assert (err, unknown, [t.transactional_id for t in listed]) == (E.NONE, ["Bogus"], ["app-2"])
    assert [t.transactional_id for t in h.shard.list_transactions(1_000, producer_id_filters=[1000])[2]] == ["app-1"]
    # Duration: only transactions running longer than the filter (an Empty id has no start).
    assert [t.transactional_id for t in h.shard.list_transactions(1_000, state_filters=["Ongoing"],
                                                                   duration_filter_ms=900)[2]] == []
    assert [t.transactional_id for t in h.shard.list_transactions(1_000, state_filters=["Ongoing"],
                                                                   duration_filter_ms=899)[2]] == ["app-2"]
    assert [t.transactional_id for t in h.shard.list_transactions(
        1_000, transactional_id_pattern="app-.")[2]] == ["app-1", "app-2"]
    assert h.shard.list_transactions(1_000, transactional_id_pattern="app")[2] == []  # whole id
    assert h.shard.list_transactions(1_000, transactional_id_pattern="(")[0] == E.INVALID_REQUEST


def test_owns_places_ids_as_kafka_does() -> None:
    h = Harness()
    # partitionFor = abs(String.hashCode) % 50; "t" hashes to 116.
    assert h.shard.owns("t") is False
    assert Harness().shard.owns("d") is True  # 100 % 50 == 0
    assert TransactionConfig(transaction_state_log_num_partitions=7).partition_for("t") == 116 % 7
