"""How much event-loop time a request takes: the measure behind ``request_percentage`` quotas.

Kafka's request quota counts the time a request spends on a request handler thread (and on a
network thread) as a percentage of one thread's second: ``request_percentage=50`` lets a client
use half a thread. kafkapy runs every request of a connection on that connection's task in one
event loop, so the honest counterpart of "thread time" is the time the event loop spends running
that task while it handles the request: every step of the task between its checkpoints, and
nothing of the time it waits (a long-polling fetch, an acks=all produce waiting for followers).
One event loop plays the part of one Kafka request handler thread.

``RequestTimeMeter`` is a Trio instrument that adds each step's duration to the task being
measured. It is installed the first time a request quota is in use (Kafka's quota managers
also start measuring only once a quota has been set) and removed once none is and no request is
being measured, so brokers without request quotas pay nothing per task step.
"""

from __future__ import annotations

import time
import weakref

import trio

NANOS_PER_PERCENT_SECOND = 1e7  # 100% of one second is 1e9 ns


class RequestTimeMeter(trio.abc.Instrument):
    """Event-loop nanoseconds spent by the tasks being measured."""

    def __init__(self) -> None:
        self._spent: weakref.WeakKeyDictionary[trio.lowlevel.Task, int] = weakref.WeakKeyDictionary()
        self._step_start = 0
        self.installed = False

    def install(self) -> None:
        """Start measuring (in the running Trio loop)."""
        if not self.installed:
            trio.lowlevel.add_instrument(self)
            self.installed = True
            self._step_start = time.perf_counter_ns()

    def uninstall_if_idle(self) -> None:
        """Stop measuring (no request quota is in use any more) unless a request is being
        measured now; ``install`` starts again."""
        if self.installed and not self._spent:
            trio.lowlevel.remove_instrument(self)
            self.installed = False

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self._step_start = time.perf_counter_ns()

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        if task in self._spent:
            self._spent[task] += time.perf_counter_ns() - self._step_start

    def start(self) -> None:
        """Measure the current task from now on (the part of the running step before now
        does not count)."""
        self._spent[trio.lowlevel.current_task()] = -(time.perf_counter_ns() - self._step_start)

    def stop(self) -> int:
        """Nanoseconds the current task ran since ``start``; it is no longer measured."""
        task = trio.lowlevel.current_task()
        spent = self._spent.pop(task, None)
        if spent is None:
            return 0
        return max(0, spent + time.perf_counter_ns() - self._step_start)


def nanos_to_percent(nanos: int) -> float:
    """Kafka's nanosToPercentage: a request's time as a share of one thread's second."""
    return nanos / NANOS_PER_PERCENT_SECOND


__all__ = ["RequestTimeMeter", "nanos_to_percent"]
