"""Ten thousand partitions on one combined node, made and restarted the way an operator meets them
(issue 18), on one node and one data dir so the partitions are made once:

* a 9,999-partition CreateTopics does not stall the node: it keeps answering its own broker's
  heartbeats (it never fences itself), keeps acknowledging an acks=all producer on another topic,
  and ends with a log for every partition of the new topic and a sample of them taking records.
  The longest pause of the steady producer is printed; its bound (2 s) is checked by
  ``benchmarks/bulk_create.py``, not here, as a timing target;
* the node, still serving those 10,000 partition logs (the new topic's 9,999 and the steady
  producer's one), is killed with SIGKILL: the restart recovers every one of them, reports its
  progress while it loads, and then listens. How long it takes is reported by
  ``benchmarks/restart_10k.py``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import pytest
from helpers import log_end

from kafkapy.testing.bulk_create import BulkCreateReport, run_bulk_create
from kafkapy.testing.node import KafkaNode

pytest.importorskip("confluent_kafka")

PARTITIONS = 9999  # 1 TopicRecord + 9,999 PartitionRecords: Kafka's per-request record limit
LOGS = PARTITIONS + 1  # and the steady producer's topic
DEADLINE_S = 600.0  # generous: on a shared 2-core box the files alone take a while


@dataclass
class BulkRun:
    """The node after the bulk create (killed with SIGKILL), and what was seen while it ran."""

    node: KafkaNode
    report: BulkCreateReport
    broker_ids: list[int]
    node_log: str


@pytest.fixture(scope="module")
def bulk(tmp_path_factory) -> Any:
    with KafkaNode(tmp_path_factory.mktemp("bulk") / "node", startup_timeout=600) as node:
        report = run_bulk_create(node, partitions=PARTITIONS, deadline_s=DEADLINE_S)
        print(f"\nbulk create: {report.as_dict()}")
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        brokers = admin.describe_cluster(request_timeout=30).result(60).nodes
        # The kill -9 the restart test recovers from. Every log line is already in the file: the
        # node's logging flushes each record.
        node.kill9()
        yield BulkRun(node, report, [b.id for b in brokers], node.log_path.read_text(errors="replace"))


# Either test may be the first to use the module's node, so either may pay for the bulk create.
@pytest.mark.slow
@pytest.mark.timeout(DEADLINE_S + 300)
def test_bulk_create_keeps_the_node_serving(bulk: BulkRun):
    report, node_log = bulk.report, bulk.node_log
    assert report.create_error is None, report.create_error
    assert report.all_logs_s is not None, f"not every partition got its log: {report}"
    assert report.sample_written_s is not None and report.write_failures == 0, \
        f"a sample of the partitions did not all take a record: {report}"
    assert report.steady_acks > 0 and report.steady_failures == []
    # The node never fenced itself, nor did its controller fence it.
    assert "fencing ourselves" not in node_log
    assert "Fenced broker" not in node_log
    assert "lost contact with the controllers" not in node_log
    assert bulk.broker_ids == [1]
    # Its logs were made in the background, not on the event loop.
    assert "partition log(s)" in node_log


@pytest.mark.slow
@pytest.mark.timeout(DEADLINE_S + 300)
def test_kill9_restart_of_10k_partitions_reports_progress_and_listens(bulk: BulkRun):
    node, report = bulk.node, bulk.report
    assert report.all_logs_s is not None and report.sample_written_s is not None, \
        f"the bulk create did not leave {LOGS} partition logs with records: {report}"
    since = node.log_path.stat().st_size
    started = time.monotonic()
    node.start()  # bounded by startup_timeout; benchmarks/restart_10k.py reports the time
    took = time.monotonic() - started
    out = node.log_path.read_bytes()[since:].decode("utf-8", "replace")
    assert f"Loaded {LOGS} logs in" in out and "unclean shutdown" in out, out[-3000:]
    if took > 10:  # progress lines at least every 5 s while loading
        assert f"/{LOGS} logs in" in out
    # The last partition is always in the sample that took one record each.
    assert log_end(node, "bulk", PARTITIONS - 1) == 1
