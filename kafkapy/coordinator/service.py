"""The Trio edge of the group coordinator: shards, loading, log writes, parked requests and timers.

One :class:`~kafkapy.coordinator.group.GroupShard` runs per ``__consumer_offsets`` partition this
broker leads. This module does what the sans-I/O core cannot:

* loads a shard by replaying its partition's log (requests for its groups get
  COORDINATOR_LOAD_IN_PROGRESS meanwhile), transactional batches and their markers included;
* appends the records an operation produced to the partition before the operation is answered
  (a TxnOffsetCommit's as one transactional batch of its producer);
* completes a producer's pending transactional offsets once its marker is in the partition
  (``complete_transaction``, called by the WriteTxnMarkers handler);
* parks JoinGroup / SyncGroup requests until the rebalance answers them, each with a deadline;
* calls the shards' ``tick`` when their next deadline is due (rebalance, session, pending sync;
  consumer groups' session and rebalance timeouts) and expires old offsets every
  ``offsets.retention.check.interval.ms``;
* answers ConsumerGroupHeartbeat once its records are committed (``run_modern``), undoing the
  group's change when they could not be appended;
* keeps the consumer groups' view of the cluster's topics current (``on_topics``).
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Generic, Protocol

import trio

from kafkapy.coordinator import schema
from kafkapy.coordinator.classic_group import GroupConfig
from kafkapy.coordinator.consumer.migration_policy import MigrationPolicy
from kafkapy.coordinator.group import ConsumerGroupConfig, GroupShard, TopicInfo
from kafkapy.coordinator.outcome import PARKED_TYPE, Outcome
from kafkapy.coordinator.replicas import OffsetsReplicas, P
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.records import format as fmt
from kafkapy.records.builder import Record, build_batch
from kafkapy.records.control import read_marker
from kafkapy.records.reader import iter_batches, iter_records

log = logging.getLogger("kafkapy.coordinator")



def _coordinator_write_error(code: int) -> int:
    """What a member is told when the group's record could not be written (Kafka's mapping)."""
    if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_COORDINATOR):
        return ErrorCode.NOT_COORDINATOR
    return ErrorCode.UNKNOWN_SERVER_ERROR


def setting(config: Any, name: str) -> int:
    """An integer broker setting by Kafka's name (declared with its default in kafkapy.config)."""
    return int(config.get(name))


def group_config(config: Any) -> GroupConfig:
    return GroupConfig(
        min_session_timeout_ms=setting(config, "group.min.session.timeout.ms"),
        max_session_timeout_ms=setting(config, "group.max.session.timeout.ms"),
        initial_rebalance_delay_ms=setting(config, "group.initial.rebalance.delay.ms"),
        max_size=setting(config, "group.max.size"),
        offset_metadata_max_bytes=setting(config, "offset.metadata.max.bytes"),
        offsets_retention_ms=setting(config, "offsets.retention.minutes") * 60_000,
    )


def consumer_group_config(config: Any) -> ConsumerGroupConfig:
    """The broker-wide ``group.consumer.*`` settings of consumer groups (per-group overrides come
    on top, see ``GroupCoordinator.consumer_config_for`` and :func:`with_group_overrides`)."""
    # Kafka also takes the assignors' class names; the built-ins are known by short names here.
    short = tuple(n.strip().rsplit(".", 1)[-1].removesuffix("Assignor").lower()
                  for n in config.get_list("group.consumer.assignors") if n.strip())
    return ConsumerGroupConfig(
        session_timeout_ms=config.get_int("group.consumer.session.timeout.ms"),
        heartbeat_interval_ms=config.get_int("group.consumer.heartbeat.interval.ms"),
        max_size=config.get_int("group.consumer.max.size"),
        assignors=short or ("uniform", "range"),
        regex_refresh_interval_ms=config.get_int("group.consumer.regex.refresh.interval.ms"),
    )


def migration_policy(config: Any) -> MigrationPolicy:
    """``group.consumer.migration.policy``: the online conversions between classic and consumer
    groups (Kafka's default: ``bidirectional``; the group size limits are ``group.max.size`` and
    ``group.consumer.max.size``)."""
    try:
        value = config.get("group.consumer.migration.policy")
    except KeyError:
        value = None
    return MigrationPolicy.parse(str(value or MigrationPolicy.BIDIRECTIONAL.value))
