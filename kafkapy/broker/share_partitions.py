"""Share partitions on their leader (Kafka's SharePartitionManager): the Trio edge of
:mod:`kafkapy.share`.

Each (group, topic id, partition) fetched here gets a :class:`~kafkapy.share.partition.SharePartition`
on first use, rebuilt from the state the persister holds (the share coordinator's
``__share_group_state``); a stored start offset of -1 is resolved with the group's
``share.auto.offset.reset``. A fetch reads whole batches from the local log as Fetch does (a
file region, never parsed record by record), walks only their headers to acquire offsets, and
answers with the batches that hold acquired records. Acknowledgements, releases, lock expiries
and the log start moving change the state; each change is written through the persister before
anyone is told it happened. A partition whose leadership moved, or whose persisted state was
fenced by a newer leader, is forgotten here and reloaded on its next use.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

import trio

from kafkapy.broker.edges import RemoteLog
from kafkapy.broker.partition import Partition
from kafkapy.broker.replica_manager import ReplicaManager
from kafkapy.config import BrokerConfig
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.protocol.events import FileRegion
from kafkapy.records import format as fmt
from kafkapy.share.partition import (
    AbortedTransaction,
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRecords,
    FetchedBatch,
    SharePartition,
    SharePartitionConfig,
)
from kafkapy.share.persister import SharePersister
from kafkapy.share.sessions import ShareSessionCache, TopicIdPartition

log = logging.getLogger(__name__)

# The persister's answers that mean another leader (or a newer state) owns the partition now.
_FENCED = frozenset({ErrorCode.FENCED_STATE_EPOCH, ErrorCode.FENCED_LEADER_EPOCH})
# How often the background task looks for partitions this broker no longer leads, at most.
_LEADERSHIP_SWEEP_MS = 1000
_SCAN_CHUNK = 64 * 1024


class Clock(Protocol):
    def now_ms(self) -> int: ...


@dataclass(frozen=True)
class ShareGroupSettings:
    """A share group's settings as the leader applies them (the GROUP config resource's
    ``share.*`` values, each defaulting to the broker's ``group.share.*``)."""

    partition: SharePartitionConfig = SharePartitionConfig()
    # share.auto.offset.reset: "latest", "earliest" or "by_duration" (then ``reset_duration_ms``).
    auto_offset_reset: str = "latest"
    reset_duration_ms: int = 0


class _Reset(Protocol):
    @property
    def strategy(self) -> str: ...

    @property
    def duration_ms(self) -> int: ...


class GroupShareConfig(Protocol):
    """The share settings of a group's effective configs (``metadata.group_configs.GroupConfig``)."""

    @property
    def share_record_lock_duration_ms(self) -> int: ...

    @property
    def share_delivery_count_limit(self) -> int: ...

    @property
    def share_partition_max_record_locks(self) -> int: ...

    @property
    def share_isolation_level(self) -> int: ...  # 0 read_uncommitted, 1 read_committed

    @property
    def share_auto_offset_reset(self) -> _Reset: ...


def share_settings_of(config: GroupShareConfig) -> ShareGroupSettings:
    """A group's effective configs as the share partitions apply them."""
    reset = config.share_auto_offset_reset
    return ShareGroupSettings(
        SharePartitionConfig(record_lock_duration_ms=config.share_record_lock_duration_ms,
                             delivery_count_limit=config.share_delivery_count_limit,
                             max_record_locks=config.share_partition_max_record_locks,
                             read_committed=config.share_isolation_level == 1),
        auto_offset_reset=reset.strategy, reset_duration_ms=reset.duration_ms)


def max_share_sessions(config: BrokerConfig) -> int:
    """``group.share.max.share.sessions`` (2000 where this broker does not know it)."""
    try:
        return config.get_int("group.share.max.share.sessions")
    except KeyError:
        return 2000


class ShareKey(NamedTuple):
    """A share partition: a share group's view of one topic partition."""

    group_id: str
    topic_id: uuid.UUID
    partition: int


