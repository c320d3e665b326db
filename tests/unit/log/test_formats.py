"""On-disk formats byte for byte: names, index entries, checkpoints, snapshots, metadata."""

from __future__ import annotations

import os
import struct
import uuid

import crc32c
import pytest

from kafkapy.log import files
from kafkapy.log.checkpoint import (
    CorruptCheckpointError,
    read_checkpoint,
    read_offsets_checkpoint,
    write_offsets_checkpoint,
)
from kafkapy.log.index import CorruptIndexError, IndexOffsetError
from kafkapy.log.leader_epoch import LeaderEpochCache
from kafkapy.log.offset_index import OffsetIndex
from kafkapy.log.partition_metadata import (
    read_partition_metadata,
    topic_id_from_str,
    topic_id_to_str,
    write_partition_metadata,
)
from kafkapy.log.producer_state import (
    BatchMetadata,
    CorruptSnapshotError,
    ProducerStateEntry,
    decode_snapshot,
    encode_snapshot,
)
from kafkapy.log.time_index import TimeIndex


# ---------------------------------------------------------------- names
def test_segment_file_names():
    assert files.filename_prefix(0) == "00000000000000000000"
    assert files.log_file("/d", 42) == "/d/00000000000000000042.log"
    assert files.index_file("/d", 42).endswith("00000000000000000042.index")
    assert files.time_index_file("/d", 42).endswith("00000000000000000042.timeindex")
    assert files.snapshot_file("/d", 7).endswith("00000000000000000007.snapshot")
    assert files.offset_from_filename("00000000000000012345.log") == 12345
    assert files.offset_from_filename("00000000000000012345.log.deleted") == 12345


@pytest.mark.parametrize("name,expected", [
    ("orders-0", ("orders", 0)),
    ("my-topic-12", ("my-topic", 12)),
    ("a.b-c.d-3", ("a.b-c.d", 3)),
    ("__consumer_offsets-49", ("__consumer_offsets", 49)),
    ("__cluster_metadata-0", ("__cluster_metadata", 0)),
    ("no_partition", None),
    ("topic-", None),
    ("orders-0.0123456789abcdef0123456789abcdef-delete", None),
    ("lost+found", None),
])
def test_dir_names(name, expected):
    assert files.parse_dir_name(name) == expected
    if expected:
        assert files.dir_name(*expected) == name


def test_delete_dir_name():
    n = files.delete_dir_name("my-topic", 3, "0123456789abcdef0123456789abcdef")
    assert n == "my-topic-3.0123456789abcdef0123456789abcdef-delete"
    assert files.parse_special_dir_name(n) == (
        "my-topic", 3, "0123456789abcdef0123456789abcdef", "-delete")


# ---------------------------------------------------------------- offset index
def test_offset_index_entries_are_kafka_bytes(tmp_path):
    path = str(tmp_path / "00000000000000000100.index")
    idx = OffsetIndex(path, 100, 1024)
    assert os.path.getsize(path) == 1024  # preallocated while active
    idx.append(105, 4100)
    idx.append(190, 9000)
    with pytest.raises(IndexOffsetError):
        idx.append(150, 9999)
    idx.close()  # trims to the entries
    data = open(path, "rb").read()
    assert data == struct.pack(">ii", 5, 4100) + struct.pack(">ii", 90, 9000)


def test_offset_index_lookup_is_floor(tmp_path):
    idx = OffsetIndex(str(tmp_path / "x.index"), 0, 8 * 100)
    for i in range(1, 50):
        idx.append(i * 10, i * 1000)
    assert idx.lookup(0) == (0, 0)
    assert idx.lookup(9) == (0, 0)
    assert idx.lookup(10) == (10, 1000)
    assert idx.lookup(255) == (250, 25000)
    assert idx.lookup(10_000) == (490, 49000)
    assert idx.lookup_by_position(25500) == (250, 25000)
    idx.truncate_to(250)
    assert idx.entries == 24 and idx.lookup(10_000) == (240, 24000)
    idx.close()


def test_offset_index_full_and_reopen(tmp_path):
    path = str(tmp_path / "00000000000000000000.index")
    idx = OffsetIndex(path, 0, 8 * 3 + 5)  # rounded down to 3 entries
    for i in range(3):
        idx.append(i + 1, (i + 1) * 100)
    assert idx.is_full()
    idx.close()
    again = OffsetIndex(path, 0, 1 << 20)
    assert again.entries == 3 and again.lookup(2) == (2, 200)
    again.sanity_check()
    again.close()


def test_offset_index_preallocated_zeros_are_not_entries(tmp_path):
    path = str(tmp_path / "00000000000000000000.index")
    idx = OffsetIndex(path, 0, 8 * 64)
    idx.append(3, 500)
    idx.flush()
    idx.close_no_trim()  # a crash: the file keeps its preallocated length
    assert os.path.getsize(path) == 8 * 64
    again = OffsetIndex(path, 0, 8 * 64)
    assert again.entries == 1
    again.close()


def test_offset_index_sanity_check_detects_garbage(tmp_path):
    path = str(tmp_path / "00000000000000000000.index")
    with open(path, "wb") as f:
        f.write(struct.pack(">ii", 50, 100) + struct.pack(">ii", 10, 50))
    idx = OffsetIndex(path, 0, 1024)
    with pytest.raises(CorruptIndexError):
        idx.sanity_check()
    idx.close_no_trim()
    with open(path, "wb") as f:
        f.write(b"\x00" * 12)  # not a multiple of 8
    idx = OffsetIndex(path, 0, 1024)
    with pytest.raises(CorruptIndexError):
        idx.sanity_check()
    idx.close_no_trim()


