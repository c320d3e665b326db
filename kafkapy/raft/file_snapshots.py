"""Snapshots as files in the metadata partition's directory, named and written as Kafka does.

A snapshot ``SnapshotId(end_offset, epoch)`` lives in ``__cluster_metadata-0/`` as
``<end offset, 20 digits>-<epoch, 10 digits>.checkpoint`` (Kafka's ``Snapshots``). Writing goes
through ``<that name>-<random>.checkpoint.part``: the bytes are written and fsynced, then the file
is made read-only and renamed into place and the directory fsynced, so a crash leaves either no
snapshot or a complete one; a leftover ``.part`` is only ever a dead write and is deleted at load.
Deleting renames ``.checkpoint`` to ``.checkpoint.deleted`` first (Kafka's ``markForDelete``), so
the snapshot stops being visible in one atomic step before its bytes go.

This is the one module of ``raft/`` that touches the disk (with ``quorum_state``); it does so only
through ``os``.
"""

from __future__ import annotations

import os
import tempfile
from typing import NamedTuple

from kafkapy.durable import fsync_dir, is_space_error
from kafkapy.raft.messages import SnapshotId
from kafkapy.raft.snapshot_store import SnapshotNotStored

SUFFIX = ".checkpoint"
PARTIAL_SUFFIX = SUFFIX + ".part"
DELETE_SUFFIX = SUFFIX + ".deleted"
OFFSET_WIDTH = 20
EPOCH_WIDTH = 10


def snapshot_filename(snapshot_id: SnapshotId) -> str:
    """``00000000000000000042-0000000003.checkpoint`` for ``SnapshotId(42, 3)``."""
    return f"{snapshot_id.end_offset:0{OFFSET_WIDTH}d}-{snapshot_id.epoch:0{EPOCH_WIDTH}d}{SUFFIX}"


class SnapshotPath(NamedTuple):
    """A file name Kafka's ``Snapshots.parse`` recognises: its id, and whether it is a partial
    write (``.checkpoint.part``) or marked for deletion (``.checkpoint.deleted``)."""

    name: str
    snapshot_id: SnapshotId
    partial: bool
    deleted: bool


def parse_snapshot_filename(name: str) -> SnapshotPath | None:
    """The snapshot a file name stands for, or None for any other file."""
    partial = name.endswith(PARTIAL_SUFFIX)
    deleted = name.endswith(DELETE_SUFFIX)
    if not (partial or deleted or name.endswith(SUFFIX)):
        return None
    offset_text = name[:OFFSET_WIDTH]
    epoch_text = name[OFFSET_WIDTH + 1:OFFSET_WIDTH + 1 + EPOCH_WIDTH]
    if (len(name) < OFFSET_WIDTH + 1 + EPOCH_WIDTH or name[OFFSET_WIDTH] != "-"
            or not offset_text.isdigit() or not epoch_text.isdigit()):
        return None
    return SnapshotPath(name, SnapshotId(int(offset_text), int(epoch_text)), partial, deleted)


class FileSnapshotStore:
    """``SnapshotStore`` over a partition directory, in Kafka's on-disk layout.

    Opening the store creates the directory if needed and deletes leftovers of interrupted
    work: ``.checkpoint.part`` files (a write that never completed) and ``.checkpoint.deleted``
    files (a deletion that never finished), as ``KafkaMetadataLog.recoverSnapshots`` does.
    Snapshots below the log start offset are the log's business (``RaftLog.start`` trims them
    through ``delete_before``).
    """

    def __init__(self, partition_dir: str | os.PathLike[str]) -> None:
        self.dir = os.fspath(partition_dir)
        os.makedirs(self.dir, exist_ok=True)
        removed = False
        for name in os.listdir(self.dir):
            parsed = parse_snapshot_filename(name)
            if parsed is not None and (parsed.partial or parsed.deleted):
                os.remove(os.path.join(self.dir, name))
                removed = True
        if removed:
            fsync_dir(self.dir)

    def path(self, snapshot_id: SnapshotId) -> str:
        """Where snapshot ``snapshot_id`` lives once complete."""
        return os.path.join(self.dir, snapshot_filename(snapshot_id))

    def snapshot_ids(self) -> list[SnapshotId]:
        """Every complete snapshot in the directory, oldest first."""
        ids = []
        for name in os.listdir(self.dir):
            parsed = parse_snapshot_filename(name)
            if parsed is not None and not parsed.partial and not parsed.deleted:
                ids.append(parsed.snapshot_id)
        return sorted(ids, key=lambda s: (s.end_offset, s.epoch))

    def write(self, snapshot_id: SnapshotId, data: bytes) -> None:
        """Store a complete snapshot; it is durable, and visible, only when this returns. An
        existing snapshot with the same id is replaced in one rename."""
        prefix = snapshot_filename(snapshot_id)[:-len(SUFFIX)] + "-"
        fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=PARTIAL_SUFFIX, dir=self.dir)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            # Kafka freezes a snapshot read-only before moving it into place.
            os.chmod(tmp, 0o444)
            os.replace(tmp, self.path(snapshot_id))
        except BaseException as exc:
            try:
                os.remove(tmp)
            except FileNotFoundError:
                pass
            if is_space_error(exc):
                raise SnapshotNotStored(f"{self.path(snapshot_id)}: {exc.strerror}") from exc
            raise
        fsync_dir(self.dir)

    def read(self, snapshot_id: SnapshotId) -> bytes | None:
        try:
            with open(self.path(snapshot_id), "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def latest(self) -> SnapshotId | None:
        """The newest complete snapshot, by (end offset, epoch), found by scanning the directory."""
        ids = self.snapshot_ids()
        return ids[-1] if ids else None

    def delete_before(self, snapshot_id: SnapshotId) -> None:
        """Delete the snapshots ending before ``snapshot_id``'s end offset: each is renamed to
        ``.checkpoint.deleted`` (so it is gone from ``latest`` and ``read`` at once) and then
        removed. Kafka removes the renamed files after ``file.delete.delay.ms`` so that
        in-flight FetchSnapshot reads can finish; here a reader holding the file open keeps its
        bytes anyway (POSIX unlink), so the removal follows immediately, and a crash in between
        leaves ``.deleted`` files that the next open clears."""
        doomed = [s for s in self.snapshot_ids() if s.end_offset < snapshot_id.end_offset]
        if not doomed:
            return
        marked = []
        for sid in doomed:
            path = self.path(sid)
            deleted_path = path[:-len(SUFFIX)] + DELETE_SUFFIX
            os.replace(path, deleted_path)
            marked.append(deleted_path)
        fsync_dir(self.dir)
        for path in marked:
            os.remove(path)
        fsync_dir(self.dir)


__all__ = [
    "DELETE_SUFFIX", "FileSnapshotStore", "PARTIAL_SUFFIX", "SUFFIX", "SnapshotPath",
    "parse_snapshot_filename", "snapshot_filename",
]
