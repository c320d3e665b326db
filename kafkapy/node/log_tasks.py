"""The broker's periodic log work, on the node's clock.

Kafka's LogManager and ReplicaManager schedule these tasks; here each is one Trio task of the
broker runtime, reading the time and sleeping only through the injected ``NodeClock`` so that
under Trio's ``MockClock`` they run in virtual time:

* flushes and checkpoints (flush.ms, the recovery-point / log-start checkpoints, and
  replica.high.watermark.checkpoint.interval.ms);
* retention (first after log.initial.task.delay.ms, then every log.retention.check.interval.ms),
  with the unlinking of retired segment files (file.delete.delay.ms);
* ISR expiry (every half replica.lag.time.max.ms);
* compaction of cleanup.policy=compact logs (log.cleaner.backoff.ms, a dynamic config).
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import trio

from kafkapy.config import BrokerConfig
from kafkapy.config_views import BrokerSettings
from kafkapy.log.cleaner import CLEANER_TMP_DIR, LogCleaner, apply_clean, clean_inputs, plan_clean
from kafkapy.quorum.clock import NodeClock

log = logging.getLogger("kafkapy.node")

#: How often the recovery-point and log-start-offset checkpoints are written.
CHECKPOINT_INTERVAL_S = 60.0


class LogHost(Protocol):
    """What the tasks need of the broker's ``LogManager``."""

    def flush_due(self, now_ms: int) -> Any: ...

    def checkpoint(self) -> Any: ...

    def checkpoint_high_watermarks(self) -> Any: ...

    def next_file_delete_ms(self) -> int | None: ...

    def cleanup_logs(self, now_ms: int, *, checkpoint: bool = ...) -> Any: ...

    def delete_due_files(self, now_ms: int) -> Any: ...


class ReplicaHost(Protocol):
    """What the tasks need of the broker's ``ReplicaManager``."""

    def check_isr(self, now_ms: int) -> Any: ...

    def partitions(self) -> Any: ...

    def dynamic_config(self, image: Any) -> BrokerConfig: ...


