"""The chaos driver: run a consume-transform-produce service until the input is done while
killing it (and brokers) on a schedule, then check the output.

    summary = ChaosRun(pipeline, "python", schedule=evenly(3000, ["service"] * 3),
                       broker_fault=None, workdir=tmp).run()
    assert summary.check.exactly_once

A `Fault` fires once the service incarnations together reported ``at_records`` committed input
records: by default at the next ``produced`` event plus a random jitter (``jitter_ms``; keep it
below the service's ``pause_ms``), so that it lands inside an open transaction whose records are
on the brokers (the aborted records read_uncommitted then sees; a commit or abort reported before
the kill fires moves it on to the next transaction); else after the jitter alone.
``service`` kill -9s the running incarnation (the next one starts at once and, with the same
transactional id, fences it and aborts its open transaction); any other action
(``txn-coordinator``, ``group-coordinator``, ``output-leader``) goes to the ``broker_fault``
callback, which kills and restarts that broker (`broker_killer` builds one for a
`targets.Target`). An incarnation that exits on its own with an error is restarted too. With
``stall_s``, an incarnation that reports nothing for that long is kill -9ed and restarted as well
(counted apart, as ``stall_kills``): librdkafka's send_offsets_to_transaction can block past its
timeout when the group coordinator's broker dies (librdkafka issues 5456 and 5511), and a real
deployment's supervisor would restart it the same way. ``ChaosSummary.fault_log`` says when each
fault and stall kill happened. Every wait is bounded by ``deadline_s``; every process is gone when
`run` returns or raises.
"""

from __future__ import annotations

import json
import os
import queue
import random
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable

from kafkapy.testing.eos.checker import CheckResult, check_output
from kafkapy.testing.eos.services import Pipeline, service_argv
from kafkapy.testing.eos.targets import Roles, Target
from kafkapy.testing.node import REPO_ROOT

SERVICE_KILL = "service"
BROKER_ROLES = ("txn-coordinator", "group-coordinator", "output-leader")


class ChaosError(AssertionError):
    """The run did not finish (deadline, or too many failed incarnations); says what happened."""


@dataclass(frozen=True)
class Fault:
    """``action`` once ``at_records`` input records were committed; ``mid_transaction``: at the
    service's next ``produced`` event (a batch on the brokers, its transaction still open) rather
    than wherever the service is then."""

    at_records: int
    action: str = SERVICE_KILL
    mid_transaction: bool = True


def evenly(records: int, actions: list[str]) -> list[Fault]:
    """One fault per action, spread evenly over the input (never at its very end)."""
    step = records / (len(actions) + 1)
    return [Fault(int(step * (i + 1)), action) for i, action in enumerate(actions)]


