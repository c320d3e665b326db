"""A RemoteStorageManager over a local (or mounted network) directory.

Objects are files: ``<root>/<topic>-<partition>-<topic id>/<segment id>.<kind>``. It serves single
-node setups and tests, and any shared filesystem (NFS, a FUSE-mounted bucket) an operator points it
at. Uploads survive crashes: every object goes to a temp file, is fsynced and renamed into place,
and the segment's manifest is renamed in last, so until then readers see no segment at all.
"""

from __future__ import annotations

import io
import os
import shutil
from collections.abc import Mapping
from typing import BinaryIO, cast

from kafkapy.durable import fsync_dir
from kafkapy.tiered.remote_metadata import RemoteLogSegmentId
from kafkapy.tiered.storage import (
    INDEX_OBJECT_KIND,
    LOCAL_DIR_CONFIG,
    IndexType,
    LogSegmentData,
    ObjectKind,
    RemoteResourceNotFoundError,
    RemoteStorageError,
    RemoteStorageManager,
    check_range,
    decode_manifest,
    encode_manifest,
    object_name,
    object_prefix,
    partition_dir,
)

# Suffix of an object being written. It keeps the segment's name prefix, so deleting a segment
# sweeps up the leftovers of a crashed upload too, and a retry reuses (truncates) the same name.
TEMP_SUFFIX = ".tmp"


