"""Hands out producer ids from blocks the controller allocates (ProducerIdsRecord), as Kafka does.

Asking the controller once per 1000 ids keeps InitProducerId off the metadata log's hot path.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio


class ProducerIdManager:
    """The current block [next, end) and a way to fetch the next one."""

    def __init__(self, allocate_block: Callable[[], Awaitable[tuple[int, int]]]) -> None:
        self._allocate_block = allocate_block
        self._next = 0
        self._end = 0
        self._lock = trio.Lock()

    async def next_id(self) -> int:
        async with self._lock:
            if self._next >= self._end:
                start, size = await self._allocate_block()
                self._next, self._end = start, start + size
            pid = self._next
            self._next += 1
            return pid