class ConsumerOverrides(Protocol):
    """The consumer part of a group's effective configs (``metadata.group_configs.GroupConfig``)."""

    @property
    def consumer_session_timeout_ms(self) -> int: ...

    @property
    def consumer_heartbeat_interval_ms(self) -> int: ...


def with_group_overrides(base: ConsumerGroupConfig, group: ConsumerOverrides) -> ConsumerGroupConfig:
    """``base`` with a group's own session timeout and heartbeat interval (the two consumer
    settings Kafka 4.4 lets a GROUP config resource change)."""
    return replace(base, session_timeout_ms=group.consumer_session_timeout_ms,
                   heartbeat_interval_ms=group.consumer_heartbeat_interval_ms)


#: Kafka's internal topics, which a subscribed regular expression never matches.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


def topic_infos(image: Any) -> dict[str, TopicInfo]:
    """What the consumer groups need of every topic in a metadata image."""
    return {name: TopicInfo(t.id, name, len(t.partitions), name in INTERNAL_TOPICS)
            for name, t in image.topics.by_name.items()}


class _Waiter:
    __slots__ = ("event", "value")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.value: object = None


class GroupCoordinator(Generic[P]):
    """Every group shard this broker leads, and the work around them."""

    def __init__(self, config: Any, replicas: OffsetsReplicas[P], clock: Any, node_id: int,
                 new_uuid: Callable[[], str] | None = None) -> None:
        self.config = config
        self.replicas = replicas
        self.clock = clock
        self.node_id = node_id
        self.group_config = group_config(config)
        self.num_partitions = setting(config, "offsets.topic.num.partitions")
        self.commit_timeout_ms = setting(config, "offsets.commit.timeout.ms")
        self._new_uuid = new_uuid or (lambda: str(uuid.uuid4()))
        self.shards: dict[int, GroupShard] = {}
        self.loading: set[int] = set()
        self._waiters: dict[tuple[str, str, str], list[_Waiter]] = {}
        self._nursery: trio.Nursery | None = None
        self._pending_loads: list[int] = []
        self._wake = trio.Event()
        self._topic_id: Any = None
        self.consumer_config = consumer_group_config(config)
        self.migration_policy = migration_policy(config)
        #: A group's consumer settings: the broker's, unless the group has overrides (set by
        #: whoever reads the per-group configs of the metadata image).
        self.consumer_config_for: Callable[[str], ConsumerGroupConfig] = lambda _group_id: self.consumer_config
        self.topics: dict[str, TopicInfo] = {}
        self.topics_version = -1

    # ---------------------------------------------------------------- placement
    def partition_for(self, group_id: str) -> int:
        return schema.partition_for(group_id, self.num_partitions)

    def shard_for(self, group_id: str) -> GroupShard:
        """The loaded shard of a group, or the error a client retries on."""
        p = self.partition_for(group_id)
        shard = self.shards.get(p)
        if shard is not None:
            return shard
        if p in self.loading:
            raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        try:
            hosted = self.replicas.get(schema.OFFSETS_TOPIC, p)
        except KafkaError:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE) from None
        if hosted.leader_id != self.node_id:
            raise KafkaError(ErrorCode.NOT_COORDINATOR)
        # Led but not yet scheduled for loading (the image arrived before the coordinator ran).
        raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)

    # ---------------------------------------------------------------- metadata changes
    def on_image(self, image: Any) -> None:
        """Load the shards of ``__consumer_offsets`` partitions this broker now leads; drop the rest."""
        led: set[int] = set()
        topic = image.topics.by_name.get(schema.OFFSETS_TOPIC)
        if topic is not None:
            if self._topic_id is not None and topic.id != self._topic_id:
                for p in list(self.shards):
                    self._unload(p)
            self._topic_id = topic.id
            for index, reg in topic.partitions.items():
                if reg.leader == self.node_id:
                    led.add(index)
        for p in list(self.shards):
            if p not in led:
                self._unload(p)
        for p in sorted(led):
            if p not in self.shards and p not in self.loading:
                self.loading.add(p)
                self._pending_loads.append(p)
        if self._pending_loads:
            self._wake.set()

    def on_topics(self, update: Any) -> None:
        """A metadata update: when it created or deleted topics or added partitions, the
        consumer groups see the new topic view on their next heartbeat."""
        image = update.image
        changed = update.full or self.topics_version < 0 or bool(update.created_topics or update.deleted_topics)
        if not changed:
            for topic_id in update.changed_partitions:
                before, after = update.previous.topics.by_id.get(topic_id), image.topics.by_id.get(topic_id)
                if before is None or after is None or len(before.partitions) != len(after.partitions):
                    changed = True
                    break
        if not changed:
            return
        self.topics = topic_infos(image)
        self.topics_version = image.offset
        for shard in self.shards.values():
            shard.set_topics(self.topics, self.topics_version)

    def _unload(self, p: int) -> None:
        shard = self.shards.pop(p, None)
        if shard is None:
            return
        log.info("Unloading group coordinator partition %d", p)
        for key in [k for k in self._waiters if self.partition_for(k[0]) == p]:
            for w in self._waiters.pop(key):
                w.value = KafkaError(ErrorCode.NOT_COORDINATOR)
                w.event.set()

    async def _load(self, p: int) -> None:
        started = self.clock.now_ms()
        shard = GroupShard(p, self.group_config, self._new_uuid, consumer_config=self.consumer_config,
                           consumer_config_for=lambda g: self.consumer_config_for(g),
                           migration_policy=self.migration_policy)
        shard.set_topics(self.topics, self.topics_version)
        try:
            hosted = self.replicas.get(schema.OFFSETS_TOPIC, p)
            plog = hosted.log
            offset = plog.local_log_start_offset
            chunk = setting(self.config, "offsets.load.buffer.size")
            count = 0
            # The end is re-read each round: transaction markers may be appended while we load
            # (the shard is installed right after the last check, with no await in between, so
            # none is missed and complete_transaction can ignore shards still loading).
            while offset < plog.log_end_offset:
                fetched = plog.read(offset, chunk)
                if fetched is None:
                    break
                data = fetched.read_bytes()
                advanced = False
                for header, batch in iter_batches(data):
                    if header.last_offset < offset:
                        continue
                    if header.attributes & fmt.CONTROL_MASK:
                        marker = read_marker(batch)
                        if marker is not None:
                            shard.replay_marker(header.producer_id, marker.commit, started)
                    else:
                        pid = header.producer_id if header.is_transactional else fmt.NO_PRODUCER_ID
                        for rec in iter_records(batch):
                            if rec.offset >= offset and rec.key is not None:
                                shard.replay(rec.key, rec.value, started, rec.offset, pid)
                                count += 1
                    offset = header.last_offset + 1
                    advanced = True
                if not advanced:
                    break
                await trio.sleep(0)
        except KafkaError as exc:
            log.error("Loading group coordinator partition %d failed: %s", p, exc)
            self.loading.discard(p)
            return
        shard.finish_load(self.clock.now_ms())
        if p in self.loading:
            self.loading.discard(p)
            self.shards[p] = shard
            log.log(logging.INFO if count else logging.DEBUG,
                    "Loaded group coordinator partition %d: %d records, %d groups in %d ms",
                    p, count, len(shard.groups), self.clock.now_ms() - started)
            self._wake.set()

    # ---------------------------------------------------------------- applying outcomes
    def apply(self, shard: GroupShard, outcome: Outcome) -> tuple[P, int] | None:
        """Write the outcome's records, then answer the parked requests it completed.

        Returns (hosted partition, offset after the write) when records were written, so the
        caller can wait for them to replicate."""
        written = None
        if outcome.records:
            try:
                written = self._append(shard.partition, outcome)
            except (KafkaError, OSError) as exc:
                code = exc.code if isinstance(exc, KafkaError) else ErrorCode.KAFKA_STORAGE_ERROR
                log.error("Writing to %s-%d failed: %s", schema.OFFSETS_TOPIC, shard.partition, exc)
                if not outcome.on_write_failure:
                    raise
                outcome.write_failed(_coordinator_write_error(code), self.clock.now_ms())
                self._complete(outcome)
                return None
        if written is not None and outcome.after_commit and self._nursery is not None:
            # Settled by its own task, not by the request that wrote it: the members waiting
            # on it are answered even if that request's connection goes away meanwhile.
            self._nursery.start_soon(self._settle_on_commit, outcome, *written)
            self._complete(outcome)
            return None
        outcome.written(self.clock.now_ms())
        self._complete(outcome)
        return written

    async def _settle_on_commit(self, outcome: Outcome, hosted: P, required: int) -> None:
        """Apply ``outcome``'s held state changes once its records are committed, or its
        failure handling if they cannot be, then answer the requests that completes."""
        deadline = trio.current_time() + self.commit_timeout_ms / 1000.0
        try:
            code = await self.replicas.wait_for_replication(hosted, required, deadline)
        except Exception:
            log.exception("Waiting for %s-%d to replicate offset %d failed", schema.OFFSETS_TOPIC,
                          getattr(hosted, "index", -1), required - 1)
            code = ErrorCode.UNKNOWN_SERVER_ERROR
        # The members answered now get a fresh session from now (see
        # ClassicGroupMembership._answer_sync).
        if code == ErrorCode.NONE:
            outcome.written(self.clock.now_ms())
        else:
            log.warning("The group record at %s-%d offset %d was not committed: %s",
                        schema.OFFSETS_TOPIC, getattr(hosted, "index", -1), required - 1,
                        ErrorCode(code).name)
            outcome.write_failed(_coordinator_write_error(code), self.clock.now_ms())
        self._complete(outcome)
        self._wake.set()  # a failure moved the group's deadlines (it rebalances)

    def _complete(self, outcome: Outcome) -> None:
        for line in outcome.log:
            log.info(line)
        outcome.log.clear()
        for key, result in outcome.completions:
            for w in self._waiters.pop(key, []):
                w.value = result
                w.event.set()
        # The timer loop re-reads the deadlines when a rebalance moved (heartbeats and commits
        # only push deadlines later; the loop also wakes at least once a second).
        if outcome.completions or isinstance(outcome.response, PARKED_TYPE):
            self._wake.set()

    def _append(self, partition: int, outcome: Outcome) -> tuple[P, int]:
        now = self.clock.now_ms()
        try:
            hosted = self.replicas.get(schema.OFFSETS_TOPIC, partition)
        except KafkaError:
            raise KafkaError(ErrorCode.NOT_COORDINATOR) from None
        records = outcome.records
        pid, epoch = outcome.producer_id, outcome.producer_epoch
        if pid >= 0:
            # The partition's producer state fences a stale epoch, as Kafka's coordinator
            # appends do (our own appends skip the client checks).
            entry = hosted.log.producer_state.last_entry(pid)
            if entry is not None and epoch < entry.producer_epoch:
                raise KafkaError(ErrorCode.INVALID_PRODUCER_EPOCH,
                                 f"epoch {epoch} of producer {pid} is older than {entry.producer_epoch}")
        batch = build_batch([Record(k, v, timestamp=now) for k, v in records], now_ms=now,
                            producer_id=pid if pid >= 0 else fmt.NO_PRODUCER_ID,
                            producer_epoch=epoch if pid >= 0 else fmt.NO_PRODUCER_EPOCH,
                            transactional=pid >= 0)
        result = self.replicas.append(hosted, bytearray(batch), now_ms=now, from_client=False)
        outcome.base_offset = result.last_offset + 1 - len(records)
        return hosted, result.last_offset + 1

    def complete_transaction(self, offsets_partition: int, producer_id: int, commit: bool) -> None:
        """``producer_id``'s end-transaction marker was appended to ``offsets_partition``: its
        pending offsets in that partition's groups are committed (or dropped on abort). A shard
        not loaded here is left alone (a loading one reads the marker from the log)."""
        shard = self.shards.get(offsets_partition)
        if shard is None:
            return
        self._complete(shard.complete_transaction(producer_id, commit, self.clock.now_ms()))

    async def run_op(self, shard: GroupShard, outcome: Outcome, *, timeout_ms: int,
                     on_timeout: object) -> object:
        """Apply ``outcome`` and return its response, waiting for it if the request was parked."""
        response = outcome.response
        waiter = None
        key: tuple[str, str, str] | None = None
        if isinstance(response, PARKED_TYPE):
            key = response.key
            waiter = _Waiter()
            self._waiters.setdefault(key, []).append(waiter)
        try:
            written = self.apply(shard, outcome)
            if written is not None:
                # As Kafka's coordinator (offsets.commit.required.acks=-1): the request is
                # answered once every in-sync replica has the records, so a committed offset
                # survives the loss of this broker.
                hosted, required = written
                deadline = trio.current_time() + self.commit_timeout_ms / 1000.0
                code = await self.replicas.wait_for_replication(hosted, required, deadline)
                if code != ErrorCode.NONE:
                    raise KafkaError(code)
            if waiter is None:
                return response
            with trio.move_on_after(timeout_ms / 1000.0):
                await waiter.event.wait()
            if not waiter.event.is_set():
                return on_timeout
            if isinstance(waiter.value, KafkaError):
                raise waiter.value
            return waiter.value
        finally:
            if waiter is not None and key is not None and not waiter.event.is_set():
                lst = self._waiters.get(key)
                if lst and waiter in lst:
                    lst.remove(waiter)
                    if not lst:
                        del self._waiters[key]

    async def run_modern(self, shard: GroupShard, outcome: Outcome, on_error: Callable[[int], object]) -> object:
        """Append a consumer group operation's records and answer once every in-sync replica
        has them (acks=all); ``on_error(code)`` is the answer when they cannot be written. An
        append that failed undoes the group's change; one that was appended but not replicated
        in time stays (it commits, or the shard is unloaded with the leadership)."""
        if not outcome.records:
            self._complete(outcome)
            return outcome.response
        try:
            hosted, required = self._append(shard.partition, outcome)
        except (KafkaError, OSError) as exc:
            code = exc.code if isinstance(exc, KafkaError) else ErrorCode.KAFKA_STORAGE_ERROR
            log.error("Writing to %s-%d failed: %s", schema.OFFSETS_TOPIC, shard.partition, exc)
            outcome.write_failed(code, self.clock.now_ms())
            self._complete(outcome)
            return on_error(_coordinator_write_error(code))
        outcome.written(self.clock.now_ms())
        self._complete(outcome)
        self._wake.set()  # new members and revocations bring new deadlines
        deadline = trio.current_time() + self.commit_timeout_ms / 1000.0
        code = await self.replicas.wait_for_replication(hosted, required, deadline)
        if code != ErrorCode.NONE:
            return on_error(_coordinator_write_error(code))
        return outcome.response

    # ---------------------------------------------------------------- background work
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._expiry_loop)
            task_status.started()
            while True:
                while self._pending_loads:
                    p = self._pending_loads.pop(0)
                    nursery.start_soon(self._load, p)
                self._tick_due()
                deadline = self._next_deadline()
                self._wake = trio.Event()
                wait_s = 1.0 if deadline is None else max(0.0, (deadline - self.clock.now_ms()) / 1000.0)
                with trio.move_on_after(min(wait_s, 1.0) + 0.001):
                    await self._wake.wait()

    def _next_deadline(self) -> int | None:
        best = None
        for shard in self.shards.values():
            t = shard.next_deadline()
            if t is not None and (best is None or t < best):
                best = t
        return best

    def _tick_due(self) -> None:
        now = self.clock.now_ms()
        for shard in list(self.shards.values()):
            t = shard.next_deadline()
            if t is not None and t <= now:
                for outcome in shard.ticks(now):
                    try:
                        self.apply(shard, outcome)
                    except KafkaError as exc:
                        log.error("Writing group state of partition %d failed: %s", shard.partition, exc)

    async def _expiry_loop(self) -> None:
        interval = setting(self.config, "offsets.retention.check.interval.ms") / 1000.0
        while True:
            await trio.sleep(interval if math.isfinite(interval) else 600.0)
            self.expire_offsets()

    def expire_offsets(self) -> int:
        now = self.clock.now_ms()
        removed = 0
        for shard in list(self.shards.values()):
            outcome = shard.expire_offsets(now)
            if outcome.records:
                removed += sum(1 for k, _ in outcome.records if schema.decode_key(k).__class__ is schema.OffsetKey)
                try:
                    self.apply(shard, outcome)
                except KafkaError as exc:
                    log.error("Writing expired offsets of partition %d failed: %s", shard.partition, exc)
        if removed:
            log.info("Removed %d expired offsets", removed)
        return removed

    def groups(self) -> list[tuple[GroupShard, Any]]:
        return [(s, g) for s in self.shards.values() for g in s.groups.values()]

    def listed_groups(self) -> list[tuple[str, str, str, str]]:
        """(group id, protocol type, state, type) of every group of every loaded shard."""
        return [row for s in self.shards.values() for row in s.listed_groups()]
