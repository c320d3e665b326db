"""Durable file updates shared by the log and the Raft stores: atomic replace and directory fsync,
and which write failures mean the disk is full.

A rename or a new file survives a crash only once its directory is fsynced (POSIX); Kafka does
the same in ``Utils.atomicMoveWithFallback`` and ``Utils.flushDir``.
"""

from __future__ import annotations

import errno
import os
from typing import TypeGuard

#: Faults that mean "no room" (a full disk, an exceeded quota): the write fails and nothing of
#: it is kept, but the files already there can be trusted; both stores go on once space is freed.
SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def is_space_error(exc: BaseException | None) -> TypeGuard[OSError]:
    """Whether ``exc`` is an OSError for lack of space (``SPACE_ERRNOS``)."""
    return isinstance(exc, OSError) and exc.errno in SPACE_ERRNOS


def fsync_dir(path: str) -> None:
    """fsync a directory so a rename/create inside it survives a crash."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on directories; Kafka ignores that too
    finally:
        os.close(fd)


def atomic_write(path: str, data: bytes, *, sync: bool = True) -> None:
    """Replace ``path`` with ``data`` via a temp file and rename (Kafka's atomicMoveWithFallback)."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        if sync:
            os.fsync(fd)
    except BaseException as exc:
        # A full disk: the half-written temp file would only hold on to the space.
        os.close(fd)
        try:
            os.remove(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError) and exc.filename is None:
            exc.filename = path  # os.write names no file; the log line should
        raise
    os.close(fd)
    os.replace(tmp, path)
    if sync:
        fsync_dir(os.path.dirname(os.path.abspath(path)))


__all__ = ["SPACE_ERRNOS", "atomic_write", "fsync_dir", "is_space_error"]
