"""The partitions this broker hosts: their logs, appends, and waking long-poll fetches.

The replica manager follows the metadata image: when a partition assigned to this node appears it
opens (or creates) its log, when a topic is removed it deletes the log. Produce appends go through
here so that fetches parked in a long poll wake on new data instead of polling.

Two ways in: ``apply_image`` walks the whole image (a snapshot load, the first image), and
``apply_delta`` looks only at what one committed batch changed, so that following the metadata
log costs O(changes) per batch, not O(partitions). Both leave the same hosted partitions behind.

Replication: a partition this broker leads carries a ``PartitionLeaderState`` (followers'
progress, ISR, high watermark); one it follows is handed to the ``ReplicaFetcherManager``, which
pulls the leader's batches into the local log. Becoming leader starts a new leader epoch at the log
end offset; becoming follower stops serving and lets the fetcher truncate any divergent tail.
ISR changes the leader wants go to the controller through the ``AlterPartitionManager``; until the
controller commits them the metadata image stays the truth. ``acks=all`` produce requests and
consumers wait for the high watermark, which moves only when the whole (maximal) ISR has the data.

Consumer reads (Kafka's readFromLog): before Fetch v11 only a leader serves them; from v11 a
follower does too, below the high watermark it learnt, and a leader with ``replica.selector.class``
set may answer with a preferred read replica instead of records (``replica_selector``, KIP-392).
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

import trio

from kafkapy.broker import replica_reads
from kafkapy.broker.edges import RemoteReads
from kafkapy.broker.fetch_session import FetchPartitionRequest
from kafkapy.broker.log_creation import INLINE_CREATE_LIMIT, LogCreator
from kafkapy.broker.partition import IsrCallback, Partition
from kafkapy.broker.replica_results import AppendResult, FetchParams, ReadResult
from kafkapy.broker.replica_selector import selector_for
from kafkapy.config import BrokerConfig
from kafkapy.log.bulk_create import NewLog
from kafkapy.log.config import LogConfig
from kafkapy.log.log_manager import LogManager
from kafkapy.log.partition_log import PartitionLog
from kafkapy.log.storage_errors import LogStorageError, storage_error
from kafkapy.metadata.image import (
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
)
from kafkapy.metadata.update import MetadataUpdate
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.replication import throttle
from kafkapy.replication.alter_partition import AlterPartitionManager
from kafkapy.replication.fetcher import FollowTarget, ReplicaFetcherManager
from kafkapy.replication.leader_state import IsrProposal

log = logging.getLogger(__name__)


def topic_log_config(config: BrokerConfig, image: MetadataImage, topic: str) -> LogConfig:
    """A topic's effective log settings in Kafka's precedence: its own configs, else the broker
    synonyms set dynamically for this broker, else as the cluster default, else statically."""
    props = config.with_dynamic(*_broker_layers(image, config.node_id)).topic_defaults()
    props.update(image.configs.topic(topic))
    return LogConfig.from_props(props, ignore_unknown=True)


def _broker_layers(image: MetadataImage, node_id: int) -> tuple[Mapping[str, str], Mapping[str, str]]:
    """This broker's own dynamic configs and the cluster default's."""
    return image.configs.get(RESOURCE_BROKER, str(node_id)), image.configs.get(RESOURCE_BROKER, "")


class ReplicaManager:
    """Hosted partitions keyed by (topic, partition), kept in step with the metadata image."""

    def __init__(self, log_manager: LogManager, config: BrokerConfig, node_id: int, *,
                 connect: Callable[[int], Awaitable[Any]] | None = None,
                 alter_partition: AlterPartitionManager | None = None,
                 fetchers: Callable[[ReplicaManager], ReplicaFetcherManager] | None = None,
                 log_creator: Callable[[ReplicaManager], LogCreator] | None = None) -> None:
        self._log_manager = log_manager
        self._config = config
        self._node_id = node_id
        self._partitions: dict[tuple[str, int], Partition] = {}
        # Hosted partition indexes by topic name, so a deleted topic's logs are found without
        # scanning every hosted partition.
        self._by_topic: dict[str, set[int]] = {}
        # Partitions whose last apply failed (a log that would not open): retried next time.
        self._retry: set[tuple[str, int]] = set()
        self._appended = trio.Event()
        # Set while this broker has lost contact with the controllers for a whole session: it
        # has been fenced (or soon will be) and others may lead its partitions now, so it must
        # not accept writes or serve reads as their leader (the node sets it; see lifecycle).
        self.leadership_suspended = False
        # The image last applied: its configs tell whether a running log's settings changed.
        self._applied: MetadataImage | None = None
        # Replication edges, given by the node at construction (unit tests run without them: then only
        # single-replica partitions make progress).
        self.fetchers: ReplicaFetcherManager | None = None if fetchers is None else fetchers(self)
        self.alter_partition: AlterPartitionManager | None = alter_partition
        # As the fetchers' host: opens a client to another broker (given by the node).
        self.connect: Callable[[int], Awaitable[Any]] | None = connect
        # Makes logs off the event loop when a metadata step places many new partitions here
        # (given by the node; without it every log is created inline).
        self.log_creator: LogCreator | None = None if log_creator is None else log_creator(self)
        self._config_memo: tuple[MetadataImage | None, dict[str, LogConfig]] = (None, {})
        self._lag_time_max_ms = int(str(config.get("replica.lag.time.max.ms")))
        # Replication throttles (a reassignment's copying), kept in step with the metadata:
        # the leader's on replica fetches it answers, the follower's read by the fetchers.
        self.leader_quota = throttle.ReplicationQuota(node_id)
        self.follower_quota = throttle.ReplicationQuota(node_id)
        # replica.selector.class (KIP-392): None, and consumers read from leaders only.
        self.replica_selector = selector_for(config.get_str("replica.selector.class"))
        log_manager.dir_offline_listeners.append(self._on_dir_offline)

    def __len__(self) -> int:
        return len(self._partitions)

    @property
    def node_id(self) -> int:
        return self._node_id

    @property
    def log_dirs(self) -> list[str]:
        return list(self._log_manager.log_dirs)

    @property
    def offline_log_dirs(self) -> frozenset[str]:
        return frozenset(self._log_manager.offline_dirs)

    def move_to_log_dir(self, topic: str, partition: int, log_dir: str) -> bool:
        """AlterReplicaLogDirs for one replica: see ``LogManager.move``."""
        if self._log_manager.offline_dirs and (
                os.path.abspath(log_dir) in self._log_manager.offline_dirs
                or self._log_manager.is_offline(topic, partition)):
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"log dir {log_dir} is offline")
        return self._log_manager.move(topic, partition, log_dir)

    def partitions(self) -> list[Partition]:
        return list(self._partitions.values())

    def mirror_replica(self, topic: str, partition: int) -> Partition | None:
        """The hosted partition, for a cluster link's mirror fetcher."""
        return self._partitions.get((topic, partition))

    def get(self, topic: str, partition: int) -> Partition:
        hosted = self._partitions.get((topic, partition))
        if hosted is None:
            if self.log_creator is not None and (topic, partition) in self.log_creator:
                # Known to the metadata but not hosted yet: Kafka's answer, which clients retry.
                raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                 f"the log of {topic}-{partition} is still being created")
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if self._log_manager.is_offline(topic, partition):
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                             f"the log dir of {topic}-{partition} on broker {self._node_id} is offline")
        return hosted

    def leader(self, topic: str, partition: int, current_leader_epoch: int = -1, *,
               topic_id: uuid.UUID | None = None) -> Partition:
        """The partition if this broker leads it at the client's leader epoch (-1: any), as Kafka checks.

        With ``topic_id`` (a fetch session entry's), a partition of another topic of the same
        name (deleted and re-created since) is INCONSISTENT_TOPIC_ID, never read.
        """
        hosted = self.get(topic, partition)
        if topic_id is not None and hosted.topic_id != topic_id:
            raise KafkaError(ErrorCode.INCONSISTENT_TOPIC_ID)
        if not hosted.is_leader(self._node_id) or self.leadership_suspended:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        _check_leader_epoch(hosted, current_leader_epoch)
        return hosted

    def replica(self, topic: str, partition: int, current_leader_epoch: int = -1, *,
                topic_id: uuid.UUID | None = None) -> Partition:
        """The partition if this broker holds a replica consumers may read (Fetch v11+, KIP-392):
        its leader, or a follower, at the client's leader epoch (-1: any) as the metadata says
        it. A replica that believes it leads but no longer does (suspended, stopped) serves nobody.
        """
        hosted = self.get(topic, partition)
        if topic_id is not None and hosted.topic_id != topic_id:
            raise KafkaError(ErrorCode.INCONSISTENT_TOPIC_ID)
        if hosted.leader_id == self._node_id and (not hosted.is_leader() or self.leadership_suspended):
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        _check_leader_epoch(hosted, current_leader_epoch)
        return hosted

    def log_config(self, image: MetadataImage, topic: str) -> LogConfig:
        return topic_log_config(self._config, image, topic)

    def apply_update(self, update: MetadataUpdate, *, now_ms: int) -> None:
        """Follow one published metadata step: a full walk for a full update, else the delta."""
        try:
            if update.full:
                self.apply_image(update.image, now_ms=now_ms)
            else:
                self.apply_delta(update, now_ms=now_ms)
        finally:
            self._refresh_throttles(update)

    def _refresh_throttles(self, update: MetadataUpdate) -> None:
        """Take the throttle rates (dynamic broker configs) and throttled replicas (topic
        configs) a metadata step brings."""
        if not update.full and not update.changed_configs:
            return
        image = update.image
        if update.full:
            topics = [(name, configs) for (rtype, name), configs in image.configs.resources.items()
                      if rtype == RESOURCE_TOPIC]
        else:
            topics = [(name, image.configs.topic(name)) for rtype, name in update.changed_configs
                      if rtype == RESOURCE_TOPIC]
        throttle.refresh_quotas(self.leader_quota, self.follower_quota, self.dynamic_config(image).get,
                                topics, full=update.full)

    def dynamic_config(self, image: MetadataImage) -> BrokerConfig:
        """This broker's settings with the dynamic ones ``image`` holds (for this broker, then the
        cluster default) over the static ones, as Kafka's DynamicBrokerConfig layers them."""
        return self._config.with_dynamic(*_broker_layers(image, self._node_id))

    def leader_throttled(self, hosted: Partition, replica_id: int, now_ms: int) -> bool:
        """Whether a replica fetch from ``replica_id`` gets no data for ``hosted`` now: a
        throttled partition, a replica outside the ISR, the leader quota exceeded."""
        state = hosted.leader_state
        in_sync = state is not None and replica_id in state.isr
        return self.leader_quota.should_throttle(hosted.topic, hosted.index, in_sync, now_ms)

    def apply_image(self, image: MetadataImage, *, now_ms: int) -> None:
        """Open logs for partitions placed here and delete logs of topics that are gone.

        Every partition of the image is looked at; a partition that fails (its log cannot be
        opened) does not stop the others, and the first failure is raised at the end.
        """
        previous, self._applied = self._applied, image
        self._retry.clear()
        wanted: set[tuple[str, int]] = set()
        failures: list[KafkaError] = []
        broker_changed = previous is not None and \
            _broker_layers(previous, self._node_id) != _broker_layers(image, self._node_id)
        defer = self._defer_new_logs((topic, index) for topic in image.topics.by_name.values()
                                     for index in topic.partitions)
        for topic in image.topics.by_name.values():
            config_changed = previous is None or broker_changed or \
                previous.configs.topic(topic.name) != image.configs.topic(topic.name)
            sync = _TopicSync(self, image, topic, config_changed, now_ms, defer_new=defer)
            for index, reg in topic.partitions.items():
                if self._node_id in reg.replicas:
                    wanted.add((topic.name, index))
                sync.partition(index, reg, failures)
        for key in [k for k in self._partitions if k not in wanted]:
            self._drop(key)
        self._raise_first(failures)

    def apply_delta(self, update: MetadataUpdate, *, now_ms: int) -> None:
        """``apply_image(update.image)`` for a step from the image applied last, touching only
        the topics, partitions and topic configs the step changed.

        Partitions that failed in an earlier apply are tried again here, so one bad log is not
        forgotten until the next full walk.
        """
        image = update.image
        previous, self._applied = self._applied, image
        failures: list[KafkaError] = []
        # Deletions first: a topic deleted and recreated under the same name in one step must
        # lose its old logs before the new ones open.
        for name in sorted(set(update.deleted_topics.values())):
            live = image.topics.by_name.get(name)
            for index in sorted(self._by_topic.get(name, ())):
                if live is None or self._partitions[(name, index)].topic_id != live.id:
                    self._drop((name, index))
        touched, broker_changed = _touched(update, self._retry, self._by_topic, self._node_id)
        self._retry.clear()
        defer = self._defer_new_logs((topic, index) for name, indexes in touched.items()
                                     if (topic := image.topics.by_name.get(name)) is not None
                                     for index in indexes)
        for name in sorted(touched):
            topic = image.topics.by_name.get(name)
            if topic is None:
                for index in sorted(touched[name]):
                    if (name, index) in self._partitions:
                        self._drop((name, index))  # a retried partition of a topic now gone
                continue
            config_changed = previous is None or broker_changed or \
                previous.configs.topic(name) != image.configs.topic(name)
            sync = _TopicSync(self, image, topic, config_changed, now_ms, defer_new=defer)
            for index in sorted(touched[name]):
                reg = topic.partitions.get(index)
                if reg is not None:
                    sync.partition(index, reg, failures)
                elif (name, index) in self._partitions:
                    self._drop((name, index))
            if config_changed:
                # Hosted partitions the step did not otherwise touch take the new settings too.
                for index in sorted(self._by_topic.get(name, ())):
                    if index not in touched[name]:
                        sync.refresh_config(self._partitions[(name, index)])
        self._raise_first(failures)

    def _defer_new_logs(self, partitions: Iterable[tuple[TopicImage, int]]) -> bool:
        """Whether a step placing ``partitions`` needs more than INLINE_CREATE_LIMIT new logs
        here: then the log creator makes them all, off the event loop."""
        if self.log_creator is None:
            return False
        needed = 0
        for topic, index in partitions:
            reg = topic.partitions.get(index)
            if (reg is not None and self._node_id in reg.replicas
                    and (topic.name, index) not in self._partitions
                    and self._log_manager.get(topic.name, index) is None):
                needed += 1
                if needed > INLINE_CREATE_LIMIT:
                    return True
        return False

    # -- the log creator's host: what to create, and hosting what was created -------------------

    def new_log_specs(self, keys: Sequence[tuple[str, int]]) -> list[NewLog]:
        """What to create for ``keys`` as the image applied now says: partitions gone from
        here (or hosted meanwhile) are left out; a log dir is chosen for each of the rest."""
        image = self._applied
        if image is None:
            return []
        wanted: list[tuple[TopicImage, int, PartitionRegistration]] = []
        for name, index in keys:
            topic = image.topics.by_name.get(name)
            reg = topic.partitions.get(index) if topic is not None else None
            if topic is None or reg is None or self._node_id not in reg.replicas \
                    or (name, index) in self._partitions:
                continue
            if self._log_manager.get(name, index) is not None:
                # A log appeared meanwhile (nothing makes one for a waiting partition, but if
                # it did): the next metadata step hosts it the usual way.
                self._retry.add((name, index))
                continue
            wanted.append((topic, index, reg))
        try:
            dirs = self._log_manager.place_new_logs(len(wanted))
        except KafkaError as exc:
            log.error("Cannot create %d partition log(s): %s", len(wanted), exc)
            self._retry.update((topic.name, index) for topic, index, _ in wanted)
            return []
        configs: dict[str, LogConfig] = {}
        specs = []
        for (topic, index, reg), d in zip(wanted, dirs):
            config = configs.get(topic.name)
            if config is None:
                config = configs[topic.name] = self.log_config(image, topic.name)
            specs.append(NewLog(topic.name, index, topic.id, config, d,
                                reg.leader_epoch if reg.leader == self._node_id else -1))
        return specs

    def create_new_logs(self, specs: Sequence[NewLog], *, now_ms: int) -> list[PartitionLog | KafkaError]:
        """Make the logs of ``specs`` (on a worker thread: touches nothing of ours)."""
        return self._log_manager.create_new_logs(specs, now_ms=now_ms)

    def take_created(self, spec: NewLog, result: PartitionLog | KafkaError, *, now_ms: int) -> bool:
        """Host a log the creator made, as the image applied *now* says (it may have changed
        while the log was made); False when it is not hosted (failed, or no longer wanted)."""
        key = (spec.topic, spec.partition)
        if isinstance(result, KafkaError):
            if isinstance(result, LogStorageError) and result.space:
                self._log_manager.faults.fault(spec.log_dir, result)  # once per full-disk episode
            else:
                log.error("Cannot create the log of %s-%d: %s", spec.topic, spec.partition, result)
            self._retry.add(key)
            return False
        image = self._applied
        topic = image.topics.by_name.get(spec.topic) if image is not None else None
        reg = topic.partitions.get(spec.partition) if topic is not None else None
        if (topic is None or reg is None or topic.id != spec.topic_id
                or self._node_id not in reg.replicas or key in self._partitions
                or not self._log_manager.adopt(result, spec.log_dir)):
            self._log_manager.abandon(result)
            if topic is not None and reg is not None and self._node_id in reg.replicas \
                    and key not in self._partitions and self.log_creator is not None:
                self.log_creator.add(key)  # recreated under a new topic id meanwhile
            return False
        assert image is not None
        config = self._creation_config(image, topic.name)
        if config != spec.config:
            result.update_config(config)
        _TopicSync(self, image, topic, False, now_ms).host(spec.partition, reg, result)
        return True

    def _creation_config(self, image: MetadataImage, topic: str) -> LogConfig:
        # A chunk hosts hundreds of partitions of one topic against one image: its config is
        # worked out once, not per partition.
        memo_image, memo = self._config_memo
        if memo_image is not image:
            memo = {}
            self._config_memo = (image, memo)
        config = memo.get(topic)
        if config is None:
            config = memo[topic] = self.log_config(image, topic)
        return config

    @staticmethod
    def _raise_first(failures: list[KafkaError]) -> None:
        if failures:
            raise failures[0]

    def _host(self, hosted: Partition) -> None:
        self._partitions[(hosted.topic, hosted.index)] = hosted
        self._by_topic.setdefault(hosted.topic, set()).add(hosted.index)

    def _apply_registration(self, hosted: Partition, reg: PartitionRegistration, now_ms: int,
                            new: bool) -> None:
        image = self._applied
        hosted.apply_registration(reg, now_ms, new=new,
                                  offline=self._log_manager.is_offline(hosted.topic, hosted.index),
                                  mirror=image.links.mirror(hosted.topic_id) if image is not None else None)

    def _drop(self, key: tuple[str, int]) -> None:
        hosted = self._partitions.pop(key)
        if self.fetchers is not None:
            self.fetchers.unfollow([key])
        hosted.stop()
        indexes = self._by_topic[key[0]]
        indexes.discard(key[1])
        if not indexes:
            del self._by_topic[key[0]]
        log.debug("Deleting log of %s-%d", hosted.topic, hosted.index)  # the log manager says it
        self._log_manager.delete(hosted.topic, hosted.index)

    # -- appends and the purgatories (the partition does the work) -----------------------------

    def append(self, hosted: Partition, records: bytearray | memoryview, *, now_ms: int,
               from_client: bool = True) -> AppendResult:
        """Append a produce request's batches (or, ``from_client=False``, the broker's own
        records) as leader and wake fetches waiting for data."""
        return hosted.append(records, now_ms=now_ms, from_client=from_client)

    def check_min_insync(self, hosted: Partition) -> None:
        """acks=all's check before appending: see ``Partition.check_min_insync``."""
        hosted.check_min_insync()

    async def wait_for_replication(self, hosted: Partition, required_offset: int,
                                   deadline: float) -> ErrorCode:
        """The produce purgatory for acks=all: see ``Partition.wait_for_replication``."""
        return await hosted.wait_for_replication(required_offset, deadline)

    async def wait_for_low_watermark(self, hosted: Partition, required_offset: int,
                                     deadline: float, alive: Callable[[int], bool]) -> tuple[ErrorCode, int]:
        """DeleteRecords' purgatory: see ``Partition.wait_for_low_watermark``."""
        return await hosted.wait_for_low_watermark(required_offset, deadline, alive)

    async def wait_for_append(self, deadline: float) -> None:
        """Sleep until some partition gets new data or ``deadline`` (trio time) passes."""
        with trio.move_on_at(deadline):
            await self._appended.wait()

    # -- reads ------------------------------------------------------------------------------------

    def read(self, p: FetchPartitionRequest, params: FetchParams, *, budget: int, min_one: bool,
             last_fetched_epoch: int = -1, remote: RemoteReads | None = None) -> ReadResult:
        """One partition's part of a fetch (Kafka's readFromLog): see ``replica_reads.read``."""
        return replica_reads.read(self, p, params, budget=budget, min_one=min_one,
                                  last_fetched_epoch=last_fetched_epoch, remote=remote)

    @property
    def applied_image(self) -> MetadataImage | None:
        """The metadata image last applied (None before the first)."""
        return self._applied

    # -- faults -----------------------------------------------------------------------------------

    def storage_fault(self, topic: str, partition: int, exc: LogStorageError) -> None:
        """A write to the partition's log failed on disk: log it once per episode, and take the
        dir offline unless the disk is merely full (see ``log.storage_errors``)."""
        d = self._log_manager.log_dir_of(topic, partition)
        if d is not None:
            self._log_manager.faults.fault(d, exc)

    def storage_ok(self, topic: str, partition: int) -> None:
        """A write to the partition's log went through: ends a full-disk episode."""
        if self._log_manager.faults.failing:
            d = self._log_manager.log_dir_of(topic, partition)
            if d is not None:
                self._log_manager.faults.ok(d)

    def read_fault(self, topic: str, partition: int, exc: OSError) -> None:
        """Reading the partition's log failed on disk: its dir goes offline (any errno)."""
        d = self._log_manager.log_dir_of(topic, partition)
        if d is not None:
            err = storage_error(exc, "read", d)
            err.offline = True
            self._log_manager.faults.fault(d, err)

    def _on_dir_offline(self, d: str) -> None:
        # Kafka's handleLogDirFailure: stop leading and following what lives there; the
        # heartbeat tells the controller, which moves leadership to another in-sync replica.
        keys = [k for k in self._partitions if self._log_manager.log_dir_of(*k) == d]
        if self.fetchers is not None:
            self.fetchers.unfollow(keys)
        for key in keys:
            self._partitions[key].stop()

    # -- the leader's side of follower fetches, and ISR expiry -----------------------------------

    def on_follower_fetch(self, hosted: Partition, replica_id: int, fetch_offset: int,
                          now_ms: int, *, log_start_offset: int = -1) -> None:
        """A follower fetched at ``fetch_offset`` (its log end): track it for the ISR and HW."""
        hosted.on_follower_fetch(replica_id, fetch_offset, now_ms, log_start_offset=log_start_offset)

    def check_isr(self, now_ms: int) -> None:
        """Shrink the ISR of every led partition whose followers fell behind for longer than
        replica.lag.time.max.ms (Kafka's isr-expiration task)."""
        for hosted in list(self._partitions.values()):
            hosted.maybe_shrink_isr(now_ms, self._lag_time_max_ms)

    # -- the partitions' host (see ``partition.PartitionHost``) ----------------------------------

    def follow(self, key: tuple[str, int], target: FollowTarget | None) -> None:
        if self.fetchers is not None:
            if target is None:
                self.fetchers.unfollow([key])
            else:
                self.fetchers.follow({key: target})

    @property
    def can_propose_isr(self) -> bool:
        return self.alter_partition is not None

    def propose_isr(self, topic_id: uuid.UUID, partition: int, proposal: IsrProposal,
                    on_result: IsrCallback) -> None:
        if self.alter_partition is not None:
            self.alter_partition.submit(topic_id, partition, proposal, on_result)

    def wake_fetches(self) -> None:
        self._appended.set()
        self._appended = trio.Event()

    # -- the follower's side (the fetcher's host) ------------------------------------------------

    def follower_log(self, topic: str, partition: int, leader_epoch: int) -> PartitionLog | None:
        hosted = self._partitions.get((topic, partition))
        if hosted is None or hosted.leader_state is not None or hosted.leader_epoch != leader_epoch:
            return None
        return hosted.log

    def on_follower_progress(self, topic: str, partition: int) -> None:
        hosted = self._partitions.get((topic, partition))
        if hosted is not None:
            hosted.wake()
            if hosted.follower_high_watermark_moved():
                self.wake_fetches()  # consumers reading this follower (KIP-392) see more now
            self.storage_ok(topic, partition)

    def shutdown(self) -> None:
        for hosted in self._partitions.values():
            hosted.stop()
        self._partitions.clear()
        self._by_topic.clear()


