"""A bulk CreateTopics against a running node while a steady producer writes to another topic,
measured from the outside (what an operator saw in issue 18: a 9,999-partition CreateTopics that
stalled the node until it fenced itself).

:func:`run_bulk_create` is the scenario; the integration test asserts on its report and
``benchmarks/bulk_create.py`` records its numbers. Everything runs in threads of the calling
process against ``node`` (a ``KafkaNode``), each bounded by the scenario's deadline:

* a steady producer (confluent-kafka, ``acks=all``, one record every ``interval_s``) to its own
  one-partition topic, recording every delivery time and every failed delivery;
* probes that send ApiVersions to the broker listener and to the controller listener every
  ``probe_s`` and record the longest wait between answers (a broker heartbeat and the metadata
  quorum travel over the controller listener, so its gap bounds how long they could wait);
* the CreateTopics (confluent-kafka AdminClient); then, once every partition's log directory is
  on the node's disk, one record to a sample of the new topic's partitions (retried by the
  client while a partition is still being set up) until all are stored.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafkapy.testing.node import api_versions_round_trip


@dataclass
class BulkCreateReport:
    """What one run observed; times in seconds from the CreateTopics request."""

    partitions: int
    create_s: float | None = None  # the CreateTopics answer arrived
    all_logs_s: float | None = None  # every partition of the topic had its log on disk
    sample_written_s: float | None = None  # a sample of its partitions had accepted a record
    sample_written: int = 0
    create_error: str | None = None
    write_failures: int = 0
    steady_acks: int = 0
    steady_failures: list[str] = field(default_factory=list)
    longest_ack_gap_s: float = 0.0  # between steady deliveries, from the request to the end
    broker_probe_gap_s: float = 0.0
    controller_probe_gap_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class SteadyProducer(threading.Thread):
    """Produces one record every ``interval_s`` with acks=all and records delivery times."""

    def __init__(self, bootstrap: str, topic: str, *, interval_s: float = 0.02) -> None:
        super().__init__(daemon=True, name="steady-producer")
        self.bootstrap, self.topic, self.interval_s = bootstrap, topic, interval_s
        self.acks: list[float] = []
        self.failures: list[str] = []
        self._stopping = threading.Event()

    def run(self) -> None:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 0,
                             "message.timeout.ms": 120_000})

        def delivered(err: Any, _msg: Any) -> None:
            if err is None:
                self.acks.append(time.monotonic())
            else:
                self.failures.append(str(err))

        while not self._stopping.is_set():
            producer.produce(self.topic, b"steady", callback=delivered)
            producer.poll(self.interval_s)
        producer.flush(30)

    def stop(self) -> None:
        self._stopping.set()
        self.join(60)

    def longest_gap(self, start: float, end: float) -> float:
        """The longest stretch of [start, end] without a delivery."""
        times = [start] + [t for t in self.acks if start < t < end] + [end]
        return max(b - a for a, b in zip(times, times[1:]))


class ListenerProbe(threading.Thread):
    """ApiVersions round trips to one listener; the longest time between two answers."""

    def __init__(self, host: str, port: int, *, interval_s: float = 0.1) -> None:
        super().__init__(daemon=True, name=f"probe-{port}")
        self.host, self.port, self.interval_s = host, port, interval_s
        self.longest_gap_s = 0.0
        self._stopping = threading.Event()

    def run(self) -> None:
        last = time.monotonic()
        while not self._stopping.is_set():
            if api_versions_round_trip(self.host, self.port, timeout=30.0):
                now = time.monotonic()
                self.longest_gap_s = max(self.longest_gap_s, now - last)
                last = now
            self._stopping.wait(self.interval_s)

    def stop(self) -> None:
        self._stopping.set()
        self.join(60)


def run_bulk_create(node: Any, *, partitions: int = 9999, topic: str = "bulk",
                    steady_topic: str = "steady", deadline_s: float = 600.0,
                    settle_s: float = 2.0, sample_size: int = 100) -> BulkCreateReport:
    """Run the scenario against ``node`` (see the module docstring) and report what was seen."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    report = BulkCreateReport(partitions)
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(steady_topic, 1, 1)])[steady_topic].result(60)
    steady = SteadyProducer(node.bootstrap, steady_topic)
    probes = [ListenerProbe(node.host, node.port),
              ListenerProbe(node.host, node.controller_port)]
    steady.start()
    for p in probes:
        p.start()
    try:
        deadline = time.monotonic() + deadline_s
        # Let the steady producer get going before the bulk request.
        while not steady.acks and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(settle_s)
        for p in probes:
            p.longest_gap_s = 0.0  # start-up does not count
        started = time.monotonic()
        future = admin.create_topics([NewTopic(topic, partitions, 1)], request_timeout=120,
                                     operation_timeout=120)[topic]
        try:
            future.result(deadline_s)
            report.create_s = time.monotonic() - started
        except Exception as exc:  # reported, and the caller asserts on it
            report.create_error = str(exc)
            return report
        # Every partition's log directory, then one record to a sample of the partitions (a
        # partition stores it only once it is served; the client retries until then).
        data_dir = Path(node.data_dir)
        prefix = f"{topic}-"
        while time.monotonic() < deadline:
            made = sum(1 for name in os.listdir(data_dir) if name.startswith(prefix)
                       and name[len(prefix):].isdigit())
            if made >= partitions:
                report.all_logs_s = time.monotonic() - started
                break
            time.sleep(0.5)
        sample = sorted(set(range(0, partitions, max(1, partitions // sample_size))) | {partitions - 1})
        writer = Producer({"bootstrap.servers": node.bootstrap, "acks": "all", "linger.ms": 5,
                           "message.timeout.ms": int(max(1.0, deadline - time.monotonic()) * 1000)})
        pending = [len(sample)]

        def written(err: Any, _msg: Any) -> None:
            pending[0] -= 1
            if err is not None:
                report.write_failures += 1

        for i in sample:
            writer.produce(topic, b"bulk", partition=i, callback=written)
        while pending[0] > 0 and time.monotonic() < deadline:
            writer.poll(0.2)
        writer.flush(max(0.0, deadline - time.monotonic()))
        report.sample_written = len(sample) - pending[0] - report.write_failures
        if pending[0] == 0 and report.write_failures == 0:
            report.sample_written_s = time.monotonic() - started
        ended = time.monotonic()
        report.longest_ack_gap_s = steady.longest_gap(started, ended)
    finally:
        for p in probes:
            p.stop()
        steady.stop()
    report.steady_acks = len(steady.acks)
    report.steady_failures = list(steady.failures)
    report.broker_probe_gap_s = probes[0].longest_gap_s
    report.controller_probe_gap_s = probes[1].longest_gap_s
    return report


__all__ = ["BulkCreateReport", "ListenerProbe", "SteadyProducer", "run_bulk_create"]
