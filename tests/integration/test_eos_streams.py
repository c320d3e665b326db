"""Kafka Streams with processing.guarantee=exactly_once_v2 (issue 21's Streams acceptance).

StreamsSum.java re-keys numbered input records into buckets (a repartition topic) and keeps a
running count and sum per bucket (a state store and its changelog topic), writing every update.
The test kill -9s the app mid-run and restarts it; read_committed must then show each bucket's
updates as counts 1, 2, ... c without gap or repeat, ending at the bucket's true total.
`TARGETS` as in test_eos_harness.py: a kafkapy node, and Apache Kafka 4.4 with
KAFKAPY_EOS_ON_APACHE_KAFKA=1.
"""

from __future__ import annotations

import uuid

import pytest

from kafkapy.testing.eos import workload
from kafkapy.testing.eos.streams import StreamsRun
from kafkapy.testing.eos.targets import start_target
from tests.integration.helpers import eos_targets

TARGETS = eos_targets("apache-kafka", "kafkapy")
RECORDS = 3000
PARTITIONS = 3
BUCKETS = 7

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module", params=TARGETS)
def target(request, tmp_path_factory):
    started = start_target(request.param, tmp_path_factory.mktemp(request.param))
    try:
        yield started
    finally:
        started.close()


def test_a_stateful_streams_app_killed_mid_run_counts_every_input_once(target, tmp_path):
    tag = uuid.uuid4().hex[:6]
    source, sink = f"streams-in-{tag}", f"streams-out-{tag}"
    workload.create_topics(target.bootstrap, [source, sink], partitions=PARTITIONS,
                           replication=target.replication, min_isr=target.min_isr)
    workload.seed_input(target.bootstrap, source, partitions=PARTITIONS, count=RECORDS)
    replication = target.replication if target.replication > 1 else None
    summary = StreamsRun(target.bootstrap, source, sink, records=RECORDS, buckets=BUCKETS,
                         workdir=tmp_path, kills=1, replication=replication, deadline_s=150).run()
    print(summary.line())
    check = summary.check
    assert check["done"], f"{summary.line()}\n{check['buckets']}"
    assert check["exactly_once"], f"{summary.line()}\n{check['buckets']}"
    assert check["records"] == RECORDS  # one committed update per input, none twice
    assert check["uncommitted_records"] >= RECORDS