def _check_leader_epoch(hosted: Partition, current_leader_epoch: int) -> None:
    """The client's leader epoch (-1: unchecked) against the one the metadata gave this replica."""
    if current_leader_epoch >= 0 and current_leader_epoch != hosted.leader_epoch:
        raise KafkaError(
            ErrorCode.FENCED_LEADER_EPOCH if current_leader_epoch < hosted.leader_epoch
            else ErrorCode.UNKNOWN_LEADER_EPOCH
        )


def _touched(update: MetadataUpdate, retry: Iterable[tuple[str, int]], hosted: Iterable[str],
             node_id: int) -> tuple[dict[str, set[int]], bool]:
    """The partitions (by topic name) a metadata step makes the replica manager look at again:
    those it changed, those whose last apply failed, and all of a topic whose configs changed;
    and whether this broker's dynamic configs changed (then every ``hosted`` topic is looked at)."""
    image = update.image
    touched: dict[str, set[int]] = {}
    for topic_id, indexes in update.changed_partitions.items():
        topic = image.topics.by_id.get(topic_id)
        if topic is not None:
            touched.setdefault(topic.name, set()).update(indexes)
    for topic_name, index in retry:
        touched.setdefault(topic_name, set()).add(index)
    for rtype, rname in update.changed_configs:
        if rtype == RESOURCE_TOPIC:
            touched.setdefault(rname, set())
    # A dynamic broker config may change what every topic without its own value inherits.
    broker_changed = any(rtype == RESOURCE_BROKER and rname in ("", str(node_id))
                         for rtype, rname in update.changed_configs)
    if broker_changed:
        for name in hosted:
            touched.setdefault(name, set())
    return touched, broker_changed