@dataclass
class _Held:
    """A share partition in memory, with the leader epoch it was loaded under."""

    partition: SharePartition
    topic: str
    leader_epoch: int
    lock: trio.Lock = field(default_factory=trio.Lock)


class BatchRef(NamedTuple):
    """One whole batch of a read: where it sits in its file, and its header."""

    position: int  # in the file
    size: int
    batch: FetchedBatch


@dataclass
class ShareRead:
    """One partition's part of a ShareFetch: whole batches and the offsets acquired in them."""

    error: int = ErrorCode.NONE
    records: FileRegion | bytes = b""
    acquired: list[AcquiredRecords] = field(default_factory=list)
    message: str | None = None
    refs: list[BatchRef] = field(default_factory=list, repr=False)

    @property
    def size(self) -> int:
        return len(self.records)


class SharePartitionManager:
    """Every share partition this broker leads, its share sessions, and the lock timers."""

    def __init__(self, replicas: ReplicaManager, persister: SharePersister, clock: Clock, *,
                 settings: Callable[[str], ShareGroupSettings] | None = None,
                 max_sessions: int = 2000, remote: RemoteLog | None = None) -> None:
        self._replicas = replicas
        # Tiered storage (KIP-405), when enabled: records below the local log are read from it.
        self._remote = remote
        self._persister = persister
        self._clock = clock
        self._settings = settings or (lambda group_id: ShareGroupSettings())
        self.sessions = ShareSessionCache(max_sessions)
        self._held: dict[ShareKey, _Held] = {}
        self._loading: dict[ShareKey, trio.Event] = {}
        # Set when records may have become acquirable (released, expired, archived past): parked
        # fetches look again. Replaced after each set.
        self._released = trio.Event()
        # Set when a lock deadline may have moved earlier: the timer task looks again.
        self._timers = trio.Event()

    def lock_duration_ms(self, group_id: str) -> int:
        """AcquisitionLockTimeoutMs for the group's answers."""
        return self._settings(group_id).partition.record_lock_duration_ms

    def held(self, key: ShareKey) -> SharePartition | None:
        """The share partition in memory for ``key`` (None when not loaded here)."""
        held = self._held.get(key)
        return None if held is None else held.partition

    # -- loading ----------------------------------------------------------------------------

    async def _get(self, key: ShareKey, topic: str) -> _Held:
        """The partition for ``key`` if this broker leads it, loaded on first use; a KafkaError
        (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, the persister's) otherwise."""
        while True:
            hosted = self._replicas.leader(topic, key.partition, topic_id=key.topic_id)
            held = self._held.get(key)
            if held is not None:
                if held.leader_epoch == hosted.leader_epoch:
                    return held
                # Leadership moved away and back: the old in-flight state is stale.
                self._drop(key)
            loading = self._loading.get(key)
            if loading is None:
                break
            await loading.wait()
        done = self._loading[key] = trio.Event()
        try:
            held = await self._load(key, topic, hosted.leader_epoch)
            self._held[key] = held
            return held
        finally:
            del self._loading[key]
            done.set()

    async def _load(self, key: ShareKey, topic: str, leader_epoch: int) -> _Held:
        result = await self._persister.read(key.group_id, key.topic_id, key.partition, leader_epoch)
        if result.error != ErrorCode.NONE:
            raise KafkaError(ErrorCode(result.error), result.message)
        settings = self._settings(key.group_id)
        state = result.state
        start = -1 if state is None else state.start_offset
        default_start = self._initial_offset(topic, key.partition, settings) if start < 0 else start
        if state is None:
            part = SharePartition(settings.partition, default_start, leader_epoch=leader_epoch)
        else:
            part = SharePartition.from_read_state(state, settings.partition,
                                                  default_start_offset=default_start,
                                                  leader_epoch=leader_epoch)
        log.info("Loaded share partition %s/%s-%d at start offset %d (state epoch %d)",
                 key.group_id, topic, key.partition, part.start_offset, part.state_epoch)
        return _Held(part, topic, leader_epoch)

    def _initial_offset(self, topic: str, partition: int, settings: ShareGroupSettings) -> int:
        """Where a share partition with no stored start begins (share.auto.offset.reset)."""
        plog = self._replicas.leader(topic, partition).log
        reset = settings.auto_offset_reset
        if reset == "earliest":
            return plog.log_start_offset
        if reset == "by_duration":
            target = self._clock.now_ms() - settings.reset_duration_ms
            found = plog.offset_for_timestamp(target)
            if found is not None:
                return max(found[0], plog.log_start_offset)
        return plog.high_watermark

    def _drop(self, key: ShareKey) -> None:
        if self._held.pop(key, None) is not None:
            log.info("Dropped share partition %s/%s-%d from memory", *key)

    # -- fetching ---------------------------------------------------------------------------

    async def fetch(self, key: ShareKey, topic: str, member_id: str, *, max_records: int,
                    limit: int, min_one: bool, batch_size: int = 0, strict: bool = False) -> ShareRead:
        """Read from where ``key`` has records to hand out and acquire them for ``member_id``:
        about ``max_records`` (rounded up to whole batches; exactly at most that many when
        ``strict``, the record_limit mode), in AcquiredRecords entries of about ``batch_size``
        records each (cut at batch boundaries; 0: as acquired)."""
        try:
            held = await self._get(key, topic)
        except KafkaError as exc:
            return ShareRead(exc.code, message=exc.message)
        async with held.lock:
            try:
                read = await self._acquire(key, held, member_id, max_records, limit, min_one, strict)
            except KafkaError as exc:
                return ShareRead(exc.code, message=exc.message)
            except OSError as exc:
                self._replicas.read_fault(topic, key.partition, exc)
                return ShareRead(ErrorCode.KAFKA_STORAGE_ERROR)
        if batch_size > 0 and read.refs:
            read.acquired = split_acquired(read.acquired, read.refs, batch_size)
        return read

    async def _acquire(self, key: ShareKey, held: _Held, member_id: str, max_records: int,
                       limit: int, min_one: bool, strict: bool) -> ShareRead:
        part = held.partition
        # The group's configs may have changed (IncrementalAlterConfigs on the group): the next
        # acquisition uses them, as Kafka's reads them per acquisition.
        part.config = self._settings(key.group_id).partition
        hosted = self._replicas.leader(held.topic, key.partition, topic_id=key.topic_id)
        plog = hosted.log
        if part.update_log_start(plog.log_start_offset):
            await self._persist(key, held)
        if max_records <= 0 or not part.can_acquire():
            return ShareRead()
        offset = part.next_fetch_offset()
        read_committed = part.config.read_committed
        try:
            result = hosted.read(offset, limit, min_one=min_one, read_committed=read_committed)
        except KafkaError as exc:
            if exc.code != ErrorCode.OFFSET_OUT_OF_RANGE:
                raise
            if self._remote is not None and self._remote.serves_remotely(hosted, offset):
                return await self._acquire_remote(hosted, part, member_id, offset, max_records, limit, min_one,
                                                  strict)
            return ShareRead()  # past a log end that truncation moved back: nothing yet
        region = result.records
        if not isinstance(region, FileRegion) or len(region) == 0:
            return ShareRead()
        # Acquiring never reaches past max_records new records beyond the SPEO: headers further
        # on are not read.
        refs = batch_headers(region, until=part.end_offset + max_records)
        end = result.last_stable_offset if read_committed else result.high_watermark
        acquired = part.acquire(member_id, [b for _, _, b in refs], self._clock.now_ms(),
                                max_records=max_records, end_offset=end,
                                aborted=_aborted(result.aborted_transactions), strict=strict)
        if not acquired:
            region.release()
            return ShareRead()
        self._timers.set()
        return ShareRead(records=_covering(region, refs, acquired), acquired=acquired, refs=refs)

    async def _acquire_remote(self, hosted: Partition, part: SharePartition, member_id: str, offset: int,
                              max_records: int, limit: int, min_one: bool, strict: bool) -> ShareRead:
        """Acquire from batches below the local log that tiered storage holds (KIP-405)."""
        remote = self._remote
        assert remote is not None
        plog = hosted.log
        hw = plog.high_watermark
        aborted: Sequence[tuple[int, int]] | None = None
        if part.config.read_committed:
            got = await remote.read_remote_committed(hosted, offset, limit, min_one=min_one)
            data, aborted = (None, None) if got is None else got
            end = min(plog.last_stable_offset, hw)
        else:
            data, end = await remote.read_remote(hosted, offset, limit, min_one=min_one), hw
        if not data:
            return ShareRead()
        refs = batch_headers_of(data)
        acquired = part.acquire(member_id, [b for _, _, b in refs], self._clock.now_ms(),
                                max_records=max_records, end_offset=end, aborted=_aborted(aborted),
                                strict=strict)
        if not acquired:
            return ShareRead()
        self._timers.set()
        first, last = _covering_refs(refs, acquired)
        return ShareRead(records=data[first.position:last.position + last.size], acquired=acquired,
                         refs=refs)

    async def acquirable_bytes(self, key: ShareKey, topic: str, *, limit: int) -> int:
        """How many bytes a fetch of ``key`` could read now, up to ``limit``, acquiring nothing
        (-1 when the fetch should go ahead at once: an error to answer, or the log start moved
        past the share partition's start, which the fetch archives and persists)."""
        try:
            held = await self._get(key, topic)
            hosted = self._replicas.leader(topic, key.partition, topic_id=key.topic_id)
        except KafkaError:
            return -1
        part = held.partition
        if hosted.log.log_start_offset > part.start_offset:
            return -1
        if not part.can_acquire():
            return 0
        offset = part.next_fetch_offset()
        try:
            result = hosted.read(offset, limit, min_one=False, read_committed=part.config.read_committed)
        except KafkaError as exc:
            if exc.code != ErrorCode.OFFSET_OUT_OF_RANGE:
                return -1
            # Below the local log but in tiered storage: the fetch reads it at once.
            remote = self._remote
            return -1 if remote is not None and remote.serves_remotely(hosted, offset) else 0
        except OSError:
            return -1
        size = len(result.records)
        if isinstance(result.records, FileRegion):
            result.records.release()
        return size

    async def wait(self, deadline: float) -> None:
        """Sleep until some log gets new data, records are released, or ``deadline`` (trio time)."""
        released = self._released

        async def appended(scope: trio.CancelScope) -> None:
            await self._replicas.wait_for_append(deadline)
            scope.cancel()

        async def freed(scope: trio.CancelScope) -> None:
            with trio.move_on_at(deadline):
                await released.wait()
            scope.cancel()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(appended, nursery.cancel_scope)
            nursery.start_soon(freed, nursery.cancel_scope)

    # -- acknowledging and releasing ----------------------------------------------------------

    async def acknowledge(self, key: ShareKey, topic: str, member_id: str,
                          batches: Sequence[AcknowledgementBatch]) -> tuple[int, str | None]:
        """Apply and persist ``member_id``'s acknowledgements for ``key``: (error code, message).
        Nothing changes unless the whole set is valid and written."""
        try:
            held = await self._get(key, topic)
        except KafkaError as exc:
            return exc.code, exc.message
        async with held.lock:
            held.partition.config = self._settings(key.group_id).partition
            before = held.partition.copy()
            # The handler refused RENEW in requests older than v2.
            code = held.partition.acknowledge(member_id, batches, self._clock.now_ms(), renew=True)
            if code != ErrorCode.NONE:
                return code, None
            if all(t == AcknowledgeType.RENEW for b in batches for t in b.acknowledge_types):
                # Only locks moved, which the share state does not hold: nothing to write.
                self._timers.set()
                return ErrorCode.NONE, None
            error = await self._persist(key, held)
            if error != ErrorCode.NONE:
                held.partition = before  # not durable, so not done
                return error, None
        self._wake_fetches()
        return ErrorCode.NONE, None

    async def release_member(self, group_id: str, member_id: str,
                             partitions: Iterable[TopicIdPartition]) -> None:
        """Release what ``member_id`` holds in ``partitions`` (its session closed, or it left)."""
        for tp in partitions:
            key = ShareKey(group_id, tp.topic_id, tp.partition)
            held = self._held.get(key)
            if held is None:
                continue
            async with held.lock:
                if held.partition.release_member(member_id):
                    await self._persist(key, held)
        self._wake_fetches()

    async def member_left(self, group_id: str, member_id: str) -> None:
        """The member left its share group (or was fenced): end its session, free its records."""
        self.sessions.remove_member(group_id, member_id)
        held = [k for k in self._held if k.group_id == group_id]
        await self.release_member(group_id, member_id,
                                  [TopicIdPartition(k.topic_id, k.partition) for k in held])

    def group_empty(self, group_id: str) -> None:
        """The share group has no members left (or was deleted): its partitions' state is all
        persisted but what is in flight, which nobody holds now, so forget them here; a later
        fetch loads them again (Kafka's onGroupEmpty)."""
        for key in [k for k in self._held if k.group_id == group_id]:
            self._drop(key)

    async def connection_closed(self, connection_id: str) -> None:
        """A client connection closed: its share sessions end and their records are released."""
        for result in self.sessions.connection_closed(connection_id):
            if result.session is not None:
                await self.release_member(result.session.group_id, result.session.member_id,
                                          result.release)

    async def evict_idle_sessions(self, idle_ms: int) -> int:
        """Make room when the session cache is full: end the sessions unused for ``idle_ms``
        (their clients are gone, though no connection close told us) and release their records;
        how many ended."""
        ended = self.sessions.evict_idle(self._clock.now_ms() - idle_ms)
        for result in ended:
            if result.session is not None:
                await self.release_member(result.session.group_id, result.session.member_id, result.release)
        return len(ended)

    async def _persist(self, key: ShareKey, held: _Held) -> int:
        """Write ``held``'s state; a fenced answer means another leader owns it: forget it."""
        result = await self._persister.write(key.group_id, key.topic_id, key.partition,
                                             held.partition.to_write_state())
        if result.error in _FENCED:
            self._drop(key)
        elif result.error != ErrorCode.NONE:
            log.warning("Writing share partition %s/%s-%d's state failed: %s", key.group_id,
                        held.topic, key.partition, ErrorCode(result.error).name)
        return result.error

    def _wake_fetches(self) -> None:
        self._released.set()
        self._released = trio.Event()

    # -- timers -------------------------------------------------------------------------------

    async def expire_locks(self) -> int | None:
        """Release the records whose acquisition locks lapsed, persist, and forget partitions
        this broker no longer leads; the next lock deadline (wall ms), None when none."""
        now = self._clock.now_ms()
        earliest: int | None = None
        released = False
        for key, held in list(self._held.items()):
            if not self._still_leader(key, held):
                self._drop(key)
                continue
            deadline = held.partition.next_deadline()
            if deadline is not None and deadline <= now:
                async with held.lock:
                    if held.partition.tick(now):
                        released = True
                        await self._persist(key, held)
                deadline = held.partition.next_deadline()
            if deadline is not None and (earliest is None or deadline < earliest):
                earliest = deadline
        if released:
            self._wake_fetches()
        return earliest

    def _still_leader(self, key: ShareKey, held: _Held) -> bool:
        try:
            hosted = self._replicas.leader(held.topic, key.partition, topic_id=key.topic_id)
        except KafkaError:
            return False
        return hosted.leader_epoch == held.leader_epoch

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The lock timer: expire locks as they lapse, until cancelled."""
        task_status.started()
        while True:
            self._timers = timers = trio.Event()
            earliest = await self.expire_locks()
            wait_ms = _LEADERSHIP_SWEEP_MS
            if earliest is not None:
                wait_ms = min(wait_ms, max(0, earliest - self._clock.now_ms()))
            with trio.move_on_after(wait_ms / 1000.0):
                await timers.wait()


def batch_headers_of(data: bytes) -> list[BatchRef]:
    """The headers of the whole batches in ``data`` (a remote read), positions within it."""
    out: list[BatchRef] = []
    pos = 0
    while len(data) - pos >= fmt.HEADER_SIZE:
        h = fmt.parse_header(data, pos)
        if h.size < fmt.HEADER_SIZE or pos + h.size > len(data):
            break
        out.append(BatchRef(pos, h.size, FetchedBatch(h.base_offset, h.last_offset, h.producer_id,
                                                      h.is_transactional, h.is_control)))
        pos += h.size
    return out


def batch_headers(region: FileRegion, until: int | None = None) -> list[BatchRef]:
    """The headers of the whole batches in ``region``, read a chunk at a time: what acquiring
    needs, without touching the records; with ``until``, only up to the batch holding it."""
    fd = region.fileno()
    out: list[BatchRef] = []
    pos, end = region.offset, region.offset + region.count
    buf, buf_start = b"", pos
    while end - pos >= fmt.HEADER_SIZE:
        rel = pos - buf_start
        if rel + fmt.HEADER_SIZE > len(buf):
            buf, buf_start, rel = os.pread(fd, min(_SCAN_CHUNK, end - pos), pos), pos, 0
            if len(buf) < fmt.HEADER_SIZE:
                break
        h = fmt.parse_header(buf, rel)
        size = h.size
        if size < fmt.HEADER_SIZE or pos + size > end:
            break
        out.append(BatchRef(pos, size, FetchedBatch(h.base_offset, h.last_offset, h.producer_id,
                                                    h.is_transactional, h.is_control)))
        if until is not None and h.last_offset >= until:
            break
        pos += size
    return out


def _covering(region: FileRegion, refs: Sequence[BatchRef],
              acquired: Sequence[AcquiredRecords]) -> FileRegion:
    """The part of ``region`` from the batch holding the first acquired offset to the one
    holding the last (Kafka's maybeSliceFetchRecords): the client gets no batch it cannot use."""
    start, stop = _covering_refs(refs, acquired)
    return FileRegion(region.fd, start.position, stop.position + stop.size - start.position,
                      region.owner)


def _covering_refs(refs: Sequence[BatchRef], acquired: Sequence[AcquiredRecords]) -> tuple[BatchRef, BatchRef]:
    """The first and the last batch holding acquired offsets."""
    first, last = acquired[0].first_offset, acquired[-1].last_offset
    start = next(r for r in refs if r.batch.last_offset >= first)
    stop = next((r for r in reversed(refs) if r.batch.base_offset <= last), refs[-1])
    return start, stop


def _aborted(found: Sequence[tuple[int, int]] | None) -> list[AbortedTransaction]:
    return [AbortedTransaction(pid, first) for pid, first in found or ()]


def split_acquired(acquired: Sequence[AcquiredRecords], refs: Sequence[BatchRef],
                   batch_size: int) -> list[AcquiredRecords]:
    """``acquired`` cut into entries of at least ``batch_size`` records where a log batch ends
    (the last entry of a range may be smaller): the acknowledgement granularity BatchSize asks
    for, never splitting a log batch."""
    out: list[AcquiredRecords] = []
    for a in acquired:
        first = a.first_offset
        for ref in refs:
            end = ref.batch.last_offset
            if end < first or ref.batch.base_offset > a.last_offset:
                continue
            if end >= a.last_offset:
                break
            if end - first + 1 >= batch_size:
                out.append(AcquiredRecords(first, end, a.delivery_count))
                first = end + 1
        out.append(AcquiredRecords(first, a.last_offset, a.delivery_count))
    return out


__all__ = ["BatchRef", "GroupShareConfig", "ShareGroupSettings", "ShareKey", "SharePartitionManager", "ShareRead",
           "batch_headers", "batch_headers_of", "max_share_sessions", "share_settings_of",
           "split_acquired"]
