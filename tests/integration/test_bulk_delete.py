"""Deleting a topic of 2,000 partitions from a running node (issue 27, defect 4).

DeleteTopics is answered, the node never fences itself, a steady acks=all producer on another
topic keeps being acknowledged, and the partition directories are renamed at once and gone once
file.delete.delay.ms (set low here) has passed, each removal logged. The longest pause of the
steady producer is printed; its bound (1 s, at 10,000 partitions) is checked by
``benchmarks/delete_10k.py``, not here, as a timing target.
"""

from __future__ import annotations

import pytest

from kafkapy.testing.bulk_delete import run_bulk_delete
from kafkapy.testing.node import KafkaNode

pytest.importorskip("confluent_kafka")

PARTITIONS = 2000
DELETE_DELAY_MS = 3000
DEADLINE_S = 240.0  # generous bound on a shared 2-core box; the run takes well under a minute


@pytest.mark.timeout(DEADLINE_S + 120)
def test_deleting_a_large_topic_keeps_the_node_serving(tmp_path):
    overrides = {"log.segment.delete.delay.ms": str(DELETE_DELAY_MS)}
    with KafkaNode(tmp_path / "node", startup_timeout=60, overrides=overrides) as node:
        report = run_bulk_delete(node, partitions=PARTITIONS, deadline_s=DEADLINE_S)
        print(f"\nbulk delete: {report.as_dict()}")
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        brokers = admin.describe_cluster(request_timeout=30).result(60).nodes
        topics = set(admin.list_topics(timeout=30).topics)
        node.stop()  # a clean stop: the whole log is on disk before it is read
        node_log = node.log_path.read_text(errors="replace")

    assert report.error is None, report.error
    assert report.delete_s is not None
    assert report.renamed_s is not None, f"live partition dirs were left: {report}"
    assert report.gone_s is not None, f"renamed dirs were not removed: {report}"
    # Not before file.delete.delay.ms: a fetch still reading them could finish.
    assert report.gone_s >= DELETE_DELAY_MS / 1000.0
    assert report.steady_acks > 0 and report.steady_failures == []
    assert "doomed" not in topics and "steady" in topics
    # The node never fenced itself, nor did its controller fence it.
    assert "fencing ourselves" not in node_log
    assert "Fenced broker" not in node_log
    assert "lost contact with the controllers" not in node_log
    assert [b.id for b in brokers] == [1]
    # Each removal has its line; the checkpoints were rewritten in passes, not per partition.
    assert node_log.count("Deleted log for partition doomed-") == PARTITIONS
    passes = node_log.count("Offset checkpoints rewritten after")
    assert 1 <= passes < 50
