"""Kafka's per-directory ``.lock`` file: one process at a time owns a log or metadata dir.

Two nodes started on the same ``log.dirs`` would append to each other's logs and overwrite each
other's checkpoints and clean-shutdown markers. Before anything in a dir is read or written, the
owner takes an exclusive, non-blocking ``flock`` and a POSIX record lock (the kind Kafka's JVM
tools take) on ``<dir>/.lock`` and writes its pid into it (so the next contender can say who holds
it). The kernel drops both when the process dies, kill -9 included, so a stale file never blocks a
restart.

Locks are counted per process: code that runs inside a node (formatting a new dir at first start)
may lock dirs the node already holds. ``flock`` itself would refuse that, as it locks per open
file description, not per process.
"""

from __future__ import annotations

import fcntl
import os
import threading
from types import TracebackType

LOCK_FILE = ".lock"

_registry_lock = threading.Lock()
# abspath -> (fd, how many holders in this process)
_held: dict[str, list[int]] = {}


class LogDirLockedError(OSError):
    """Another process holds the dir's ``.lock``; the message names the dir and the holder."""

    def __init__(self, directory: str, holder: str) -> None:
        super().__init__(
            f"Log directory {directory} is in use by another process ({holder}): could not lock "
            f"{os.path.join(directory, LOCK_FILE)}. Stop that process, or give this one its own "
            "log.dirs and metadata.log.dir")
        self.directory = directory
        self.holder = holder


def _read_holder(fd: int) -> str:
    try:
        text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
    except OSError:
        text = ""
    return f"pid {text}" if text.isdigit() else "pid unknown"


def _acquire(directory: str) -> None:
    entry = _held.get(directory)
    if entry is not None:
        entry[1] += 1
        return
    os.makedirs(directory, exist_ok=True)
    fd = os.open(os.path.join(directory, LOCK_FILE), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        # A POSIX record lock as well: Java's FileChannel.tryLock (Kafka's broker, kafka-storage,
        # kafka-metadata-shell) takes that kind, which on Linux does not see a flock.
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except (BlockingIOError, PermissionError):
        holder = _read_holder(fd)
        os.close(fd)
        raise LogDirLockedError(directory, holder) from None
    except BaseException:
        os.close(fd)
        raise
    # Only the holder writes: the pid is what the next contender's error message shows.
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    _held[directory] = [fd, 1]


def _release(directory: str) -> None:
    entry = _held.get(directory)
    if entry is None:
        return
    entry[1] -= 1
    if entry[1] == 0:
        del _held[directory]
        # Closing the descriptor drops both locks; the file stays (as Kafka's does).
        os.close(entry[0])


class DirLocks:
    """The ``.lock`` of each of a set of dirs, taken together (all or none).

    Use as a context manager or call :meth:`release`; releasing twice is harmless.
    """

    def __init__(self, directories: list[str]) -> None:
        self.directories: list[str] = []
        seen: set[str] = set()
        with _registry_lock:
            try:
                for d in directories:
                    # The real path: a POSIX record lock belongs to the process and goes when ANY
                    # descriptor of the file is closed, so a second spelling of a dir this
                    # process already holds (a symlink, "a/../a") must reuse the held descriptor,
                    # never open and close one of its own.
                    d = os.path.realpath(d)
                    if d in seen:
                        continue
                    _acquire(d)
                    seen.add(d)
                    self.directories.append(d)
            except BaseException:
                for d in self.directories:
                    _release(d)
                self.directories = []
                raise

    def release(self) -> None:
        with _registry_lock:
            for d in self.directories:
                _release(d)
            self.directories = []

    def __enter__(self) -> DirLocks:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


def lock_dirs(directories: list[str]) -> DirLocks:
    """Lock every dir in ``directories`` (created if missing) or raise LogDirLockedError."""
    return DirLocks(directories)


def held_by_this_process(directory: str) -> bool:
    with _registry_lock:
        return os.path.abspath(directory) in _held
