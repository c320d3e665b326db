"""Creating many brand-new partition logs at once, off the event loop.

A CreateTopics of 10,000 partitions makes 10,000 directories, each with a segment, its two
indexes, ``partition.metadata`` and (on the leader) ``leader-epoch-checkpoint``. Made one by one
with an fsync per file, that is minutes of a slow disk. Here the files of a whole chunk are
written first without fsync (by two threads, whose waits on the file system overlap), then
fsynced together from a small thread pool: concurrent
fsyncs share the file system's journal commits, which is many times faster than one after the
other, and each file is still on disk before its log is handed back (and so before the
partition is served). The log dir itself is fsynced last, so the new directories' entries
survive a crash too.

Nothing here touches a ``LogManager``'s state: :func:`create_new_logs` may run on a worker
thread while the event loop serves requests; the manager adopts the results on the loop.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from kafkapy.log import files
from kafkapy.log.config import LogConfig
from kafkapy.log.partition_log import PartitionLog
from kafkapy.log.partition_metadata import write_partition_metadata
from kafkapy.log.storage_errors import storage_error
from kafkapy.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

#: Logs made at once. Making one is mostly waiting on the file system, which threads overlap,
#: but also some Python, which holds the interpreter lock: more threads would starve the event
#: loop of it (each of its system calls waits for the lock again).
CREATE_THREADS = 2
#: fsyncs in flight at once: enough to share journal commits; each holds the lock only briefly.
FSYNC_THREADS = 8


@dataclass(frozen=True)
class NewLog:
    """One log to create: where, for which topic id, with which settings. ``leader_epoch`` >= 0
    records that epoch as starting at offset 0 (this replica leads the partition from birth),
    so becoming leader later finds it already there and writes nothing."""

    topic: str
    partition: int
    topic_id: uuid.UUID
    config: LogConfig
    log_dir: str
    leader_epoch: int = -1

    @property
    def path(self) -> str:
        return os.path.join(self.log_dir, files.dir_name(self.topic, self.partition))


def create_new_logs(specs: Sequence[NewLog], *, now_ms: int, create_threads: int = CREATE_THREADS,
                    fsync_threads: int = FSYNC_THREADS) -> list[PartitionLog | KafkaError]:
    """Create every log of ``specs`` (none may exist yet); one result per spec, in order: the
    open log, or the KAFKA_STORAGE_ERROR that stopped it (the others go on)."""
    def create(spec: NewLog) -> PartitionLog | KafkaError:
        try:
            return _create_unsynced(spec, now_ms)
        except (OSError, ValueError, KafkaError) as exc:
            return _storage_error(spec, exc)

    def sync(item: tuple[int, PartitionLog]) -> tuple[int, OSError | None]:
        i, plog = item
        try:
            for path in _durable_paths(specs[i], plog):
                _fsync(path)
        except OSError as exc:
            return i, exc
        return i, None

    # Files first, then their fsyncs: the fsyncs find most of their work in a few journal
    # commits, which concurrent fsyncs share.
    with ThreadPoolExecutor(max_workers=max(1, min(create_threads, len(specs)))) as pool:
        results: list[PartitionLog | KafkaError] = list(pool.map(create, specs))
    created = [(i, r) for i, r in enumerate(results) if isinstance(r, PartitionLog)]
    if created:
        with ThreadPoolExecutor(max_workers=max(1, min(fsync_threads, len(created)))) as pool:
            for i, exc in pool.map(sync, created):
                if exc is not None:
                    plog = results[i]
                    assert isinstance(plog, PartitionLog)
                    _close_quietly(plog)
                    results[i] = _storage_error(specs[i], exc)
    for d in sorted({s.log_dir for s in specs}):
        try:
            _fsync(d)
        except OSError as exc:
            # Without it the new directories may vanish in a crash: fail them all.
            for i, spec in enumerate(specs):
                result = results[i]
                if spec.log_dir == d and isinstance(result, PartitionLog):
                    _close_quietly(result)
                    results[i] = _storage_error(spec, exc)
    return results


def _create_unsynced(spec: NewLog, now_ms: int) -> PartitionLog:
    path = spec.path
    if os.path.exists(path):
        # A leftover (a crash between creating and registering): open it as any existing log,
        # which checks its topic id.
        plog = PartitionLog.open(path, spec.config, now_ms=now_ms, recover=True,
                                 topic_id=spec.topic_id)
    else:
        os.makedirs(path)
        # partition.metadata first, unsynced; open() then finds the right topic id in place.
        write_partition_metadata(path, spec.topic_id, sync=False)
        plog = PartitionLog.open(path, spec.config, now_ms=now_ms, recover=False,
                                 topic_id=spec.topic_id)
    if spec.leader_epoch >= 0:
        plog.leader_epoch_cache.assign(spec.leader_epoch, plog.log_end_offset, sync=False)
    return plog


def _durable_paths(spec: NewLog, plog: PartitionLog) -> list[str]:
    paths = [os.path.join(plog.dir, files.PARTITION_METADATA)]
    if spec.leader_epoch >= 0:
        paths.append(os.path.join(plog.dir, files.LEADER_EPOCH_CHECKPOINT))
    paths.append(plog.dir)  # the files' own directory entries
    return paths


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _close_quietly(plog: PartitionLog) -> None:
    try:
        plog.close()
    except OSError as exc:  # the disk that failed the fsync may fail this too
        log.warning("Closing the new log in %s failed: %s", plog.dir, exc)


def _storage_error(spec: NewLog, exc: BaseException) -> KafkaError:
    if isinstance(exc, KafkaError):
        return exc
    if isinstance(exc, OSError):
        return storage_error(exc, "create the log of", spec.path)
    return KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                      f"cannot create the log of {spec.topic}-{spec.partition} in {spec.log_dir}: {exc}")


__all__ = ["CREATE_THREADS", "FSYNC_THREADS", "NewLog", "create_new_logs"]
