"""``__transaction_state`` records: Kafka's bytes, both value versions, round trips, tombstones."""

from __future__ import annotations

import struct

import pytest

from kafkapy.coordinator.transaction import records as rec
from kafkapy.coordinator.transaction.metadata import TxnTransition
from kafkapy.coordinator.transaction.state import TransactionState as S
from kafkapy.protocol.schema_codec import SchemaError, write_uvarint

ONGOING = TxnTransition(S.ONGOING, producer_id=1000, prev_producer_id=999, next_producer_id=-1, producer_epoch=3,
                        last_producer_epoch=-1, txn_timeout_ms=60_000, partitions=frozenset({("a", 0), ("b", 7)}),
                        txn_start_timestamp=20, txn_last_update_timestamp=30, client_transaction_version=0)
EMPTY = TxnTransition(S.EMPTY, 1000, 1000, -1, 0, -1, 60_000, frozenset(), -1, 10, 0)


def _uvarint(n: int) -> bytes:
    out = bytearray()
    write_uvarint(out, n)
    return bytes(out)


def test_key_is_type_0_then_the_transactional_id() -> None:
    assert rec.encode_key("t1") == b"\x00\x00" + b"\x00\x02t1"
    assert rec.decode_key(rec.encode_key("ünï")) == "ünï"


def test_value_v1_byte_for_byte_as_kafka_writes_it() -> None:
    # Hand-built in Kafka's layout: version 1 (flexible), compact arrays and strings, tagged
    # PreviousProducerId (tag 0) at the end; NextProducerId and ClientTransactionVersion are
    # at their defaults, so not written. The same hex is what Kafka 4.4's
    # TransactionLog.valueToBytes gives for this transition under transaction.version 1.
    expected = (struct.pack(">hqhib", 1, 1000, 3, 60_000, 1)
                + _uvarint(3)                                   # 2 topics
                + _uvarint(2) + b"a" + _uvarint(2) + struct.pack(">i", 0) + b"\x00"
                + _uvarint(2) + b"b" + _uvarint(2) + struct.pack(">i", 7) + b"\x00"
                + struct.pack(">qq", 30, 20)                    # last update, start
                + _uvarint(1) + _uvarint(0) + _uvarint(8) + struct.pack(">q", 999))
    assert rec.encode_value(ONGOING, transaction_version=1) == expected
    assert expected.hex() == ("000100000000000003e800030000ea60010302610200000000000262020000000700000000000000"
                              "001e000000000000001401000800000000000003e7")


def test_value_v0_byte_for_byte_as_kafka_writes_it() -> None:
    expected = (struct.pack(">hqhib", 0, 1000, 3, 60_000, 1)
                + struct.pack(">i", 2)
                + struct.pack(">h", 1) + b"a" + struct.pack(">ii", 1, 0)
                + struct.pack(">h", 1) + b"b" + struct.pack(">ii", 1, 7)
                + struct.pack(">qq", 30, 20))
    assert rec.encode_value(ONGOING, transaction_version=0) == expected


def test_empty_state_has_null_partitions() -> None:
    assert rec.encode_value(EMPTY, 0).hex() == "000000000000000003e800000000ea6000ffffffff000000000000000affffffffffffffff"
    assert rec.encode_value(EMPTY, 1).hex() == ("000100000000000003e800000000ea600000000000000000000affffffffffffffff"
                                                "01000800000000000003e8")
    with pytest.raises(ValueError):
        rec.encode_value(TxnTransition(S.EMPTY, 1, 1, -1, 0, -1, 1, frozenset({("a", 0)}), -1, 1, 0), 1)


@pytest.mark.parametrize("tv", [0, 1, 2])
@pytest.mark.parametrize("t", [ONGOING, EMPTY], ids=["ongoing", "empty"])
def test_round_trip(t: TxnTransition, tv: int) -> None:
    md = rec.decode_value("t1", rec.encode_value(t, tv))
    assert (md.state, md.producer_id, md.producer_epoch, md.txn_timeout_ms, md.partitions,
            md.txn_start_timestamp, md.txn_last_update_timestamp) == (
        t.state, t.producer_id, t.producer_epoch, t.txn_timeout_ms, set(t.partitions),
        t.txn_start_timestamp, t.txn_last_update_timestamp)
    # v0 has no previous producer id; the last epoch is never written (Kafka loads -1 too).
    assert md.prev_producer_id == (t.prev_producer_id if tv >= 1 else -1)
    assert md.last_producer_epoch == -1
    assert rec.encode_value(md.snapshot(), tv) == rec.encode_value(
        t if tv >= 1 else TxnTransition(**{**t.__dict__, "prev_producer_id": -1}), tv)


def test_client_transaction_version_is_kept_in_v1() -> None:
    t = TxnTransition(**{**ONGOING.__dict__, "client_transaction_version": 2, "next_producer_id": 77})
    md = rec.decode_value("x", rec.encode_value(t, 1))
    assert (md.client_transaction_version, md.next_producer_id) == (2, 77)


def test_unknown_versions_and_corrupt_bytes() -> None:
    with pytest.raises(rec.UnknownRecordVersion):
        rec.decode_key(b"\x00\x01\x00\x01g")  # a __consumer_offsets-style key type
    with pytest.raises(rec.UnknownRecordVersion):
        rec.decode_value("t", b"\x00\x05" + rec.encode_value(EMPTY, 1)[2:])
    with pytest.raises(SchemaError):
        rec.decode_value("t", rec.encode_value(ONGOING, 1)[:-3])
    bad_state = bytearray(rec.encode_value(EMPTY, 0))
    bad_state[16] = 9  # version 2 + producer id 8 + epoch 2 + timeout 4: the status byte
    with pytest.raises(SchemaError, match="state id 9"):
        rec.decode_value("t", bytes(bad_state))
