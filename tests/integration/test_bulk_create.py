"""A 9,999-partition CreateTopics on one combined node does not stall it (issue 18).

The node must keep answering its own broker's heartbeats (it never fences itself), keep
acknowledging an acks=all producer on another topic, and end with a log for every partition of
the new topic and a sample of them taking records. The longest pause of the steady producer is printed; its bound (2 s) is checked
by ``benchmarks/bulk_create.py``, not here, as a timing target.
"""

from __future__ import annotations

import pytest

from kafkapy.testing.bulk_create import run_bulk_create
from kafkapy.testing.node import KafkaNode

pytest.importorskip("confluent_kafka")

PARTITIONS = 9999  # 1 TopicRecord + 9,999 PartitionRecords: Kafka's per-request record limit
DEADLINE_S = 600.0  # generous: on a shared 2-core box the files alone take a while


@pytest.mark.slow
@pytest.mark.timeout(DEADLINE_S + 120)
def test_bulk_create_keeps_the_node_serving(tmp_path):
    with KafkaNode(tmp_path / "node", startup_timeout=60) as node:
        report = run_bulk_create(node, partitions=PARTITIONS, deadline_s=DEADLINE_S)
        print(f"\nbulk create: {report.as_dict()}")
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        brokers = admin.describe_cluster(request_timeout=30).result(60).nodes
        node.stop()  # a clean stop: the whole log is on disk before it is read
        node_log = node.log_path.read_text(errors="replace")

    assert report.create_error is None, report.create_error
    assert report.all_logs_s is not None, f"not every partition got its log: {report}"
    assert report.sample_written_s is not None and report.write_failures == 0, \
        f"a sample of the partitions did not all take a record: {report}"
    assert report.steady_acks > 0 and report.steady_failures == []
    # The node never fenced itself, nor did its controller fence it.
    assert "fencing ourselves" not in node_log
    assert "Fenced broker" not in node_log
    assert "lost contact with the controllers" not in node_log
    assert [b.id for b in brokers] == [1]
    # Its logs were made in the background, not on the event loop.
    assert "partition log(s)" in node_log
