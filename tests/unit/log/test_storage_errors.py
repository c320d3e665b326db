"""Appends and rolls that fail on disk: exact rollback, KAFKA_STORAGE_ERROR, and which faults take
a log dir offline; the failure episode logged once."""

from __future__ import annotations

import errno
import logging
import os

import pytest

from kafkapy.log import segment as segment_mod
from kafkapy.log.index import MmapIndex
from kafkapy.log.storage_errors import LogStorageError, StorageFaults, storage_error
from kafkapy.protocol.errors import ErrorCode

from .helpers import make_batch


def _files(log) -> dict[str, int]:
    """Size of every segment file (what a failed append must leave as it was)."""
    return {name: os.path.getsize(os.path.join(log.dir, name)) for name in sorted(os.listdir(log.dir))
            if name.endswith((".log", ".index", ".timeindex"))}


def _failing_pwrite(err: int, *, after_bytes: int = 0):
    """An os.pwrite that writes ``after_bytes`` of the first call, then fails with ``err``."""
    real = os.pwrite
    state = {"left": after_bytes}

    def pwrite(fd, data, pos):
        if state["left"] > 0:
            n = real(fd, bytes(data[:state["left"]]), pos)
            state["left"] -= n
            return n
        raise OSError(err, os.strerror(err))
    return pwrite


@pytest.mark.parametrize("err, offline", [(errno.ENOSPC, False), (errno.EDQUOT, False),
                                          (errno.EIO, True)])
def test_a_failed_append_leaves_no_partial_batch(open_log, monkeypatch, err, offline):
    log = open_log(index_interval_bytes=1)
    for _ in range(5):
        log.append_as_leader(make_batch(3), now_ms=0, leader_epoch=0)
    before, leo = _files(log), log.log_end_offset
    monkeypatch.setattr(segment_mod.os, "pwrite", _failing_pwrite(err, after_bytes=20))
    with pytest.raises(LogStorageError) as caught:
        log.append_as_leader(make_batch(3), now_ms=0, leader_epoch=0)
    monkeypatch.undo()
    assert caught.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert caught.value.offline is offline
    assert _files(log) == before and log.log_end_offset == leo
    # The log goes on where it stopped, and reads back whole batches only.
    log.append_as_leader(make_batch(2), now_ms=0, leader_epoch=0)
    assert log.log_end_offset == leo + 2
    assert [ref.header.base_offset for ref in log.active.iter_batches()][-1] == leo


def test_a_failed_rollback_takes_the_dir_offline(open_log, monkeypatch):
    log = open_log()
    log.append_as_leader(make_batch(1), now_ms=0, leader_epoch=0)
    monkeypatch.setattr(segment_mod.os, "pwrite", _failing_pwrite(errno.ENOSPC))

    def ftruncate(fd, size):
        raise OSError(errno.EIO, "I/O error")
    monkeypatch.setattr(segment_mod.os, "ftruncate", ftruncate)
    with pytest.raises(LogStorageError) as caught:
        log.append_as_leader(make_batch(1), now_ms=0, leader_epoch=0)
    assert caught.value.offline


def test_index_blocks_are_reserved_before_the_append_writes(open_log, monkeypatch):
    log = open_log(index_interval_bytes=1)
    before = _files(log)
    calls = []

    def fallocate(fd, offset, length):
        calls.append((offset, length))
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "posix_fallocate", fallocate)
    with pytest.raises(LogStorageError) as caught:
        log.append_as_leader(make_batch(1), now_ms=0, leader_epoch=0)
    assert calls and not caught.value.offline
    assert _files(log) == before, "nothing written when the index blocks are not there"
    monkeypatch.undo()
    log.append_as_leader(make_batch(1), now_ms=0, leader_epoch=0)
    assert log.log_end_offset == 1


def test_a_roll_that_cannot_create_the_segment_leaves_the_log_as_it_was(open_log, monkeypatch):
    log = open_log(segment_bytes=300)
    log.append_as_leader(make_batch(1, value_size=150), now_ms=0, leader_epoch=0)
    segments, leo = len(log.segments), log.log_end_offset

    def ftruncate(fd, size):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "ftruncate", ftruncate)
    with pytest.raises(LogStorageError):
        log.append_as_leader(make_batch(1, value_size=150), now_ms=0, leader_epoch=0)
    monkeypatch.undo()
    assert len(log.segments) == segments and log.log_end_offset == leo
    assert sorted(n for n in os.listdir(log.dir) if n.endswith(".log")) == \
        [os.path.basename(s.log_path) for s in log.segments], "no half-made segment left behind"
    log.append_as_leader(make_batch(1, value_size=150), now_ms=0, leader_epoch=0)
    assert len(log.segments) == segments + 1


def test_reserve_allocates_ahead_in_chunks(tmp_path, monkeypatch):
    from kafkapy.log.offset_index import OffsetIndex
    idx = OffsetIndex(str(tmp_path / "0.index"), 0, 1 << 20)
    calls = []
    real = os.posix_fallocate
    monkeypatch.setattr(os, "posix_fallocate", lambda fd, o, n: (calls.append((o, n)), real(fd, o, n)))
    for i in range(1, 200):
        idx.append(i, i * 10)
    assert len(calls) == 1, "one chunk covers many entries"
    assert isinstance(idx, MmapIndex)


def test_a_full_disk_is_logged_once_per_episode(caplog):
    offline: list[str] = []
    faults = StorageFaults(lambda d, reason: offline.append(d) or True, free=lambda d: 1 << 30)
    full = storage_error(OSError(errno.ENOSPC, "No space left on device"), "append to", "/d/x.log")
    with caplog.at_level(logging.INFO, logger="kafkapy.log.storage"):
        for _ in range(10):
            faults.fault("/d", full)
        faults.ok("/d")
        faults.ok("/d")
        faults.fault("/d", full)
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    infos = [r for r in caplog.records if r.levelno == logging.INFO]
    assert len(errors) == 2 and len(infos) == 1
    assert not offline, "a full disk keeps the dir online"
    faults.fault("/d", storage_error(OSError(errno.EIO, "I/O error"), "append to", "/d/x.log"))
    assert offline == ["/d"]


def test_a_write_that_just_fits_does_not_end_the_episode(caplog):
    # A failed write's rollback frees its bytes, and a smaller write may then fit: the disk is
    # still full, and the next failure is not a new episode.
    space = {"/d": 8192}
    faults = StorageFaults(lambda d, reason: True, free=space.__getitem__)
    full = storage_error(OSError(errno.ENOSPC, "No space left on device"), "append to", "/d/x.log")
    with caplog.at_level(logging.INFO, logger="kafkapy.log.storage"):
        faults.fault("/d", full)
        faults.ok("/d")
        faults.fault("/d", full)
        assert "/d" in faults.failing
        space["/d"] = 3 << 20  # an operator freed space
        faults.ok("/d")
    assert [r.levelno for r in caplog.records] == [logging.ERROR, logging.INFO]
    assert not faults.failing


def test_faults_on_worker_threads_are_handled_on_the_owning_thread():
    import threading
    offline: list[str] = []
    faults = StorageFaults(lambda d, reason: offline.append(d) or True)
    eio = storage_error(OSError(errno.EIO, "I/O error"), "write", "/d/checkpoint")
    worker = threading.Thread(target=faults.fault, args=("/d", eio))
    worker.start()
    worker.join()
    assert offline == [], "listeners must not run on the worker thread"
    faults.drain()
    assert offline == ["/d"]
