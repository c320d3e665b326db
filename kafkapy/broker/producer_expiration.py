"""Periodic expiry of idle producer ids (Kafka's ``PeriodicProducerExpirationCheck``).

Every producer.id.expiration.check.interval.ms, the first time one interval after start as in
Kafka, each hosted log forgets the producers whose last write is producer.id.expiration.ms old
and that have no transaction open (``LogManager.expire_producers``). Without it the producer
state of every partition only grows, and a producer id that went quiet a day ago still has its
sequence checked against what it wrote then.

producer.id.expiration.ms is a dynamic broker config: the value in force is read at each pass.
The pass touches only in-memory state, so it runs on the event loop, between appends.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

import trio

log = logging.getLogger(__name__)

#: Longest sleep between looks at the clock: a clock step delays a pass by no more than this.
MAX_WAIT_S = 1.0


class ExpiryHost(Protocol):
    """What the task needs from the log manager."""

    def expire_producers(self, now_ms: int, *, expiration_ms: int | None = None) -> int: ...


class ProducerExpiration:
    """Runs an expiry pass over every log once per check interval."""

    def __init__(self, host: ExpiryHost, now_ms: Callable[[], int], *, interval_ms: int,
                 expiration_ms: Callable[[], int], max_wait_s: float = MAX_WAIT_S) -> None:
        self._host = host
        self._now_ms = now_ms
        self.interval_ms = interval_ms
        self._expiration_ms = expiration_ms
        self.max_wait_s = max_wait_s
        self.passes = 0  # passes run so far (for tests and metrics)
        self.expired = 0  # producer states forgotten so far

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run passes until cancelled."""
        next_ms = self._now_ms() + self.interval_ms
        task_status.started()
        while True:
            now_ms = self._now_ms()
            if now_ms < next_ms:
                await trio.sleep(min((next_ms - now_ms) / 1000.0, self.max_wait_s))
                continue
            next_ms = now_ms + self.interval_ms
            self.run_pass(now_ms)

    def run_pass(self, now_ms: int) -> int:
        """One pass at ``now_ms``; the number of producer states forgotten."""
        try:
            removed = self._host.expire_producers(now_ms, expiration_ms=self._expiration_ms())
        except Exception:  # one bad pass must not stop the node's other work, nor later passes
            log.exception("Expiring idle producer ids failed")
            return 0
        self.passes += 1
        self.expired += removed
        return removed


__all__ = ["ExpiryHost", "MAX_WAIT_S", "ProducerExpiration"]
