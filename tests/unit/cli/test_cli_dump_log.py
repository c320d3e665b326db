"""`kafkapy dump-log` on files we build: segments, damaged segments, indexes, metadata logs and
snapshots."""

from __future__ import annotations

import argparse
import struct
import uuid
from pathlib import Path
from types import MappingProxyType

from kafkapy.cli.dump_log import (
    dump_file,
    dump_records,
    index_sanity,
    read_offset_index,
    read_time_index,
    verify_offset_index,
    verify_time_index,
)
from kafkapy.metadata.image import FeaturesImage, MetadataImage
from kafkapy.metadata.records import TopicRecord, encode_record
from kafkapy.metadata.snapshot import write_snapshot
from kafkapy.raft.control import build_leader_change_batch
from kafkapy.raft.messages import SnapshotId
from kafkapy.records.builder import Record, build_batch

T0 = 1_700_000_000_000


def args(**kw: object) -> argparse.Namespace:
    base = dict(print_data_log=False, deep_iteration=False, cluster_metadata_decoder=False,
                index_sanity_check=False, verify_index_only=False, max_bytes=None, json=True)
    base.update(kw)
    return argparse.Namespace(**base)


def segment() -> bytes:
    first = build_batch([Record(b"k0", b"v0", (("h", b"x"),), T0), Record(None, b"v1", (), T0 + 5)],
                        base_offset=0, now_ms=T0, producer_id=7, producer_epoch=0, base_sequence=0,
                        partition_leader_epoch=3)
    second = build_batch([Record(b"k2", None, (), T0 + 9)], base_offset=2, now_ms=T0)
    return first + second


def test_batches_and_records_with_data():
    data = segment()
    dump = dump_records(data, records=True, print_data=True)
    assert dump["error"] is None and dump["valid_bytes"] == len(data)
    first, second = dump["batches"]
    assert (first["base_offset"], first["last_offset"], first["count"]) == (0, 1, 2)
    assert (first["producer_id"], first["base_sequence"], first["last_sequence"]) == (7, 0, 1)
    assert first["partition_leader_epoch"] == 3 and first["is_valid"] and first["position"] == 0
    assert second["position"] == first["size"]
    recs = first["records"] + second["records"]
    assert [r["offset"] for r in recs] == [0, 1, 2]
    assert [(r["key"], r["payload"]) for r in recs] == [("k0", "v0"), (None, "v1"), ("k2", None)]
    assert recs[0]["headers"] == {"h": "x"} and recs[2]["value_size"] == -1
    assert [r["timestamp"] for r in recs] == [T0, T0 + 5, T0 + 9]


def test_without_print_data_records_carry_no_payload():
    dump = dump_records(segment(), records=True)
    assert all("payload" not in r for b in dump["batches"] for r in b["records"])
    assert "records" not in dump_records(segment())["batches"][0]


def test_a_flipped_byte_fails_the_crc_and_a_cut_batch_is_reported():
    data = bytearray(segment())
    data[70] ^= 0xFF
    dump = dump_records(bytes(data))
    assert [b["is_valid"] for b in dump["batches"]] == [False, True]
    cut = segment()[:-10]
    dump = dump_records(cut)
    assert len(dump["batches"]) == 1 and "incomplete batch" in dump["error"]


def test_garbage_header_ends_the_dump_with_a_position():
    data = segment() + b"\x00" * 8 + struct.pack(">i", 3) + b"\x00" * 60
    dump = dump_records(data)
    assert len(dump["batches"]) == 2 and "CORRUPT_MESSAGE" in dump["error"]


def test_a_segment_file_and_its_indexes(tmp_path: Path):
    log = tmp_path / "00000000000000000100.log"
    b1 = build_batch([Record(None, b"a", (), T0)], base_offset=100, now_ms=T0)
    b2 = build_batch([Record(None, b"b", (), T0 + 1), Record(None, b"c", (), T0 + 7)], base_offset=101, now_ms=T0)
    log.write_bytes(b1 + b2)
    # The offset index names the batch that ends at offset 102 (relative 2) at its position;
    # preallocated zero slots follow.
    (tmp_path / "00000000000000000100.index").write_bytes(struct.pack(">ii", 2, len(b1)) + b"\0" * 16)
    (tmp_path / "00000000000000000100.timeindex").write_bytes(struct.pack(">qi", T0 + 7, 2) + b"\0" * 24)
    [dumped_log] = [dump_file(log, args())]
    assert dumped_log["base_offset"] == 100 and len(dumped_log["batches"]) == 2
    index = dump_file(tmp_path / "00000000000000000100.index", args())
    assert index["entries"] == [[102, len(b1)]] and index["sanity_problems"] == [] and index["mismatches"] == []
    times = dump_file(tmp_path / "00000000000000000100.timeindex", args())
    assert times["entries"] == [[T0 + 7, 102]] and times["mismatches"] == []


