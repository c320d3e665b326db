"""Fetches below the local log start, served from remote segments, equal local reads."""

from __future__ import annotations

import uuid

import pytest

from kafkapy.log.config import LogConfig
from kafkapy.log.partition_log import PartitionLog
from kafkapy.records.builder import Record, build_batch
from kafkapy.records.reader import iter_batches
from kafkapy.tiered.copier import copy_pass
from kafkapy.tiered.local_dir_storage import LocalDirRemoteStorage
from kafkapy.tiered.metadata_cache import RemoteLogMetadataCache
from kafkapy.tiered.remote_metadata import TopicIdPartition
from kafkapy.tiered.remote_reader import ChunkCache, RemoteReader

TP = TopicIdPartition(uuid.uuid4(), "t", 0)
NOW = 1_700_000_000_000


@pytest.fixture
def tiered(tmp_path):
    """A log of several segments over two epochs, its closed segments all copied."""
    plog = PartitionLog.open(str(tmp_path / "t-0"),
                             LogConfig.from_props({"segment.bytes": "2048", "index.interval.bytes": "200"}),
                             now_ms=NOW, recover=False)
    for i in range(60):
        recs = [Record(b"k%d" % i, b"value-%d-%d" % (i, j) * 3, (), NOW + i) for j in range(1 + i % 3)]
        plog.append_as_leader(bytearray(build_batch(recs)), now_ms=NOW, leader_epoch=0 if i < 35 else 2)
    rsm = LocalDirRemoteStorage.at(tmp_path / "remote")
    cache = RemoteLogMetadataCache(TP)
    copy_pass(plog, TP, rsm, cache, cache.apply, broker_id=1, now_ms=lambda: NOW)
    yield plog, rsm, cache
    plog.close()


def batch_offsets(data: bytes) -> list[tuple[int, int]]:
    return [(h.base_offset, h.last_offset) for h, _ in iter_batches(data)]


@pytest.mark.parametrize("chunk_size", [64, 1000, 1 << 20])
def test_remote_reads_equal_local_reads(tiered, chunk_size) -> None:
    plog, rsm, cache = tiered
    reader = RemoteReader(rsm, ChunkCache(max_bytes=1 << 20, chunk_size=chunk_size))
    remote_end = plog.segments[-1].base_offset
    for offset in range(0, remote_end):
        epoch = plog.leader_epoch_cache.epoch_for_offset(offset)
        got = reader.read(cache, epoch, offset, max_bytes=700)
        assert got is not None, offset
        local = plog.read(offset, 700)
        # Local reads may cross into the next segment's range only by reading it separately;
        # the remote read stays inside the segment that holds the offset, as Kafka's does.
        expected = [b for b in batch_offsets(local.read_bytes()) if b[1] <= got.segment.end_offset]
        assert batch_offsets(got.records) == expected, offset
        assert got.segment.start_offset <= offset <= got.segment.end_offset


def test_cache_is_used_and_bounded(tiered) -> None:
    plog, rsm, cache = tiered
    chunks = ChunkCache(max_bytes=3000, chunk_size=512)
    reader = RemoteReader(rsm, chunks)
    reader.read(cache, 0, 0, 10_000)
    misses = chunks.misses
    reader.read(cache, 0, 0, 10_000)
    assert chunks.misses == misses and chunks.hits > 0
    for offset in range(0, plog.segments[-1].base_offset, 7):
        reader.read(cache, plog.leader_epoch_cache.epoch_for_offset(offset), offset, 10_000)
    assert chunks.size <= 3000 + 2048  # one entry may exceed the bound on its own


def test_offsets_that_are_not_remote_and_tiny_max_bytes(tiered) -> None:
    plog, rsm, cache = tiered
    reader = RemoteReader(rsm)
    assert reader.read(cache, 2, plog.log_end_offset - 1, 1000) is None  # only local
    one = reader.read(cache, 0, 0, 1)
    assert len(batch_offsets(one.records)) == 1  # at least one batch, as a local fetch
    assert reader.read(cache, 0, 0, 1, min_one_batch=False).records == b""
