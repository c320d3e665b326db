"""ISR proposals to the active controller: AlterPartition, batched, one request at a time.

Kafka's DefaultAlterPartitionManager: leaders submit proposals as they arise; whatever is queued
when the previous request completes goes out as the next request (so a burst of ISR changes,
say after a broker comes back, costs one round trip, not one per partition). A partition's newer
submission replaces a queued older one, whose callback gets OPERATION_NOT_ATTEMPTED. Every
submission's callback is called exactly once, from the manager's task (never from ``submit``, so
a callback may submit again), with the partition's error code and the controller's partition data
(None on error). After a request fails as a whole the next one waits ``retry_backoff_ms``, so
proposals resubmitted on a retriable error cannot spin against an unreachable controller.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import ErrorCode, KafkaError, error_name
from kafkapy.replication.leader_state import IsrProposal

log = logging.getLogger(__name__)

ALTER_PARTITION_VERSION = 3

Callback = Callable[[int, Any], None]


class AlterPartitionManager:
    """Sends ISR proposals to the controller (see the module docstring)."""

    def __init__(self, send: Callable[[Any], Awaitable[Any]], *, node_id: int,
                 broker_epoch: Callable[[], int], broker_epoch_of: Callable[[int], int],
                 retry_backoff_ms: int = 100) -> None:
        self._send = send
        self.node_id = node_id
        self._broker_epoch = broker_epoch
        self._broker_epoch_of = broker_epoch_of
        self._retry_backoff_s = retry_backoff_ms / 1000.0
        self._queued: dict[tuple[uuid.UUID, int], tuple[IsrProposal, Callback]] = {}
        # Callbacks of replaced submissions, answered from the task.
        self._superseded: list[Callback] = []
        self._wake = trio.Event()

    def submit(self, topic_id: uuid.UUID, partition: int, proposal: IsrProposal,
               on_result: Callback) -> None:
        """Queue ``proposal`` for the next request; ``on_result(error_code, partition_data)``
        follows from the manager's task."""
        key = (topic_id, partition)
        replaced = self._queued.get(key)
        self._queued[key] = (proposal, on_result)
        if replaced is not None and replaced[1] is not on_result:
            self._superseded.append(replaced[1])
        self._wake.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            if self._superseded:
                superseded, self._superseded = self._superseded, []
                for callback in superseded:
                    _answer(callback, ErrorCode.OPERATION_NOT_ATTEMPTED, None)
                continue
            if not self._queued:
                self._wake = trio.Event()
                await self._wake.wait()
                continue
            batch, self._queued = self._queued, {}
            if not await self._send_batch(batch):
                await trio.sleep(self._retry_backoff_s)

    def _request(self, batch: dict[tuple[uuid.UUID, int], tuple[IsrProposal, Callback]]) -> Any:
        Topic = m.AlterPartitionRequest.TopicData
        Part = Topic.PartitionData
        State = Part.BrokerState
        by_topic: dict[uuid.UUID, list[Any]] = {}
        for (topic_id, partition), (proposal, _) in batch.items():
            by_topic.setdefault(topic_id, []).append(Part(
                partition_index=partition, leader_epoch=proposal.leader_epoch,
                new_isr_with_epochs=[State(broker_id=b, broker_epoch=self._broker_epoch_of(b))
                                     for b in proposal.new_isr],
                leader_recovery_state=0, partition_epoch=proposal.partition_epoch))
        return m.AlterPartitionRequest(
            broker_id=self.node_id, broker_epoch=self._broker_epoch(),
            topics=[Topic(topic_id=tid, partitions=parts) for tid, parts in by_topic.items()])

    async def _send_batch(self, batch: dict[tuple[uuid.UUID, int], tuple[IsrProposal, Callback]]) -> bool:
        """Send one request and answer every callback of ``batch``; False if it failed whole."""
        try:
            response = await self._send(self._request(batch))
        except KafkaError as exc:
            self._fail_all(batch, exc.code, exc)
            return False
        except Exception as exc:  # noqa: BLE001 - the controller may be gone
            self._fail_all(batch, ErrorCode.REQUEST_TIMED_OUT if isinstance(exc, trio.TooSlowError)
                           else ErrorCode.UNKNOWN_SERVER_ERROR, exc)
            return False
        if response.error_code != ErrorCode.NONE:
            self._fail_all(batch, response.error_code, None)
            return False
        answered: set[tuple[uuid.UUID, int]] = set()
        for topic in response.topics:
            for p in topic.partitions:
                key = (_as_uuid(topic.topic_id), p.partition_index)
                entry = batch.get(key)
                if entry is None or key in answered:
                    continue
                answered.add(key)
                _answer(entry[1], p.error_code, p if p.error_code == ErrorCode.NONE else None)
        for key, (_, callback) in batch.items():
            if key not in answered:
                # The controller left it out: nothing is known, so it may be proposed again.
                _answer(callback, ErrorCode.UNKNOWN_SERVER_ERROR, None)
        return True

    @staticmethod
    def _fail_all(batch: dict[tuple[uuid.UUID, int], tuple[IsrProposal, Callback]], code: int,
                  exc: BaseException | None) -> None:
        log.info("AlterPartition for %d partition(s) failed: %s", len(batch),
                 exc if exc is not None else error_name(code))
        for _, callback in batch.values():
            _answer(callback, code, None)


def _answer(callback: Callback, code: int, data: Any) -> None:
    # A broken callback is the leader state's bug, not a reason to stop every other partition's
    # ISR changes.
    try:
        callback(code, data)
    except Exception:  # noqa: BLE001
        log.exception("AlterPartition result callback failed")


def _as_uuid(value: Any) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    if isinstance(value, (bytes, bytearray)):
        return uuid.UUID(bytes=bytes(value))
    return uuid.UUID(str(value))
