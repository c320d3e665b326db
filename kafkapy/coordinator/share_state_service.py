"""The Trio edge of the share coordinator (Kafka's ShareCoordinatorService) on ``__share_group_state``.

One :class:`~kafkapy.coordinator.share_state.shard.ShareStateShard` runs per ``__share_group_state``
partition this broker leads, loaded by replaying the partition's log (COORDINATOR_LOAD_IN_PROGRESS
meanwhile) and dropped when leadership moves or the leader epoch changes. This module does what
the sans-I/O core cannot:

* places a share partition's state on ``abs(hashCode("<group>:<topic id>:<partition>")) %
  share.coordinator.state.topic.num.partitions``, as Kafka's SharePartitionKey;
* runs each operation on its shard, appends the records it made as one batch and waits for the
  in-sync replicas (acks=all, at most ``share.coordinator.write.timeout.ms``) before answering;
  an append refused outright is rolled back. A write appended but not replicated in time stays
  in memory as it stays in the local log: the caller is told to retry, and a leader change
  reloads the shard from whichever log wins;
* every ``share.coordinator.cold.partition.snapshot.interval.ms`` folds the keys with pending
  updates into snapshots, and every ``share.coordinator.state.topic.prune.interval.ms`` deletes
  the records below the oldest snapshot still needed (DeleteRecords on the leader; the topic is
  ``cleanup.policy=delete`` with infinite retention, so this is what bounds it).

It is also the in-process :class:`~kafkapy.share.persister.SharePersister` of the keys this node
coordinates: every call answers a :class:`~kafkapy.share.persister.StateResult`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import trio

from kafkapy.coordinator.schema import partition_for
from kafkapy.coordinator.share_state import codec
from kafkapy.coordinator.share_state.shard import ShareStateConfig, ShareStateOutcome, ShareStateShard
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.protocol.schema_codec import SchemaError
from kafkapy.records import format as fmt
from kafkapy.records.builder import Record, build_batch
from kafkapy.records.reader import iter_batches, iter_records
from kafkapy.share.partition import PartitionState
from kafkapy.share.persister import StateResult
from kafkapy.storage import kafka_uuid_to_uuid, uuid_to_kafka_uuid

log = logging.getLogger("kafkapy.coordinator.share")

SHARE_STATE_TOPIC = "__share_group_state"
E = ErrorCode


class ShareStateReplicas(Protocol):
    """The replica manager as the share coordinator uses it; the hosted partition has ``log``
    and ``delete_records_on_leader`` (the broker's Partition)."""

    def get(self, topic: str, partition: int) -> Any: ...

    def check_min_insync(self, hosted: Any) -> None: ...

    def append(self, hosted: Any, records: bytearray, *, now_ms: int, from_client: bool = True) -> Any: ...

    async def wait_for_replication(self, hosted: Any, required_offset: int, deadline: float) -> ErrorCode: ...


@dataclass(frozen=True)
class ShareCoordinatorSettings:
    """The ``share.coordinator.*`` broker settings (Kafka 4.4's ShareCoordinatorConfig defaults)."""

    num_partitions: int = 50
    replication_factor: int = 3
    min_isr: int = 2
    segment_bytes: int = 100 * 1024 * 1024
    snapshot_update_records_per_snapshot: int = 500
    write_timeout_ms: int = 5000
    load_buffer_size: int = 5 * 1024 * 1024
    prune_interval_ms: int = 300_000
    cold_partition_snapshot_interval_ms: int = 300_000

    def topic_configs(self) -> dict[str, str | None]:
        """The configs Kafka creates ``__share_group_state`` with (shareGroupStateTopicConfigs)."""
        return {"cleanup.policy": "delete", "compression.type": "producer", "retention.ms": "-1",
                "segment.bytes": str(self.segment_bytes), "min.insync.replicas": str(self.min_isr)}


def _setting(config: Any, name: str, default: int) -> int:
    """A broker setting by Kafka's name: the declared one, else the raw property (these names are
    not all declared in kafkapy.config yet), else Kafka's default."""
    try:
        value = config.get(name)
    except LookupError:
        props = getattr(config, "props", None)
        value = props.get(name) if props is not None else None
    return default if value is None else int(value)


def share_coordinator_settings(config: Any) -> ShareCoordinatorSettings:
    d = ShareCoordinatorSettings()
    p = "share.coordinator."
    return ShareCoordinatorSettings(
        num_partitions=_setting(config, p + "state.topic.num.partitions", d.num_partitions),
        replication_factor=_setting(config, p + "state.topic.replication.factor", d.replication_factor),
        min_isr=_setting(config, p + "state.topic.min.isr", d.min_isr),
        segment_bytes=_setting(config, p + "state.topic.segment.bytes", d.segment_bytes),
        snapshot_update_records_per_snapshot=_setting(config, p + "snapshot.update.records.per.snapshot",
                                                      d.snapshot_update_records_per_snapshot),
        write_timeout_ms=_setting(config, p + "write.timeout.ms", d.write_timeout_ms),
        load_buffer_size=_setting(config, p + "load.buffer.size", d.load_buffer_size),
        prune_interval_ms=_setting(config, p + "state.topic.prune.interval.ms", d.prune_interval_ms),
        cold_partition_snapshot_interval_ms=_setting(config, p + "cold.partition.snapshot.interval.ms",
                                                     d.cold_partition_snapshot_interval_ms),
    )


def coordinator_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    """Kafka's SharePartitionKey.asCoordinatorKey: ``<group>:<topic id, base64>:<partition>``."""
    return f"{group_id}:{uuid_to_kafka_uuid(topic_id)}:{partition}"


def parse_coordinator_key(key: str) -> tuple[str, uuid.UUID, int]:
    """(group, topic id, partition) of a FindCoordinator SHARE key; ValueError when it is not one
    (Kafka's SharePartitionKey.getInstance: the group may itself hold colons)."""
    parts = key.split(":")
    if len(parts) < 3:
        raise ValueError(f"Invalid key format: expected - <groupId>:<topicId>:<partition>, found -  {key}")
    group = ":".join(parts[:-2])
    if not group.strip():
        raise ValueError("GroupId must not be empty")
    return group, kafka_uuid_to_uuid(parts[-2]), int(parts[-1])


def _write_error(code: int) -> int:
    """What the caller is told when a state record could not be written."""
    if code in (E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_ENOUGH_REPLICAS, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                E.REQUEST_TIMED_OUT):
        return E.COORDINATOR_NOT_AVAILABLE
    if code in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR, E.NOT_COORDINATOR):
        return E.NOT_COORDINATOR
    return E.UNKNOWN_SERVER_ERROR


