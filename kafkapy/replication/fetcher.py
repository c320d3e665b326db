"""Followers pull their partitions from the leaders: one fetcher task per leader broker.

Kafka's ReplicaFetcherThread in Trio. The replica manager says which partitions to follow and
from whom (``follow`` / ``unfollow``, synchronous, called while metadata is applied); each
leader broker gets one task that sends it Fetch requests for all of them at once, with this
broker's id as the replica id, and:

* appends the returned batches byte for byte (``append_as_follower`` checks every CRC), then takes
  the leader's high watermark (never past its own log end) and log start offset;
* on a DivergingEpoch truncates the divergent tail (``truncation.divergence_truncation``) before
  fetching on;
* on OFFSET_OUT_OF_RANGE below the leader's log start restarts the log empty at that offset;
* on leadership errors backs the partition off until the metadata retargets it.

A partition that was retargeted or dropped while its request was out has its answer discarded.
A throttled partition (``throttle``) is left out of the requests while this follower is behind
the leader's high watermark and the follower quota (the host's ``follower_quota``) is exceeded;
the bytes fetched for throttled partitions count against it.
Errors never end a task: the connection is dropped and retried after ``replica.fetch.backoff.ms``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import trio

from kafkapy.log.partition_log import PartitionLog
from kafkapy.log.storage_errors import LogStorageError
from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import ErrorCode, KafkaError, error_name
from kafkapy.records.reader import iter_batches
from kafkapy.replication.throttle import ReplicationQuota
from kafkapy.replication.truncation import divergence_truncation

log = logging.getLogger(__name__)

#: Fetch v12: topics by name, LastFetchedEpoch in, DivergingEpoch out.
FETCH_VERSION = 12

_BACK_OFF_ERRORS = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID,
    ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.KAFKA_STORAGE_ERROR,
})


class FollowTarget(NamedTuple):
    """Whom to follow for one partition, and in which leader epoch."""

    leader_id: int
    leader_epoch: int


class FetcherHost(Protocol):
    """What the fetchers need from the broker."""

    @property
    def node_id(self) -> int:
        """This broker's id: the replica id of its fetches."""

    def follower_log(self, topic: str, partition: int, leader_epoch: int) -> PartitionLog | None:
        """The log while this broker still follows ``leader_epoch`` of the partition."""

    @property
    def connect(self) -> Callable[[int], Awaitable[Any]] | None:
        """Opens a connected, version-negotiated client to a broker's broker listener (None
        until the node attaches one)."""

    def on_follower_progress(self, topic: str, partition: int) -> None:
        """Called after the log moved (append, truncation, high watermark)."""

    def storage_fault(self, topic: str, partition: int, exc: LogStorageError) -> None:
        """Writing the replica failed on disk (the host logs it and may take its dir offline)."""


@dataclass
class FetcherSettings:
    """The replica.fetch.* settings."""

    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 10485760
    partition_max_bytes: int = 1048576
    backoff_ms: int = 1000
    request_timeout_ms: int = 30000

    @classmethod
    def from_config(cls, config: Any) -> FetcherSettings:
        def get(name: str, default: int) -> int:
            value = config.get(name)
            return default if value is None else int(value)
        return cls(
            max_wait_ms=get("replica.fetch.wait.max.ms", cls.max_wait_ms),
            min_bytes=get("replica.fetch.min.bytes", cls.min_bytes),
            max_bytes=get("replica.fetch.response.max.bytes", cls.max_bytes),
            partition_max_bytes=get("replica.fetch.max.bytes", cls.partition_max_bytes),
            backoff_ms=get("replica.fetch.backoff.ms", cls.backoff_ms),
            request_timeout_ms=get("replica.socket.timeout.ms", cls.request_timeout_ms),
        )


class _Fetcher:
    """The partitions followed from one leader broker, and the task that fetches them."""

    def __init__(self, leader_id: int) -> None:
        self.leader_id = leader_id
        self.partitions: dict[tuple[str, int], int] = {}  # key -> leader epoch
        self.delayed_until: dict[tuple[str, int], float] = {}
        # Partitions whose last fetch reached the leader's high watermark (Kafka's
        # isReplicaInSync on the follower): a throttle never holds them back.
        self.caught_up: set[tuple[str, int]] = set()
        self.changed = trio.Event()
        self.client: Any = None


