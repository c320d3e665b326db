"""The broker's :class:`~kafkapy.share.persister.SharePersister` (Kafka's DefaultStatePersister).

A share partition's state lives with the share coordinator leading its ``__share_group_state``
partition. When that is this node, the call goes straight to the local
:class:`~kafkapy.coordinator.share_state_service.ShareCoordinator`; otherwise it is sent as an
Initialize/Read/Write/Delete/ReadShareGroupStateSummary RPC over an inter-broker connection (one
kept per coordinator broker). The coordinator is found as FindCoordinator key type 2 finds it:
the leader of the key's partition in this broker's metadata image, the topic being created
first if it does not exist yet. NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
COORDINATOR_NOT_AVAILABLE and broken connections are retried (the image may move meanwhile)
until the call's deadline; then the last error is the answer.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import trio

from kafkapy.coordinator.share_state_service import SHARE_STATE_TOPIC, ShareCoordinator
from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import ErrorCode
from kafkapy.share.partition import PartitionState, StateBatch
from kafkapy.share.persister import StateResult

log = logging.getLogger("kafkapy.coordinator.share")

E = ErrorCode
RETRIABLE = frozenset({E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE,
                       E.NETWORK_EXCEPTION})
#: Pause between attempts while the coordinator moves or loads.
RETRY_BACKOFF_S = 0.1
WRITE_VERSION = 1
SUMMARY_VERSION = 1


class PeerClient(Protocol):
    """An inter-broker connection (``kafkapy.net.client.KafkaClient``)."""

    async def send(self, request: Any, version: int | None = None, *, timeout: float | None = ...) -> Any: ...

    async def aclose(self) -> None: ...


Connect = Callable[[int], Awaitable[PeerClient]]
Local = Callable[[], Awaitable[StateResult]]
Parse = Callable[[Any], StateResult]


def _batches(values: Any) -> tuple[StateBatch, ...]:
    return tuple(StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in values or ())


def _only_partition(response: Any) -> Any:
    """The one partition result of a single-partition answer (None when it holds none)."""
    for topic in response.results or ():
        for p in topic.partitions or ():
            return p
    return None


def _error_only(response: Any) -> StateResult:
    p = _only_partition(response)
    if p is None:
        return StateResult(E.UNKNOWN_SERVER_ERROR, "the share coordinator answered no partition")
    return StateResult(p.error_code, p.error_message)


def _read_result(response: Any, leader_epoch: int) -> StateResult:
    p = _only_partition(response)
    if p is None or p.error_code:
        return _error_only(response)
    # ReadShareGroupState answers no leader epoch: an unfenced read leaves the reader's stored.
    return StateResult(state=PartitionState(p.state_epoch, leader_epoch, p.start_offset, _batches(p.state_batches)))


def _summary_result(response: Any) -> StateResult:
    p = _only_partition(response)
    if p is None or p.error_code:
        return _error_only(response)
    complete = getattr(p, "delivery_complete_count", -1)
    return StateResult(state=PartitionState(p.state_epoch, p.leader_epoch, p.start_offset, (),
                                            -1 if complete is None else complete))


class ShareStatePersister:
    """In-process or RPC access to the share coordinator owning each key (module docstring)."""

    def __init__(self, coordinator: ShareCoordinator, node_id: int, image: Callable[[], Any],
                 connect: Connect | None, *, ensure_topic: Callable[[], Awaitable[bool]] | None = None,
                 timeout_ms: int | None = None) -> None:
        self.coordinator = coordinator
        self.node_id = node_id
        self._image = image
        self._connect = connect
        self._ensure_topic = ensure_topic
        self._timeout_s = (timeout_ms if timeout_ms is not None else 2 * coordinator.settings.write_timeout_ms) / 1000.0
        self._clients: dict[int, PeerClient] = {}
        self._connecting: dict[int, trio.Lock] = {}

    # ---------------------------------------------------------------- SharePersister
    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                         start_offset: int) -> StateResult:
        R = m.InitializeShareGroupStateRequest
        body = R(group_id=group_id, topics=[R.InitializeStateData(topic_id=topic_id, partitions=[
            R.InitializeStateData.PartitionData(partition=partition, state_epoch=state_epoch,
                                                start_offset=start_offset)])])
        return await self._call(group_id, topic_id, partition, body, 0, _error_only,
                                lambda: self.coordinator.initialize(group_id, topic_id, partition, state_epoch,
                                                                    start_offset))

    async def read(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int) -> StateResult:
        R = m.ReadShareGroupStateRequest
        body = R(group_id=group_id, topics=[R.ReadStateData(topic_id=topic_id, partitions=[
            R.ReadStateData.PartitionData(partition=partition, leader_epoch=leader_epoch)])])
        return await self._call(group_id, topic_id, partition, body, 0, lambda r: _read_result(r, leader_epoch),
                                lambda: self.coordinator.read(group_id, topic_id, partition, leader_epoch))

    async def read_summary(self, group_id: str, topic_id: uuid.UUID, partition: int,
                           leader_epoch: int = -1) -> StateResult:
        R = m.ReadShareGroupStateSummaryRequest
        body = R(group_id=group_id, topics=[R.ReadStateSummaryData(topic_id=topic_id, partitions=[
            R.ReadStateSummaryData.PartitionData(partition=partition, leader_epoch=leader_epoch)])])
        return await self._call(group_id, topic_id, partition, body, SUMMARY_VERSION, _summary_result,
                                lambda: self.coordinator.read_summary(group_id, topic_id, partition, leader_epoch))

    async def write(self, group_id: str, topic_id: uuid.UUID, partition: int, state: PartitionState) -> StateResult:
        R = m.WriteShareGroupStateRequest
        D = R.WriteStateData.PartitionData
        body = R(group_id=group_id, topics=[R.WriteStateData(topic_id=topic_id, partitions=[D(
            partition=partition, state_epoch=state.state_epoch, leader_epoch=state.leader_epoch,
            start_offset=state.start_offset, delivery_complete_count=state.delivery_complete_count,
            state_batches=[D.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                        delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                           for b in state.state_batches])])])
        return await self._call(group_id, topic_id, partition, body, WRITE_VERSION, _error_only,
                                lambda: self.coordinator.write(group_id, topic_id, partition, state))

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> StateResult:
        R = m.DeleteShareGroupStateRequest
        body = R(group_id=group_id, topics=[R.DeleteStateData(topic_id=topic_id, partitions=[
            R.DeleteStateData.PartitionData(partition=partition)])])
        return await self._call(group_id, topic_id, partition, body, 0, _error_only,
                                lambda: self.coordinator.delete(group_id, topic_id, partition))

    # ---------------------------------------------------------------- routing
    def coordinator_of(self, state_partition: int) -> int:
        """The broker leading ``__share_group_state`` partition ``state_partition`` (-1: none)."""
        topic = self._image().topics.by_name.get(SHARE_STATE_TOPIC)
        reg = topic.partitions.get(state_partition) if topic is not None else None
        return reg.leader if reg is not None else -1

    async def _call(self, group_id: str, topic_id: uuid.UUID, partition: int, body: Any, version: int,
                    parse: Parse, local: Local) -> StateResult:
        state_partition = self.coordinator.partition_for(group_id, topic_id, partition)
        deadline = trio.current_time() + self._timeout_s
        while True:
            result = await self._attempt(state_partition, body, version, parse, local, deadline)
            if result.error not in RETRIABLE or trio.current_time() + RETRY_BACKOFF_S >= deadline:
                return result
            await trio.sleep(RETRY_BACKOFF_S)

    async def _attempt(self, state_partition: int, body: Any, version: int, parse: Parse, local: Local,
                       deadline: float) -> StateResult:
        if SHARE_STATE_TOPIC not in self._image().topics.by_name and self._ensure_topic is not None:
            try:
                await self._ensure_topic()
            except Exception as exc:  # noqa: BLE001 - the next attempt creates it again
                log.warning("Creating %s failed: %s", SHARE_STATE_TOPIC, exc)
        broker = self.coordinator_of(state_partition)
        if broker < 0:
            return StateResult(E.COORDINATOR_NOT_AVAILABLE)
        if broker == self.node_id:
            return await local()
        if self._connect is None:
            return StateResult(E.COORDINATOR_NOT_AVAILABLE)
        client: PeerClient | None = None
        try:
            with trio.fail_after(max(deadline - trio.current_time(), 0.001)):
                client = await self._client(broker)
                response = await client.send(body, version, timeout=max(deadline - trio.current_time(), 0.001))
        except Exception as exc:  # a broken connection or a timeout: a fresh connection next time
            log.info("Share state call to coordinator %d failed: %r", broker, exc)
            await self._drop(broker, client)
            return StateResult(E.NETWORK_EXCEPTION, str(exc) or type(exc).__name__)
        return parse(response)

    async def _client(self, broker: int) -> PeerClient:
        client = self._clients.get(broker)
        if client is not None:
            return client
        assert self._connect is not None
        lock = self._connecting.setdefault(broker, trio.Lock())
        async with lock:
            client = self._clients.get(broker)
            if client is None:
                client = await self._connect(broker)
                self._clients[broker] = client
            return client

    async def _drop(self, broker: int, failed: PeerClient | None) -> None:
        if failed is None or self._clients.get(broker) is not failed:
            return
        del self._clients[broker]
        with trio.move_on_after(1):
            try:
                await failed.aclose()
            except Exception:  # noqa: BLE001 - it is broken already
                pass

    async def aclose(self) -> None:
        """Close the connections to other coordinators."""
        for broker in list(self._clients):
            await self._drop(broker, self._clients[broker])


__all__ = ["RETRIABLE", "ShareStatePersister"]
