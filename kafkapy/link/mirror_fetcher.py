"""A cluster link's mirror fetcher: this broker's mirror partitions, pulled from the source.

For every mirror partition this broker leads, the fetcher reads the same partition of the source
topic from the source's leader, as a consumer (read_uncommitted, so up to the source's high
watermark: nothing the source could still lose), and hands the batches to the partition, which
appends them byte for byte at the source's offsets. Transaction markers, producer ids, timestamps
and partition leader epochs come across untouched.

Kafka's replica fetcher is the model, with a consumer's way of finding leaders and checking its
position:

* the source's Metadata names each partition's leader and leader epoch; one task per source
  leader sends it Fetch requests (v12) for all the partitions it leads;
* before fetching a partition whose log is not empty, and again whenever the source's leader
  epoch changes, the position is checked with OffsetsForLeaderEpoch: when the source's history of
  our last epoch ends below our log end (an unclean election there, or a writable topic restored
  as a mirror), the mirror's tail is cut there. A DivergingEpoch in a Fetch answer does the same;
* a source that deleted records we never got (retention, DeleteRecords) answers
  OFFSET_OUT_OF_RANGE: the mirror restarts at the source's log start; the source's log start in
  every answer moves the mirror's along;
* a batch whose leader epoch is above the mirror's epoch ceiling is not appended: the partition
  stops with an error (see ``MirrorTopic.epoch_ceiling``).

Leadership errors mark the source metadata stale; every error backs the partition off for
``replica.fetch.backoff.ms``. Nothing here ends on an error: a source that is down is retried
until it is back or the mirror is stopped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import trio

from kafkapy.link.cluster_client import ClusterClient
from kafkapy.log.partition_log import PartitionLog
from kafkapy.log.storage_errors import LogStorageError
from kafkapy.metadata.link_configs import LinkSettings
from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import ErrorCode, KafkaError, error_name
from kafkapy.records.reader import iter_batches
from kafkapy.replication.truncation import divergence_truncation

log = logging.getLogger(__name__)

#: Fetch v12: topics by name, LastFetchedEpoch in, DivergingEpoch out.
FETCH_VERSION = 12
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
CONSUMER_REPLICA_ID = -1

_METADATA_ERRORS = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.KAFKA_STORAGE_ERROR,
})


class MirrorReplica(Protocol):
    """What the fetcher needs of a mirror partition this broker leads (the broker's Partition)."""

    def mirror_log(self, leader_epoch: int) -> PartitionLog | None:
        """The log while this broker leads ``leader_epoch`` of the read-only mirror."""

    @property
    def mirror_epoch_ceiling(self) -> int: ...

    def append_mirrored(self, records: bytes | memoryview, *, now_ms: int) -> None: ...

    def truncate_mirrored(self, offset: int, *, now_ms: int, why: str) -> None: ...

    def restart_mirrored_at(self, offset: int, *, now_ms: int, why: str) -> None: ...

    def follow_source_log_start(self, offset: int) -> None: ...


class MirrorHost(Protocol):
    """The broker's side: its hosted partitions."""

    def mirror_replica(self, topic: str, partition: int) -> MirrorReplica | None:
        """The hosted partition ``topic``-``partition``, if any."""


@dataclass(frozen=True)
class MirrorAssignment:
    """A mirror partition to fill: its source topic and the destination leader epoch we lead."""

    source_topic: str
    leader_epoch: int


@dataclass
class _Mirrored:
    """The fetcher's state for one mirror partition."""

    assignment: MirrorAssignment
    #: The source leader epoch at which our log was last checked against the source (-2: never).
    validated_epoch: int = -2
    delayed_until: float = 0.0
    stopped: str | None = None
    source_high_watermark: int = -1
    log_end_offset: int = -1


@dataclass(frozen=True)
class MirrorLag:
    """One mirror partition's progress, for metrics and describe."""

    log_end_offset: int
    source_high_watermark: int
    stopped: str | None

    @property
    def lag(self) -> int:
        if self.source_high_watermark < 0 or self.log_end_offset < 0:
            return -1
        return max(0, self.source_high_watermark - self.log_end_offset)


class MirrorFetcher:
    """Fills one link's mirror partitions led here (see the module docstring)."""

    def __init__(self, link_name: str, source: ClusterClient, settings: LinkSettings, host: MirrorHost,
                 now_ms: Callable[[], int]) -> None:
        self.link_name = link_name
        self.source = source
        self.settings = settings
        self.host = host
        self._now_ms = now_ms
        self._partitions: dict[tuple[str, int], _Mirrored] = {}
        self._leader_tasks: set[int] = set()
        self._changed = trio.Event()
        self._stale = True
        self._nursery: trio.Nursery | None = None

    # -- what to fetch (called as metadata is applied) ---------------------------------------------

    def assign(self, assignments: Mapping[tuple[str, int], MirrorAssignment]) -> None:
        """Fill exactly these partitions from now on."""
        for key in [k for k in self._partitions if k not in assignments]:
            del self._partitions[key]
        for key, assignment in assignments.items():
            current = self._partitions.get(key)
            if current is None or current.assignment != assignment:
                self._partitions[key] = _Mirrored(assignment)
        self._stale = True
        self._wake()

    def lags(self) -> dict[tuple[str, int], MirrorLag]:
        return {k: MirrorLag(s.log_end_offset, s.source_high_watermark, s.stopped)
                for k, s in self._partitions.items()}

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    # -- the tasks ------------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started()
                await self._metadata_loop()
        finally:
            self._nursery = None
            await self.source.aclose()

    async def _metadata_loop(self) -> None:
        """Keep the source's metadata fresh enough, and one fetch task per source leader."""
        backoff = self.settings.fetch_backoff_ms / 1000.0
        max_age = self.settings.metadata_max_age_ms / 1000.0
        while True:
            changed = self._changed
            topics = sorted({s.assignment.source_topic for s in self._partitions.values()})
            meta = self.source.metadata
            if topics and (self._stale or self._leaderless() or meta is None
                           or trio.current_time() - meta.fetched_at > max_age
                           or any(t not in meta.topics for t in topics)):
                try:
                    await self.source.refresh(topics)
                    self._stale = False
                except Exception as exc:  # noqa: BLE001 - a source that is down is retried
                    log.info("Cluster link %s: source metadata failed: %s; retrying in %d ms",
                             self.link_name, exc or type(exc).__name__,
                             self.settings.fetch_backoff_ms)
                    with trio.move_on_after(backoff):
                        await changed.wait()
                    continue
            for leader in {self._source_leader(k)[0] for k in self._partitions} - self._leader_tasks:
                if leader >= 0 and self._nursery is not None:
                    self._leader_tasks.add(leader)
                    self._nursery.start_soon(self._leader_loop, leader)
            # A partition whose source leader is unknown (an election there) has no task to
            # fill it until the metadata names one: ask again soon, not in max_age.
            with trio.move_on_after(backoff if self._stale or self._leaderless() else max_age):
                await changed.wait()

    def _leaderless(self) -> bool:
        return any(self._source_leader(k)[0] < 0 for k in self._partitions)

    def _source_leader(self, key: tuple[str, int]) -> tuple[int, int]:
        """(leader id, leader epoch) of the source partition of mirror ``key``; -1s if unknown."""
        state = self._partitions.get(key)
        meta = self.source.metadata
        if state is None or meta is None:
            return -1, -1
        topic = meta.topics.get(state.assignment.source_topic)
        part = topic.partitions.get(key[1]) if topic is not None else None
        if part is None or part.error_code != ErrorCode.NONE:
            return -1, -1
        return part.leader, part.leader_epoch

    def _led_by(self, leader: int) -> list[tuple[str, int]]:
        now = trio.current_time()
        return [k for k, s in self._partitions.items()
                if s.stopped is None and s.delayed_until <= now and self._source_leader(k)[0] == leader]

    async def _leader_loop(self, leader: int) -> None:
        backoff = self.settings.fetch_backoff_ms / 1000.0
        try:
            while True:
                keys = self._led_by(leader)
                if not keys:
                    if not any(self._source_leader(k)[0] == leader for k in self._partitions):
                        return  # this source broker leads none of ours any more
                    changed = self._changed
                    with trio.move_on_after(backoff):
                        await changed.wait()
                    continue
                try:
                    await self._validate(leader, keys)
                    fetched = await self._fetch(leader, keys)
                except Exception as exc:  # noqa: BLE001 - a lost source broker must not end the task
                    log.info("Cluster link %s: fetching from source broker %d failed: %s; retrying in %d ms",
                             self.link_name, leader, exc or type(exc).__name__,
                             self.settings.fetch_backoff_ms)
                    self._stale = True
                    self._wake()
                    await trio.sleep(backoff)
                    continue
                if not fetched:
                    # No partition's log to fill yet (leadership suspended, or not yet leading
                    # the assigned epoch): going round at once would never yield, and would
                    # starve every other task of the broker, its heartbeats included.
                    changed = self._changed
                    with trio.move_on_after(backoff):
                        await changed.wait()
        finally:
            self._leader_tasks.discard(leader)

    # -- checking our position against the source's history --------------------------------------------

    async def _validate(self, leader: int, keys: list[tuple[str, int]]) -> None:
        """OffsetsForLeaderEpoch for partitions not yet checked at the source's current epoch."""
        # key -> (source leader epoch, our last epoch, our log end, source topic)
        todo: dict[tuple[str, int], tuple[int, int, int, str]] = {}
        for key in keys:
            state = self._partitions.get(key)
            epoch = self._source_leader(key)[1]
            if state is None or state.validated_epoch == epoch:
                continue
            plog = self._log(key, state)
            if plog is None:
                continue
            last = plog.leader_epoch_cache.latest_epoch
            if plog.log_end_offset <= plog.log_start_offset or last < 0:
                state.validated_epoch = epoch  # nothing of ours to check
                continue
            todo[key] = (epoch, last, plog.log_end_offset, state.assignment.source_topic)
        if not todo:
            return
        Req = m.OffsetForLeaderEpochRequest
        by_topic: dict[str, list[Any]] = {}
        for key, (epoch, last, _, source_topic) in todo.items():
            by_topic.setdefault(source_topic, []).append(
                Req.OffsetForLeaderTopic.OffsetForLeaderPartition(
                    partition=key[1], current_leader_epoch=epoch, leader_epoch=last))
        request = Req(replica_id=CONSUMER_REPLICA_ID, topics=[
            Req.OffsetForLeaderTopic(topic=t, partitions=ps) for t, ps in by_topic.items()])
        response = await self.source.send_to(leader, request, version=OFFSET_FOR_LEADER_EPOCH_VERSION)
        dest = {(v[3], k[1]): k for k, v in todo.items()}
        for topic in response.topics:
            for p in topic.partitions:
                key = dest.get((topic.topic, p.partition))
                if key is None or key not in self._partitions:
                    continue
                state = self._partitions[key]
                if p.error_code != ErrorCode.NONE:
                    self._back_off(key, state, p.error_code, "checking its position")
                    continue
                plog = self._log(key, state)
                if plog is None or plog.log_end_offset != todo[key][2]:
                    continue
                offset, _ = divergence_truncation(plog.leader_epoch_cache, plog.log_end_offset,
                                                  plog.high_watermark, p.leader_epoch, p.end_offset)
                if p.end_offset >= 0 and offset < plog.log_end_offset:
                    self._replica(key).truncate_mirrored(  # type: ignore[union-attr]
                        offset, now_ms=self._now_ms(),
                        why=f"the source's history of leader epoch {todo[key][1]} ends at "
                            f"{p.end_offset} (epoch {p.leader_epoch})")
                state.validated_epoch = todo[key][0]

    # -- fetching --------------------------------------------------------------------------------------

    async def _fetch(self, leader: int, keys: list[tuple[str, int]]) -> bool:
        """Fetch ``keys`` from ``leader`` and apply the answer; False when none could be asked."""
        s = self.settings
        Req = m.FetchRequest
        by_topic: dict[str, list[Any]] = {}
        sent: dict[tuple[str, int], tuple[int, int, str]] = {}  # key -> (our epoch, our LEO, source topic)
        for key in keys:
            state = self._partitions.get(key)  # unassigned while we validated: skipped
            epoch = self._source_leader(key)[1]
            if state is None or state.validated_epoch != epoch:
                continue
            plog = self._log(key, state)
            if plog is None:
                continue
            leo = plog.log_end_offset
            by_topic.setdefault(state.assignment.source_topic, []).append(Req.FetchTopic.FetchPartition(
                partition=key[1], current_leader_epoch=epoch, fetch_offset=leo,
                last_fetched_epoch=plog.leader_epoch_cache.latest_epoch, log_start_offset=-1,
                partition_max_bytes=s.fetch_max_bytes))
            sent[key] = (state.assignment.leader_epoch, leo, state.assignment.source_topic)
        if not sent:
            return False
        request = Req(
            replica_id=CONSUMER_REPLICA_ID, max_wait_ms=s.fetch_wait_max_ms, min_bytes=s.fetch_min_bytes,
            max_bytes=s.fetch_response_max_bytes, isolation_level=0, session_id=0, session_epoch=-1,
            topics=[Req.FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
            forgotten_topics_data=[], rack_id="")
        # A long poll answered on time never trips this: the wait is well inside it.
        timeout = self.source.timeout + s.fetch_wait_max_ms / 1000.0
        response = await self.source.send_to(leader, request, version=FETCH_VERSION, timeout=timeout)
        if response.error_code != ErrorCode.NONE:
            raise KafkaError(response.error_code, "the source refused the fetch")
        dest = {(v[2], k[1]): k for k, v in sent.items()}
        for topic in response.responses:
            for p in topic.partitions:
                key = dest.get((topic.topic, p.partition_index))
                state = self._partitions.get(key) if key is not None else None
                if key is None or state is None or state.assignment.leader_epoch != sent[key][0]:
                    continue  # retargeted or dropped while the request was out
                plog = self._log(key, state)
                if plog is None or plog.log_end_offset != sent[key][1]:
                    continue
                try:
                    await self._apply(key, state, plog, p)
                except LogStorageError:
                    self._delay(state)  # the partition reported it to the broker
                except Exception:  # noqa: BLE001 - other partitions keep mirroring
                    log.exception("Cluster link %s: mirroring %s-%d failed", self.link_name, *key)
                    self._delay(state)
        return True

    async def _apply(self, key: tuple[str, int], state: _Mirrored, plog: PartitionLog, p: Any) -> None:
        replica = self._replica(key)
        assert replica is not None
        now_ms = self._now_ms()
        error = p.error_code
        if error == ErrorCode.NONE:
            diverging = getattr(p, "diverging_epoch", None)
            if diverging is not None and (diverging.epoch >= 0 or diverging.end_offset >= 0):
                offset, _ = divergence_truncation(plog.leader_epoch_cache, plog.log_end_offset,
                                                  plog.high_watermark, diverging.epoch, diverging.end_offset)
                if offset < plog.log_end_offset:
                    replica.truncate_mirrored(offset, now_ms=now_ms,
                                              why=f"the source diverges at epoch {diverging.epoch}")
                else:
                    self._delay(state)
                return
            records = p.records
            if records:
                ceiling = replica.mirror_epoch_ceiling
                top = max((h.partition_leader_epoch for h, _ in iter_batches(records)), default=-1)
                if top > ceiling:
                    state.stopped = (f"source leader epoch {top} is above the mirror's epoch ceiling "
                                     f"{ceiling}")
                    log.error("Cluster link %s: mirror %s-%d stops: %s; recreate the mirror topic to "
                              "go on", self.link_name, key[0], key[1], state.stopped)
                    return
                replica.append_mirrored(records, now_ms=now_ms)
            replica.follow_source_log_start(p.log_start_offset)
            state.source_high_watermark = p.high_watermark
            state.log_end_offset = plog.log_end_offset
        elif error == ErrorCode.OFFSET_OUT_OF_RANGE:
            await self._out_of_range(key, state, plog, replica)
        else:
            self._back_off(key, state, error, "fetching")

    async def _out_of_range(self, key: tuple[str, int], state: _Mirrored, plog: PartitionLog,
                            replica: MirrorReplica) -> None:
        """Our log end is outside the source's log: restart at its start, or cut down to its end."""
        leo = plog.log_end_offset
        earliest = await self._list_offset(key, state, -2)
        latest = await self._list_offset(key, state, -1)
        # The mirror may have been stopped (promoted, failed over) or retargeted while we asked:
        # then its log is no longer the link's to cut.
        if self._log(key, state) is not plog or plog.log_end_offset != leo:
            return
        if earliest is not None and leo < earliest:
            replica.restart_mirrored_at(earliest, now_ms=self._now_ms(),
                                        why=f"the source deleted offsets {leo}-{earliest - 1} before "
                                            "they were mirrored")
        elif latest is not None and leo > latest:
            replica.truncate_mirrored(latest, now_ms=self._now_ms(),
                                      why=f"the source's log ends at {latest}")
        else:
            self._delay(state)

    async def _list_offset(self, key: tuple[str, int], state: _Mirrored, timestamp: int) -> int | None:
        Req = m.ListOffsetsRequest
        leader, epoch = self._source_leader(key)
        request = Req(replica_id=CONSUMER_REPLICA_ID, isolation_level=0, topics=[Req.ListOffsetsTopic(
            name=state.assignment.source_topic, partitions=[Req.ListOffsetsTopic.ListOffsetsPartition(
                partition_index=key[1], current_leader_epoch=epoch, timestamp=timestamp)])])
        response = await self.source.send_to(leader, request)
        part = response.topics[0].partitions[0]
        return int(part.offset) if part.error_code == ErrorCode.NONE else None

    # -- helpers ---------------------------------------------------------------------------------------

    def _replica(self, key: tuple[str, int]) -> MirrorReplica | None:
        return self.host.mirror_replica(*key)

    def _log(self, key: tuple[str, int], state: _Mirrored) -> PartitionLog | None:
        replica = self._replica(key)
        return None if replica is None else replica.mirror_log(state.assignment.leader_epoch)

    def _delay(self, state: _Mirrored) -> None:
        state.delayed_until = trio.current_time() + self.settings.fetch_backoff_ms / 1000.0

    def _back_off(self, key: tuple[str, int], state: _Mirrored, error: int, doing: str) -> None:
        if error in _METADATA_ERRORS:
            self._stale = True
            self._wake()
        else:
            log.warning("Cluster link %s: source answered %s for %s-%d while %s", self.link_name,
                        error_name(error), state.assignment.source_topic, key[1], doing)
        self._delay(state)


__all__ = ["MirrorAssignment", "MirrorFetcher", "MirrorHost", "MirrorLag", "MirrorReplica"]
