"""Kafka Streams with processing.guarantee=exactly_once_v2 (issue 21's Streams acceptance).

StreamsSum.java re-keys numbered input records into buckets (a repartition topic) and keeps a
running count and sum per bucket (a state store and its changelog topic), writing every update.
On a kafkapy 3+3 cluster (RF 3, min.insync 2) the test kill -9s the broker that is the
transaction coordinator of the app's producer while the app runs (the app must carry on, not
die), starts it again, then kill -9s the app itself and restarts it. read_committed must show
each bucket's updates as counts 1, 2, ... c without gap or repeat, ending at the bucket's true
total, and what the run left behind (`streams.build_view`: per bucket the output's count shape
and final value, the changelog's record count and final value, the repartition topic's records;
the input offsets the app committed) must be exactly `streams.expected_view`.

With KAFKAPY_EOS_ON_APACHE_KAFKA=1 the same app with the same faults runs on Apache Kafka 4.4 (a
single JVM node, so its broker kill is a full outage) and its view must equal kafkapy's.
"""

from __future__ import annotations

import uuid

import pytest

from kafkapy.testing.eos import workload
from kafkapy.testing.eos.chaos import SERVICE_KILL, Fault
from kafkapy.testing.eos.streams import StreamsRun, expected_view, read_view, view_differences
from kafkapy.testing.eos.targets import start_target
from tests.integration.helpers import eos_targets

RECORDS = 3000
PARTITIONS = 3
BUCKETS = 7
# The coordinator's broker dies a third of the way in, the app two thirds of the way in.
SCHEDULE = [Fault(RECORDS // 3, "txn-coordinator"), Fault(2 * RECORDS // 3, SERVICE_KILL)]
APACHE_KAFKA = eos_targets("apache-kafka")

pytestmark = pytest.mark.timeout(300)


def run_streams(target, tmp_path):
    """Seed fresh topics on ``target``, run the app through `SCHEDULE`; (summary, view read back)."""
    tag = uuid.uuid4().hex[:6]
    source, sink = f"streams-in-{tag}", f"streams-out-{tag}"
    workload.create_topics(target.bootstrap, [source, sink], partitions=PARTITIONS,
                           replication=target.replication, min_isr=target.min_isr)
    workload.seed_input(target.bootstrap, source, partitions=PARTITIONS, count=RECORDS)
    replication = target.replication if target.replication > 1 else None
    run = StreamsRun(target.bootstrap, source, sink, records=RECORDS, buckets=BUCKETS, workdir=tmp_path,
                     schedule=SCHEDULE, target=target, partitions=PARTITIONS, replication=replication,
                     deadline_s=180)
    summary = run.run()
    print(f"{target.name}: {summary.line()}")
    return summary, read_view(target.bootstrap, run.app_id, source, sink)


@pytest.fixture(scope="module")
def kafkapy_run(tmp_path_factory):
    """The app's run on a kafkapy 3+3 cluster (one cluster for the module)."""
    workdir = tmp_path_factory.mktemp("kafkapy-cluster")
    cluster = start_target("kafkapy-cluster", workdir / "cluster")
    try:
        yield run_streams(cluster, workdir)
    finally:
        cluster.close()


def assert_exactly_once(summary, seen) -> None:
    check = summary.check
    assert (summary.broker_kills, summary.app_kills) == (1, 1), summary.line()
    assert summary.unexpected_exits == 0, summary.line()  # a broker kill must not kill Streams
    assert check["exactly_once"], f"{summary.line()}\n{check['buckets']}"
    assert check["records"] == RECORDS  # one committed update per input, none twice
    # The killed app's open transaction was aborted, and read_uncommitted still shows its records.
    assert check["uncommitted_records"] >= RECORDS
    differences = view_differences(expected_view(RECORDS, BUCKETS, PARTITIONS), seen["view"])
    assert not differences, "\n".join([summary.line(), "expected != seen:", *differences])


def test_streams_on_a_cluster_survives_a_coordinator_broker_kill_and_an_app_kill(kafkapy_run):
    summary, seen = kafkapy_run
    assert "txn-coordinator" in summary.broker_kill_log[0], summary.broker_kill_log
    assert_exactly_once(summary, seen)
    assert seen["records"] == {"output": RECORDS, "changelog": RECORDS, "repartition": RECORDS}


@pytest.mark.parametrize("name", APACHE_KAFKA)
def test_apache_kafka_gives_the_same_output(name, kafkapy_run, tmp_path):
    _, on_kafkapy = kafkapy_run
    target = start_target(name, tmp_path / name)
    try:
        summary, on_kafka = run_streams(target, tmp_path)
    finally:
        target.close()
    assert_exactly_once(summary, on_kafka)
    differences = view_differences(on_kafka["view"], on_kafkapy["view"])
    assert not differences, "\n".join(["Apache Kafka != kafkapy:", *differences])
    assert on_kafka["records"] == on_kafkapy["records"]
