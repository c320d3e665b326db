"""The broker's RemoteLogManager (KIP-405): tiered storage wired into a running broker.

Created by the node only when ``remote.log.storage.system.enable=true``. It

* creates ``__remote_log_metadata`` (``remote.log.metadata.topic.*``, the replication factor
  capped to the live brokers) once a remote-enabled partition is hosted, and follows the metadata
  partitions that hold the events of every remote-enabled partition this broker hosts, leader or
  follower (``metadata_consumer.RemoteMetadataConsumer`` over ``metadata_log.MetadataLog``), so a
  new leader knows what is remote and carries on where the old one stopped;
* on the leader of each remote-enabled partition, every ``remote.log.manager.task.interval.ms``,
  runs the copy pass (``copier``) then the expiration pass (``expiry``) on a worker thread
  (``leader_pass``), at most one pass per partition at a time; each event the passes publish is appended to the
  metadata topic with acks=all and applied to the partition's cache only once durable, and a
  pass whose broker lost the leadership meanwhile fails at its next publish;
* tells each hosted log what is remote (``PartitionLog.remote_log_enabled`` and
  ``highest_offset_in_remote_storage``), so local retention (``local.retention.*``) deletes only
  copied segments;
* serves fetches below the local log start from remote storage (``remote_fetch`` over
  ``remote_reader``) on worker threads (``remote.log.reader.threads`` at a time) and keeps each
  log's earliest remote offset, from which the log answers its whole start (``PartitionLog.log_start_offset``: the
  earliest remote offset, or the higher start DeleteRecords set; remote segments wholly below it
  go with the next expiration pass);
* deletes all remote data of a deleted topic's partitions it led (DELETE_PARTITION_MARKED,
  STARTED, every segment from the store, FINISHED);
* keeps counters per partition (``tracking``: copy lag, bytes copied and expired, remote
  fetches) and writes them with the local/remote sizes to ``<first log dir>/remote-log-manager-status.json``.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import trio

from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.tiered.copier import highest_copied_offset
from kafkapy.tiered.leader_pass import copy_then_expire
from kafkapy.tiered.metadata_cache import RemoteLogMetadataCache, RemoteLogMetadataError
from kafkapy.tiered.metadata_consumer import RemoteMetadataConsumer
from kafkapy.tiered.metadata_log import MetadataLog
from kafkapy.tiered.remote_fetch import RemoteFetcher
from kafkapy.tiered.remote_metadata import (
    RemoteLogMetadata,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
)
from kafkapy.tiered.remote_metadata_serde import (
    REMOTE_LOG_METADATA_TOPIC,
    metadata_partition,
    serialize,
)
from kafkapy.tiered.remote_reader import ChunkCache, RemoteReader
from kafkapy.tiered.replicas import TieredPartition, TieredReplicas
from kafkapy.tiered.storage import RemoteStorageManager
from kafkapy.tiered.tracking import PartitionStats, TrackedPartition

log = logging.getLogger(__name__)

#: Where the counters go, in the first log dir (a file: the log manager only opens directories).
STATUS_FILE = "remote-log-manager-status.json"
#: Kafka's prefix for the RemoteLogMetadataManager's own configs (remote.log.metadata.manager.impl.prefix).
DEFAULT_RLMM_PREFIX = "rlmm.config."
#: How often the metadata consumer looks for new events when there were none.
CONSUME_IDLE_S = 0.2
#: A failing metadata read is retried every CONSUME_IDLE_S but logged only this often.
CONSUME_ERROR_LOG_S = 30
#: How often topic creation is retried while it fails (no controller yet, too few brokers).
TOPIC_RETRY_S = 1.0
#: How long a new leader waits (per task interval) to read the metadata its predecessor wrote.
CATCH_UP_TIMEOUT_S = 10.0
_FINISHED = RemoteLogSegmentState.COPY_SEGMENT_FINISHED


@dataclass(frozen=True)
class TieredSettings:
    """The broker configs the RemoteLogManager honours (Kafka's names and defaults)."""

    task_interval_ms: int = 30_000
    metadata_partitions: int = 50
    metadata_replication_factor: int = 3
    metadata_retention_ms: int = -1
    reader_threads: int = 10
    cache_bytes: int = 1 << 30

    @classmethod
    def from_config(cls, config: Any) -> "TieredSettings":
        props = config.props
        prefix = props.get("remote.log.metadata.manager.impl.prefix", DEFAULT_RLMM_PREFIX)

        def rlmm(name: str) -> int:
            # Kafka reads these with the RLMM prefix (rlmm.config.remote.log.metadata.topic.*);
            # the bare name is accepted too.
            raw = props.get(prefix + name)
            return int(raw) if raw is not None else int(config.get(name))

        return cls(
            task_interval_ms=max(1, int(config.get("remote.log.manager.task.interval.ms"))),
            metadata_partitions=max(1, rlmm("remote.log.metadata.topic.num.partitions")),
            metadata_replication_factor=max(1, rlmm("remote.log.metadata.topic.replication.factor")),
            metadata_retention_ms=rlmm("remote.log.metadata.topic.retention.ms"),
            reader_threads=max(1, int(config.get("remote.log.reader.threads"))),
            cache_bytes=max(1 << 20, int(config.get("remote.log.index.file.cache.total.size.bytes"))),
        )


def earliest_remote_offset(cache: RemoteLogMetadataCache) -> int | None:
    """The first offset of the oldest readable (COPY_SEGMENT_FINISHED) segment, or None."""
    finished = cache.segments_in_state(_FINISHED)
    return finished[0].start_offset if finished else None


class LeadershipLost(KafkaError):
    """A pass tried to publish after this broker stopped leading the partition."""


class RemoteLogManager:
    """The broker's tiered-storage work; see the module docstring."""

    def __init__(self, config: Any, rsm: RemoteStorageManager, replicas: TieredReplicas, node_id: int,
                 now_ms: Callable[[], int], metadata_log: MetadataLog[Any],
                 create_topic: Callable[[str, int, int, dict[str, str]], Any]) -> None:
        self.settings = TieredSettings.from_config(config)
        self.rsm = rsm
        self.replicas = replicas
        self.node_id = node_id
        self.now_ms = now_ms
        self.metadata_log = metadata_log
        self._create_topic = create_topic
        self.log_dirs = list(config.log_dirs)
        self.consumer: RemoteMetadataConsumer | None = None
        self.reader = RemoteReader(rsm, ChunkCache(max_bytes=self.settings.cache_bytes))
        self._tracked: dict[tuple[str, int], TrackedPartition] = {}
        self._pending_assign: set[TopicIdPartition] = set()
        self._busy: set[tuple[str, int]] = set()
        # Deleted partitions whose remote data this broker removes: tip -> its cache (kept
        # assigned until done).
        self._deleting: dict[TopicIdPartition, RemoteLogMetadataCache | None] = {}
        self._deletes_started: set[TopicIdPartition] = set()
        self._wake_consumer = trio.Event()
        self._wake_tasks = trio.Event()
        self._nursery: trio.Nursery | None = None
        self._stats_lock = threading.Lock()
        self.fetcher = RemoteFetcher(rsm, self.reader, self.settings.reader_threads, self._stats_lock,
                                     self._tracked_partition)
        self.metadata_topic_ready = False


    # ================================================================== following the image
    def on_metadata_update(self, update: Any) -> None:
        """Follow the hosted partitions after a metadata step: start following the remote
        metadata of newly hosted remote-enabled partitions, stop for the others, and start
        removing the remote data of deleted topics' partitions this broker led."""
        if not update.full and update.is_empty():
            return  # heartbeats and no-ops: nothing hosted changed
        image = update.image
        desired: dict[tuple[str, int], TieredPartition] = {}
        for hosted in self.replicas.partitions():
            if hosted.topic == REMOTE_LOG_METADATA_TOPIC:
                continue
            enabled = bool(hosted.log.config.remote_storage_enable)
            hosted.log.update_remote_state(enabled=enabled)
            if enabled:
                desired[(hosted.topic, hosted.index)] = hosted
        for key, tracked in list(self._tracked.items()):
            current = desired.get(key)
            if current is not None and current.topic_id == tracked.tip.topic_id:
                tracked.leader_id = current.leader_id
                continue
            del self._tracked[key]
            self._pending_assign.discard(tracked.tip)
            deleted = tracked.tip.topic_id not in image.topics.by_id
            # KIP-950: remote.storage.enable turned off with remote.log.delete.on.disable=true
            # removes the remote data as a topic deletion does.
            disabled = not deleted and self._disabled_with_delete(key, tracked.tip)
            if (deleted or disabled) and tracked.leader_id == self.node_id:
                cache = self.consumer.cache(tracked.tip) if self.consumer is not None else None
                self._deleting[tracked.tip] = cache
                log.info("%s: %s; removing its remote data", tracked.tip,
                         "topic deleted" if deleted else "remote storage disabled")
            elif self.consumer is not None:
                self.consumer.unassign([tracked.tip])
        for key, hosted in desired.items():
            if key not in self._tracked:
                tip = TopicIdPartition(hosted.topic_id, hosted.topic, hosted.index)
                self._tracked[key] = TrackedPartition(tip, hosted.leader_id)
                self._pending_assign.add(tip)
        self._wake_consumer.set()
        self._wake_tasks.set()

    def _disabled_with_delete(self, key: tuple[str, int], tip: TopicIdPartition) -> bool:
        try:
            hosted = self.replicas.get(*key)
        except KafkaError:
            return False
        config = hosted.log.config
        return hosted.topic_id == tip.topic_id and not config.remote_storage_enable \
            and config.remote_log_delete_on_disable

    # ================================================================== running
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Create the metadata topic, then follow it and run the passes until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            # The metadata topic is created at once when enough brokers are live for its
            # replication factor, else when the first remote-enabled partition shows up (then
            # capped to the live brokers): a starting cluster whose other brokers are merely
            # late does not get an under-replicated metadata topic.
            while not self._tracked and not self._deleting and self.metadata_log.partition_count() is None \
                    and self._live_brokers() < self.settings.metadata_replication_factor:
                self._wake_tasks = trio.Event()
                with trio.move_on_after(TOPIC_RETRY_S):
                    await self._wake_tasks.wait()
            await self._ensure_metadata_topic()
            nursery.start_soon(self._consume_loop)
            await self._task_loop(nursery)

    async def _ensure_metadata_topic(self) -> None:
        s = self.settings
        while self.metadata_log.partition_count() is None:
            live = max(1, self._live_brokers())
            configs = {"cleanup.policy": "delete", "retention.ms": str(s.metadata_retention_ms),
                       "retention.bytes": "-1"}
            try:
                await self._create_topic(REMOTE_LOG_METADATA_TOPIC, s.metadata_partitions,
                                         min(s.metadata_replication_factor, live), configs)
            except Exception as exc:  # no controller yet, a timeout: try again shortly
                log.info("Creating %s failed, retrying: %s", REMOTE_LOG_METADATA_TOPIC, exc)
            if self.metadata_log.partition_count() is None:
                await trio.sleep(TOPIC_RETRY_S)
        count = self.metadata_log.partition_count()
        assert count is not None
        if count != s.metadata_partitions:
            log.warning("%s has %d partitions (remote.log.metadata.topic.num.partitions says %d): "
                        "using %d", REMOTE_LOG_METADATA_TOPIC, count, s.metadata_partitions, count)
        self.consumer = RemoteMetadataConsumer(count)
        self.metadata_topic_ready = True
        self._wake_consumer.set()

    def _live_brokers(self) -> int:
        image = self.metadata_log.image()
        return sum(1 for b in image.brokers.values() if not getattr(b, "fenced", False))

    # -- the metadata consumer ------------------------------------------------------------
    async def _consume_loop(self) -> None:
        consumer = self.consumer
        assert consumer is not None
        last_error_log: float = -CONSUME_ERROR_LOG_S
        while True:
            self._wake_consumer = trio.Event()
            progressed = False
            try:
                await self._assign_pending(consumer)
                for mp, position in consumer.positions().items():
                    records, next_offset = await self.metadata_log.read(mp, position)
                    if records:
                        consumer.on_records(mp, records)
                        progressed = True
                    elif next_offset > position:
                        # Only offsets without events (or below the topic's start): step over them.
                        consumer.on_records(mp, [(next_offset - 1, None)])
                        progressed = True
            except Exception:  # a metadata partition moving or unreadable: try again shortly
                if trio.current_time() - last_error_log >= CONSUME_ERROR_LOG_S:
                    last_error_log = trio.current_time()
                    log.exception("Reading %s failed (retrying; logged at most every %d s)",
                                  REMOTE_LOG_METADATA_TOPIC, CONSUME_ERROR_LOG_S)
            if progressed:
                self._refresh_earliest()
                self._wake_tasks.set()
                await trio.sleep(0)
                continue
            with trio.move_on_after(CONSUME_IDLE_S):
                await self._wake_consumer.wait()

    async def _assign_pending(self, consumer: RemoteMetadataConsumer) -> None:
        wanted = set(self._pending_assign) | {t for t in self._deleting if consumer.cache(t) is None}
        if not wanted:
            return
        ends: dict[int, int] = {}
        ready: list[TopicIdPartition] = []
        for tip in wanted:
            mp = metadata_partition(tip, consumer.metadata_partitions)
            if mp not in ends:
                end = await self.metadata_log.end_offset(mp)
                if end is None:
                    continue  # its leader is unknown now: try again next round
                ends[mp] = end
            ready.append(tip)
        consumer.assign(ready, ends)
        self._pending_assign.difference_update(ready)

    def cache_of(self, tip: TopicIdPartition) -> RemoteLogMetadataCache | None:
        """The partition's remote metadata once caught up, else None."""
        return self.consumer.cache(tip) if self.consumer is not None else None

    # -- the periodic passes --------------------------------------------------------------
    async def _task_loop(self, nursery: trio.Nursery) -> None:
        interval = self.settings.task_interval_ms / 1000.0
        next_run = trio.current_time()
        while True:
            self._wake_tasks = trio.Event()
            now = trio.current_time()
            if now >= next_run:
                next_run = now + interval
                self._refresh_earliest()
                self._schedule_passes(nursery)
                try:
                    # Gathered here (the caches change on this loop), written on a thread.
                    snapshot = self.status()
                    await trio.to_thread.run_sync(self.write_status, snapshot)
                except OSError as exc:
                    log.warning("Writing %s failed: %s", STATUS_FILE, exc)
            self._schedule_deletes(nursery)
            with trio.move_on_at(next_run):
                await self._wake_tasks.wait()

    def _caught_up(self) -> list[tuple[tuple[str, int], TrackedPartition, TieredPartition, RemoteLogMetadataCache]]:
        """(key, tracked, hosted partition, cache) of each tracked partition still hosted under
        the same topic id whose remote metadata is read."""
        out = []
        for key, tracked in list(self._tracked.items()):
            cache = self.cache_of(tracked.tip)
            if cache is None:
                continue
            try:
                hosted = self.replicas.get(*key)
            except KafkaError:
                continue
            if hosted.topic_id == tracked.tip.topic_id:
                out.append((key, tracked, hosted, cache))
        return out

    def _schedule_passes(self, nursery: trio.Nursery) -> None:
        for key, tracked, hosted, cache in self._caught_up():
            plog = hosted.log
            plog.update_remote_state(enabled=bool(plog.config.remote_storage_enable))
            # Followers learn what is remote from the metadata too: their local retention waits
            # for the copies just as the leader's does.
            plog.update_remote_state(highest_offset=highest_copied_offset(cache, plog.leader_epoch_cache.entries))
            if key in self._busy or not hosted.is_leader(self.node_id) or self.replicas.leadership_suspended:
                continue
            self._busy.add(key)
            nursery.start_soon(self._leader_pass, key, tracked, hosted, cache)

    async def _leader_pass(self, key: tuple[str, int], tracked: TrackedPartition, hosted: TieredPartition,
                           cache: RemoteLogMetadataCache) -> None:
        epoch = hosted.leader_epoch

        def still_leader() -> bool:
            try:
                current = self.replicas.get(*key)
            except KafkaError:
                return False
            return (current is hosted and hosted.is_leader(self.node_id) and hosted.leader_epoch == epoch
                    and not self.replicas.leadership_suspended and self._tracked.get(key) is tracked)

        def publish(event: RemoteLogMetadata) -> None:
            trio.from_thread.run(self._publish, tracked.tip, cache, event, still_leader)

        try:
            if tracked.synced_epoch != epoch:
                # A new leadership: first read every event the previous leader wrote, or this
                # leader would copy again what it copied last.
                if not await self._catch_up(tracked.tip):
                    return
                tracked.synced_epoch = epoch
            await trio.to_thread.run_sync(self._blocking_pass, tracked, hosted, cache, publish)
        except LeadershipLost:
            log.info("%s: leadership moved; its remote log tasks stop", tracked.tip)
        except Exception as exc:  # a store or metadata failure: the next interval retries
            tracked.stats.pass_errors += 1
            log.warning("%s: remote log pass failed: %s", tracked.tip, exc, exc_info=not isinstance(exc, KafkaError))
        finally:
            self._busy.discard(key)

    async def _catch_up(self, tip: TopicIdPartition) -> bool:
        consumer = self.consumer
        if consumer is None:
            return False
        mp = metadata_partition(tip, consumer.metadata_partitions)
        target = await self.metadata_log.catch_up_offset(mp)
        if target is None:
            return False
        with trio.move_on_after(CATCH_UP_TIMEOUT_S):
            while consumer.positions().get(mp, 0) < target:
                self._wake_consumer.set()
                await trio.sleep(0.02)
            return True
        log.info("%s: still reading %s-%d up to %d; the copy pass waits", tip,
                 REMOTE_LOG_METADATA_TOPIC, mp, target)
        return False

    async def _publish(self, tip: TopicIdPartition, cache: RemoteLogMetadataCache | None,
                       event: RemoteLogMetadata, allowed: Callable[[], bool] | None = None) -> None:
        """Append ``event`` durably to its metadata partition, then apply it to ``cache``."""
        consumer = self.consumer
        if consumer is None:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{REMOTE_LOG_METADATA_TOPIC} is not ready")
        if allowed is not None and not allowed():
            raise LeadershipLost(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{tip}: not the leader any more")
        mp = metadata_partition(tip, consumer.metadata_partitions)
        await self.metadata_log.append(mp, serialize(event))
        if cache is not None:
            try:
                cache.apply(event)
            except RemoteLogMetadataError as exc:
                log.warning("%s: event not applied: %s", tip, exc)
            self._refresh_earliest()
        self._wake_consumer.set()

    def _refresh_earliest(self) -> None:
        """Tell each hosted log its earliest readable remote offset (-1: none), whenever the
        caches change here: the log answers its whole start from it without sorting the
        segments. A cache not caught up (again) leaves the last value: a start answered from the
        local log meanwhile would reach the followers, which keep the highest start they hear."""
        for _key, _tracked, hosted, cache in self._caught_up():
            earliest = earliest_remote_offset(cache)
            hosted.log.update_remote_state(earliest_offset=-1 if earliest is None else earliest)

    def _blocking_pass(self, tracked: TrackedPartition, hosted: TieredPartition, cache: RemoteLogMetadataCache,
                       publish: Callable[[RemoteLogMetadata], None]) -> None:
        """Copy, then expire; on a worker thread."""
        copy_then_expire(tracked, hosted, cache, publish, rsm=self.rsm, broker_id=self.node_id,
                         now_ms=self.now_ms, chunks=self.reader.chunks, stats_lock=self._stats_lock)


    # -- deleting topics ------------------------------------------------------------------
    def _schedule_deletes(self, nursery: trio.Nursery) -> None:
        for tip in list(self._deleting):
            if tip not in self._deletes_started:
                self._deletes_started.add(tip)
                nursery.start_soon(self._delete_partition, tip)

    async def _delete_partition(self, tip: TopicIdPartition) -> None:
        """Remove every remote segment of a deleted partition, with Kafka's partition events."""
        delay = 0.5
        # A pass still running for the partition stops at its next publish (it is no longer
        # tracked); wait for it, so it uploads nothing after the segments are listed.
        with trio.move_on_after(CATCH_UP_TIMEOUT_S):
            while (tip.topic, tip.partition) in self._busy:
                await trio.sleep(0.02)
        for attempt in range(20):
            cache = self._deleting.get(tip) or self.cache_of(tip)
            if cache is None:
                self._wake_consumer.set()
                await trio.sleep(delay)  # the metadata is still being read
                continue
            try:
                state = cache.partition_delete_state
                if state is None:
                    await self._publish(
                        tip, cache, self._partition_event(tip, RemotePartitionDeleteState.DELETE_PARTITION_MARKED))
                    state = RemotePartitionDeleteState.DELETE_PARTITION_MARKED
                if state is RemotePartitionDeleteState.DELETE_PARTITION_MARKED:
                    await self._publish(
                        tip, cache, self._partition_event(tip, RemotePartitionDeleteState.DELETE_PARTITION_STARTED))
                segments = cache.list_all_remote_log_segments()
                for seg in segments:
                    await trio.to_thread.run_sync(self.rsm.delete_log_segment_data, seg.remote_log_segment_id)
                    self.reader.chunks.forget(seg.remote_log_segment_id)
                await self._publish(
                    tip, cache, self._partition_event(tip, RemotePartitionDeleteState.DELETE_PARTITION_FINISHED))
                log.info("%s: deleted %d remote segment(s) of the deleted partition", tip, len(segments))
                break
            except Exception as exc:
                log.warning("%s: deleting remote data failed (attempt %d): %s", tip, attempt + 1, exc)
                await trio.sleep(delay)
                delay = min(delay * 2, 10.0)
        else:
            log.error("%s: gave up deleting the remote data of the deleted partition", tip)
        self._deleting.pop(tip, None)
        self._deletes_started.discard(tip)
        if self.consumer is not None:
            self.consumer.unassign([tip])

    def _partition_event(self, tip: TopicIdPartition,
                         state: RemotePartitionDeleteState) -> RemotePartitionDeleteMetadata:
        return RemotePartitionDeleteMetadata(tip, state, self.now_ms(), self.node_id)

    # ================================================================== reads
    def _tracked_cache(self, hosted: TieredPartition) -> RemoteLogMetadataCache | None:
        found = self._tracked_partition(hosted)
        return None if found is None else found[1]

    def _tracked_partition(self, hosted: TieredPartition) -> tuple[TrackedPartition, RemoteLogMetadataCache] | None:
        """The partition's tracking entry and caught-up remote metadata, or None."""
        tracked = self._tracked.get((hosted.topic, hosted.index))
        if tracked is None or tracked.tip.topic_id != hosted.topic_id:
            return None
        cache = self.cache_of(tracked.tip)
        return None if cache is None else (tracked, cache)

    def highest_remote_offset(self, hosted: TieredPartition) -> int:
        """The highest offset copied to remote storage along this log's epochs, -1 for none."""
        cache = self._tracked_cache(hosted)
        if cache is None:
            return -1
        return highest_copied_offset(cache, hosted.log.leader_epoch_cache.entries)

    def serves_remotely(self, hosted: TieredPartition, offset: int) -> bool:
        """Whether a fetch at ``offset`` is below the local log but inside the whole log."""
        return offset < hosted.log.local_log_start_offset and offset >= hosted.log.log_start_offset \
            and self._tracked_cache(hosted) is not None
    async def read_remote(self, hosted: TieredPartition, offset: int, max_bytes: int, *, min_one: bool) -> bytes | None:
        """Whole batches from ``offset`` out of remote storage (off the event loop), or None when
        no remote segment holds it (the caller answers OFFSET_OUT_OF_RANGE)."""
        return await self.fetcher.read(hosted, offset, max_bytes, min_one=min_one)

    async def read_remote_committed(self, hosted: TieredPartition, offset: int, max_bytes: int, *,
                                    min_one: bool) -> tuple[bytes, Sequence[tuple[int, int]]] | None:
        """``read_remote`` for a READ_COMMITTED consumer: the batches and the aborted
        transactions overlapping them, as (producer id, first offset)."""
        return await self.fetcher.read_committed(hosted, offset, max_bytes, min_one=min_one)

    async def offset_for_timestamp(self, hosted: TieredPartition, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first remote record with timestamp >= ``timestamp``, or
        None when no remote record is that late (then the local log answers)."""
        return await self.fetcher.offset_for_timestamp(hosted, timestamp)

    # ================================================================== visibility
    def status(self) -> dict[str, Any]:
        """Per partition: local and remote bytes and segments, offsets, counters."""
        partitions = {}
        totals = PartitionStats()
        for key, tracked in list(self._tracked.items()):
            try:
                hosted = self.replicas.get(*key)
            except KafkaError:
                continue
            cache = self.cache_of(tracked.tip)
            finished = cache.segments_in_state(_FINISHED) if cache is not None else []
            plog = hosted.log
            with self._stats_lock:
                stats = asdict(tracked.stats)
            for name, value in stats.items():
                setattr(totals, name, getattr(totals, name) + value)
            partitions[f"{key[0]}-{key[1]}"] = {
                "topic": key[0], "partition": key[1],
                "leader": hosted.is_leader(self.node_id),
                "metadata_ready": cache is not None,
                "local_bytes": plog.size_in_bytes,
                "local_segments": len(plog.segments),
                "remote_bytes": sum(s.segment_size_in_bytes for s in finished),
                "remote_segments": len(finished),
                "log_start_offset": hosted.log.log_start_offset,
                "local_log_start_offset": plog.local_log_start_offset,
                "highest_remote_offset": plog.highest_offset_in_remote_storage,
                "log_end_offset": plog.log_end_offset,
                **stats,
            }
        return {"broker": self.node_id, "metadata_topic_ready": self.metadata_topic_ready,
                "cache": {"bytes": self.reader.chunks.size, "hits": self.reader.chunks.hits,
                          "misses": self.reader.chunks.misses},
                "totals": asdict(totals), "partitions": partitions}

    def write_status(self, snapshot: dict[str, Any] | None = None) -> None:
        """Write :meth:`status` (or ``snapshot`` of it) to ``<first log dir>/remote-log-manager-status.json``
        atomically."""
        path = os.path.join(self.log_dirs[0], STATUS_FILE)
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.status() if snapshot is None else snapshot, f, indent=1, sort_keys=True)
        os.replace(tmp, path)

    async def aclose(self) -> None:
        await self.metadata_log.aclose()

    def close(self) -> None:
        try:
            self.rsm.close()
        except Exception:  # closing must not stop the node's shutdown
            log.exception("Closing the remote storage manager failed")
