"""The RemoteStorageManager contract (KIP-405) and the factory that picks a backend from broker props.

A RemoteStorageManager (RSM) keeps the bytes of closed log segments outside the broker: the
``.log`` file, its offset and time indexes, the optional transaction index, the producer-state
snapshot and the leader-epoch checkpoint as of the segment's end. It knows nothing of offsets or
leaders; which segments exist and in what state is the RemoteLogMetadataManager's business
(kafkapy/tiered/remote_metadata.py). The calls block on I/O: the broker runs them on a worker
thread, never on the Trio event loop.
"""

from __future__ import annotations

import abc
import enum
import importlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import BinaryIO

from kafkapy.log.partition_metadata import topic_id_to_str
from kafkapy.tiered.remote_metadata import RemoteLogSegmentId

# Broker props, with Kafka's names (RemoteLogManagerConfig).
REMOTE_LOG_STORAGE_SYSTEM_ENABLE = "remote.log.storage.system.enable"
REMOTE_STORAGE_MANAGER_CLASS_NAME = "remote.log.storage.manager.class.name"
REMOTE_STORAGE_MANAGER_CONFIG_PREFIX = "remote.log.storage.manager.impl.prefix"
DEFAULT_REMOTE_STORAGE_MANAGER_CONFIG_PREFIX = "rsm.config."
# Key (after the prefix is stripped) naming the local-dir backend's root: Kafka's LocalTieredStorage
# reads the same ``dir`` key, so ``rsm.config.dir`` means the same thing to both.
LOCAL_DIR_CONFIG = "dir"
# Where the local-dir backend lives when nothing says otherwise: beside the first log dir, so it
# is on the same disk the operator already provisioned, yet outside any log dir the LogManager scans.
DEFAULT_LOCAL_DIR_NAME = "kafkapy-remote-storage"


class RemoteStorageError(Exception):
    """A remote store failed (Kafka's RemoteStorageException); the caller may retry."""


class RemoteResourceNotFoundError(RemoteStorageError):
    """The segment or index asked for is not in the store (Kafka's RemoteResourceNotFoundException)."""


class IndexType(enum.Enum):
    """The per-segment files besides the ``.log`` (Kafka's RemoteStorageManager.IndexType)."""

    OFFSET = "OFFSET"
    TIMESTAMP = "TIMESTAMP"
    PRODUCER_SNAPSHOT = "PRODUCER_SNAPSHOT"
    TRANSACTION = "TRANSACTION"
    LEADER_EPOCH = "LEADER_EPOCH"


class ObjectKind(enum.Enum):
    """One stored object of a segment; the value is the suffix of its object name."""

    LOG = "log"
    OFFSET_INDEX = "index"
    TIME_INDEX = "timeindex"
    TRANSACTION_INDEX = "txnindex"
    PRODUCER_SNAPSHOT = "snapshot"
    # Kafka's LocalTieredStorage names this one ``.leader_epoch_checkpoint``; we keep its spelling.
    LEADER_EPOCH_CHECKPOINT = "leader_epoch_checkpoint"
    # Written last: a segment without it is an unfinished upload and does not exist for readers.
    MANIFEST = "manifest"


INDEX_OBJECT_KIND = {
    IndexType.OFFSET: ObjectKind.OFFSET_INDEX,
    IndexType.TIMESTAMP: ObjectKind.TIME_INDEX,
    IndexType.PRODUCER_SNAPSHOT: ObjectKind.PRODUCER_SNAPSHOT,
    IndexType.TRANSACTION: ObjectKind.TRANSACTION_INDEX,
    IndexType.LEADER_EPOCH: ObjectKind.LEADER_EPOCH_CHECKPOINT,
}


def partition_dir(segment: RemoteLogSegmentId) -> str:
    """``<topic>-<partition>-<topic id>``: the folder (or key level) of a partition's objects."""
    tp = segment.topic_id_partition
    return f"{tp.topic}-{tp.partition}-{topic_id_to_str(tp.topic_id)}"


def object_name(segment: RemoteLogSegmentId, kind: ObjectKind) -> str:
    """``<segment id>.<kind>``, ids in Kafka's URL-safe base64 form (which never contains a dot).
    A fresh segment id is drawn for every copy attempt, so two uploads never share objects."""
    return f"{topic_id_to_str(segment.id)}.{kind.value}"