class LocalDirRemoteStorage(RemoteStorageManager):
    """Remote segments as files under one root directory (props: ``dir``, i.e. ``rsm.config.dir``)."""

    def __init__(self, props: Mapping[str, str]) -> None:
        root = props.get(LOCAL_DIR_CONFIG)
        if not root:
            raise ValueError(f"the local-dir remote storage needs rsm.config.{LOCAL_DIR_CONFIG}")
        self._root = os.path.abspath(root)
        try:
            os.makedirs(self._root, exist_ok=True)
        except OSError as e:
            raise RemoteStorageError(f"cannot create remote storage dir {self._root}: {e}") from e

    @classmethod
    def at(cls, root: str | os.PathLike[str]) -> "LocalDirRemoteStorage":
        """A store rooted at ``root`` (a shorthand for tests and tools)."""
        return cls({LOCAL_DIR_CONFIG: os.fspath(root)})

    @property
    def root(self) -> str:
        return self._root

    def partition_path(self, segment: RemoteLogSegmentId) -> str:
        return os.path.join(self._root, partition_dir(segment))

    def object_path(self, segment: RemoteLogSegmentId, kind: ObjectKind) -> str:
        return os.path.join(self.partition_path(segment), object_name(segment, kind))

    # -- copy -------------------------------------------------------------------------------

    def copy_log_segment_data(self, segment: RemoteLogSegmentId, data: LogSegmentData) -> bytes | None:
        directory = self.partition_path(segment)
        try:
            if not os.path.isdir(directory):
                os.makedirs(directory, exist_ok=True)
                fsync_dir(self._root)
            # A re-copy hides the segment first: otherwise a reader could get the old log with a new
            # index between two renames. Copies are rare and retried; consistency wins.
            self._unlink(self.object_path(segment, ObjectKind.MANIFEST))
            sizes: dict[ObjectKind, int] = {}
            for kind, source in data.files():
                sizes[kind] = self._put_file(self.object_path(segment, kind), source)
            sizes[ObjectKind.LEADER_EPOCH_CHECKPOINT] = self._put_bytes(
                self.object_path(segment, ObjectKind.LEADER_EPOCH_CHECKPOINT), bytes(data.leader_epoch_index))
            # The renames above must be durable before the manifest's is, or a crash could keep
            # the manifest while losing an object it vouches for.
            fsync_dir(directory)
            self._put_bytes(self.object_path(segment, ObjectKind.MANIFEST), encode_manifest(segment, sizes))
            fsync_dir(directory)
        except OSError as e:
            raise RemoteStorageError(f"copying segment {segment} to {directory} failed: {e}") from e
        return None

    @staticmethod
    def _put_file(target: str, source: str | os.PathLike[str]) -> int:
        temp = target + TEMP_SUFFIX
        shutil.copyfile(source, temp)  # sendfile/copy_file_range where the OS has them
        fd = os.open(temp, os.O_RDWR)
        try:
            os.fsync(fd)
            size = os.fstat(fd).st_size
        finally:
            os.close(fd)
        os.replace(temp, target)
        return size

    @staticmethod
    def _put_bytes(target: str, payload: bytes) -> int:
        temp = target + TEMP_SUFFIX
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, target)
        return len(payload)

    # -- fetch ------------------------------------------------------------------------------

    def _manifest(self, segment: RemoteLogSegmentId) -> dict[ObjectKind, int]:
        try:
            with open(self.object_path(segment, ObjectKind.MANIFEST), "rb") as f:
                return decode_manifest(f.read())
        except FileNotFoundError as e:
            raise RemoteResourceNotFoundError(f"segment {segment} is not in remote storage") from e
        except OSError as e:
            raise RemoteStorageError(f"reading the manifest of {segment} failed: {e}") from e

    def _open(self, segment: RemoteLogSegmentId, kind: ObjectKind) -> io.BufferedReader:
        try:
            return open(self.object_path(segment, kind), "rb")
        except FileNotFoundError as e:
            # The manifest was there a moment ago: a delete raced us.
            raise RemoteResourceNotFoundError(f"{kind.value} of segment {segment} is gone") from e
        except OSError as e:
            raise RemoteStorageError(f"opening {kind.value} of segment {segment} failed: {e}") from e

    def fetch_log_segment(self, segment: RemoteLogSegmentId, start_position: int,
                          end_position: int | None = None) -> BinaryIO:
        check_range(start_position, end_position)
        size = self._manifest(segment)[ObjectKind.LOG]
        last = size - 1 if end_position is None else min(end_position, size - 1)
        length = max(0, last - start_position + 1)
        f = self._open(segment, ObjectKind.LOG)
        try:
            f.seek(start_position)
        except OSError as e:
            f.close()
            raise RemoteStorageError(f"seeking in segment {segment} failed: {e}") from e
        return cast(BinaryIO, io.BufferedReader(_Window(f, length)))

    def fetch_index(self, segment: RemoteLogSegmentId, index_type: IndexType) -> BinaryIO:
        kind = INDEX_OBJECT_KIND[index_type]
        if kind not in self._manifest(segment):
            raise RemoteResourceNotFoundError(f"segment {segment} has no {index_type.name} index")
        return cast(BinaryIO, self._open(segment, kind))

    # -- delete -----------------------------------------------------------------------------

    def delete_log_segment_data(self, segment: RemoteLogSegmentId) -> None:
        directory = self.partition_path(segment)
        try:
            # Manifest first, durably: from then on the segment is gone for readers even if we
            # crash before the rest is removed (a retried delete finishes the job).
            if self._unlink(self.object_path(segment, ObjectKind.MANIFEST)):
                fsync_dir(directory)
            prefix = object_prefix(segment)
            try:
                names = os.listdir(directory)
            except FileNotFoundError:
                return
            for name in names:
                if name.startswith(prefix):
                    self._unlink(os.path.join(directory, name))
            fsync_dir(directory)
            try:
                os.rmdir(directory)  # the partition's last segment: leave no empty folder behind
                fsync_dir(self._root)
            except OSError:
                pass  # other segments remain (or a concurrent delete got there first)
        except OSError as e:
            raise RemoteStorageError(f"deleting segment {segment} failed: {e}") from e

    @staticmethod
    def _unlink(path: str) -> bool:
        try:
            os.unlink(path)
            return True
        except FileNotFoundError:
            return False


class _Window(io.RawIOBase):
    """At most ``length`` bytes of an open file from its current position; closes the file."""

    def __init__(self, f: io.BufferedReader, length: int) -> None:
        self._f = f
        self._left = length

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
        if self._left <= 0:
            return 0
        view = memoryview(buffer).cast("B")[: self._left]
        n = self._f.readinto(view) or 0
        self._left -= n
        return n

    def close(self) -> None:
        if not self.closed:
            self._f.close()
        super().close()


__all__ = ["LocalDirRemoteStorage"]
