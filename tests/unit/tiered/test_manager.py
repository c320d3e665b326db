"""The broker's RemoteLogManager over a real log, the local-directory store and an in-memory
``__remote_log_metadata`` (the node's replica manager and metadata topic are faked)."""

from __future__ import annotations

import os
import uuid
from types import SimpleNamespace
from typing import Any

import trio

from kafkapy.config import BrokerConfig
from kafkapy.log.config import LogConfig
from kafkapy.log.partition_log import PartitionLog
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.records.builder import Record, build_batch
from kafkapy.records.reader import iter_batches, iter_records
from kafkapy.tiered.local_dir_storage import LocalDirRemoteStorage
from kafkapy.tiered.manager import RemoteLogManager, TieredSettings
from kafkapy.tiered.metadata_cache import RemoteLogMetadataCache
from kafkapy.tiered.remote_fetch import segment_for_offset
from kafkapy.tiered.remote_metadata import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    TopicIdPartition,
)
from kafkapy.tiered.remote_metadata_serde import deserialize

NOW = 1_700_000_000_000
TOPIC_ID = uuid.uuid4()
TIP = TopicIdPartition(TOPIC_ID, "t", 0)


class FakeMetadataLog:
    """``MetadataLog`` over in-memory partitions; every append is durable at once."""

    def __init__(self, partitions: int) -> None:
        self.partitions: list[list[bytes]] = [[] for _ in range(partitions)]
        self.topic_exists = False
        self.topics: dict[str, Any] = {}

    def image(self) -> Any:
        return SimpleNamespace(brokers={1: SimpleNamespace(fenced=False)},
                               topics=SimpleNamespace(by_id={TOPIC_ID: object()} if "t" in self.topics else {}))

    def partition_count(self) -> int | None:
        return len(self.partitions) if self.topic_exists else None

    async def append(self, mp: int, value: bytes, timeout_s: float = 30.0) -> int:
        self.partitions[mp].append(value)
        return len(self.partitions[mp]) - 1

    async def read(self, mp: int, offset: int) -> tuple[list[tuple[int, bytes | None]], int]:
        records = [(o, v) for o, v in enumerate(self.partitions[mp]) if o >= offset]
        return records, len(self.partitions[mp]) if records else offset

    async def end_offset(self, mp: int) -> int:
        return len(self.partitions[mp])

    async def catch_up_offset(self, mp: int) -> int:
        return len(self.partitions[mp])

    async def aclose(self) -> None:
        pass

    def events(self) -> list[Any]:
        return [deserialize(v) for p in self.partitions for v in p]


class FakeHosted:
    def __init__(self, plog: PartitionLog, leader_id: int) -> None:
        self.topic, self.topic_id, self.index = "t", TOPIC_ID, 0
        self.log = plog
        self.leader_id = leader_id
        self.leader_epoch = 0

    def is_leader(self, node_id: int) -> bool:
        return self.leader_id == node_id


class FakeReplicas:
    def __init__(self) -> None:
        self.hosted: dict[tuple[str, int], FakeHosted] = {}
        self.leadership_suspended = False

    def partitions(self) -> list[FakeHosted]:
        return list(self.hosted.values())

    def get(self, topic: str, index: int) -> FakeHosted:
        try:
            return self.hosted[(topic, index)]
        except KeyError:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) from None


def config(tmp_path, **extra: str) -> BrokerConfig:
    props = {"node.id": "1", "log.dirs": str(tmp_path / "logs"), "remote.log.storage.system.enable": "true",
             "remote.log.manager.task.interval.ms": "20",
             "rlmm.config.remote.log.metadata.topic.num.partitions": "3", **extra}
    os.makedirs(tmp_path / "logs", exist_ok=True)
    return BrokerConfig(props)


def open_log(tmp_path) -> PartitionLog:
    cfg = LogConfig.from_props({"segment.bytes": "1024", "remote.storage.enable": "true",
                                "local.retention.bytes": "1"})
    plog = PartitionLog.open(str(tmp_path / "logs" / "t-0"), cfg, now_ms=NOW, recover=False)
    plog.hw_follows_leo = True
    return plog


def append(plog: PartitionLog, n: int) -> None:
    for i in range(n):
        offset = plog.log_end_offset
        batch = bytearray(build_batch([Record(None, b"value-%06d" % offset + b"x" * 40, (), NOW + offset)]))
        plog.append_as_leader(batch, now_ms=NOW, leader_epoch=0)


def manager(tmp_path, replicas: FakeReplicas, mlog: FakeMetadataLog, node_id: int = 1) -> RemoteLogManager:
    async def create_topic(name: str, partitions: int, replication: int, configs: dict[str, str]) -> None:
        assert (partitions, replication) == (3, 1)
        mlog.topic_exists = True

    rsm = LocalDirRemoteStorage.at(tmp_path / "remote")
    return RemoteLogManager(config(tmp_path), rsm, replicas, node_id, lambda: NOW, mlog, create_topic)


