"""Deleting a topic of many partitions from a running node while a steady producer writes to
another topic, measured from the outside (issue 27: deleting 8,000 partitions stalled the node
for 140 s and it fenced itself).

:func:`run_bulk_delete` is the scenario; ``tests/integration/test_bulk_delete.py`` asserts on its
report and ``benchmarks/delete_10k.py`` records its numbers. Everything runs in threads of the
calling process against ``node`` (a ``KafkaNode``), bounded by the scenario's deadline:

* the big topic is made first (CreateTopics of up to 9,999 partitions, Kafka's per-request
  record limit, then CreatePartitions for the rest), and the scenario waits until every
  partition's log directory is on disk and a sample of partitions took a record;
* a steady producer (``bulk_create.SteadyProducer``: confluent-kafka, acks=all, one record every
  20 ms) writes to its own one-partition topic throughout, and ApiVersions probes watch the
  broker and the controller listeners (``bulk_create.ListenerProbe``);
* DeleteTopics of the big topic (confluent-kafka AdminClient); then the time until no partition
  directory of it has its live name any more (renamed for deletion), and until the renamed
  directories are gone too (after the node's file.delete.delay.ms).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafkapy.log import files
from kafkapy.testing.bulk_create import ListenerProbe, SteadyProducer

#: Partitions one CreateTopics may create (with its TopicRecord: Kafka's 10,000-record limit).
CREATE_LIMIT = 9999


@dataclass
class BulkDeleteReport:
    """What one run observed; times in seconds from the DeleteTopics request."""

    partitions: int
    setup_s: float | None = None  # making the big topic and its logs, before the clock starts
    delete_s: float | None = None  # the DeleteTopics answer arrived
    renamed_s: float | None = None  # no partition dir of the topic had its live name any more
    gone_s: float | None = None  # no dir of the topic was left at all
    error: str | None = None
    steady_acks: int = 0
    steady_failures: list[str] = field(default_factory=list)
    longest_ack_gap_s: float = 0.0  # between steady deliveries, from the request to the end
    broker_probe_gap_s: float = 0.0
    controller_probe_gap_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def topic_dirs(data_dir: Path, topic: str) -> tuple[int, int]:
    """(live partition dirs, dirs renamed for deletion) of ``topic`` in ``data_dir``."""
    live = deleting = 0
    for name in os.listdir(data_dir):
        tp = files.parse_dir_name(name)
        if tp is not None:
            live += tp[0] == topic
            continue
        special = files.parse_special_dir_name(name)
        # A long topic name may be cut in the delete name: match on the prefix.
        if special is not None and special[3] == files.DELETE_DIR_SUFFIX and topic.startswith(special[0]):
            deleting += 1
    return live, deleting


def make_topic(node: Any, topic: str, partitions: int, deadline: float, *,
               sample_size: int = 100) -> None:
    """Create ``topic`` with ``partitions`` partitions, wait for every log directory, and write
    one record to a sample of its partitions; raises on failure or past ``deadline``."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    first = min(partitions, CREATE_LIMIT)
    admin.create_topics([NewTopic(topic, first, 1)], request_timeout=120,
                        operation_timeout=120)[topic].result(max(1.0, deadline - time.monotonic()))
    data_dir = Path(node.data_dir)
    if partitions > first:
        # The new partitions are only accepted once the first ones are placed.
        while topic_dirs(data_dir, topic)[0] < first and time.monotonic() < deadline:
            time.sleep(0.5)
        admin.create_partitions([NewPartitions(topic, partitions)], request_timeout=120,
                                operation_timeout=120)[topic].result(max(1.0, deadline - time.monotonic()))
    while topic_dirs(data_dir, topic)[0] < partitions:
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {topic_dirs(data_dir, topic)[0]} of {partitions} logs of {topic}")
        time.sleep(0.5)
    sample = sorted(set(range(0, partitions, max(1, partitions // sample_size))) | {partitions - 1})
    writer = Producer({"bootstrap.servers": node.bootstrap, "acks": "all", "linger.ms": 5,
                       "message.timeout.ms": int(max(1.0, deadline - time.monotonic()) * 1000)})
    failures: list[str] = []
    for i in sample:
        writer.produce(topic, b"doomed", partition=i,
                       callback=lambda err, _m: failures.append(str(err)) if err else None)
    left = writer.flush(max(1.0, deadline - time.monotonic()))
    if left or failures:
        raise RuntimeError(f"writing a sample of {topic}: {left} unsent, failures {failures[:3]}")


def run_bulk_delete(node: Any, *, partitions: int = 10_000, topic: str = "doomed",
                    steady_topic: str = "steady", deadline_s: float = 600.0,
                    settle_s: float = 2.0, tail_s: float = 2.0) -> BulkDeleteReport:
    """Run the scenario against ``node`` (see the module docstring) and report what was seen.

    The node's file.delete.delay.ms (``log.segment.delete.delay.ms``) decides how long the
    renamed directories wait; the report's ``gone_s`` includes it.
    """
    from confluent_kafka.admin import AdminClient, NewTopic

    report = BulkDeleteReport(partitions)
    deadline = time.monotonic() + deadline_s
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(steady_topic, 1, 1)])[steady_topic].result(60)
    t0 = time.monotonic()
    try:
        make_topic(node, topic, partitions, deadline)
    except Exception as exc:  # reported, and the caller asserts on it
        report.error = f"setup: {exc}"
        return report
    report.setup_s = time.monotonic() - t0
    steady = SteadyProducer(node.bootstrap, steady_topic)
    probes = [ListenerProbe(node.host, node.port), ListenerProbe(node.host, node.controller_port)]
    steady.start()
    for p in probes:
        p.start()
    data_dir = Path(node.data_dir)
    try:
        while not steady.acks and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(settle_s)
        for p in probes:
            p.longest_gap_s = 0.0  # the set-up does not count
        started = time.monotonic()
        future = admin.delete_topics([topic], request_timeout=120, operation_timeout=120)[topic]
        try:
            future.result(max(1.0, deadline - time.monotonic()))
            report.delete_s = time.monotonic() - started
        except Exception as exc:
            report.error = f"DeleteTopics: {exc}"
            return report
        while time.monotonic() < deadline:
            live, deleting = topic_dirs(data_dir, topic)
            if live == 0 and report.renamed_s is None:
                report.renamed_s = time.monotonic() - started
            if live == 0 and deleting == 0:
                report.gone_s = time.monotonic() - started
                break
            time.sleep(0.1)
        time.sleep(tail_s)  # the removal's end is watched too
        report.longest_ack_gap_s = steady.longest_gap(started, time.monotonic())
    finally:
        for p in probes:
            p.stop()
        steady.stop()
    report.steady_acks = len(steady.acks)
    report.steady_failures = list(steady.failures)
    report.broker_probe_gap_s = probes[0].longest_gap_s
    report.controller_probe_gap_s = probes[1].longest_gap_s
    return report


__all__ = ["BulkDeleteReport", "make_topic", "run_bulk_delete", "topic_dirs"]
