"""Sends a transaction coordinator's end markers to the partition leaders (Kafka's
TransactionMarkerChannelManager).

Each :class:`~kafkapy.coordinator.transaction.TxnMarkers` is split by the current leader of each
of its partitions, read from the metadata image; the entries for one broker are sent together in
one WriteTxnMarkers request over an inter-broker connection (this broker included: as in Kafka
the local leader gets its markers over the network too). Every answer goes back to the shard
(``markers_written``), whose result says what to send again and when to write the Complete
record. A partition whose topic is gone is dropped from the transaction; one with no leader
right now, or a broker that cannot be reached, is tried again after a backoff that grows to
``MAX_BACKOFF_S``, for as long as the shard is loaded (Kafka retries until the coordinator
moves: giving up would leave the transaction open and its partitions' LSO stuck).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import trio

from kafkapy.coordinator.transaction import TransactionShard, TxnMarkers, TxnResult
from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import ErrorCode

log = logging.getLogger("kafkapy.coordinator.transaction")

#: WriteTxnMarkers v1: what the partition leaders serve (v0 is gone from Kafka 4; v2 carries
#: KIP-1228's transaction version, which markers of transaction.version 1 do not need).
WRITE_TXN_MARKERS_VERSION = 1
FIRST_BACKOFF_S = 0.1
MAX_BACKOFF_S = 2.0

Req = m.WriteTxnMarkersRequest
Marker = Req.WritableTxnMarker
MarkerTopic = Marker.WritableTxnMarkerTopic


class MarkerClient(Protocol):
    """An inter-broker connection (``kafkapy.net.client.KafkaClient``)."""

    async def send(self, request: Any, version: int | None = None, *, timeout: float | None = ...) -> Any:
        ...

    async def aclose(self) -> None:
        ...


Connect = Callable[[int], Awaitable[MarkerClient]]
#: What a shard's result becomes once the edge has acted on it (its appends, answers, markers).
Execute = Callable[[TransactionShard, TxnResult], Awaitable[object]]


@dataclass
class _Pending:
    shard: TransactionShard
    markers: TxnMarkers
    attempt: int = 0


@dataclass
class _Broker:
    queue: list[_Pending] = field(default_factory=list)
    wake: trio.Event = field(default_factory=trio.Event)
    client: MarkerClient | None = None


class TxnMarkerSender:
    """One queue and one sending task per destination broker."""

    def __init__(self, connect: Connect | None, image: Callable[[], Any], clock: Any, execute: Execute,
                 request_timeout_s: float) -> None:
        self._connect = connect
        self._image = image
        self._clock = clock
        self._execute = execute
        self._timeout_s = request_timeout_s
        self._brokers: dict[int, _Broker] = {}
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = None
            for b in self._brokers.values():
                if b.client is not None:
                    with trio.CancelScope(shield=True):
                        await _close(b.client)

    # ---------------------------------------------------------------- enqueueing
    def send(self, shard: TransactionShard, markers: TxnMarkers, attempt: int = 0) -> None:
        """Queue ``markers`` for the current leaders of its partitions (after a backoff on a
        retry)."""
        if self._nursery is None or not shard.active:
            return
        if attempt:
            self._nursery.start_soon(self._later, shard, markers, attempt)
        else:
            self._route(shard, markers, attempt)

    async def _later(self, shard: TransactionShard, markers: TxnMarkers, attempt: int) -> None:
        await trio.sleep(min(FIRST_BACKOFF_S * 2 ** (attempt - 1), MAX_BACKOFF_S))
        if shard.active:
            self._route(shard, markers, attempt)

    def _route(self, shard: TransactionShard, markers: TxnMarkers, attempt: int) -> None:
        assert self._nursery is not None
        if not markers.partitions:
            # No partition to write to: the transaction completes at once.
            self._nursery.start_soon(self._feed, shard, markers, {}, (), attempt)
            return
        topics = self._image().topics.by_name
        by_leader: dict[int, set[tuple[str, int]]] = {}
        gone: list[tuple[str, int]] = []
        leaderless: set[tuple[str, int]] = set()
        for tp in markers.partitions:
            topic = topics.get(tp[0])
            reg = None if topic is None else topic.partitions.get(tp[1])
            if reg is None:
                gone.append(tp)  # the topic was deleted: the partition waits no longer
            elif reg.leader < 0:
                leaderless.add(tp)
            else:
                by_leader.setdefault(reg.leader, set()).add(tp)
        if gone:
            log.info("Not writing %s's transaction marker to %s: no such partition any more",
                     markers.transactional_id, ", ".join(f"{t}-{p}" for t, p in sorted(gone)))
            self._nursery.start_soon(self._feed, shard, markers, {}, gone, attempt)
        if leaderless:
            self.send(shard, _subset(markers, leaderless), attempt + 1)
        for leader, tps in by_leader.items():
            broker = self._brokers.get(leader)
            if broker is None:
                broker = self._brokers[leader] = _Broker()
                self._nursery.start_soon(self._broker_loop, leader, broker)
            broker.queue.append(_Pending(shard, _subset(markers, tps), attempt))
            broker.wake.set()

    # ---------------------------------------------------------------- sending
    async def _broker_loop(self, broker_id: int, broker: _Broker) -> None:
        while True:
            await broker.wake.wait()
            broker.wake = trio.Event()
            batch = [p for p in broker.queue if p.shard.active]
            broker.queue.clear()
            while batch:
                # The answer is keyed by producer id: one entry per producer id per request.
                seen: set[int] = set()
                now: list[_Pending] = []
                later: list[_Pending] = []
                for p in batch:
                    (later if p.markers.producer_id in seen else now).append(p)
                    seen.add(p.markers.producer_id)
                try:
                    await self._send_batch(broker_id, broker, now)
                except Exception:  # a bug of ours must not take the broker down: try again later
                    log.exception("Sending transaction markers to broker %d failed", broker_id)
                    for p in now:
                        self.send(p.shard, p.markers, p.attempt + 1)
                batch = later

    async def _send_batch(self, broker_id: int, broker: _Broker, batch: list[_Pending]) -> None:
        request = Req(markers=[
            Marker(producer_id=p.markers.producer_id, producer_epoch=p.markers.producer_epoch,
                   transaction_result=p.markers.commit, coordinator_epoch=p.markers.coordinator_epoch,
                   topics=[MarkerTopic(name=t, partition_indexes=ps) for t, ps in _by_topic(p.markers).items()])
            for p in batch])
        try:
            if self._connect is None:
                raise ConnectionError("no inter-broker connections")
            with trio.fail_after(self._timeout_s):
                if broker.client is None:
                    broker.client = await self._connect(broker_id)
                response = await broker.client.send(request, WRITE_TXN_MARKERS_VERSION, timeout=self._timeout_s)
        except Exception as exc:  # noqa: BLE001 - any failure (or no answer in time) is retried
            level = logging.INFO if batch[0].attempt == 0 else logging.DEBUG
            log.log(level, "Sending transaction markers to broker %d failed (%s); retrying", broker_id,
                    exc or type(exc).__name__)
            if broker.client is not None:
                client, broker.client = broker.client, None
                await _close(client)
            for p in batch:
                self.send(p.shard, p.markers, p.attempt + 1)  # the leader is looked up again
            return
        results: dict[int, dict[tuple[str, int], int]] = {}
        for r in response.markers:
            codes = results.setdefault(r.producer_id, {})
            for t in r.topics:
                for part in t.partitions:
                    codes[(t.name, part.partition_index)] = part.error_code
        for p in batch:
            codes = results.get(p.markers.producer_id, {})
            # A partition the answer left out is asked again.
            answer = {tp: codes.get(tp, ErrorCode.REQUEST_TIMED_OUT) for tp in p.markers.partitions}
            await self._feed(p.shard, p.markers, answer, (), p.attempt)

    async def _feed(self, shard: TransactionShard, markers: TxnMarkers, results: dict[tuple[str, int], int],
                    gone: Any, attempt: int) -> None:
        """Hand an answer to the shard and act on its result (the Complete record, or markers
        to send again)."""
        try:
            res = shard.markers_written(markers.transactional_id, results, self._clock.now_ms(), gone=gone)
            retry, res.markers = res.markers, []
            await self._execute(shard, res)
        except Exception:  # a bug of ours: the transaction waits for the next load
            log.exception("Completing %s's transaction after its markers failed", markers.transactional_id)
            return
        for again in retry:
            self.send(shard, again, attempt + 1)


def _subset(markers: TxnMarkers, partitions: set[tuple[str, int]]) -> TxnMarkers:
    return TxnMarkers(markers.transactional_id, markers.producer_id, markers.producer_epoch, markers.commit,
                      markers.coordinator_epoch, frozenset(partitions))


def _by_topic(markers: TxnMarkers) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for topic, partition in sorted(markers.partitions):
        out.setdefault(topic, []).append(partition)
    return out


async def _close(client: MarkerClient) -> None:
    try:
        await client.aclose()
    except Exception:  # noqa: BLE001 - a broken connection may fail to close too
        pass


__all__ = ["Connect", "MarkerClient", "TxnMarkerSender", "WRITE_TXN_MARKERS_VERSION"]
