"""Partition logs on their way off the disk (Kafka's ``logsToBeDeleted``).

Deleting a partition takes two steps, as in Kafka. First the log manager forgets the log and its
directory is renamed to ``<topic>-<partition>.<uuid>-delete``; then, after file.delete.delay.ms,
the files go, so fetches already reading the log can finish. The event loop only forgets the log
and closes its files: the rename (tens of microseconds each, seconds for a topic of 10,000
partitions on a busy disk) and the removal run in a background pass on a worker thread, which
takes the renames at once. :class:`RenameHandOff` passes logs from the loop to that pass,
:class:`DeletionQueue` holds the renamed directories until they are due, and :func:`remove_tree`
removes one. Nothing here knows the log manager's maps.
"""

from __future__ import annotations

import errno
import heapq
import logging
import shutil
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Generic, TypeVar

_log = logging.getLogger("kafkapy.log.log_manager")  # the lines operators know, unchanged

K = TypeVar("K")
T = TypeVar("T")

#: Errors of a removal that mean the disk itself is failing: the dir goes offline, as any I/O
#: error during deletion does in Kafka. Others (a permission changed by hand, a busy mount point)
#: leave a leftover that the next start removes; the logs in that dir are not at risk.
OFFLINE_ERRNOS = frozenset({errno.EIO, errno.EROFS})


@dataclass(frozen=True, order=True)
class DeletedLog:
    """A partition directory renamed for deletion, removed at or after ``due_ms``."""

    due_ms: int
    seq: int
    topic: str = field(compare=False)
    partition: int = field(compare=False)
    path: str = field(compare=False)
    log_dir: str = field(compare=False)


class DeletionQueue:
    """Renamed partition directories ordered by when they are due.

    Thread-safe: the event loop adds, the background pass takes from a worker thread.
    """

    def __init__(self) -> None:
        self._heap: list[DeletedLog] = []
        self._seq = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._heap)

    def add(self, topic: str, partition: int, path: str, log_dir: str, due_ms: int) -> DeletedLog:
        with self._lock:
            self._seq += 1
            entry = DeletedLog(due_ms, self._seq, topic, partition, path, log_dir)
            heapq.heappush(self._heap, entry)
        return entry

    def next_due_ms(self) -> int | None:
        """When the first entry is due (None when the queue is empty)."""
        with self._lock:
            return self._heap[0].due_ms if self._heap else None

    def take_due(self, now_ms: int, limit: int) -> list[DeletedLog]:
        """Up to ``limit`` entries due at ``now_ms``, oldest first, out of the queue."""
        taken: list[DeletedLog] = []
        with self._lock:
            while self._heap and self._heap[0].due_ms <= now_ms and len(taken) < limit:
                taken.append(heapq.heappop(self._heap))
        return taken

    def entries(self) -> list[DeletedLog]:
        """Everything still waiting, oldest first."""
        with self._lock:
            return sorted(self._heap)


class RenameHandOff(Generic[K, T]):
    """Deleted logs whose directory still has its live name, handed from the event loop to the
    background pass, which renames them.

    Whoever needs a partition's name first renames its old directory: the pass (:meth:`next`,
    then :meth:`finished`), or the creation of a new log of the same partition (:meth:`claim`,
    which waits if the pass is renaming that very one). So no directory is renamed twice and
    no new log is made under a name still taken. Thread-safe.
    """

    def __init__(self) -> None:
        self._items: dict[K, T] = {}
        self._busy: K | None = None
        self._cond = threading.Condition()

    def __len__(self) -> int:
        return len(self._items)

    def put(self, key: K, item: T) -> T | None:
        """Hand ``item`` over; the item ``key`` had waiting, if any (the caller renames it)."""
        with self._cond:
            old = self._items.pop(key, None)
            self._items[key] = item
        return old

    def claim(self, key: K) -> T | None:
        """Take ``key``'s item to rename it oneself (None if there is none), once the pass is
        not renaming it."""
        with self._cond:
            item = self._items.pop(key, None)
            while self._busy == key:
                self._cond.wait(1.0)
        return item

    def claim_all(self) -> list[T]:
        """Take every item (a shutdown renames what is left), once the pass is idle."""
        with self._cond:
            items = list(self._items.values())
            self._items.clear()
            while self._busy is not None:
                self._cond.wait(1.0)
        return items

    def next(self) -> T | None:
        """The oldest item, for the pass to rename; call :meth:`finished` when it is done."""
        with self._cond:
            if not self._items:
                return None
            key = next(iter(self._items))
            self._busy = key
            return self._items.pop(key)

    def finished(self) -> None:
        with self._cond:
            self._busy = None
            self._cond.notify_all()


def remove_tree(path: str) -> OSError | None:
    """Remove ``path`` and everything under it, going on past failures; the first failure
    (None when all went, or when the directory was already gone)."""
    errors: list[OSError] = []

    def failed(_func: Any, _path: str,
               exc: BaseException | tuple[type, BaseException, TracebackType]) -> None:
        err = exc[1] if isinstance(exc, tuple) else exc
        if not isinstance(err, FileNotFoundError) and isinstance(err, OSError):
            errors.append(err)

    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=failed)
    else:
        shutil.rmtree(path, onerror=failed)
    return errors[0] if errors else None


#: Directories removed at once: a removal mostly waits on the file system's journal, which
#: threads overlap (about four times quicker than one by one on a busy disk); few, so that
#: their bits of Python do not starve the event loop of the interpreter lock.
REMOVE_THREADS = 4


def remove_due(due: list[DeletedLog], on_disk_fault: Callable[[DeletedLog, OSError], None]) -> int:
    """Remove the directories of ``due`` on REMOVE_THREADS threads; the number removed. One
    INFO line per removal; a failure leaves what is left to the next start with a WARN line,
    and ``on_disk_fault`` hears of those that mean the disk itself is failing."""
    if not due:
        return 0
    with ThreadPoolExecutor(min(REMOVE_THREADS, len(due)),
                            thread_name_prefix="kafka-delete-logs") as pool:
        errors = list(pool.map(remove_tree, [entry.path for entry in due]))
    removed = 0
    for entry, err in zip(due, errors):
        name = f"{entry.topic}-{entry.partition}"
        if err is None:
            removed += 1
            _log.info("Deleted log for partition %s in %s.", name, entry.path)
            continue
        _log.warning("Could not delete log for partition %s in %s: %s; what is left is "
                     "removed at the next start", name, entry.path, err)
        if err.errno in OFFLINE_ERRNOS:
            on_disk_fault(entry, err)
    return removed


__all__ = ["OFFLINE_ERRNOS", "REMOVE_THREADS", "DeletedLog", "DeletionQueue", "RenameHandOff",
           "remove_due", "remove_tree"]
