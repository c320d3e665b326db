"""Background creation of partition logs, so a large CreateTopics never stalls the event loop.

A metadata step that places more than ``INLINE_CREATE_LIMIT`` new partitions on this broker
(one CreateTopics of thousands of partitions, or a fresh broker's first image) does not create
their logs inline: the replica manager hands the partitions to a :class:`LogCreator`, whose task
creates them in chunks of ``CHUNK_SIZE`` on a worker thread (``LogManager.create_new_logs``:
files written, then fsynced together) while the event loop keeps serving produce requests,
heartbeats and the metadata quorum. Each chunk is then hosted on the loop against the image
applied by then, so a partition that moved away, was deleted or was recreated meanwhile is
handled as the newest metadata says.

Until its log exists a partition is not served: the replica manager answers requests for it with
NOT_LEADER_OR_FOLLOWER (as Kafka does for a partition its metadata knows but it does not host
yet), which clients retry.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from typing import Protocol

import trio

from kafkapy.log.bulk_create import NewLog
from kafkapy.log.partition_log import PartitionLog
from kafkapy.protocol.errors import KafkaError

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

#: New logs one metadata step may create on the event loop; a step needing more makes them all
#: in the background. Small steps (a topic of a few dozen partitions, ``__consumer_offsets``)
#: stay inline, so their partitions are served as soon as the CreateTopics answer arrives.
INLINE_CREATE_LIMIT = 64
#: Logs created per worker-thread call: bounds the loop work of hosting one chunk and how long a
#: shutdown waits for the chunk in progress.
CHUNK_SIZE = 256


class CreationHost(Protocol):
    """What the creator needs from the replica manager."""

    def new_log_specs(self, keys: Sequence[TopicPartition]) -> list[NewLog]: ...

    def create_new_logs(self, specs: Sequence[NewLog], *, now_ms: int) -> list[PartitionLog | KafkaError]: ...

    def take_created(self, spec: NewLog, result: PartitionLog | KafkaError, *, now_ms: int) -> bool: ...


class LogCreator:
    """The partitions waiting for a log, and the task that makes them (see the module doc).

    ``on_hosted(topics)`` is told, after each chunk, the names of the topics that gained hosted
    partitions (the node tells the group coordinator and tiered storage).
    """

    def __init__(self, host: CreationHost, now_ms: Callable[[], int], *,
                 chunk_size: int = CHUNK_SIZE,
                 on_hosted: Callable[[set[str]], None] | None = None) -> None:
        if chunk_size < 1:
            raise ValueError("chunk_size must be at least 1")
        self._host = host
        self._now_ms = now_ms
        self.chunk_size = chunk_size
        self.on_hosted = on_hosted
        # Insertion-ordered: partitions are created in the order the metadata named them.
        self._pending: dict[TopicPartition, None] = {}
        self._in_flight: set[TopicPartition] = set()
        self._wake = trio.Event()
        self._idle = trio.Event()
        self._idle.set()
        self.created = 0  # logs hosted so far (for tests and the benchmark)

    def __contains__(self, key: object) -> bool:
        return key in self._pending or key in self._in_flight

    def __len__(self) -> int:
        return len(self._pending) + len(self._in_flight)

    def add(self, key: TopicPartition) -> None:
        """Create ``key``'s log in the background (no-op if it is already waiting)."""
        if key in self:
            return
        if not self._pending:
            log.debug("Creating partition logs in the background")
        self._pending[key] = None
        self._idle = trio.Event() if self._idle.is_set() else self._idle
        self._wake.set()

    async def wait_idle(self) -> None:
        """Return once nothing waits for a log (tests, the benchmark)."""
        await self._idle.wait()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Create waiting logs chunk by chunk until cancelled."""
        task_status.started()
        while True:
            if not self._pending:
                self._idle.set()
                self._wake = trio.Event()
                await self._wake.wait()
                continue
            await self.create_chunk()
            # Let requests that queued behind the hosting of this chunk run first.
            await trio.sleep(0)

    async def create_chunk(self) -> int:
        """Create and host the next chunk of waiting logs; the number hosted."""
        keys = list(self._pending)[: self.chunk_size]
        for key in keys:
            del self._pending[key]
        self._in_flight.update(keys)
        hosted_topics: set[str] = set()
        hosted = 0
        started = trio.current_time()
        try:
            specs = self._host.new_log_specs(keys)
            # Shielded: once files are being made, the results must be adopted (and so closed
            # at shutdown) rather than dropped half-way. A chunk is bounded, so is the wait.
            with trio.CancelScope(shield=True):
                results = await trio.to_thread.run_sync(
                    functools.partial(self._host.create_new_logs, specs, now_ms=self._now_ms()))
            # From here to the end nothing awaits: the chunk is hosted in one step.
            now_ms = self._now_ms()
            for spec, result in zip(specs, results):
                self._in_flight.discard((spec.topic, spec.partition))
                if self._host.take_created(spec, result, now_ms=now_ms):
                    hosted_topics.add(spec.topic)
                    hosted += 1
        finally:
            self._in_flight.difference_update(keys)
        self.created += hosted
        log.info("Created %d partition log(s) in %d ms; %d waiting", hosted,
                 round((trio.current_time() - started) * 1000), len(self._pending))
        if hosted_topics and self.on_hosted is not None:
            try:
                self.on_hosted(hosted_topics)
            except Exception:  # a listener's failure must not stop log creation
                log.exception("Telling about newly hosted partitions failed")
        return hosted


__all__ = ["CHUNK_SIZE", "INLINE_CREATE_LIMIT", "CreationHost", "LogCreator"]
