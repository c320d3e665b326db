"""KIP-890 part 1's verification guard in a partition's producer state: a transactional write
verified with the coordinator is appended only while its guard holds; any write of the producer
meanwhile (a marker, its first transactional batch) or a new epoch makes the stale append fail."""

from __future__ import annotations

from kafkapy.log.producer_state import ProducerBatch, ProducerStateManager
from kafkapy.records.control import EndTxnMarker

PID = 42


def txn_batch(offset: int, epoch: int = 0, seq: int = 0) -> ProducerBatch:
    return ProducerBatch(PID, epoch, seq, offset, offset, 0, True, False)


def marker(offset: int, epoch: int = 0) -> ProducerBatch:
    return ProducerBatch(PID, epoch, -1, offset, offset, 0, True, True, EndTxnMarker(commit=False,
                                                                                    coordinator_epoch=0))


def append(psm: ProducerStateManager, b: ProducerBatch, *, from_client: bool = True) -> None:
    psm.commit(psm.prepare([b], from_client=from_client), b.last_offset + 1)


def test_a_guard_holds_until_something_else_of_the_producer_is_written():
    psm = ProducerStateManager(None)
    guard = psm.start_verification(PID, 0, now_ms=0)
    assert psm.start_verification(PID, 0, now_ms=5) is guard  # concurrent verifications share it
    assert psm.verification_holds(PID, 0, guard)
    append(psm, txn_batch(0))
    # The transaction is open here now: any write of it at this epoch may go in.
    assert psm.has_ongoing_transaction(PID, 0)
    assert psm.verification_holds(PID, 0, guard)
    assert PID not in psm.verifications


def test_a_marker_written_while_verifying_refuses_the_stale_append():
    psm = ProducerStateManager(None)
    guard = psm.start_verification(PID, 0, now_ms=0)
    append(psm, marker(0), from_client=False)  # the transaction was aborted meanwhile
    assert not psm.verification_holds(PID, 0, guard)
    assert psm.start_verification(PID, 0, now_ms=1) is not guard  # a retry verifies afresh


def test_a_new_epoch_replaces_the_guard():
    psm = ProducerStateManager(None)
    old = psm.start_verification(PID, 0, now_ms=0)
    new = psm.start_verification(PID, 1, now_ms=1)
    assert new is not old
    assert not psm.verification_holds(PID, 0, old)
    assert psm.verification_holds(PID, 1, new)


def test_an_open_transaction_of_an_older_epoch_does_not_stand_in_for_verification():
    psm = ProducerStateManager(None)
    append(psm, txn_batch(0, epoch=0))
    assert psm.has_ongoing_transaction(PID, 0) and not psm.has_ongoing_transaction(PID, 1)
    assert not psm.verification_holds(PID, 1, object())


def test_unused_guards_expire_with_idle_producers():
    psm = ProducerStateManager(None, producer_id_expiration_ms=1000)
    psm.start_verification(PID, 0, now_ms=0)
    psm.remove_expired(999)
    assert PID in psm.verifications
    psm.remove_expired(1000)
    assert PID not in psm.verifications


def test_a_batch_above_the_lowest_verified_sequence_waits_for_the_lower_one():
    # Two pipelined batches open a transaction here; the first one's verification failed (say,
    # the coordinator was restarting) while the second's went through. Kafka refuses the second
    # until the first is in, or the first could never be appended in sequence again.
    import pytest

    from kafkapy.protocol.errors import ErrorCode, KafkaError

    psm = ProducerStateManager(None)
    first, second = (ProducerBatch(PID, 0, 0, 0, 4, 0, True, False),
                     ProducerBatch(PID, 0, 5, 5, 9, 0, True, False))
    guard = psm.start_verification(PID, 0, now_ms=0, sequence=first.base_sequence)
    assert psm.start_verification(PID, 0, now_ms=1, sequence=second.base_sequence) is guard
    with pytest.raises(KafkaError) as refused:
        psm.prepare([second], from_client=True)
    assert refused.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert "0 (earliest seen sequence)" in str(refused.value)
    append(psm, first)  # the retried first batch, verified again
    append(psm, second)  # then the second: the transaction is open here now
    assert psm.last_entry(PID).last_seq == 9


def test_a_new_epoch_starts_from_its_own_lowest_sequence():
    psm = ProducerStateManager(None)
    psm.start_verification(PID, 0, now_ms=0, sequence=0)
    psm.start_verification(PID, 1, now_ms=1, sequence=0)
    append(psm, ProducerBatch(PID, 1, 0, 0, 2, 0, True, False))
    assert psm.has_ongoing_transaction(PID, 1)