class ReplicaFetcherManager:
    """Follows partitions from their leaders (see the module docstring)."""

    def __init__(self, host: FetcherHost, settings: FetcherSettings, now_ms: Callable[[], int]) -> None:
        self.host = host
        self.settings = settings
        self._now_ms = now_ms
        self._targets: dict[tuple[str, int], FollowTarget] = {}
        self._fetchers: dict[int, _Fetcher] = {}
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                for fetcher in self._fetchers.values():
                    nursery.start_soon(self._fetch_loop, fetcher)
                task_status.started()
                await trio.sleep_forever()
        finally:
            # follow() after shutdown only records targets (a later run() starts their tasks);
            # no task can start in a closed nursery.
            self._nursery = None

    def following(self) -> dict[tuple[str, int], FollowTarget]:
        return dict(self._targets)

    def follow(self, targets: Mapping[tuple[str, int], FollowTarget]) -> None:
        for key, target in targets.items():
            old = self._targets.get(key)
            if old == target:
                continue
            if old is not None and old.leader_id != target.leader_id:
                self._remove_from(old.leader_id, key)
            self._targets[key] = target
            fetcher = self._fetchers.get(target.leader_id)
            if fetcher is None:
                fetcher = self._fetchers[target.leader_id] = _Fetcher(target.leader_id)
                if self._nursery is not None:
                    self._nursery.start_soon(self._fetch_loop, fetcher)
            fetcher.partitions[key] = target.leader_epoch
            fetcher.delayed_until.pop(key, None)
            fetcher.changed.set()

    def unfollow(self, keys: Iterable[tuple[str, int]]) -> None:
        for key in keys:
            old = self._targets.pop(key, None)
            if old is not None:
                self._remove_from(old.leader_id, key)

    def _remove_from(self, leader_id: int, key: tuple[str, int]) -> None:
        fetcher = self._fetchers.get(leader_id)
        if fetcher is None:
            return
        fetcher.partitions.pop(key, None)
        fetcher.delayed_until.pop(key, None)
        fetcher.caught_up.discard(key)
        fetcher.changed.set()

    # ---------------------------------------------------------------- the task
    async def _fetch_loop(self, fetcher: _Fetcher) -> None:
        backoff = self.settings.backoff_ms / 1000.0
        try:
            while True:
                if not fetcher.partitions:
                    # Nothing to follow from this broker any more: end, unless new partitions
                    # arrive while we close.
                    if self._fetchers.get(fetcher.leader_id) is fetcher:
                        del self._fetchers[fetcher.leader_id]
                    return
                try:
                    request, sent = self._build_request(fetcher)
                except Exception:  # noqa: BLE001 - e.g. a log closed under us; retry later
                    log.exception("Building a replica fetch for broker %d failed", fetcher.leader_id)
                    await trio.sleep(backoff)
                    continue
                if request is None:
                    fetcher.changed = trio.Event()
                    wake = min(fetcher.delayed_until.values(), default=trio.current_time() + backoff)
                    with trio.move_on_at(wake):
                        await fetcher.changed.wait()
                    continue
                try:
                    if fetcher.client is None:
                        connect = self.host.connect
                        if connect is None:
                            raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, "no inter-broker connections")
                        fetcher.client = await connect(fetcher.leader_id)
                    # Kafka requires replica.socket.timeout.ms >= replica.fetch.wait.max.ms, so
                    # a long poll answered on time never trips this.
                    with trio.fail_after(self.settings.request_timeout_ms / 1000.0):
                        response = await fetcher.client.send(request, version=FETCH_VERSION, timeout=None)
                except Exception as exc:  # noqa: BLE001 - a lost leader must not end the task
                    log.info("Fetching from broker %d failed: %s; retrying in %d ms",
                             fetcher.leader_id, exc or type(exc).__name__, self.settings.backoff_ms)
                    await self._drop_client(fetcher)
                    await trio.sleep(backoff)
                    continue
                if response.error_code != ErrorCode.NONE:
                    log.info("Broker %d answered a replica fetch with %s", fetcher.leader_id,
                             error_name(response.error_code))
                    await trio.sleep(backoff)
                    continue
                try:
                    self._handle_response(fetcher, response, sent)
                except Exception:  # noqa: BLE001 - one bad answer must not stop replication
                    log.exception("Handling a replica fetch response from broker %d failed",
                                  fetcher.leader_id)
                    for key in sent:
                        self._delay(fetcher, key)
        finally:
            await self._drop_client(fetcher)

    async def _drop_client(self, fetcher: _Fetcher) -> None:
        client, fetcher.client = fetcher.client, None
        if client is not None:
            with trio.CancelScope(shield=True):
                try:
                    await client.aclose()
                except Exception:  # noqa: BLE001 - closing a broken connection may fail too
                    pass

    def _quota(self) -> ReplicationQuota | None:
        return getattr(self.host, "follower_quota", None)

    def _build_request(self, fetcher: _Fetcher) -> tuple[Any, dict[tuple[str, int], tuple[int, int]]]:
        now = trio.current_time()
        s = self.settings
        quota = self._quota()
        now_ms = self._now_ms()
        by_topic: dict[str, list[Any]] = {}
        sent: dict[tuple[str, int], tuple[int, int]] = {}
        P = m.FetchRequest.FetchTopic.FetchPartition
        for key, epoch in fetcher.partitions.items():
            if fetcher.delayed_until.get(key, 0.0) > now:
                continue
            fetcher.delayed_until.pop(key, None)
            if quota is not None and quota.should_throttle(key[0], key[1], key in fetcher.caught_up, now_ms):
                continue
            plog = self.host.follower_log(key[0], key[1], epoch)
            if plog is None:
                continue
            leo = plog.log_end_offset
            last_epoch = plog.leader_epoch_cache.latest_epoch
            by_topic.setdefault(key[0], []).append(P(
                partition=key[1], current_leader_epoch=epoch, fetch_offset=leo,
                last_fetched_epoch=last_epoch, log_start_offset=plog.log_start_offset,
                partition_max_bytes=s.partition_max_bytes))
            sent[key] = (epoch, leo)
        if not sent:
            return None, sent
        request = m.FetchRequest(
            replica_id=self.host.node_id, max_wait_ms=s.max_wait_ms, min_bytes=s.min_bytes,
            max_bytes=s.max_bytes, isolation_level=0, session_id=0, session_epoch=-1,
            topics=[m.FetchRequest.FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
            forgotten_topics_data=[], rack_id="")
        return request, sent

    def _handle_response(self, fetcher: _Fetcher, response: Any,
                         sent: dict[tuple[str, int], tuple[int, int]]) -> None:
        for topic in response.responses:
            for p in topic.partitions:
                key = (topic.topic, p.partition_index)
                if key not in sent:
                    continue
                epoch, fetch_offset = sent[key]
                if fetcher.partitions.get(key) != epoch:
                    continue  # retargeted or dropped while the request was out
                plog = self.host.follower_log(key[0], key[1], epoch)
                if plog is None or plog.log_end_offset != fetch_offset:
                    continue
                try:
                    self._apply(fetcher, key, plog, p, fetch_offset)
                except LogStorageError as exc:
                    # Logged once per failure episode by the host, not once per fetch.
                    self.host.storage_fault(key[0], key[1], exc)
                    self._delay(fetcher, key)
                except KafkaError as exc:
                    log.error("Replicating %s-%d from broker %d failed: %s", key[0], key[1],
                              fetcher.leader_id, exc)
                    self._delay(fetcher, key)
                except OSError as exc:
                    log.error("Writing the replica of %s-%d failed: %s", key[0], key[1], exc)
                    self._delay(fetcher, key)
                except Exception:  # noqa: BLE001 - other partitions keep replicating
                    log.exception("Replicating %s-%d from broker %d failed", key[0], key[1],
                                  fetcher.leader_id)
                    self._delay(fetcher, key)

    def _delay(self, fetcher: _Fetcher, key: tuple[str, int]) -> None:
        fetcher.delayed_until[key] = trio.current_time() + self.settings.backoff_ms / 1000.0

    def _apply(self, fetcher: _Fetcher, key: tuple[str, int], plog: PartitionLog, p: Any,
               fetch_offset: int) -> None:
        error = p.error_code
        now_ms = self._now_ms()
        if error == ErrorCode.NONE:
            diverging = getattr(p, "diverging_epoch", None)
            if diverging is not None and (diverging.epoch >= 0 or diverging.end_offset >= 0):
                offset, _ = divergence_truncation(
                    plog.leader_epoch_cache, plog.log_end_offset, plog.high_watermark,
                    diverging.epoch, diverging.end_offset)
                if offset >= plog.log_end_offset:
                    # Nothing of ours lies past the leader's answer, yet it says we diverge:
                    # asking again at once would get the same answer, so wait.
                    log.warning("Leader %d reports %s-%d diverging at epoch %d offset %d, but "
                                "our log ends at %d; retrying later", fetcher.leader_id, key[0],
                                key[1], diverging.epoch, diverging.end_offset, plog.log_end_offset)
                    self._delay(fetcher, key)
                    return
                log.info("Truncating %s-%d to %d (diverged from leader %d at epoch %d)",
                         key[0], key[1], offset, fetcher.leader_id, diverging.epoch)
                plog.truncate_to(offset, now_ms=now_ms)
                self.host.on_follower_progress(*key)
                return
            records = p.records
            if records:
                _restart_inside_first_batch(plog, records, now_ms)
                plog.append_as_follower(records, now_ms=now_ms)
                quota = self._quota()
                if quota is not None and quota.is_throttled(*key):
                    quota.record(len(records), now_ms)
            leader_hw = p.high_watermark
            if plog.log_end_offset >= leader_hw:
                fetcher.caught_up.add(key)
            else:
                fetcher.caught_up.discard(key)
            new_hw = min(leader_hw, plog.log_end_offset)
            if new_hw > plog.high_watermark:
                plog.maybe_increment_high_watermark(new_hw)
            # The leader deleted records (retention, DeleteRecords): so do we.
            plog.maybe_increment_log_start_offset_from_leader(p.log_start_offset)
            self.host.on_follower_progress(*key)
        elif error == ErrorCode.OFFSET_OUT_OF_RANGE:
            if 0 <= fetch_offset < p.log_start_offset:
                log.info("Restarting the replica of %s-%d at the leader's log start %d (we were at %d)",
                         key[0], key[1], p.log_start_offset, fetch_offset)
                plog.truncate_fully_and_start_at(p.log_start_offset, now_ms=now_ms)
                self.host.on_follower_progress(*key)
            else:
                log.warning("Replica of %s-%d is out of range at %d on broker %d",
                            key[0], key[1], fetch_offset, fetcher.leader_id)
                self._delay(fetcher, key)
        else:
            if error not in _BACK_OFF_ERRORS:
                log.warning("Replica fetch of %s-%d from broker %d: %s", key[0], key[1],
                            fetcher.leader_id, error_name(error))
            self._delay(fetcher, key)


def _restart_inside_first_batch(plog: PartitionLog, records: bytes, now_ms: int) -> None:
    """A follower that restarted at the leader's log start may get a batch beginning before it
    (DeleteRecords or retention cut in the middle of that batch): as Kafka, restart the empty
    log at the batch's base offset so the whole batch can be appended; the leader's log start
    is applied right after."""
    leo = plog.log_end_offset
    if leo != plog.local_log_start_offset:
        return
    first = next(iter_batches(records), None)
    if first is not None and first[0].base_offset < leo <= first[0].last_offset:
        plog.truncate_fully_and_start_at(first[0].base_offset, now_ms=now_ms)