def object_prefix(segment: RemoteLogSegmentId) -> str:
    """The name prefix every object of this segment shares, temp files included."""
    return f"{topic_id_to_str(segment.id)}."


@dataclass(frozen=True)
class LogSegmentData:
    """The files of one closed segment to upload (Kafka's LogSegmentData).

    The leader-epoch checkpoint arrives as bytes, not a path: the broker renders the cache as of the
    segment's end, which differs from the partition's live checkpoint file.
    """

    log_segment: str | os.PathLike[str]
    offset_index: str | os.PathLike[str]
    time_index: str | os.PathLike[str]
    transaction_index: str | os.PathLike[str] | None
    producer_snapshot: str | os.PathLike[str]
    leader_epoch_index: bytes

    def files(self) -> list[tuple[ObjectKind, str | os.PathLike[str]]]:
        """The file-backed objects, in upload order (the log first: it is the bulk of the work)."""
        out: list[tuple[ObjectKind, str | os.PathLike[str]]] = [
            (ObjectKind.LOG, self.log_segment),
            (ObjectKind.OFFSET_INDEX, self.offset_index),
            (ObjectKind.TIME_INDEX, self.time_index),
        ]
        if self.transaction_index is not None:
            out.append((ObjectKind.TRANSACTION_INDEX, self.transaction_index))
        out.append((ObjectKind.PRODUCER_SNAPSHOT, self.producer_snapshot))
        return out


class RemoteStorageManager(abc.ABC):
    """Copies, serves and deletes the objects of remote log segments (KIP-405's RemoteStorageManager).

    Implementations are built from the RSM props (``rsm.config.*`` with the prefix stripped) and
    must make ``copy_log_segment_data`` and ``delete_log_segment_data`` idempotent: the broker
    retries both after failures and crashes.
    """

    @abc.abstractmethod
    def copy_log_segment_data(self, segment: RemoteLogSegmentId, data: LogSegmentData) -> bytes | None:
        """Store every object of the segment, overwriting leftovers of an earlier attempt.

        The segment becomes fetchable only once all of it is stored. Returns custom metadata for
        the segment's remote metadata record (Kafka's CustomMetadata), or None.
        """

    @abc.abstractmethod
    def fetch_log_segment(self, segment: RemoteLogSegmentId, start_position: int,
                          end_position: int | None = None) -> BinaryIO:
        """A stream of the ``.log`` bytes from ``start_position`` to ``end_position`` INCLUSIVE
        (Kafka's convention), or to the end of the segment when it is None or beyond the end.

        Raises RemoteResourceNotFoundError when the segment is not (fully) stored.
        """

    @abc.abstractmethod
    def fetch_index(self, segment: RemoteLogSegmentId, index_type: IndexType) -> BinaryIO:
        """A stream of one index. A segment with no transaction index raises
        RemoteResourceNotFoundError for TRANSACTION, as Kafka specifies."""

    @abc.abstractmethod
    def delete_log_segment_data(self, segment: RemoteLogSegmentId) -> None:
        """Remove every object of the segment; a segment already (partly) gone is not an error."""

    def close(self) -> None:
        """Release clients and handles. The default has nothing to release."""


def encode_manifest(segment: RemoteLogSegmentId, sizes: Mapping[ObjectKind, int]) -> bytes:
    """The marker object's body: which objects the segment has and their sizes.

    Readers learn from it whether a transaction index exists and where the log ends (so a ranged
    read past the end needs no extra round trip), and a torn upload is told apart from a whole one.
    """
    body = {
        "version": 1,
        "topic": segment.topic_id_partition.topic,
        "topic_id": topic_id_to_str(segment.topic_id_partition.topic_id),
        "partition": segment.topic_id_partition.partition,
        "segment_id": topic_id_to_str(segment.id),
        "objects": {kind.value: size for kind, size in sizes.items()},
    }
    return json.dumps(body, sort_keys=True).encode()


def decode_manifest(raw: bytes) -> dict[ObjectKind, int]:
    """Object sizes by kind from a marker body; a body we cannot read is a storage error."""
    try:
        body = json.loads(raw)
        return {ObjectKind(k): int(v) for k, v in body["objects"].items()}
    except (ValueError, KeyError, TypeError) as e:
        raise RemoteStorageError(f"unreadable segment manifest: {e}") from e


