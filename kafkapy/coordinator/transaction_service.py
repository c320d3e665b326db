"""The Trio edge of the transaction coordinator: shards, loading, log writes, markers and timers.

One :class:`~kafkapy.coordinator.transaction.TransactionShard` runs per ``__transaction_state``
partition this broker leads, at that partition's leader epoch as its coordinator epoch (Kafka's
onElection / onResignation). This module does what the sans-I/O core cannot:

* loads a shard by replaying its partition's log (COORDINATOR_LOAD_IN_PROGRESS meanwhile) and
  sends the markers of the transactions it finds half-ended; unloads it when leadership moves or
  the leader epoch changes (a newer epoch loads afresh);
* appends an operation's records as one batch and waits until every in-sync replica has them
  before the operation is answered (Kafka's acks=-1 for the transaction log);
* hands the markers to the :class:`~kafkapy.coordinator.txn_marker_sender.TxnMarkerSender`;
* aborts timed-out transactions and expires idle transactional ids on Kafka's two intervals;
* gives the core's synchronous allocator producer ids from a small prefetched pool, refilled from
  the broker's ProducerIdManager (COORDINATOR_LOAD_IN_PROGRESS while the first block is on its
  way, as Kafka's coordinator answers).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import trio

from kafkapy.coordinator.replicas import Appended
from kafkapy.coordinator.transaction import (
    TRANSACTION_STATE_TOPIC,
    TransactionConfig,
    TransactionShard,
    TxnResult,
)
from kafkapy.coordinator.txn_marker_sender import Connect, TxnMarkerSender
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.records import format as fmt
from kafkapy.records.builder import Record, build_batch
from kafkapy.records.reader import iter_batches, iter_records

log = logging.getLogger("kafkapy.coordinator.transaction")

TRANSACTION_VERSION_FEATURE = "transaction.version"
#: Producer ids kept ready for the core's synchronous allocator.
PRODUCER_ID_POOL = 16
#: How long a Complete record whose append failed waits before it is appended again.
COMPLETION_RETRY_S = 0.5

E = ErrorCode


class TxnReplicas(Protocol):
    """The replica manager as the transaction coordinator uses it."""

    def get(self, topic: str, partition: int) -> Any:
        """The hosted partition (KafkaError when it is not hosted here)."""
        ...

    def check_min_insync(self, hosted: Any) -> None:
        """NOT_ENOUGH_REPLICAS when the ISR is below min.insync.replicas."""
        ...

    def append(self, hosted: Any, records: bytearray, *, now_ms: int, from_client: bool = True) -> Appended:
        ...

    async def wait_for_replication(self, hosted: Any, required_offset: int, deadline: float) -> ErrorCode:
        ...


def _setting(config: Any, name: str, default: int) -> int:
    """A broker setting by Kafka's name (declared in kafkapy.config), or ``default`` for a
    config object that does not know it (tests' stand-ins)."""
    try:
        value = config.get(name)
    except LookupError:
        return default
    return default if value is None else int(value)


def transaction_config(config: Any) -> TransactionConfig:
    d = TransactionConfig()
    return TransactionConfig(
        transaction_max_timeout_ms=_setting(config, "transaction.max.timeout.ms", d.transaction_max_timeout_ms),
        transactional_id_expiration_ms=_setting(config, "transactional.id.expiration.ms",
                                                d.transactional_id_expiration_ms),
        transaction_state_log_num_partitions=_setting(config, "transaction.state.log.num.partitions",
                                                      d.transaction_state_log_num_partitions),
        offsets_topic_num_partitions=_setting(config, "offsets.topic.num.partitions", d.offsets_topic_num_partitions),
        transaction_abort_timed_out_transaction_cleanup_interval_ms=_setting(
            config, "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            d.transaction_abort_timed_out_transaction_cleanup_interval_ms),
        transaction_remove_expired_transaction_cleanup_interval_ms=_setting(
            config, "transaction.remove.expired.transaction.cleanup.interval.ms",
            d.transaction_remove_expired_transaction_cleanup_interval_ms),
    )


class TransactionCoordinator:
    """Every transaction shard this broker leads, and the work around them."""

    def __init__(self, config: Any, replicas: TxnReplicas, clock: Any, node_id: int, *,
                 next_producer_id: Callable[[], Awaitable[int]], image: Callable[[], Any],
                 connect: Connect | None = None) -> None:
        self.config = config
        self.replicas = replicas
        self.clock = clock
        self.node_id = node_id
        self.txn_config = transaction_config(config)
        self.request_timeout_ms = _setting(config, "request.timeout.ms", 30_000)
        self.load_buffer = _setting(config, "transaction.state.log.load.buffer.size", 5 * 1024 * 1024)
        self._image = image
        self._next_producer_id = next_producer_id
        self.shards: dict[int, TransactionShard] = {}
        #: Partitions being loaded, with the leader epoch they are loaded at.
        self.loading: dict[int, int] = {}
        self._pending_loads: list[tuple[int, int]] = []
        self._wake = trio.Event()
        self._topic_id: Any = None
        self._pids: deque[int] = deque()
        self._fetching_pids = False
        self._nursery: trio.Nursery | None = None
        self.markers = TxnMarkerSender(connect, image, clock, self.execute,
                                       request_timeout_s=self.request_timeout_ms / 1000.0 + 5.0)

    # ---------------------------------------------------------------- placement
    def partition_for(self, transactional_id: str) -> int:
        return self.txn_config.partition_for(transactional_id)

    def shard_for(self, transactional_id: str) -> TransactionShard:
        """The shard coordinating ``transactional_id``, or the error a client retries on."""
        p = self.partition_for(transactional_id)
        shard = self.shards.get(p)
        if shard is not None:
            return shard
        if p in self.loading:
            raise KafkaError(E.COORDINATOR_LOAD_IN_PROGRESS)
        topic = self._image().topics.by_name.get(TRANSACTION_STATE_TOPIC)
        reg = None if topic is None else topic.partitions.get(p)
        if reg is None:
            raise KafkaError(E.COORDINATOR_NOT_AVAILABLE)
        if reg.leader != self.node_id:
            raise KafkaError(E.NOT_COORDINATOR)
        raise KafkaError(E.COORDINATOR_LOAD_IN_PROGRESS)  # led, not yet scheduled for loading

    def all_loaded(self) -> bool:
        return not self.loading

    def loaded_shards(self) -> list[TransactionShard]:
        return list(self.shards.values())

    def transaction_version(self) -> int:
        """The record layout to write: the cluster's finalized transaction.version, at most 1
        (this coordinator does not serve transaction.version 2's protocol)."""
        try:
            level = int(self._image().features.levels.get(TRANSACTION_VERSION_FEATURE, 0))
        except AttributeError:
            level = 0
        return min(level, 1)

    # ---------------------------------------------------------------- metadata changes
    def on_image(self, image: Any) -> None:
        """Load the shards of the partitions this broker now leads, at their leader epochs; drop
        the rest (and any whose leader epoch moved: a newer one loads afresh)."""
        led: dict[int, int] = {}
        topic = image.topics.by_name.get(TRANSACTION_STATE_TOPIC)
        if topic is not None:
            if self._topic_id is not None and topic.id != self._topic_id:
                for p in list(self.shards):
                    self._unload(p)
                self.loading.clear()
            self._topic_id = topic.id
            for index, reg in topic.partitions.items():
                if reg.leader == self.node_id:
                    led[index] = reg.leader_epoch
        for p, shard in list(self.shards.items()):
            if led.get(p) != shard.coordinator_epoch:
                self._unload(p)
        for p, epoch in list(self.loading.items()):
            if led.get(p) != epoch:
                del self.loading[p]  # the load in progress finds itself superseded
        for p, epoch in sorted(led.items()):
            if p not in self.shards and p not in self.loading:
                self.loading[p] = epoch
                self._pending_loads.append((p, epoch))
        if self._pending_loads:
            self._wake.set()

    def _unload(self, p: int) -> None:
        shard = self.shards.pop(p, None)
        if shard is None:
            return
        log.info("Unloading transaction coordinator partition %s-%d (coordinator epoch %d)",
                 TRANSACTION_STATE_TOPIC, p, shard.coordinator_epoch)
        shard.unload()

    async def _load(self, p: int, epoch: int) -> None:
        started = self.clock.now_ms()
        self._prefetch_producer_ids()
        shard = TransactionShard(p, epoch, self.txn_config, self._allocate_producer_id,
                                 self.transaction_version())
        count = 0
        try:
            plog = self.replicas.get(TRANSACTION_STATE_TOPIC, p).log
            offset = plog.local_log_start_offset
            while offset < plog.log_end_offset:
                fetched = plog.read(offset, self.load_buffer)
                if fetched is None:
                    break
                advanced = False
                for header, batch in iter_batches(fetched.read_bytes()):
                    if header.last_offset < offset:
                        continue
                    if not header.attributes & fmt.CONTROL_MASK:
                        for rec in iter_records(batch):
                            if rec.offset >= offset:
                                shard.replay(rec.key, rec.value)
                                count += 1
                    offset = header.last_offset + 1
                    advanced = True
                if not advanced:
                    break
                await trio.sleep(0)
        except Exception as exc:  # KafkaError, OSError, or a bug of ours: the partition is not served
            log.error("Loading transaction coordinator partition %s-%d failed: %s", TRANSACTION_STATE_TOPIC, p, exc,
                      exc_info=not isinstance(exc, (KafkaError, OSError)))
            if self.loading.get(p) == epoch:
                del self.loading[p]
            return
        if self.loading.get(p) != epoch:
            return  # leadership moved while loading
        del self.loading[p]
        self.shards[p] = shard
        res = shard.finish_load(self.clock.now_ms())
        log.info("Loaded transaction coordinator partition %s-%d at coordinator epoch %d: %d records in %d ms",
                 TRANSACTION_STATE_TOPIC, p, epoch, count, self.clock.now_ms() - started)
        await self.execute(shard, res)

    # ---------------------------------------------------------------- producer ids
    def _allocate_producer_id(self) -> int:
        """The core's allocator: a prefetched id, or COORDINATOR_LOAD_IN_PROGRESS (the client
        retries) while the next ones are fetched."""
        if self._pids:
            pid = self._pids.popleft()
            if len(self._pids) < PRODUCER_ID_POOL // 2:
                self._prefetch_producer_ids()
            return pid
        self._prefetch_producer_ids()
        raise KafkaError(E.COORDINATOR_LOAD_IN_PROGRESS, "waiting for a block of producer ids")

    def _prefetch_producer_ids(self) -> None:
        if not self._fetching_pids and self._nursery is not None:
            self._fetching_pids = True
            self._nursery.start_soon(self._fetch_producer_ids)

    async def _fetch_producer_ids(self) -> None:
        try:
            while len(self._pids) < PRODUCER_ID_POOL:
                self._pids.append(await self._next_producer_id())
        except Exception as exc:  # noqa: BLE001 - the next request asks again
            log.warning("Fetching producer ids for the transaction coordinator failed: %s", exc)
        finally:
            self._fetching_pids = False

    # ---------------------------------------------------------------- applying results
    async def execute(self, shard: TransactionShard, res: TxnResult) -> object:
        """Append ``res``'s records (waiting for the in-sync replicas), apply or undo them, log,
        send its markers, and return the answer for the client."""
        if res.records and self._nursery is not None:
            # In the coordinator's own task: a client that goes away mid-write must not leave
            # the id's transition pending, nor its markers unsent.
            done = trio.Event()
            self._nursery.start_soon(self._settle, shard, res, done)
            await done.wait()
        else:
            await self._settle(shard, res)
        return res.response

    async def _settle(self, shard: TransactionShard, res: TxnResult, done: trio.Event | None = None) -> None:
        try:
            try:
                if res.records:
                    code = await self._write(shard, res.records)
                    if code == E.NONE:
                        res.written()
                    else:
                        res.write_failed(code)
                        if res.retry and self._nursery is not None:
                            self._nursery.start_soon(self._retry_write, shard, res)
            except Exception:  # a bug of ours: this request fails, the broker goes on
                log.exception("Applying a transaction coordinator write to %s-%d failed", TRANSACTION_STATE_TOPIC,
                              shard.partition)
                res.markers = []
                res.response = res.error_response(E.UNKNOWN_SERVER_ERROR) if res.error_response else None
            for line in res.log:
                log.info("%s", line)
            res.log.clear()
            for markers in res.markers:
                self.markers.send(shard, markers)
            res.markers = []
        finally:
            if done is not None:
                done.set()

    async def _retry_write(self, shard: TransactionShard, res: TxnResult) -> None:
        """A Complete record whose append failed retriably: append it again until it is in
        or the shard goes."""
        while res.retry and shard.active:
            await trio.sleep(COMPLETION_RETRY_S)
            code = await self._write(shard, res.records)
            if code == E.NONE:
                res.written()
            else:
                res.write_failed(code)
            for line in res.log:
                log.info("%s", line)
            res.log.clear()

    async def _write(self, shard: TransactionShard, records: list[tuple[bytes, bytes | None]]) -> int:
        """Append ``records`` as one batch to the shard's partition; the append's error code
        (NONE once every in-sync replica has it)."""
        if not shard.active:
            return E.NOT_LEADER_OR_FOLLOWER
        now = self.clock.now_ms()
        try:
            hosted = self.replicas.get(TRANSACTION_STATE_TOPIC, shard.partition)
            self.replicas.check_min_insync(hosted)
            batch = build_batch([Record(k, v, timestamp=now) for k, v in records], now_ms=now)
            result = self.replicas.append(hosted, bytearray(batch), now_ms=now, from_client=False)
        except KafkaError as exc:
            log.warning("Writing to %s-%d failed: %s", TRANSACTION_STATE_TOPIC, shard.partition, exc)
            return exc.code
        except OSError as exc:
            log.error("Writing to %s-%d failed: %s", TRANSACTION_STATE_TOPIC, shard.partition, exc)
            return E.KAFKA_STORAGE_ERROR
        deadline = trio.current_time() + self.request_timeout_ms / 1000.0
        try:
            return await self.replicas.wait_for_replication(hosted, result.last_offset + 1, deadline)
        except Exception:
            log.exception("Waiting for %s-%d to replicate offset %d failed", TRANSACTION_STATE_TOPIC,
                          shard.partition, result.last_offset)
            return E.UNKNOWN_SERVER_ERROR

    # ---------------------------------------------------------------- background work
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await nursery.start(self.markers.run)
            nursery.start_soon(self._timer, self.txn_config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
                               self.abort_timed_out)
            nursery.start_soon(self._timer, self.txn_config.transaction_remove_expired_transaction_cleanup_interval_ms,
                               self.expire_transactional_ids)
            task_status.started()
            while True:
                while self._pending_loads:
                    nursery.start_soon(self._load, *self._pending_loads.pop(0))
                self._wake = trio.Event()
                await self._wake.wait()

    async def _timer(self, interval_ms: int, job: Callable[[], None]) -> None:
        while True:
            await trio.sleep(interval_ms / 1000.0)
            try:
                job()
            except Exception:  # a bug of ours must not stop the broker; the next round tries again
                log.exception("The transaction coordinator's periodic %s failed", getattr(job, "__name__", job))

    def abort_timed_out(self) -> None:
        """Abort, under a bumped epoch, every transaction open longer than its timeout."""
        self._each_shard(lambda shard, now: shard.abort_timed_out(now))

    def expire_transactional_ids(self) -> None:
        """Remove the ids idle for transactional.id.expiration.ms."""
        self._each_shard(lambda shard, now: shard.expire_transactional_ids(now))

    def _each_shard(self, op: Callable[[TransactionShard, int], TxnResult]) -> None:
        now = self.clock.now_ms()
        for shard in list(self.shards.values()):
            res = op(shard, now)
            if (res.records or res.markers or res.log) and self._nursery is not None:
                self._nursery.start_soon(self.execute, shard, res)


__all__ = ["TransactionCoordinator", "TxnReplicas", "transaction_config"]