def test_index_mismatches_and_disorder_are_found():
    batches = dump_records(segment())["batches"]
    assert verify_offset_index([(1, 0)], batches) == []
    assert "ends at offset 1" in verify_offset_index([(0, 0)], batches)[0]
    assert "no batch starts" in verify_offset_index([(2, 5)], batches)[0]
    assert verify_time_index([(T0 + 5, 1)], batches) == []
    assert "in no batch" in verify_time_index([(T0, 9)], batches)[0]
    assert "above the log's largest" in verify_time_index([(T0 + 99, 0)], batches)[0]
    raw = struct.pack(">ii", 5, 100) + struct.pack(">ii", 3, 200)
    entries = read_offset_index(raw, 0)
    assert entries == [(5, 100), (3, 200)]
    assert "out of order" in index_sanity("offset_index", raw, entries, 0)[0]
    assert "not a multiple" in index_sanity("offset_index", raw + b"\0", entries, 0)[0]
    assert read_time_index(struct.pack(">qi", T0, 1) + b"\0" * 12, 10) == [(T0, 11)]


def test_a_metadata_log_decodes_record_types_and_control_records(tmp_path: Path):
    meta_dir = tmp_path / "__cluster_metadata-0"
    meta_dir.mkdir()
    topic_id = uuid.UUID(int=42)
    leader = build_leader_change_batch(base_offset=0, epoch=4, leader_id=1, voters=(1, 2, 3),
                                       granting_voters=(1, 2), now_ms=T0)
    data = build_batch([Record(None, encode_record(TopicRecord("orders", topic_id)), (), T0)], base_offset=1,
                       now_ms=T0, partition_leader_epoch=4)
    log = meta_dir / "00000000000000000000.log"
    log.write_bytes(leader + data)
    dump = dump_file(log, args())
    [[control], [record]] = [b["records"] for b in dump["batches"]]
    assert control["control"] == {"type": "LEADER_CHANGE",
                                  "data": {"leader_id": 1, "voters": [1, 2, 3], "granting_voters": [1, 2]}}
    assert record["metadata"] == {"type": "TOPIC_RECORD", "version": 0,
                                  "data": {"name": "orders", "topic_id": str(topic_id)}}
    # Outside the metadata directory, only with --cluster-metadata-decoder.
    other = tmp_path / "00000000000000000000.log"
    other.write_bytes(leader + data)
    assert "records" not in dump_file(other, args())["batches"][1]
    assert dump_file(other, args(cluster_metadata_decoder=True))["batches"][1]["records"][0]["metadata"]["type"] \
        == "TOPIC_RECORD"


def test_a_snapshot_is_decoded_and_checked_whole(tmp_path: Path):
    image = MetadataImage(cluster_id="c", offset=9, features=FeaturesImage(MappingProxyType({"metadata.version": 21})))
    path = tmp_path / "00000000000000000010-0000000002.checkpoint"
    data = write_snapshot(image, SnapshotId(10, 2), now_ms=T0)
    path.write_bytes(data)
    dump = dump_file(path, args())
    types = [r.get("metadata", r.get("control", {})).get("type") for b in dump["batches"] for r in b["records"]]
    assert types[0] == "SNAPSHOT_HEADER" and types[-1] == "SNAPSHOT_FOOTER" and "FEATURE_LEVEL_RECORD" in types
    assert dump["snapshot"]["complete"] and dump["snapshot"]["epoch"] == 2
    path.write_bytes(data[:-20])
    cut = dump_file(path, args())
    assert not cut["snapshot"]["complete"] and cut["error"]
