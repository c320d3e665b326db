"""Idle producer ids expire (producer.id.expiration.ms), as in Kafka's ProducerStateManager:
a producer whose last write is that old and that has no transaction open is forgotten by the
log manager's expiry pass, and stays forgotten across a restart."""

from __future__ import annotations

import struct

import pytest

from kafkapy.log.config import LogConfig
from kafkapy.log.log_manager import LogManager
from kafkapy.log.partition_log import PartitionLog
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.records.builder import Record, build_batch

from .helpers import make_batch

PID = 7000
EXPIRATION_MS = 1_000
WRITTEN_AT = 10_000  # the batches' timestamp: what the producer's idle time counts from


@pytest.fixture
def dirs(tmp_path) -> list[str]:
    return [str(tmp_path / "d1")]


def manager(dirs: list[str], now_ms: int = 0) -> LogManager:
    return LogManager(dirs, LogConfig(), now_ms=now_ms, producer_id_expiration_ms=EXPIRATION_MS)


def produce(log: PartitionLog, seq: int, n: int = 1, ts: int = WRITTEN_AT) -> int:
    r = log.append_as_leader(make_batch(n, pid=PID, epoch=0, seq=seq, ts=ts), now_ms=ts,
                             leader_epoch=0)
    return r.first_offset


def out_of_order(log: PartitionLog, seq: int) -> bool:
    try:
        produce(log, seq)
    except KafkaError as e:
        assert e.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        return True
    return False


def test_idle_producer_is_forgotten_by_the_expiry_pass(dirs):
    lm = manager(dirs)
    log = lm.get_or_create("t", 0)
    produce(log, 0, n=2)
    assert out_of_order(log, 5)  # known producer: a gap in its sequence is refused
    assert lm.expire_producers(WRITTEN_AT + EXPIRATION_MS - 1) == 0
    assert log.producer_state.last_entry(PID) is not None
    assert lm.expire_producers(WRITTEN_AT + EXPIRATION_MS) == 1
    assert log.producer_state.last_entry(PID) is None
    # As Kafka since KIP-360: no state for the producer, so its next write is taken at
    # whatever sequence it carries, and its sequence is tracked from there.
    later = WRITTEN_AT + EXPIRATION_MS
    assert produce(log, 5, ts=later) == 2
    assert log.producer_state.last_entry(PID).last_seq == 5
    lm.shutdown()


def test_producer_with_an_open_transaction_is_kept(dirs):
    lm = manager(dirs)
    log = lm.get_or_create("t", 0)
    txn = build_batch([Record(None, b"x", timestamp=WRITTEN_AT)], producer_id=PID,
                      producer_epoch=0, base_sequence=0, transactional=True)
    log.append_as_leader(bytearray(txn), now_ms=WRITTEN_AT, leader_epoch=0)
    assert lm.expire_producers(WRITTEN_AT + 100 * EXPIRATION_MS) == 0
    assert log.producer_state.last_entry(PID).current_txn_first_offset == 0
    # The transaction ends (a commit marker from the coordinator): idle time counts from it.
    ended_at = WRITTEN_AT + 100 * EXPIRATION_MS
    marker = build_batch([Record(struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 3),
                                 timestamp=ended_at)],
                         producer_id=PID, producer_epoch=0, transactional=True, control=True)
    log.append_as_leader(bytearray(marker), now_ms=ended_at, leader_epoch=0, from_client=False)
    assert lm.expire_producers(ended_at + EXPIRATION_MS - 1) == 0
    assert lm.expire_producers(ended_at + EXPIRATION_MS) == 1
    assert log.producer_state.last_entry(PID) is None
    lm.shutdown()


def test_expired_producer_stays_gone_after_a_restart(dirs):
    lm = manager(dirs)
    log = lm.get_or_create("t", 0)
    produce(log, 0, n=2)
    # A roll snapshots the producer state at offset 2; nothing is written after it, so the
    # shutdown finds that snapshot already there and keeps it, producer included.
    log.roll(now_ms=WRITTEN_AT)
    now = WRITTEN_AT + 5 * EXPIRATION_MS
    assert lm.expire_producers(now) == 1
    lm.shutdown()
    again = manager(dirs, now_ms=now)
    log = again.get("t", 0)
    assert log.producer_state.last_entry(PID) is None
    assert not out_of_order(log, 5)
    again.shutdown()


def test_the_value_in_force_applies_from_the_next_pass(dirs):
    lm = manager(dirs)
    log = lm.get_or_create("t", 0)
    produce(log, 0)
    now = WRITTEN_AT + EXPIRATION_MS
    # producer.id.expiration.ms raised at runtime (a dynamic broker config): kept.
    assert lm.expire_producers(now, expiration_ms=10 * EXPIRATION_MS) == 0
    assert log.producer_state.last_entry(PID) is not None
    # A log opened later (a new partition) takes the value in force too.
    other = lm.get_or_create("t", 1)
    other.append_as_leader(make_batch(1, pid=PID + 1, epoch=0, seq=0, ts=WRITTEN_AT),
                           now_ms=WRITTEN_AT, leader_epoch=0)
    assert lm.expire_producers(WRITTEN_AT + 10 * EXPIRATION_MS) == 2
    lm.shutdown()