def setup(tmp_path, records: int, leader_id: int = 1) -> tuple[PartitionLog, FakeReplicas, FakeMetadataLog, RemoteLogManager]:
    """A log of ``records`` records hosted here (led by ``leader_id``), its topic in the image."""
    plog = open_log(tmp_path)
    append(plog, records)
    replicas = FakeReplicas()
    replicas.hosted[("t", 0)] = FakeHosted(plog, leader_id=leader_id)
    mlog = FakeMetadataLog(3)
    mlog.topics["t"] = object()
    return plog, replicas, mlog, manager(tmp_path, replicas, mlog)


def full_update(mlog: FakeMetadataLog) -> Any:
    return SimpleNamespace(full=True, image=mlog.image(), is_empty=lambda: False)


async def wait_until(check, what: str, timeout: float = 10.0) -> None:
    with trio.fail_after(timeout):
        while not check():
            await trio.sleep(0.01)


def test_settings_take_kafka_names_defaults_and_the_rlmm_prefix(tmp_path) -> None:
    defaults = TieredSettings.from_config(BrokerConfig({}))
    assert (defaults.task_interval_ms, defaults.metadata_partitions, defaults.metadata_replication_factor,
            defaults.metadata_retention_ms, defaults.reader_threads) == (30_000, 50, 3, -1, 10)
    s = TieredSettings.from_config(BrokerConfig({
        "remote.log.manager.task.interval.ms": "500", "remote.log.metadata.topic.replication.factor": "2",
        "rlmm.config.remote.log.metadata.topic.num.partitions": "7", "remote.log.reader.threads": "3"}))
    assert (s.task_interval_ms, s.metadata_partitions, s.metadata_replication_factor, s.reader_threads) == (500, 7, 2, 3)


def _segment(start: int, end: int, epochs: dict[int, int]) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(RemoteLogSegmentId.generate_new(TIP), start, end, NOW, 1, NOW, 100, epochs)


def test_log_start_and_segment_lookup() -> None:
    cache = RemoteLogMetadataCache(TIP)
    a, b = _segment(0, 9, {0: 0}), _segment(10, 19, {0: 10, 2: 15})
    for seg in (a, b):
        cache.apply(seg)
        cache.apply(RemoteLogSegmentMetadataUpdate(seg.remote_log_segment_id, NOW,
                                                   RemoteLogSegmentState.COPY_SEGMENT_FINISHED, 1))
    assert segment_for_offset(cache, 5) == (cache.segments_in_state(RemoteLogSegmentState.COPY_SEGMENT_FINISHED)[0], 0)
    assert segment_for_offset(cache, 12)[1] == 0
    assert segment_for_offset(cache, 17)[1] == 2
    assert segment_for_offset(cache, 20) is None


def test_local_retention_waits_for_copies(tmp_path) -> None:
    plog = open_log(tmp_path)
    append(plog, 60)
    segments = len(plog.segments)
    assert segments > 4
    # Remote-enabled, nothing copied: local.retention.bytes=1 removes nothing.
    plog.update_remote_state(enabled=True)
    assert plog.delete_old_segments(NOW) == 0
    # Copied up to the end of the second segment: exactly those two go.
    plog.update_remote_state(highest_offset=plog.segments[2].base_offset - 1)
    assert plog.delete_old_segments(NOW) == 2
    assert plog.local_log_start_offset == plog.segments[0].base_offset
    # Without tiering, local.retention.* means nothing and retention.bytes=-1 keeps everything.
    plog.update_remote_state(enabled=False)
    assert plog.delete_old_segments(NOW) == 0
    plog.close()


