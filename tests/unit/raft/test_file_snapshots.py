"""FileSnapshotStore: Kafka's file names, atomic writes, leftovers, latest and delete_before."""

from __future__ import annotations

import errno
import os
import stat

import pytest

from kafkapy.raft import file_snapshots as fs
from kafkapy.raft.file_snapshots import (
    FileSnapshotStore,
    SnapshotPath,
    parse_snapshot_filename,
    snapshot_filename,
)
from kafkapy.raft.messages import SnapshotId
from kafkapy.raft.snapshot_store import MemorySnapshotStore, SnapshotNotStored, SnapshotStore


def _names(d) -> list[str]:
    return sorted(os.listdir(d))


# -- names --------------------------------------------------------------------------------------

def test_file_names_are_kafkas() -> None:
    assert snapshot_filename(SnapshotId(42, 3)) == "00000000000000000042-0000000003.checkpoint"
    assert snapshot_filename(SnapshotId(0, 0)) == "00000000000000000000-0000000000.checkpoint"
    big = SnapshotId(2**63 - 1, 2**31 - 1)
    assert snapshot_filename(big) == "9223372036854775807-2147483647.checkpoint".rjust(42, "0")
    assert parse_snapshot_filename(snapshot_filename(big)).snapshot_id == big


def test_parse_recognises_partial_and_deleted_files() -> None:
    sid = SnapshotId(42, 3)
    assert parse_snapshot_filename("00000000000000000042-0000000003.checkpoint") == SnapshotPath(
        "00000000000000000042-0000000003.checkpoint", sid, False, False)
    # Java's Files.createTempFile(dir, "<name>-", ".checkpoint.part") adds random digits.
    part = parse_snapshot_filename("00000000000000000042-0000000003-8812731.checkpoint.part")
    assert part is not None and part.snapshot_id == sid and part.partial and not part.deleted
    deleted = parse_snapshot_filename("00000000000000000042-0000000003.checkpoint.deleted")
    assert deleted is not None and deleted.deleted and not deleted.partial
    for other in ("00000000000000000042.log", "00000000000000000042.index", "quorum-state",
                  "leader-epoch-checkpoint", "partition.metadata", "x.checkpoint",
                  "0000000000000000004x-0000000003.checkpoint", "00000000000000000042_0000000003.checkpoint"):
        assert parse_snapshot_filename(other) is None, other


# -- write, read, latest ------------------------------------------------------------------------

def test_write_then_read_back(tmp_path) -> None:
    store = FileSnapshotStore(tmp_path / "__cluster_metadata-0")
    sid = SnapshotId(10, 2)
    assert store.read(sid) is None and store.latest() is None
    store.write(sid, b"snapshot bytes")
    assert _names(store.dir) == ["00000000000000000010-0000000002.checkpoint"]
    assert store.read(sid) == b"snapshot bytes"
    assert store.latest() == sid
    # Frozen read-only, as Kafka's FileRawSnapshotWriter.freeze leaves it.
    assert not os.stat(store.path(sid)).st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
    # Writing the same id again replaces it in one rename.
    store.write(sid, b"again")
    assert store.read(sid) == b"again" and _names(store.dir) == [snapshot_filename(sid)]


def test_latest_scans_the_directory_and_survives_reopen(tmp_path) -> None:
    store = FileSnapshotStore(tmp_path)
    for sid in (SnapshotId(5, 1), SnapshotId(30, 2), SnapshotId(12, 1), SnapshotId(30, 1)):
        store.write(sid, repr(sid).encode())
    assert store.latest() == SnapshotId(30, 2)
    assert store.snapshot_ids() == [SnapshotId(5, 1), SnapshotId(12, 1), SnapshotId(30, 1),
                                    SnapshotId(30, 2)]
    (tmp_path / "00000000000000000000.log").write_bytes(b"")  # the log's own files are ignored
    reopened = FileSnapshotStore(tmp_path)
    assert reopened.latest() == SnapshotId(30, 2)
    assert reopened.read(SnapshotId(12, 1)) == repr(SnapshotId(12, 1)).encode()


def test_leftover_part_file_is_ignored_and_cleaned(tmp_path) -> None:
    store = FileSnapshotStore(tmp_path)
    store.write(SnapshotId(10, 1), b"good")
    # A crash in the middle of writing a newer snapshot leaves its .part file behind.
    (tmp_path / "00000000000000000020-0000000001-123456.checkpoint.part").write_bytes(b"half")
    assert store.latest() == SnapshotId(10, 1)
    assert store.read(SnapshotId(20, 1)) is None
    (tmp_path / "00000000000000000005-0000000001.checkpoint.deleted").write_bytes(b"old")
    reopened = FileSnapshotStore(tmp_path)
    assert _names(tmp_path) == ["00000000000000000010-0000000001.checkpoint"]
    assert reopened.latest() == SnapshotId(10, 1)


def test_failed_write_leaves_nothing_visible(tmp_path, monkeypatch) -> None:
    store = FileSnapshotStore(tmp_path)
    store.write(SnapshotId(1, 1), b"first")

    def crash(src, dst):
        raise OSError("disk gone")

    monkeypatch.setattr(fs.os, "replace", crash)
    with pytest.raises(OSError):
        store.write(SnapshotId(2, 1), b"second")
    monkeypatch.undo()
    assert store.latest() == SnapshotId(1, 1)
    assert _names(tmp_path) == [snapshot_filename(SnapshotId(1, 1))]