def check_range(start_position: int, end_position: int | None) -> None:
    """Reject ranges no backend can serve, with the same message everywhere."""
    if start_position < 0:
        raise ValueError(f"start_position must be >= 0, got {start_position}")
    if end_position is not None and end_position < start_position:
        raise ValueError(f"end_position {end_position} is before start_position {start_position}")


def rsm_props(props: Mapping[str, str]) -> dict[str, str]:
    """The props handed to an RSM: those under the RSM prefix, prefix stripped, plus ``broker.id``
    (Kafka's RemoteLogManager adds the broker id the same way)."""
    prefix = props.get(REMOTE_STORAGE_MANAGER_CONFIG_PREFIX, DEFAULT_REMOTE_STORAGE_MANAGER_CONFIG_PREFIX)
    out = {k[len(prefix):]: v for k, v in props.items() if k.startswith(prefix)}
    for id_key in ("node.id", "broker.id"):
        if id_key in props and "broker.id" not in out:
            out["broker.id"] = str(props[id_key])
    return out


def load_class(name: str) -> type:
    """Import ``module:Class`` or ``module.Class``."""
    module_name, sep, attr = name.partition(":")
    if not sep:
        module_name, _, attr = name.rpartition(".")
    if not module_name or not attr:
        raise ValueError(f"{REMOTE_STORAGE_MANAGER_CLASS_NAME}={name!r} is not 'module:Class' or 'module.Class'")
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"{REMOTE_STORAGE_MANAGER_CLASS_NAME}={name!r} cannot be loaded: {e}") from e
    if not isinstance(cls, type):
        raise ValueError(f"{REMOTE_STORAGE_MANAGER_CLASS_NAME}={name!r} is not a class")
    return cls


def _is_true(value: str | None) -> bool:
    return value is not None and str(value).strip().lower() == "true"


def remote_storage_from_config(props: Mapping[str, str],
                               log_dirs: Sequence[str] | str) -> RemoteStorageManager | None:
    """The broker's RSM, or None when tiered storage is off (``remote.log.storage.system.enable``).

    ``remote.log.storage.manager.class.name`` names the backend; unset, kafkapy uses the local-dir
    backend rooted at ``rsm.config.dir`` or ``<first log dir>/../kafkapy-remote-storage``.
    """
    if not _is_true(props.get(REMOTE_LOG_STORAGE_SYSTEM_ENABLE)):
        return None
    config = rsm_props(props)
    class_name = (props.get(REMOTE_STORAGE_MANAGER_CLASS_NAME) or "").strip()
    if class_name:
        cls = load_class(class_name)
    else:
        from kafkapy.tiered.local_dir_storage import LocalDirRemoteStorage

        cls = LocalDirRemoteStorage
        if not config.get(LOCAL_DIR_CONFIG):
            config[LOCAL_DIR_CONFIG] = default_local_dir(log_dirs)
    manager = cls(config)
    if not isinstance(manager, RemoteStorageManager):
        raise ValueError(f"{REMOTE_STORAGE_MANAGER_CLASS_NAME}={class_name!r} is not a RemoteStorageManager")
    return manager


def default_local_dir(log_dirs: Sequence[str] | str) -> str:
    """``<first log dir>/../kafkapy-remote-storage``, as an absolute path."""
    dirs = [d.strip() for d in log_dirs.split(",")] if isinstance(log_dirs, str) else list(log_dirs)
    dirs = [d for d in dirs if d]
    if not dirs:
        raise ValueError("no log dir to place the local remote storage beside; set rsm.config.dir")
    first = os.path.abspath(dirs[0]).rstrip(os.sep) or os.sep
    return os.path.join(os.path.dirname(first), DEFAULT_LOCAL_DIR_NAME)


__all__ = [
    "DEFAULT_LOCAL_DIR_NAME", "INDEX_OBJECT_KIND", "IndexType", "LogSegmentData", "ObjectKind",
    "RemoteResourceNotFoundError", "RemoteStorageError", "RemoteStorageManager",
    "object_name", "object_prefix", "partition_dir",
    "check_range", "decode_manifest", "default_local_dir", "encode_manifest", "load_class",
    "remote_storage_from_config", "rsm_props",
]