def test_leader_copies_expires_serves_remote_reads_and_a_new_leader_resumes(tmp_path) -> None:
    plog = open_log(tmp_path)
    append(plog, 80)
    replicas = FakeReplicas()
    replicas.hosted[("t", 0)] = FakeHosted(plog, leader_id=1)
    mlog = FakeMetadataLog(3)
    rlm = manager(tmp_path, replicas, mlog)
    closed = len(plog.segments) - 1

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            rlm.on_metadata_update(full_update(mlog))
            await nursery.start(rlm.run)
            await wait_until(lambda: plog.highest_offset_in_remote_storage == plog.segments[-1].base_offset - 1,
                             "every closed segment copied")
            assert rlm.status()["partitions"]["t-0"]["remote_segments"] == closed
            # Local retention (run by the node's retention task) now deletes the copies.
            plog.delete_old_segments(NOW)
            assert plog.local_log_start_offset == plog.segments[-1].base_offset
            hosted = replicas.hosted[("t", 0)]
            assert hosted.log.log_start_offset == 0
            assert rlm.serves_remotely(hosted, 0) and not rlm.serves_remotely(hosted, plog.local_log_start_offset)
            offset, seen = 0, []
            while offset < plog.local_log_start_offset:
                data = await rlm.read_remote(hosted, offset, 300, min_one=True)
                assert data
                for _, view in iter_batches(data):
                    for rec in iter_records(view):
                        seen.append(rec.offset)
                        assert bytes(rec.value).startswith(b"value-%06d" % rec.offset)
                        offset = rec.offset + 1
            assert seen == list(range(plog.local_log_start_offset))
            assert await rlm.offset_for_timestamp(hosted, NOW + 7) == (7, NOW + 7)
            # Deeper in: the remote time index says where to start reading.
            deep = plog.local_log_start_offset - 3
            assert await rlm.offset_for_timestamp(hosted, NOW + deep) == (deep, NOW + deep)
            assert await rlm.offset_for_timestamp(hosted, NOW + 10_000) is None
            status = rlm.status()["partitions"]["t-0"]
            assert status["remote_fetch_requests"] > 0 and status["copy_lag_segments"] == 0
            nursery.cancel_scope.cancel()
        copies = [e for e in mlog.events() if isinstance(e, RemoteLogSegmentMetadata)]
        assert len(copies) == closed

        # A new leader (a fresh manager over the same metadata) reads what is remote and only
        # copies what is new.
        append(plog, 40)
        rlm2 = manager(tmp_path, replicas, mlog)
        async with trio.open_nursery() as nursery:
            rlm2.on_metadata_update(full_update(mlog))
            await nursery.start(rlm2.run)
            await wait_until(lambda: rlm2.status()["partitions"].get("t-0", {}).get("copy_lag_segments") == 0
                             and rlm2.status()["partitions"]["t-0"]["copied_segments"] > 0, "new segments copied")
            nursery.cancel_scope.cancel()
        announced = [e for e in mlog.events() if isinstance(e, RemoteLogSegmentMetadata)]
        starts = [e.start_offset for e in announced]
        assert len(starts) == len(set(starts)), "a segment was copied twice"

        # The topic is deleted: the leader removes every remote segment, with the partition events.
        rlm3 = manager(tmp_path, replicas, mlog)
        async with trio.open_nursery() as nursery:
            rlm3.on_metadata_update(full_update(mlog))
            await nursery.start(rlm3.run)
            await wait_until(lambda: rlm3.cache_of(TIP) is not None, "metadata caught up")
            del replicas.hosted[("t", 0)]
            mlog.topics.clear()
            rlm3.on_metadata_update(full_update(mlog))
            await wait_until(lambda: not os.listdir(tmp_path / "remote"), "remote data deleted")
            await wait_until(lambda: any(isinstance(e, RemotePartitionDeleteMetadata)
                                         and e.state.name == "DELETE_PARTITION_FINISHED" for e in mlog.events()),
                             "partition delete finished")
            nursery.cancel_scope.cancel()

    mlog.topics["t"] = object()
    trio.run(main)
    plog.close()


def test_a_pass_stops_publishing_once_leadership_moves(tmp_path) -> None:
    plog, replicas, mlog, rlm = setup(tmp_path, 40, leader_id=2)  # another broker leads

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            rlm.on_metadata_update(full_update(mlog))
            await nursery.start(rlm.run)
            await wait_until(lambda: rlm.cache_of(TIP) is not None, "metadata caught up")
            await trio.sleep(0.2)
            assert mlog.events() == []  # a follower copies nothing
            assert plog.remote_log_enabled
            nursery.cancel_scope.cancel()

    trio.run(main)
    plog.close()


def test_a_broker_out_of_contact_with_the_controllers_runs_no_passes(tmp_path) -> None:
    plog, replicas, mlog, rlm = setup(tmp_path, 40)
    replicas.leadership_suspended = True

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            rlm.on_metadata_update(full_update(mlog))
            await nursery.start(rlm.run)
            await wait_until(lambda: rlm.cache_of(TIP) is not None, "metadata caught up")
            await trio.sleep(0.2)
            assert mlog.events() == []
            nursery.cancel_scope.cancel()

    trio.run(main)
    plog.close()


def test_turning_remote_storage_off_with_delete_on_disable_removes_the_remote_data(tmp_path) -> None:
    plog, replicas, mlog, rlm = setup(tmp_path, 40)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            rlm.on_metadata_update(full_update(mlog))
            await nursery.start(rlm.run)
            await wait_until(lambda: list((tmp_path / "remote").glob("*/*.log")), "segments copied")
            plog.update_config(LogConfig.from_props({"remote.storage.enable": "false",
                                                     "remote.log.delete.on.disable": "true"}, plog.config))
            rlm.on_metadata_update(full_update(mlog))
            await wait_until(lambda: not os.listdir(tmp_path / "remote"), "remote data deleted")
            assert not plog.remote_log_enabled
            nursery.cancel_scope.cancel()

    trio.run(main)
    plog.close()
