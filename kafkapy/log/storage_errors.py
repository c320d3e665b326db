"""Storage faults of the log layer as Kafka errors, and which of them take a log dir offline.

Kafka turns every IOException under a log dir into KAFKA_STORAGE_ERROR for the client and takes
the dir offline. kafkapy does that for every fault except a full disk or an exceeded quota
(ENOSPC, EDQUOT): those fail the write with KAFKA_STORAGE_ERROR, the failed write is rolled back,
and the dir stays online for reads; appends succeed again once space is freed (see
docs/storage-errors.md for why this differs from Kafka).

:class:`StorageFaults` keeps the per-dir "failure episode" so the broker logs one ERROR line when
a dir starts failing and one INFO line when it works again, not a traceback per request.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

from kafkapy.durable import is_space_error
from kafkapy.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("kafkapy.log.storage")

#: A full-disk episode ends at a write that succeeds with at least this much space free. Near
#: the limit a small write can still fit (a failed write's rollback frees its bytes), and ending
#: the episode there would log the next failure as a new one, line after line.
RESUME_FREE_BYTES = 1 << 20


def free_bytes(path: str) -> int:
    """Bytes an unprivileged writer may still use on ``path``'s file system."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


class LogStorageError(KafkaError):
    """KAFKA_STORAGE_ERROR raised by a log write that failed on the file system.

    ``offline`` says whether the dir must be taken offline: the fault was not a lack of space,
    or undoing the failed write itself failed, so the files can no longer be trusted.
    """

    def __init__(self, message: str, *, path: str, cause: OSError | None = None,
                 offline: bool | None = None) -> None:
        super().__init__(ErrorCode.KAFKA_STORAGE_ERROR, message)
        self.path = path
        self.cause = cause
        self.offline = (not is_space_error(cause)) if offline is None else offline

    @property
    def space(self) -> bool:
        """True when the disk (or the quota) is full."""
        return is_space_error(self.cause)


def storage_error(exc: OSError, what: str, path: str) -> LogStorageError:
    """A LogStorageError for ``exc`` raised while doing ``what`` to ``path``."""
    reason = os.strerror(exc.errno) if exc.errno else str(exc)
    return LogStorageError(f"Disk error when trying to {what} {path}: {reason}", path=path,
                           cause=exc)


class StorageFaults:
    """Per-log-dir failure episodes: one ERROR line when writes start failing, one INFO line
    when they work again; faults that are not about space take the dir offline.

    ``mark_offline(dir, reason)`` is ``LogManager.mark_dir_offline`` (it logs its own ERROR).
    ``free(dir)`` measures the space left (``free_bytes``; tests pass their own).
    """

    def __init__(self, mark_offline: Callable[[str, str], bool],
                 free: Callable[[str], int] = free_bytes) -> None:
        self._mark_offline = mark_offline
        self._free = free
        #: dir -> the message of the fault that opened its current episode.
        self.failing: dict[str, str] = {}
        # Faults seen on worker threads (checkpoints run there): the offline listeners touch
        # the event loop's state, so they are handled on its thread, by drain().
        self._owner = threading.get_ident()
        self._deferred: list[tuple[str, LogStorageError]] = []
        self._lock = threading.Lock()

    def fault(self, dir: str, exc: LogStorageError) -> None:
        """A write under ``dir`` failed with ``exc`` (already rolled back where it could be)."""
        if threading.get_ident() != self._owner:
            with self._lock:
                self._deferred.append((dir, exc))
            return
        if exc.offline:
            self.failing.pop(dir, None)
            self._mark_offline(dir, exc.message or str(exc))
            return
        if dir in self.failing:
            return
        self.failing[dir] = exc.message or str(exc)
        log.error("Log dir %s is out of space: %s. Writes to it fail with KAFKA_STORAGE_ERROR "
                  "until space is freed; reads go on.", dir, exc.message)

    def drain(self) -> None:
        """Handle the faults worker threads reported (call on the owning thread)."""
        if not self._deferred:
            return
        with self._lock:
            deferred, self._deferred = self._deferred, []
        for d, exc in deferred:
            self.fault(d, exc)

    def ok(self, dir: str) -> None:
        """A write under ``dir`` succeeded: close its failure episode, if one is open and the
        dir has room again (``RESUME_FREE_BYTES``)."""
        if not self.failing or dir not in self.failing:
            return
        try:
            if self._free(dir) < RESUME_FREE_BYTES:
                return
        except OSError:
            pass  # cannot tell: the write went through, which is all we know
        del self.failing[dir]
        log.info("Log dir %s accepts writes again", dir)