class LogTasks:
    """The broker's periodic log tasks (module docstring); each ``*_loop`` runs until cancelled."""

    def __init__(self, logs: LogHost, replicas: ReplicaHost, settings: BrokerSettings,
                 clock: NodeClock, *, log_dirs: list[str],
                 image: Callable[[], Any],
                 run_sync: Callable[..., Awaitable[Any]] = trio.to_thread.run_sync) -> None:
        self.logs = logs
        self.replicas = replicas
        self.settings = settings
        self.clock = clock
        self.log_dirs = log_dirs
        self._image = image
        # Runs checkpoints, unlinks and cleans off the event loop (tests: inline).
        self._run_sync = run_sync

    def start(self, nursery: trio.Nursery) -> None:
        nursery.start_soon(self.maintenance_loop)
        nursery.start_soon(self.retention_loop)
        nursery.start_soon(self.cleaner_loop)

    async def maintenance_loop(self) -> None:
        """Time-based flushes (flush.ms), offset checkpoints and the high-watermark checkpoint
        (replica.high.watermark.checkpoint.interval.ms)."""
        clock, logs = self.clock, self.logs
        # Kafka's recovery-point and log-start checkpoints first run after the log tasks'
        # initial delay too.
        next_checkpoint = clock.monotonic() + self.settings.log_initial_task_delay_ms / 1000.0
        hw_interval = self.settings.hw_checkpoint_interval_ms / 1000.0
        next_hw_checkpoint = clock.monotonic() + hw_interval
        while True:
            await clock.sleep(min(1.0, hw_interval))
            logs.flush_due(clock.now_ms())
            # Checkpoints write a line per log and fsync (seconds at 10k partitions on a busy
            # disk): on a worker thread, which LogManager allows for them.
            if clock.monotonic() >= next_checkpoint:
                await self._run_sync(logs.checkpoint)
                next_checkpoint = clock.monotonic() + CHECKPOINT_INTERVAL_S
                next_hw_checkpoint = clock.monotonic() + hw_interval
            elif clock.monotonic() >= next_hw_checkpoint:
                await self._run_sync(logs.checkpoint_high_watermarks)
                next_hw_checkpoint = clock.monotonic() + hw_interval

    async def retention_loop(self) -> None:
        """Kafka's log-retention task, first after log.initial.task.delay.ms, then every
        log.retention.check.interval.ms, on every replica's own log (leaders and followers
        alike); between passes it unlinks the retired segment files whose file.delete.delay.ms
        has run out.

        The pass itself changes segment lists, so it runs here like appends do (renames, no
        fsync); the checkpoint it calls for and the unlinks run on a worker thread.
        """
        clock, lm = self.clock, self.logs
        interval_ms = self.settings.log_retention_check_interval_ms
        # As Kafka's LogManager: the first pass after log.initial.task.delay.ms, not an interval.
        next_check = clock.now_ms() + self.settings.log_initial_task_delay_ms
        while True:
            now_ms = clock.now_ms()
            due = lm.next_file_delete_ms()
            wake = next_check if due is None else min(next_check, due)
            # Capped so a clock step cannot stall the task for a whole interval.
            await clock.sleep(min(max(0, wake - now_ms), 1000) / 1000.0)
            now_ms = clock.now_ms()
            try:
                if now_ms >= next_check:
                    next_check = now_ms + interval_ms
                    if lm.cleanup_logs(now_ms, checkpoint=False):
                        await self._run_sync(lm.checkpoint)
                due = lm.next_file_delete_ms()
                if due is not None and due <= now_ms:
                    await self._run_sync(lm.delete_due_files, now_ms)
            except Exception:  # a failing disk must not stop the node's other work
                log.exception("Log retention pass failed")

    async def isr_loop(self) -> None:
        """Kafka's isr-expiration task: every half replica.lag.time.max.ms, followers that fell
        behind for longer than that leave the ISRs of the partitions this broker leads."""
        interval = self.settings.replica_lag_time_max_ms / 2000.0
        while True:
            await self.clock.sleep(interval)
            self.replicas.check_isr(self.clock.now_ms())

    async def cleaner_loop(self) -> None:
        """Compact logs with cleanup.policy=compact (``__consumer_offsets`` among them).

        The heavy part of a clean (reading segments, writing the cleaned ones) runs on a worker
        thread; the swap into the live log is quick and runs here, between requests, so it never
        interleaves with an append or a roll. Kafka's log.cleaner.backoff.ms paces it.
        """
        if not self.settings.log_cleaner_enable:
            return
        for d in self.log_dirs:
            shutil.rmtree(os.path.join(d, CLEANER_TMP_DIR), ignore_errors=True)  # a crash's leftovers
        cleaner = LogCleaner()
        while True:
            # A dynamic config (kafka-configs --alter ... log.cleaner.backoff.ms) applies from
            # the next wait on.
            config = self.replicas.dynamic_config(self._image())
            await self.clock.sleep(config.get_int("log.cleaner.backoff.ms") / 1000.0)
            now_ms = self.clock.now_ms()
            for plog in cleaner.due([h.log for h in self.replicas.partitions()], now_ms=now_ms):
                end = plog.segments[-1].base_offset
                try:
                    # The live state (LSO, producers, segment list) is read here, between
                    # appends; the worker thread only reads segment files below it.
                    inputs = clean_inputs(plog)
                    plan = await self._run_sync(
                        lambda p=plog, t=now_ms, i=inputs: plan_clean(p, now_ms=t, inputs=i))
                    result = apply_clean(plog, plan, now_ms=now_ms)
                except Exception:  # one bad log must not stop the cleaning of others
                    log.exception("Cleaning %s-%d failed", plog.topic, plog.partition)
                    result = None
                cleaner.cleaned(plog, end, result, now_ms=now_ms)


__all__ = ["CHECKPOINT_INTERVAL_S", "LogTasks"]
