"""File and directory names of a partition log, exactly as Apache Kafka lays them out.

A partition lives in ``<log.dir>/<topic>-<partition>/``. Each segment is a set of files sharing
one name, the segment's base offset zero-padded to 20 digits (``00000000000000000000.log``), with
a suffix per kind. This module is the single place that knows those names.
"""

from __future__ import annotations

import os
import re

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
PRODUCER_SNAPSHOT_SUFFIX = ".snapshot"
# The files one segment consists of (the .txnindex only exists for transactional data).
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
# Suffixes appended to a whole file name while an operation is in flight. ``.deleted`` marks a
# segment file that left its log and waits for file.delete.delay.ms before being unlinked.
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
# A partition directory being deleted: ``<topic>-<partition>.<uuid hex>-delete``.
DELETE_DIR_SUFFIX = "-delete"
# A future replica (moving between log dirs): ``<topic>-<partition>.<uuid hex>-future``.
FUTURE_DIR_SUFFIX = "-future"
# A stray replica (KRaft) ``<topic>-<partition>.<uuid hex>-stray``.
STRAY_DIR_SUFFIX = "-stray"

# Per-log-dir files owned by the LogManager.
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
META_PROPERTIES = "meta.properties"
# Per-partition files.
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"

OFFSET_DIGITS = 20


def filename_prefix(offset: int) -> str:
    """The 20-digit zero-padded name Kafka gives a segment (or snapshot) starting at ``offset``."""
    return f"{offset:0{OFFSET_DIGITS}d}"


def log_file(dir: str, base_offset: int) -> str:
    return os.path.join(dir, filename_prefix(base_offset) + LOG_SUFFIX)


def index_file(dir: str, base_offset: int) -> str:
    return os.path.join(dir, filename_prefix(base_offset) + INDEX_SUFFIX)


def time_index_file(dir: str, base_offset: int) -> str:
    return os.path.join(dir, filename_prefix(base_offset) + TIME_INDEX_SUFFIX)


def txn_index_file(dir: str, base_offset: int) -> str:
    return os.path.join(dir, filename_prefix(base_offset) + TXN_INDEX_SUFFIX)


def snapshot_file(dir: str, offset: int) -> str:
    return os.path.join(dir, filename_prefix(offset) + PRODUCER_SNAPSHOT_SUFFIX)


def deleted_name(path: str) -> str:
    """The name a segment file takes while it waits to be unlinked (``<file>.deleted``)."""
    return path + DELETED_SUFFIX


def is_deleted_file(name: str) -> bool:
    return name.endswith(DELETED_SUFFIX)


def offset_from_filename(name: str) -> int:
    """The offset a segment/snapshot file name encodes (``00000000000000000042.log`` → 42)."""
    base = os.path.basename(name)
    return int(base[: base.index(".")])


def dir_name(topic: str, partition: int) -> str:
    """``<topic>-<partition>``, the directory name of a partition's log."""
    return f"{topic}-{partition}"


# Kafka's legal topic characters; a partition directory name is one of those, '-', digits.
_PARTITION_DIR = re.compile(r"^([a-zA-Z0-9._-]+)-(\d+)$")
_SPECIAL_DIR = re.compile(r"^([a-zA-Z0-9._-]+)-(\d+)\.([0-9a-fA-F]{32})(-delete|-future|-stray)$")


def parse_dir_name(name: str) -> tuple[str, int] | None:
    """Split a partition directory name into (topic, partition), or None if it is not one.

    The partition is after the *last* '-', since topic names may themselves contain '-' and '.'.
    Directories being deleted/moved (``<tp>.<uuid>-delete``) are not plain partition dirs and
    return None here; see :func:`parse_special_dir_name`.
    """
    m = _PARTITION_DIR.match(os.path.basename(name.rstrip("/")))
    if m is None:
        return None
    topic = m.group(1)
    if topic in (".", ".."):
        return None
    return topic, int(m.group(2))


def parse_special_dir_name(name: str) -> tuple[str, int, str, str] | None:
    """Parse ``<topic>-<p>.<uuidhex>-delete|-future|-stray`` → (topic, partition, uuid, suffix)."""
    m = _SPECIAL_DIR.match(os.path.basename(name.rstrip("/")))
    if m is None:
        return None
    return m.group(1), int(m.group(2)), m.group(3), m.group(4)


#: Longest file name most file systems take; a delete dir's name is cut to fit (as Kafka).
MAX_NAME_LENGTH = 255


def delete_dir_name(topic: str, partition: int, uuid_hex: str) -> str:
    """The name Kafka renames a partition dir to before removing it in the background,
    ``<topic>-<partition>.<uuid hex>-delete``, the topic cut short when the whole would not fit
    in a file name (a 249-character topic name leaves no room for the suffix)."""
    suffix = f"-{partition}.{uuid_hex}{DELETE_DIR_SUFFIX}"
    return topic[:MAX_NAME_LENGTH - len(suffix)] + suffix
