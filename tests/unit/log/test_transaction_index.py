"""The ``.txnindex`` file on its own: Kafka's 34-byte entries, searches, truncation, damage."""

from __future__ import annotations

import logging
import os
import struct

import pytest

from kafkapy.log.index import CorruptIndexError
from kafkapy.log.transaction_index import AbortedTxn, TransactionIndex


@pytest.fixture
def path(tmp_path) -> str:
    return str(tmp_path / "00000000000000000100.txnindex")


def test_append_writes_kafkas_layout_and_creates_the_file_lazily(path):
    idx = TransactionIndex(path, 100)
    assert idx.entries == [] and not os.path.exists(path)
    idx.append(AbortedTxn(7, 90, 105, 106))
    idx.flush()
    with open(path, "rb") as f:
        assert f.read() == struct.pack(">hqqqq", 0, 7, 90, 105, 106)
    assert TransactionIndex(path, 100).entries == [AbortedTxn(7, 90, 105, 106)]


def test_markers_must_come_in_offset_order(path):
    idx = TransactionIndex(path, 100)
    idx.append(AbortedTxn(7, 100, 110, 111))
    with pytest.raises(ValueError):
        idx.append(AbortedTxn(8, 101, 110, 111))
    assert idx.entries == [AbortedTxn(7, 100, 110, 111)]


def test_collect_stops_at_an_entry_whose_lso_reaches_the_upper_bound(path):
    idx = TransactionIndex(path, 100)
    for t in (AbortedTxn(1, 100, 102, 101), AbortedTxn(2, 101, 104, 105),
              AbortedTxn(3, 103, 106, 107)):
        idx.append(t)
    found = idx.collect(100, 103)
    assert found.aborted == [AbortedTxn(1, 100, 102, 101), AbortedTxn(2, 101, 104, 105)]
    assert found.complete
    found = idx.collect(105, 200)
    assert found.aborted == [AbortedTxn(3, 103, 106, 107)] and not found.complete


def test_truncate_to_removes_entries_from_the_first_marker_at_or_above(path):
    idx = TransactionIndex(path, 100)
    for t in (AbortedTxn(1, 100, 102, 103), AbortedTxn(2, 101, 104, 105)):
        idx.append(t)
    idx.truncate_to(104)
    assert idx.entries == [AbortedTxn(1, 100, 102, 103)]
    assert os.path.getsize(path) == 34
    idx.append(AbortedTxn(3, 103, 104, 105))  # and the next marker goes where it was
    assert TransactionIndex(path, 100).entries[-1] == AbortedTxn(3, 103, 104, 105)


def test_a_torn_trailing_entry_is_dropped_with_a_log_line(path, caplog):
    good = struct.pack(">hqqqq", 0, 1, 100, 102, 103)
    with open(path, "wb") as f:
        f.write(good + good[:10])
    with caplog.at_level(logging.WARNING, logger="kafkapy.log.transaction_index"):
        idx = TransactionIndex(path, 100)
        assert idx.entries == [AbortedTxn(1, 100, 102, 103)]
    assert "torn entry (10 bytes)" in caplog.text
    assert os.path.getsize(path) == 34


def test_sanity_check_refuses_a_marker_below_the_segment(path):
    with open(path, "wb") as f:
        f.write(AbortedTxn(1, 10, 20, 21).encode())
    with pytest.raises(CorruptIndexError):
        TransactionIndex(path, 100).sanity_check()
    with open(path, "wb") as f:
        f.write(struct.pack(">hqqqq", 1, 1, 100, 102, 103))  # a version we do not know
    with pytest.raises(CorruptIndexError):
        TransactionIndex(path, 100).sanity_check()


def test_rename_and_delete(path, tmp_path):
    idx = TransactionIndex(path, 100)
    assert not idx.rename_to(path + ".deleted")  # no file yet: only the name moves
    idx.append(AbortedTxn(1, 100, 101, 102))
    assert os.path.exists(path + ".deleted")
    assert idx.rename_to(path)
    idx.delete()
    assert not os.path.exists(path)