class _TopicSync:
    """Brings the hosted partitions of one topic in line with its image; shared by the full
    walk and the delta so both apply exactly the same rules."""

    def __init__(self, manager: ReplicaManager, image: MetadataImage, topic: TopicImage,
                 config_changed: bool, now_ms: int, *, defer_new: bool = False) -> None:
        self._manager = manager
        self._image = image
        self._topic = topic
        self._config_changed = config_changed
        self._now_ms = now_ms
        self._config: LogConfig | None = None
        # Logs this step would create go to the log creator instead (a bulk step).
        self._defer_new = defer_new

    def _log_config(self) -> LogConfig:
        if self._config is None:
            self._config = self._manager.log_config(self._image, self._topic.name)
        return self._config

    def refresh_config(self, hosted: Partition) -> None:
        """A config change (AlterConfigs) applies to the running log at once."""
        if self._config_changed and hosted.topic_id == self._topic.id:
            hosted.log.update_config(self._log_config())

    def partition(self, index: int, reg: PartitionRegistration, failures: list[KafkaError]) -> None:
        """Host, update or drop replica ``index`` as ``reg`` says; a failure is recorded in
        ``failures`` (and retried on the next apply) rather than raised."""
        manager, topic = self._manager, self._topic
        key = (topic.name, index)
        hosted = manager._partitions.get(key)
        if manager._node_id not in reg.replicas:
            if hosted is not None:
                manager._drop(key)  # moved away, or a stale replica of an older topic id
            return
        if hosted is not None and hosted.topic_id == topic.id:
            manager._apply_registration(hosted, reg, self._now_ms, new=False)
            self.refresh_config(hosted)
            return
        if hosted is not None:
            manager._drop(key)  # same name, new id: the topic was deleted and recreated
        creator = manager.log_creator
        if creator is not None and (key in creator or (
                self._defer_new and manager._log_manager.get(topic.name, index) is None)):
            # Made off the event loop, then hosted as the metadata says at that time.
            creator.add(key)
            return
        try:
            try:
                plog = manager._log_manager.get_or_create(topic.name, index, topic.id,
                                                          self._log_config(), now_ms=self._now_ms)
            except OSError as e:
                raise storage_error(e, "create the log of", f"{topic.name}-{index}") from e
        except KafkaError as exc:
            online = (manager._log_manager.online_dirs
                      if isinstance(exc, LogStorageError) and exc.space else [])
            if online and isinstance(exc, LogStorageError):
                manager._log_manager.faults.fault(online[0], exc)  # once per full-disk episode
            elif getattr(manager._log_manager, "online_dirs", True) == []:
                # Every dir offline: that was logged when it happened; retried quietly.
                log.debug("Cannot open the log of %s-%d: %s", topic.name, index, exc)
            else:
                log.error("Cannot open the log of %s-%d: %s", topic.name, index, exc)
            manager._retry.add(key)
            failures.append(exc)
            return
        self.host(index, reg, plog)

    def host(self, index: int, reg: PartitionRegistration, plog: PartitionLog) -> None:
        """Serve replica ``index`` from ``plog`` as ``reg`` says."""
        topic = self._topic
        manager = self._manager
        hosted = Partition(topic.name, topic.id, index, plog, node_id=manager.node_id, host=manager)
        manager._host(hosted)
        manager._apply_registration(hosted, reg, self._now_ms, new=True)
