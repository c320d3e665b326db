"""Background removal of deleted partition logs (Kafka's ``kafka-delete-logs`` task).

Deleting a topic only renames its partition directories (``LogManager.delete``, on the event loop
while the metadata step is applied). This task does the rest off the loop: it runs
``LogManager.delete_logs_pass`` on a worker thread, which first rewrites the offset checkpoints
once for every deletion since the last pass, then removes the directories whose
file.delete.delay.ms has passed, a bounded number per call. So deleting 10,000 partitions costs
the event loop 10,000 renames, not 10,000 rewrites of every checkpoint file.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Protocol

import trio

log = logging.getLogger(__name__)

#: Longest sleep between looks at the queue: a clock step, or work queued by a path that does
#: not wake the task, waits no longer than this.
MAX_WAIT_S = 1.0


class DeletionHost(Protocol):
    """What the task needs from the log manager."""

    deletion_listeners: list[Callable[[], None]]

    def next_delete_pass_ms(self) -> int | None: ...

    def delete_logs_pass(self, now_ms: int) -> int: ...


class LogDeleter:
    """Runs deletion passes when they are due; woken by every new deletion."""

    def __init__(self, host: DeletionHost, now_ms: Callable[[], int], *,
                 max_wait_s: float = MAX_WAIT_S) -> None:
        self._host = host
        self._now_ms = now_ms
        self.max_wait_s = max_wait_s
        self._wake = trio.Event()
        self.passes = 0  # passes run so far (for tests)
        self.removed = 0  # partition directories removed so far

    def wake(self) -> None:
        """A log was scheduled for deletion: look again now (called on the event loop)."""
        self._wake.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run passes until cancelled."""
        self._host.deletion_listeners.append(self.wake)
        try:
            task_status.started()
            while True:
                # A fresh event before looking: a deletion after the look sets it.
                self._wake = trio.Event()
                now_ms = self._now_ms()
                due = self._host.next_delete_pass_ms()
                if due is None or due > now_ms:
                    wait = self.max_wait_s if due is None else min((due - now_ms) / 1000.0,
                                                                   self.max_wait_s)
                    with trio.move_on_after(wait):
                        await self._wake.wait()
                    continue
                await self.run_pass(now_ms)
        finally:
            self._host.deletion_listeners.remove(self.wake)

    async def run_pass(self, now_ms: int) -> int:
        """One pass on a worker thread; the number of directories removed."""
        try:
            # Not abandoned on cancel: a shutdown waits for the bounded pass to finish.
            removed = await trio.to_thread.run_sync(
                functools.partial(self._host.delete_logs_pass, now_ms))
        except Exception:  # a failing disk must not stop the node's other work
            log.exception("Deleting logs failed")
            await trio.sleep(self.max_wait_s)
            return 0
        self.passes += 1
        self.removed += removed
        return removed


__all__ = ["DeletionHost", "LogDeleter", "MAX_WAIT_S"]