def test_a_full_disk_stores_nothing_and_says_so(tmp_path, monkeypatch) -> None:
    store = FileSnapshotStore(tmp_path)
    store.write(SnapshotId(1, 1), b"first")

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(fs.os, "fsync", full)
    with pytest.raises(SnapshotNotStored, match="No space left on device"):
        store.write(SnapshotId(2, 1), b"second")
    monkeypatch.undo()
    assert store.latest() == SnapshotId(1, 1)
    assert _names(tmp_path) == [snapshot_filename(SnapshotId(1, 1))]


def test_write_is_fsynced_before_the_rename(tmp_path, monkeypatch) -> None:
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(fs.os, "fsync", lambda fd: (events.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(fs.os, "replace",
                        lambda a, b: (events.append(f"rename {os.path.basename(a).endswith('.part')}"),
                                      real_replace(a, b))[1])
    FileSnapshotStore(tmp_path).write(SnapshotId(3, 1), b"x")
    # data fsync, then the rename of the .part file, then the directory fsync
    assert events == ["fsync", "rename True", "fsync"]


# -- delete_before ------------------------------------------------------------------------------

def test_delete_before_renames_then_removes_older_snapshots(tmp_path, monkeypatch) -> None:
    store = FileSnapshotStore(tmp_path)
    for sid in (SnapshotId(5, 1), SnapshotId(12, 1), SnapshotId(20, 2), SnapshotId(31, 2)):
        store.write(sid, b"s")
    renames: list[tuple[str, str]] = []
    real_replace = os.replace
    monkeypatch.setattr(fs.os, "replace",
                        lambda a, b: (renames.append((os.path.basename(a), os.path.basename(b))),
                                      real_replace(a, b))[1])
    store.delete_before(SnapshotId(20, 2))
    assert store.snapshot_ids() == [SnapshotId(20, 2), SnapshotId(31, 2)]
    assert renames == [
        ("00000000000000000005-0000000001.checkpoint", "00000000000000000005-0000000001.checkpoint.deleted"),
        ("00000000000000000012-0000000001.checkpoint", "00000000000000000012-0000000001.checkpoint.deleted"),
    ]
    assert _names(tmp_path) == [snapshot_filename(SnapshotId(20, 2)), snapshot_filename(SnapshotId(31, 2))]
    store.delete_before(SnapshotId(20, 5))  # nothing older: no-op
    assert store.latest() == SnapshotId(31, 2)


def test_reader_keeps_its_bytes_while_a_snapshot_is_deleted(tmp_path) -> None:
    store = FileSnapshotStore(tmp_path)
    store.write(SnapshotId(5, 1), b"old snapshot")
    store.write(SnapshotId(9, 1), b"new snapshot")
    with open(store.path(SnapshotId(5, 1)), "rb") as reader:  # an in-flight FetchSnapshot
        store.delete_before(SnapshotId(9, 1))
        assert reader.read() == b"old snapshot"
    assert store.read(SnapshotId(5, 1)) is None


# -- as a SnapshotStore ---------------------------------------------------------------------------

def test_behaves_like_the_memory_store(tmp_path) -> None:
    stores: list[SnapshotStore] = [MemorySnapshotStore(), FileSnapshotStore(tmp_path)]
    ops = [("w", SnapshotId(3, 1), b"a"), ("w", SnapshotId(8, 1), b"b"), ("d", SnapshotId(8, 1), None),
           ("w", SnapshotId(15, 2), b"c"), ("w", SnapshotId(15, 2), b"c2"), ("d", SnapshotId(16, 2), None),
           ("w", SnapshotId(40, 3), b"d")]
    for op, sid, data in ops:
        for s in stores:
            if op == "w":
                s.write(sid, data)
            else:
                s.delete_before(sid)
        mem, disk = stores
        assert mem.latest() == disk.latest()
        for probe in (SnapshotId(3, 1), SnapshotId(8, 1), SnapshotId(15, 2), SnapshotId(40, 3)):
            assert mem.read(probe) == disk.read(probe)


def test_metadata_snapshot_round_trip_through_files(tmp_path) -> None:
    from types import MappingProxyType

    from kafkapy.metadata.image import FeaturesImage, MetadataImage
    from kafkapy.metadata.snapshot import image_from_snapshot, write_snapshot

    image = MetadataImage(cluster_id="c", offset=6,
                          features=FeaturesImage(MappingProxyType({"metadata.version": 21})))
    sid = SnapshotId(7, 2)
    FileSnapshotStore(tmp_path).write(sid, write_snapshot(image, sid, now_ms=1))
    store = FileSnapshotStore(tmp_path)  # a restart
    latest = store.latest()
    assert latest == sid
    assert image_from_snapshot(store.read(latest), latest, cluster_id="c") == image


def test_snapshots_share_the_metadata_partition_dir_with_its_log(tmp_path) -> None:
    """The node keeps both in ``__cluster_metadata-0``: recovering the log leaves snapshots be."""
    from kafkapy.log.config import LogConfig
    from kafkapy.log.partition_log import PartitionLog

    part_dir = tmp_path / "__cluster_metadata-0"
    log = PartitionLog.open(str(part_dir), LogConfig(), now_ms=0, recover=True)
    store = FileSnapshotStore(part_dir)
    store.write(SnapshotId(0, 0), b"bootstrap-ish")
    log.close()
    log = PartitionLog.open(str(part_dir), LogConfig(), now_ms=0, recover=True)
    log.close()
    assert FileSnapshotStore(part_dir).latest() == SnapshotId(0, 0)
