"""The per-dir ``.lock``: one process per log dir, the holder named, nothing written by a loser."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from kafkapy.log.dir_lock import LOCK_FILE, LogDirLockedError, held_by_this_process, lock_dirs


def _hold_in_child(dirs: list[str]) -> subprocess.Popen:
    """A separate process that locks ``dirs`` and waits for stdin to close."""
    code = textwrap.dedent(f"""
        import sys
        from kafkapy.log.dir_lock import lock_dirs
        locks = lock_dirs({dirs!r})
        print("locked", flush=True)
        sys.stdin.read()
    """)
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "locked"
    return child


def _release_child(child: subprocess.Popen) -> None:
    child.stdin.close()
    child.wait(timeout=10)


def test_second_process_is_refused_with_dir_and_pid(tmp_path):
    d = str(tmp_path / "data")
    child = _hold_in_child([d])
    try:
        before = sorted(os.listdir(d))
        with pytest.raises(LogDirLockedError) as e:
            lock_dirs([d])
        assert d in str(e.value) and f"pid {child.pid}" in str(e.value)
        assert sorted(os.listdir(d)) == before
        assert open(os.path.join(d, LOCK_FILE)).read().strip() == str(child.pid)
    finally:
        _release_child(child)
    # The holder is gone: the dir is free again (no stale-file cleanup needed).
    with lock_dirs([d]):
        assert held_by_this_process(d)
    assert not held_by_this_process(d)


def test_all_or_nothing_over_several_dirs(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    child = _hold_in_child([b])
    try:
        with pytest.raises(LogDirLockedError):
            lock_dirs([a, b])
        assert not held_by_this_process(a)  # the first dir's lock was given back
    finally:
        _release_child(child)


def test_a_killed_holder_releases_the_lock(tmp_path):
    d = str(tmp_path / "data")
    child = _hold_in_child([d])
    child.kill()
    child.wait(timeout=10)
    with lock_dirs([d]):
        pass


def test_reentrant_within_one_process(tmp_path):
    d = str(tmp_path / "data")
    outer = lock_dirs([d, d])  # duplicates count once
    with lock_dirs([d]):  # e.g. formatting a new dir inside a running node
        pass
    assert held_by_this_process(d)
    outer.release()
    outer.release()
    assert not held_by_this_process(d)


def test_format_storage_refuses_a_locked_dir(tmp_path):
    from kafkapy.config import BrokerConfig
    from kafkapy.storage import StorageError, format_storage

    d = str(tmp_path / "data")
    config = BrokerConfig.from_sources({"node.id": "1", "log.dirs": d}, [])
    child = _hold_in_child([d])
    try:
        with pytest.raises(StorageError, match="in use by another process"):
            format_storage(config)
        assert not os.path.exists(os.path.join(d, "meta.properties"))
    finally:
        _release_child(child)
    format_storage(config)
    assert os.path.exists(os.path.join(d, "meta.properties"))


def test_a_posix_record_lock_sees_the_dir_as_taken(tmp_path):
    """Kafka's JVM tools lock `.lock` with FileChannel.tryLock, a POSIX record lock, which on Linux
    does not conflict with flock: kafka-metadata-shell or a Kafka broker must still be refused."""
    code = textwrap.dedent(f"""
        import fcntl, os, sys
        fd = os.open({str(tmp_path / LOCK_FILE)!r}, os.O_RDWR)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            print("refused")
        else:
            print("locked")
    """)
    with lock_dirs([str(tmp_path)]):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert out.stdout.strip() == "refused", out.stderr


def test_a_second_spelling_of_a_held_dir_shares_its_lock(tmp_path):
    """A symlink to a dir this process holds reuses the held descriptor: opening and closing one
    of its own would drop the POSIX lock Kafka's tools check, while the flock stayed."""
    import fcntl
    import os

    from kafkapy.log.dir_lock import DirLocks

    real = tmp_path / "data"
    real.mkdir()
    alias = tmp_path / "alias"
    alias.symlink_to(real)
    with DirLocks([str(real)]):
        with DirLocks([str(alias)]):
            pass
        # Still held after the alias is released: another process's lockf would fail. In this
        # process, F_GETLK shows no conflict for our own lock, so ask from a child.
        pid = os.fork()
        if pid == 0:
            fd = os.open(real / ".lock", os.O_RDWR)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                os._exit(1)
            except OSError:
                os._exit(0)
        _, status = os.waitpid(pid, 0)
        assert os.WEXITSTATUS(status) == 0, "the record lock was dropped with the alias"