class ServiceProcess:
    """One service incarnation: its own process group, stdout parsed into events by a thread,
    stderr kept in a file."""

    def __init__(self, argv: list[str], stderr_path: Path, events_path: Path, *,
                 stdin_pipe: bool = False) -> None:
        self.stderr_path = stderr_path
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self._stderr: IO[bytes] = open(stderr_path, "ab")
        self._events_log: IO[str] = open(events_path, "a")
        # A pipe for programs that run until their stdin ends (the Streams app).
        stdin = subprocess.PIPE if stdin_pipe else subprocess.DEVNULL
        self.proc = subprocess.Popen(argv, stdin=stdin, stdout=subprocess.PIPE,
                                     stderr=self._stderr, cwd=REPO_ROOT, start_new_session=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").strip()
            self._events_log.write(f"{time.time():.3f} {line}\n")
            self._events_log.flush()
            if line.startswith("{"):
                try:
                    self.events.put(json.loads(line))
                except ValueError:
                    pass
        self._events_log.close()
        self.events.put({"event": "exit"})

    def next_event(self, timeout: float) -> dict[str, Any] | None:
        try:
            return self.events.get(timeout=timeout)
        except queue.Empty:
            return None

    def close_stdin(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()

    def kill9(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.wait(10)

    def wait(self, timeout: float) -> int | None:
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        self._reader.join(timeout=5)
        self._stderr.close()
        return code


@dataclass
class ChaosSummary:
    """What a run did and what the checker found."""

    service: str
    records: int
    service_kills: int = 0
    broker_kills: int = 0
    # Incarnations killed by the watchdog because they reported nothing for ``stall_s``.
    stall_kills: int = 0
    incarnations: int = 0
    failed_incarnations: int = 0
    aborts_reported: int = 0
    committed_reported: int = 0
    wall_s: float = 0.0
    skipped_faults: list[Fault] = field(default_factory=list)
    # One line per fault and stall kill: seconds into the run, what was killed.
    fault_log: list[str] = field(default_factory=list)
    fatal_errors: list[str] = field(default_factory=list)
    check: CheckResult | None = None

    def line(self) -> str:
        check = self.check.summary() if self.check else "not checked"
        return (f"{self.service}: {self.records} records, {self.service_kills} service kills, "
                f"{self.broker_kills} broker kills, {self.stall_kills} stall kills, "
                f"{self.incarnations} incarnations "
                f"({self.failed_incarnations} failed), {self.committed_reported} committed and "
                f"{self.aborts_reported} aborts reported, "
                f"{self.wall_s:.1f}s; {check}" + "".join(f"\n  fatal: {e}" for e in self.fatal_errors))


class ChaosRun:
    """One run of ``service`` over ``pipeline`` with ``schedule`` (see the module docstring)."""

    def __init__(self, pipeline: Pipeline, service: str, *, records: int, schedule: list[Fault],
                 workdir: Path, broker_fault: Callable[[str], str] | None = None,
                 jitter_ms: int = 30, deadline_s: float = 120.0, max_failed: int = 5,
                 check_timeout: float = 60.0, seed: int = 21, stall_s: float | None = None) -> None:
        self.pipeline = pipeline
        self.service = service
        self.schedule = sorted(schedule, key=lambda f: f.at_records)
        self.workdir = workdir
        self.broker_fault = broker_fault
        self.jitter_s = jitter_ms / 1000
        self.deadline_s = deadline_s
        self.max_failed = max_failed
        self.check_timeout = check_timeout
        self.stall_s = stall_s
        self.rng = random.Random(seed)
        self.summary = ChaosSummary(service, records)
        self.argv = service_argv(service, pipeline)  # compiles the Java source before the clock runs

    def run(self) -> ChaosSummary:
        start = time.monotonic()
        deadline = start + self.deadline_s
        s = self.summary
        pending = list(self.schedule)
        fire_at: float | None = None
        current: ServiceProcess | None = None
        last_event = start
        try:
            while True:
                s.wall_s = time.monotonic() - start
                if time.monotonic() > deadline:
                    raise ChaosError(f"not done within {self.deadline_s}s: {s.line()}\n{self._stderr_tail()}")
                if current is None:
                    s.incarnations += 1
                    current = ServiceProcess(self.argv, self.workdir / f"{self.service}-service.stderr",
                                             self.workdir / f"{self.service}-service.events")
                    last_event = time.monotonic()
                # Wake at the fault's time, not a poll tick later: the kill must land in the
                # service's pause, inside its open transaction.
                wait = 0.05 if fire_at is None else min(0.05, max(0.0, fire_at - time.monotonic()))
                ev = current.next_event(timeout=wait)
                if ev is not None:
                    last_event = time.monotonic()
                elif self.stall_s is not None and time.monotonic() - last_event > self.stall_s:
                    current.kill9()
                    current = None
                    fire_at = None
                    s.stall_kills += 1
                    s.fault_log.append(f"{time.monotonic() - start:.1f}s stall: silent for {self.stall_s}s")
                    continue
                armed = bool(pending) and fire_at is None and s.committed_reported >= pending[0].at_records
                if ev is not None:
                    kind = ev.get("event")
                    if kind == "produced" and armed and pending[0].mid_transaction:
                        fire_at = time.monotonic() + self.rng.uniform(0, self.jitter_s)
                    elif kind in ("committed", "aborted"):
                        if kind == "committed":
                            s.committed_reported += int(ev["records"])
                        else:
                            s.aborts_reported += 1
                        if fire_at is not None and pending[0].mid_transaction:
                            # The transaction it aimed at closed first (a slow driver on a
                            # loaded machine): aim at the next one instead.
                            fire_at = None
                    elif kind == "fatal":
                        s.fatal_errors.append(str(ev.get("error")))
                    elif kind == "exit":
                        code = current.wait(10)
                        current = None
                        fire_at = None
                        if code == 0:
                            break
                        s.failed_incarnations += 1
                        if s.failed_incarnations > self.max_failed:
                            raise ChaosError(f"{s.failed_incarnations} incarnations failed (last exit "
                                             f"{code}): {s.line()}\n{self._stderr_tail()}")
                        continue
                if armed and fire_at is None and not pending[0].mid_transaction:
                    fire_at = time.monotonic() + self.rng.uniform(0, self.jitter_s)
                # Only once every event the service reported is handled: a commit already in
                # the queue cancels a mid-transaction fault (above).
                if pending and fire_at is not None and time.monotonic() >= fire_at and current.events.empty():
                    fault = pending.pop(0)
                    fire_at = None
                    at = f"{time.monotonic() - start:.1f}s"
                    if fault.action == SERVICE_KILL:
                        current.kill9()
                        current = None
                        s.service_kills += 1
                        s.fault_log.append(f"{at} service (incarnation {s.incarnations})")
                    else:
                        if self.broker_fault is None:
                            raise ValueError(f"fault {fault} needs a broker_fault callback")
                        s.fault_log.append(f"{at} {self.broker_fault(fault.action)}")
                        s.broker_kills += 1
        finally:
            if current is not None:
                current.kill9()
        s.skipped_faults = pending
        s.wall_s = time.monotonic() - start
        s.check = check_output(self.pipeline.bootstrap, self.pipeline.input, self.pipeline.output,
                               timeout=self.check_timeout)
        return s

    def _stderr_tail(self, max_bytes: int = 6000) -> str:
        path = self.workdir / f"{self.service}-service.stderr"
        try:
            return "--- service stderr ---\n" + path.read_bytes()[-max_bytes:].decode("utf-8", "replace")
        except OSError:
            return ""


def broker_killer(target: Target, pipeline: Pipeline, *, down_s: float = 2.0) -> Callable[[str], str]:
    """A ``broker_fault`` callback for ``target``: kill -9 the broker playing ``role`` now (the
    transaction coordinator of the pipeline's transactional id, its group's coordinator, or the
    leader of a random output partition), keep it down ``down_s`` seconds, start it again and
    wait until it answers; returns what it did and how long the broker took to come back."""
    roles = Roles(target.bootstrap)
    rng = random.Random(47)

    def fault(role: str) -> str:
        if role == "txn-coordinator":
            node = roles.transaction_coordinator(pipeline.transactional_id)
        elif role == "group-coordinator":
            node = roles.group_coordinator(pipeline.group)
        elif role == "output-leader":
            partition = rng.randrange(pipeline.partitions)
            node = roles.partition_leader(pipeline.output, partition)
            role = f"{role} of {pipeline.output}-{partition}"
        else:
            raise ValueError(f"unknown broker role {role!r}; expected one of {BROKER_ROLES}")
        began = time.monotonic()
        target.kill_and_restart(node, down_s=down_s)
        return f"{role}: node {node}, back in {time.monotonic() - began:.1f}s"

    return fault
