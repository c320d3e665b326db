"""End-transaction markers: Kafka's bytes, both outcomes, and what readers refuse."""

from __future__ import annotations

import pytest

from kafkapy.records import format as fmt
from kafkapy.records.builder import Record, build_batch
from kafkapy.records.control import EndTxnMarker, decode_marker, marker_batch, read_marker
from kafkapy.records.reader import iter_batches, iter_records


@pytest.mark.parametrize("commit", [True, False])
def test_a_marker_batch_is_one_control_record_in_kafkas_layout(commit: bool) -> None:
    batch = marker_batch(producer_id=4000, producer_epoch=3, commit=commit, coordinator_epoch=7,
                         now_ms=1_700_000_000_000)
    (header, _), = list(iter_batches(batch))
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (4000, 3, -1)
    assert header.record_count == 1 and header.max_timestamp == 1_700_000_000_000
    assert fmt.compute_crc(batch, 0, len(batch)) == header.crc
    (rec,) = list(iter_records(batch))
    assert bytes(rec.key) == bytes([0, 0, 0, 1 if commit else 0])
    assert bytes(rec.value) == bytes([0, 0, 0, 0, 0, 7])
    assert read_marker(batch) == EndTxnMarker(commit, 7)


def test_a_longer_value_from_a_later_version_still_reads() -> None:
    assert decode_marker(b"\x00\x00\x00\x01", b"\x00\x01\x00\x00\x00\x09extra") == EndTxnMarker(True, 9)


@pytest.mark.parametrize("key, value", [
    (b"\x00\x00\x00\x02", b"\x00\x00\x00\x00\x00\x01"),  # a KRaft LeaderChange, not a marker
    (b"\x00\x00", b"\x00\x00\x00\x00\x00\x01"),          # key cut short
    (b"\x00\x00\x00\x01", b"\x00\x00\x00"),              # value cut short
    (b"\x00\x00\x00\x01", None),
    (None, b"\x00\x00\x00\x00\x00\x01"),
])
def test_what_is_not_an_end_transaction_marker_is_refused(key, value) -> None:
    with pytest.raises(ValueError):
        decode_marker(key, value)
    batch = build_batch([Record(key, value)], transactional=True, control=True, now_ms=1)
    assert read_marker(batch) is None