@dataclass
class _Loaded:
    shard: ShareStateShard
    leader_epoch: int
    pruned_to: int = 0


class ShareCoordinator:
    """Every share-state shard this broker leads, and the work around them (module docstring)."""

    def __init__(self, config: Any, replicas: ShareStateReplicas, clock: Any, node_id: int, *,
                 image: Callable[[], Any]) -> None:
        self.config = config
        self.replicas = replicas
        self.clock = clock
        self.node_id = node_id
        self.settings = share_coordinator_settings(config)
        self._image = image
        self._shard_config = ShareStateConfig(self.settings.snapshot_update_records_per_snapshot)
        self.shards: dict[int, _Loaded] = {}
        #: Partitions being loaded, with the leader epoch they are loaded at.
        self.loading: dict[int, int] = {}
        self._pending_loads: list[tuple[int, int]] = []
        self._wake = trio.Event()
        self._topic_id: Any = None

    # ---------------------------------------------------------------- placement
    def partition_for(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int:
        return self.partition_for_key(coordinator_key(group_id, topic_id, partition))

    def partition_for_key(self, key: str) -> int:
        return partition_for(key, self.settings.num_partitions)

    def shard_for(self, group_id: str, topic_id: uuid.UUID, partition: int) -> ShareStateShard:
        """The shard holding the key's state, or the KafkaError a caller retries on."""
        p = self.partition_for(group_id, topic_id, partition)
        loaded = self.shards.get(p)
        if loaded is not None:
            return loaded.shard
        if p in self.loading:
            raise KafkaError(E.COORDINATOR_LOAD_IN_PROGRESS)
        topic = self._image().topics.by_name.get(SHARE_STATE_TOPIC)
        reg = None if topic is None else topic.partitions.get(p)
        if reg is None:
            raise KafkaError(E.COORDINATOR_NOT_AVAILABLE)
        if reg.leader != self.node_id:
            raise KafkaError(E.NOT_COORDINATOR)
        raise KafkaError(E.COORDINATOR_LOAD_IN_PROGRESS)  # led, not yet scheduled for loading

    # ---------------------------------------------------------------- the persister's calls
    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                         start_offset: int) -> StateResult:
        now = self.clock.now_ms()
        return await self._run(group_id, topic_id, partition,
                               lambda s: s.initialize(group_id, topic_id, partition, state_epoch, start_offset, now))

    async def read(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int) -> StateResult:
        return await self._run(group_id, topic_id, partition,
                               lambda s: s.read(group_id, topic_id, partition, leader_epoch))

    async def read_summary(self, group_id: str, topic_id: uuid.UUID, partition: int,
                           leader_epoch: int = -1) -> StateResult:
        return await self._run(group_id, topic_id, partition,
                               lambda s: s.read_summary(group_id, topic_id, partition, leader_epoch))

    async def write(self, group_id: str, topic_id: uuid.UUID, partition: int, state: PartitionState) -> StateResult:
        now = self.clock.now_ms()
        return await self._run(group_id, topic_id, partition,
                               lambda s: s.write(group_id, topic_id, partition, state, now))

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> StateResult:
        return await self._run(group_id, topic_id, partition, lambda s: s.delete(group_id, topic_id, partition))

    async def _run(self, group_id: str, topic_id: uuid.UUID, partition: int,
                   op: Callable[[ShareStateShard], ShareStateOutcome]) -> StateResult:
        try:
            shard = self.shard_for(group_id, topic_id, partition)
        except KafkaError as exc:
            return StateResult(exc.code, exc.message)
        p = self.partition_for(group_id, topic_id, partition)
        outcome = op(shard)
        if not outcome.records:
            return outcome.response
        code = await self._write(p, shard, outcome)
        if code != E.NONE:
            return StateResult(_write_error(code))
        return outcome.response

    # ---------------------------------------------------------------- log writes
    async def _write(self, p: int, shard: ShareStateShard, outcome: ShareStateOutcome) -> int:
        """Append ``outcome``'s records as one batch and wait for the in-sync replicas; rolled
        back when the append itself is refused (nothing reached the log)."""
        now = self.clock.now_ms()
        try:
            hosted = self.replicas.get(SHARE_STATE_TOPIC, p)
            self.replicas.check_min_insync(hosted)
            batch = build_batch([Record(*codec.encode(r), timestamp=now) for r in outcome.records], now_ms=now)
            result = self.replicas.append(hosted, bytearray(batch), now_ms=now, from_client=False)
        except (KafkaError, OSError) as exc:
            outcome.rollback()
            log.warning("Writing to %s-%d failed: %s", SHARE_STATE_TOPIC, p, exc)
            return exc.code if isinstance(exc, KafkaError) else E.KAFKA_STORAGE_ERROR
        shard.appended(outcome.records, result.last_offset - len(outcome.records) + 1)
        deadline = trio.current_time() + self.settings.write_timeout_ms / 1000.0
        try:
            return await self.replicas.wait_for_replication(hosted, result.last_offset + 1, deadline)
        except Exception:  # a bug of ours: this request fails, the broker goes on
            log.exception("Waiting for %s-%d to replicate offset %d failed", SHARE_STATE_TOPIC, p, result.last_offset)
            return E.UNKNOWN_SERVER_ERROR

    # ---------------------------------------------------------------- metadata changes
    def on_image(self, image: Any) -> None:
        """Load the shards of the partitions this broker now leads, at their leader epochs; drop
        the rest (and any whose leader epoch moved: a newer one loads afresh)."""
        led: dict[int, int] = {}
        topic = image.topics.by_name.get(SHARE_STATE_TOPIC)
        if topic is not None:
            if self._topic_id is not None and topic.id != self._topic_id:
                self.shards.clear()
                self.loading.clear()
            self._topic_id = topic.id
            led = {index: reg.leader_epoch for index, reg in topic.partitions.items() if reg.leader == self.node_id}
        for p, loaded in list(self.shards.items()):
            if led.get(p) != loaded.leader_epoch:
                log.info("Unloading share coordinator partition %s-%d", SHARE_STATE_TOPIC, p)
                del self.shards[p]
        for p, epoch in list(self.loading.items()):
            if led.get(p) != epoch:
                del self.loading[p]  # the load in progress finds itself superseded
        for p, epoch in sorted(led.items()):
            if p not in self.shards and p not in self.loading:
                self.loading[p] = epoch
                self._pending_loads.append((p, epoch))
        if self._pending_loads:
            self._wake.set()

    async def _load(self, p: int, epoch: int) -> None:
        started = self.clock.now_ms()
        shard = ShareStateShard(self._shard_config)
        count = 0
        try:
            plog = self.replicas.get(SHARE_STATE_TOPIC, p).log
            offset = plog.local_log_start_offset
            while offset < plog.log_end_offset:
                fetched = plog.read(offset, self.settings.load_buffer_size)
                if fetched is None:
                    break
                advanced = False
                for header, batch in iter_batches(fetched.read_bytes()):
                    if header.last_offset < offset:
                        continue
                    if not header.attributes & fmt.CONTROL_MASK:
                        for rec in iter_records(batch):
                            if rec.offset >= offset:
                                record = codec.decode(rec.key, rec.value)
                                if record is not None:
                                    shard.replay(record, rec.offset)
                                    count += 1
                    offset = header.last_offset + 1
                    advanced = True
                if not advanced:
                    break
                await trio.sleep(0)
        except Exception as exc:  # KafkaError, OSError, corrupt records, or a bug: not served
            log.error("Loading share coordinator partition %s-%d failed: %s", SHARE_STATE_TOPIC, p, exc,
                      exc_info=not isinstance(exc, (KafkaError, OSError, SchemaError)))
            if self.loading.get(p) == epoch:
                del self.loading[p]
            return
        if self.loading.get(p) != epoch:
            return  # leadership moved while loading
        del self.loading[p]
        self.shards[p] = _Loaded(shard, epoch, plog.local_log_start_offset)
        log.info("Loaded share coordinator partition %s-%d at leader epoch %d: %d records in %d ms",
                 SHARE_STATE_TOPIC, p, epoch, count, self.clock.now_ms() - started)

    # ---------------------------------------------------------------- background work
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._timer, self.settings.cold_partition_snapshot_interval_ms,
                               self.snapshot_cold_partitions)
            nursery.start_soon(self._timer, self.settings.prune_interval_ms, self.prune)
            task_status.started()
            while True:
                while self._pending_loads:
                    nursery.start_soon(self._load, *self._pending_loads.pop(0))
                self._wake = trio.Event()
                await self._wake.wait()

    async def _timer(self, interval_ms: int, job: Callable[[], Any]) -> None:
        while True:
            await trio.sleep(interval_ms / 1000.0)
            try:
                await job()
            except Exception:  # a bug of ours must not stop the broker; the next round tries again
                log.exception("The share coordinator's periodic %s failed", getattr(job, "__name__", job))

    async def snapshot_cold_partitions(self) -> None:
        """Write a snapshot of every key with updates since its last one, so that pruning is not
        held back by keys written rarely."""
        now = self.clock.now_ms()
        for p, loaded in list(self.shards.items()):
            outcome = loaded.shard.snapshot_cold_partitions(now)
            if outcome.records:
                await self._write(p, loaded.shard, outcome)

    async def prune(self) -> None:
        """Delete, on each led partition, the records below the oldest snapshot still needed."""
        for p, loaded in list(self.shards.items()):
            try:
                hosted = self.replicas.get(SHARE_STATE_TOPIC, p)
                target = min(loaded.shard.prunable_offset(), hosted.log.high_watermark)
                if target > loaded.pruned_to:
                    hosted.delete_records_on_leader(target)
                    loaded.pruned_to = target
                    log.debug("Pruned %s-%d below offset %d", SHARE_STATE_TOPIC, p, target)
            except KafkaError as exc:
                log.warning("Pruning %s-%d failed: %s", SHARE_STATE_TOPIC, p, exc)


__all__ = ["SHARE_STATE_TOPIC", "ShareCoordinator", "ShareCoordinatorSettings", "coordinator_key",
           "parse_coordinator_key", "share_coordinator_settings"]
