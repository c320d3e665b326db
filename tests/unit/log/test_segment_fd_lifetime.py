"""A segment's descriptor outlives every close while a fetch slice (or a file region cut from one)
still uses it, and closes as soon as the last one is released.

Closing a segment used to close its descriptor at once; the number then went to the next file
opened (Linux hands out the lowest free one), and a Fetch reply still being sent from it streamed
that file (another topic's segment) to the first topic's consumer. These tests close segments in
every way the log does, open other files straight after, and check what the slices read and which
descriptors stay open.
"""

from __future__ import annotations

import gc
import os
import uuid

import pytest

from kafkapy.log.cleaner import clean_log
from kafkapy.log.config import LogConfig
from kafkapy.log.log_manager import LogManager
from kafkapy.log.partition_log import PartitionLog
from kafkapy.protocol import FileRegion
from kafkapy.records.builder import Record, build_batch


def _batch(tag: bytes, n: int = 20, size: int = 200) -> bytearray:
    return bytearray(build_batch([Record(b"k%d" % i, tag * size, timestamp=1000 + i)
                                  for i in range(n)]))


def _open_fds_on(inode: tuple[int, int]) -> int:
    """How many of this process's descriptors are open on the file ``(st_dev, st_ino)``."""
    count = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            st = os.stat(f"/proc/self/fd/{name}")
        except OSError:
            continue  # the listing's own descriptor, gone by now
        if (st.st_dev, st.st_ino) == inode:
            count += 1
    return count


def _inode(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


def _fill_other_files(where: str, count: int = 8) -> list[int]:
    """Open files full of b"B": they take whatever descriptor numbers are free."""
    fds = []
    for i in range(count):
        fd = os.open(os.path.join(where, f"other-{i}"), os.O_RDWR | os.O_CREAT, 0o644)
        os.write(fd, b"B" * 100_000)
        fds.append(fd)
    return fds


@pytest.fixture
def manager(tmp_path):
    lm = LogManager([str(tmp_path / "logs")], LogConfig(), now_ms=0)
    yield lm
    lm.shutdown()


def test_region_of_a_deleted_topic_reads_its_own_bytes_not_the_next_topics(manager, tmp_path):
    a = manager.get_or_create("a", 0, uuid.uuid4())
    a.append_as_leader(_batch(b"A"), now_ms=0, leader_epoch=0)
    fslice = a.read(0, 1 << 20)
    region = FileRegion.of(fslice)
    expected = fslice.read_bytes()
    del fslice  # only the region (as in a reply being written) holds the slice now
    assert manager.delete("a", 0)
    # The next topic's files (and any others) open now, reusing free descriptor numbers.
    b = manager.get_or_create("b", 0, uuid.uuid4())
    b.append_as_leader(_batch(b"B"), now_ms=0, leader_epoch=0)
    others = _fill_other_files(str(tmp_path))
    try:
        # What the listener's sendfile reads: the region's descriptor number.
        assert os.pread(region.fd, region.count, region.offset) == expected
    finally:
        for fd in others:
            os.close(fd)


def test_slice_outlives_log_deletion_and_the_descriptor_closes_on_release(manager, tmp_path):
    a = manager.get_or_create("a", 0, uuid.uuid4())
    a.append_as_leader(_batch(b"A"), now_ms=0, leader_epoch=0)
    first, second = a.read(0, 1 << 20), a.read(0, 1 << 20)
    expected = first.read_bytes()
    inode = _inode(first.fileno())
    manager.delete("a", 0)
    others = _fill_other_files(str(tmp_path))
    try:
        assert first.read_bytes() == expected and second.read_bytes() == expected
        assert _open_fds_on(inode) == 1  # one descriptor shared by both, not one per slice
        first.release()
        assert _open_fds_on(inode) == 1 and second.read_bytes() == expected
        second.release()
        assert _open_fds_on(inode) == 0  # the last reader let go: closed, not leaked
        with pytest.raises(ValueError):
            second.fileno()  # a released slice never hands out a number that may be reused
    finally:
        for fd in others:
            os.close(fd)


def test_dropping_an_unreleased_slice_closes_the_descriptor(manager):
    a = manager.get_or_create("a", 0, uuid.uuid4())
    a.append_as_leader(_batch(b"A"), now_ms=0, leader_epoch=0)
    region = FileRegion.of(a.read(0, 1 << 20))
    inode = _inode(region.fd)
    manager.delete("a", 0)
    assert _open_fds_on(inode) == 1
    del region  # a reply dropped without being written (cancelled handler, closed connection)
    gc.collect()
    assert _open_fds_on(inode) == 0


def test_close_without_readers_closes_at_once(open_log):
    log = open_log()
    log.append_as_leader(_batch(b"A"), now_ms=0, leader_epoch=0)
    fslice = log.read(0, 1 << 20)
    inode = _inode(fslice.fileno())
    fslice.release()
    log.close()
    assert _open_fds_on(inode) == 0


def _close_log(log: PartitionLog) -> None:
    log.close()


def _delete_log(log: PartitionLog) -> None:
    log.delete()


def _retention(log: PartitionLog) -> None:
    log.roll(now_ms=0)
    log.append_as_leader(_batch(b"C"), now_ms=0, leader_epoch=0)
    log.maybe_increment_log_start_offset(log.log_end_offset - 1)
    assert log.delete_old_segments(now_ms=0) >= 1
    for path in log.take_files_to_delete():
        os.remove(path)


def _truncate_fully(log: PartitionLog) -> None:
    log.truncate_fully_and_start_at(1000)


def _truncate_later_segments(log: PartitionLog) -> None:
    log.truncate_to(0)


def _compaction(log: PartitionLog) -> None:
    log.roll(now_ms=0)
    log.append_as_leader(_batch(b"C"), now_ms=0, leader_epoch=0, from_client=False)
    log.roll(now_ms=0)
    log.append_as_leader(_batch(b"D"), now_ms=0, leader_epoch=0, from_client=False)
    clean_log(log, now_ms=10_000)


@pytest.mark.parametrize("close", [_close_log, _delete_log, _retention, _truncate_fully,
                                   _truncate_later_segments, _compaction])
def test_every_way_a_segment_goes_defers_the_close(open_log, tmp_path, close):
    log = open_log(cleanup_policy="compact" if close is _compaction else "delete")
    log.append_as_leader(_batch(b"A"), now_ms=0, leader_epoch=0, from_client=False)
    fslice = log.read(0, 1 << 20)
    region = FileRegion.of(fslice)
    expected = fslice.read_bytes()
    inode = _inode(fslice.fileno())
    del fslice
    close(log)
    others = _fill_other_files(str(tmp_path))
    try:
        assert os.pread(region.fd, region.count, region.offset) == expected
        region.release()
        assert _open_fds_on(inode) == 0
    finally:
        for fd in others:
            os.close(fd)

