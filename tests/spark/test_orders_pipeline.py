"""The worked example (examples/orders_cdc) end to end: exact totals after a kill and a restart.

The pipeline runs as its own process, as a user runs it, with the kafkapy source and sink on
local[2]. It is killed with SIGKILL in the middle of the stream while orders keep arriving, then
restarted from its checkpoint with an availableNow trigger. Both outputs must then hold exactly
the totals computed from the change stream in Python: no change lost, none counted twice. It runs
once more on Spark's built-in connector (--connector kafka, loaded with spark.jars.packages).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import wait_for
from kafkapy.testing import spark_connector

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "orders_cdc"
sys.path.insert(0, str(EXAMPLE))

import orders  # noqa: E402


def start_pipeline(node, topics: tuple[str, str], ckpt: Path, out: Path, trigger: str,
                   log: Path, connector: str = "kafkapy") -> subprocess.Popen:
    cmd = [sys.executable, str(EXAMPLE / "pipeline.py"), "--bootstrap", node.bootstrap,
           "--orders-topic", topics[0], "--view-topic", topics[1], "--checkpoint", str(ckpt),
           "--out", str(out), "--trigger", trigger, "--max-offsets-per-trigger", "500",
           "--connector", connector]
    if connector == "kafka":
        # The pipeline sets spark.jars.packages itself; Ivy's cache is the one `make tools` filled.
        settings = spark_connector.spark_conf()
        cmd += ["--spark-conf", f"spark.jars.ivy={settings['spark.jars.ivy']}",
                "--spark-conf", f"spark.jars.ivySettings={settings['spark.jars.ivySettings']}"]
    with open(log, "ab") as f:
        return subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)


def committed_batches(ckpt: Path) -> int:
    commits = ckpt / "commits"
    return len([p for p in commits.iterdir() if p.name.isdigit()]) if commits.exists() else 0


def test_pipeline_totals_are_exact_after_a_kill_and_a_restart(spark, node, kafka, tmp_path) -> None:
    topics = (kafka.topic("orders", 3), kafka.topic("customer-view", 1, {"cleanup.policy": "compact"}))
    ckpt, out, log = tmp_path / "checkpoint", tmp_path / "view", tmp_path / "pipeline.log"
    changes = orders.take(0, 4000)
    orders.produce(node.bootstrap, topics[0], changes[:2000])

    first = start_pipeline(node, topics, ckpt, out, "1s", log)
    try:
        wait_for(lambda: committed_batches(ckpt) >= 2 or first.poll() is not None,
                 "two micro-batches", timeout=240)
        assert first.poll() is None, log.read_text()[-3000:]
        orders.produce(node.bootstrap, topics[0], changes[2000:3000])  # while it runs
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
    stopped_at = committed_batches(ckpt)
    orders.produce(node.bootstrap, topics[0], changes[3000:])

    run_to_end(node, topics, ckpt, out, log, "kafkapy")
    assert committed_batches(ckpt) > stopped_at

    assert_outputs_exact(spark, kafka, topics[1], out, changes)


def run_to_end(node, topics, ckpt: Path, out: Path, log: Path, connector: str) -> None:
    """One availableNow run of the pipeline, bounded."""
    run = start_pipeline(node, topics, ckpt, out, "available-now", log, connector)
    try:
        assert run.wait(timeout=420) == 0, log.read_text()[-3000:]
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait(timeout=30)


# Two pipeline processes, each a Spark JVM that resolves the connector from Ivy's cache.
@pytest.mark.timeout(900)
def test_pipeline_with_the_built_in_connector_resumes_exactly(spark, node, kafka, tmp_path) -> None:
    """The same pipeline on format("kafka"), loaded with spark.jars.packages: an availableNow run,
    more changes, and a second run from the checkpoint give exactly the totals."""
    topics = (kafka.topic("orders-pkg", 3), kafka.topic("customer-view-pkg", 1, {"cleanup.policy": "compact"}))
    ckpt, out, log = tmp_path / "checkpoint", tmp_path / "view", tmp_path / "pipeline.log"
    changes = orders.take(0, 1500)
    orders.produce(node.bootstrap, topics[0], changes[:1000])
    run_to_end(node, topics, ckpt, out, log, "kafka")
    first_batches = committed_batches(ckpt)
    assert first_batches >= 2  # 1000 changes at 500 a trigger
    assert "spark-sql-kafka-0-10_2.13" in log.read_text()  # Ivy resolved the connector
    orders.produce(node.bootstrap, topics[0], changes[1000:])
    run_to_end(node, topics, ckpt, out, log, "kafka")
    assert committed_batches(ckpt) > first_batches
    assert_outputs_exact(spark, kafka, topics[1], out, changes)


def assert_outputs_exact(spark, kafka, view_topic: str, out: Path, changes: list[dict]) -> None:
    expected = orders.expected_view(changes)
    # The compacted view topic: each customer's latest record is its current totals.
    view = {}
    for record in kafka.consume(view_topic, 1):
        view[record.key.decode()] = json.loads(record.value)
    assert view == expected
    # The Parquet history: each customer's row from its latest micro-batch is the same.
    latest: dict[str, tuple[int, dict]] = {}
    for row in spark.read.parquet(str(out)).collect():
        if row.customer not in latest or row.batch_id > latest[row.customer][0]:
            latest[row.customer] = (row.batch_id, {"orders": row.orders, "amount_cents": row.amount_cents,
                                                   "changes": row.changes})
    assert {c: v for c, (_, v) in latest.items()} == expected