# ---------------------------------------------------------------- time index
def test_time_index_entries_are_kafka_bytes(tmp_path):
    path = str(tmp_path / "00000000000000000010.timeindex")
    idx = TimeIndex(path, 10, 12 * 10)
    idx.maybe_append(1000, 12)
    idx.maybe_append(1000, 15)  # not a new max: skipped
    idx.maybe_append(2000, 20)
    idx.close()
    assert open(path, "rb").read() == struct.pack(">qi", 1000, 2) + struct.pack(">qi", 2000, 10)


def test_time_index_lookup_and_truncate(tmp_path):
    idx = TimeIndex(str(tmp_path / "t.timeindex"), 0, 12 * 100)
    for i in range(1, 20):
        idx.maybe_append(i * 100, i * 5)
    assert idx.lookup(50) == (-1, 0)
    assert idx.lookup(100) == (100, 5)
    assert idx.lookup(1050) == (1000, 50)
    assert idx.lookup(10**12) == (1900, 95)
    idx.truncate_to(50)
    assert idx.last_entry() == (900, 45)
    idx.close()


def test_time_index_keeps_one_slot_for_roll(tmp_path):
    idx = TimeIndex(str(tmp_path / "t.timeindex"), 0, 12 * 3)
    idx.maybe_append(1, 1)
    idx.maybe_append(2, 2)
    assert idx.is_full()
    idx.maybe_append(3, 3, skip_full_check=True)
    assert idx.entries == 3
    idx.close()


# ---------------------------------------------------------------- checkpoints
def test_offsets_checkpoint_round_trip_and_bytes(tmp_path):
    path = str(tmp_path / "recovery-point-offset-checkpoint")
    offsets = {("orders", 0): 120, ("my-topic.x", 3): 7}
    write_offsets_checkpoint(path, offsets)
    assert open(path).read() == "0\n2\norders 0 120\nmy-topic.x 3 7\n"
    assert read_offsets_checkpoint(path) == offsets
    assert read_offsets_checkpoint(str(tmp_path / "absent")) == {}
    with open(path, "w") as f:
        f.write("0\n3\norders 0 1\n")
    with pytest.raises(CorruptCheckpointError):
        read_checkpoint(path)


def test_leader_epoch_checkpoint_round_trip(tmp_path):
    d = str(tmp_path)
    cache = LeaderEpochCache(d)
    cache.assign(0, 0)
    cache.assign(0, 5)  # same epoch later: no change
    cache.assign(2, 10)
    cache.assign(5, 30)
    text = open(os.path.join(d, "leader-epoch-checkpoint")).read()
    assert text == "0\n3\n0 0\n2 10\n5 30\n"
    again = LeaderEpochCache(d)
    assert again.entries == cache.entries
    assert again.end_offset_for(0, 100) == (0, 10)
    assert again.end_offset_for(1, 100) == (0, 10)  # unknown epoch: largest epoch below it
    assert again.end_offset_for(2, 100) == (2, 30)
    assert again.end_offset_for(5, 100) == (5, 100)
    assert again.end_offset_for(6, 100) == (-1, -1)
    again.truncate_from_end(30)
    assert again.latest_epoch == 2
    again.truncate_from_start(12)
    assert again.entries == [(2, 12)]
    # A new epoch starting below existing entries removes them (non-monotonic).
    again.assign(7, 11)
    assert again.entries == [(7, 11)]


def test_partition_metadata_matches_kafka(tmp_path):
    tid = uuid.UUID("4a3a6f5e-1b2c-4d5e-8f90-123456789abc")
    write_partition_metadata(str(tmp_path), tid)
    text = open(tmp_path / "partition.metadata").read()
    assert text == f"version: 0\ntopic_id: {topic_id_to_str(tid)}\n"
    assert len(topic_id_to_str(tid)) == 22 and "=" not in topic_id_to_str(tid)
    assert topic_id_to_str(tid) == "SjpvXhssTV6PkBI0VniavA"
    assert topic_id_from_str("SjpvXhssTV6PkBI0VniavA") == tid
    assert read_partition_metadata(str(tmp_path)) == tid


# ---------------------------------------------------------------- producer snapshot
def test_producer_snapshot_layout():
    e = ProducerStateEntry(1234, 3, coordinator_epoch=-1, last_timestamp=99,
                           current_txn_first_offset=-1)
    e.batches.append(BatchMetadata(last_seq=9, last_offset=109, offset_delta=4, timestamp=99))
    data = encode_snapshot([e])
    version, crc, count = struct.unpack_from(">hIi", data)
    assert (version, count) == (1, 1)
    assert crc == crc32c.crc32c(data[6:])
    assert struct.unpack_from(">qhiqiqiq", data, 10) == (1234, 3, 9, 109, 4, 99, -1, -1)
    assert len(data) == 10 + 46  # int64+int16+int32+int64+int32+int64+int32+int64
    back = decode_snapshot(data)
    assert back[0].producer_epoch == 3 and back[0].last_seq == 9 and back[0].first_seq == 5
    broken = bytearray(data)
    broken[-1] ^= 1
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(bytes(broken))
