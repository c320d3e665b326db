"""ListOffsets (earliest, latest, by timestamp) as each client asks for it, and auto.offset.reset
when a fetch asks for an offset the log doesn't have."""

from __future__ import annotations

import pytest

from kafkapy.testing.recordsets import BASE_TS, simple_records

N = 10
# (query timestamp, offset of the first record with timestamp >= it, or None when there is none)
TIMESTAMP_QUERIES = [
    (BASE_TS - 60_000, 0),
    (BASE_TS, 0),
    (BASE_TS + 2_500, 3),
    (BASE_TS + 3_000, 3),
    (BASE_TS + 6_999, 7),  # the second batch starts at offset 5
    (BASE_TS + 9_000, 9),
    (BASE_TS + 9_001, None),
]


@pytest.fixture(scope="module")
def timestamped_topic(cluster):
    """Ten records, timestamps BASE_TS + 1000*i, in two batches (offsets 0-4 and 5-9)."""
    topic = cluster.create_topic("by-ts")
    records = simple_records(N, prefix="ts", ts_step=1000)
    cluster.produce("confluent", topic, records[:5])
    cluster.produce("confluent", topic, records[5:])
    return topic


@pytest.mark.parametrize("client", ["confluent", "kafka_python", "aiokafka"])
def test_list_offsets(cluster, timestamped_topic, client):
    res = cluster.run(client, "list_offsets", topic=timestamped_topic, partition=0,
                      timestamps=[ts for ts, _ in TIMESTAMP_QUERIES])
    assert res["earliest"] == 0
    assert res["latest"] == N
    assert dict(zip([ts for ts, _ in TIMESTAMP_QUERIES], res["by_timestamp"])) == dict(TIMESTAMP_QUERIES)


def test_list_offsets_empty_partition(cluster):
    topic = cluster.create_topic("empty")
    res = cluster.run("confluent", "list_offsets", topic=topic, partition=0, timestamps=[BASE_TS])
    assert (res["earliest"], res["latest"], res["by_timestamp"]) == (0, 0, [None])


@pytest.mark.parametrize("client", ["confluent", "kafka_python", "aiokafka", "java"])
def test_out_of_range_fetch_resets_to_earliest(cluster, client):
    topic = cluster.create_topic("reset")
    records = simple_records(5, prefix="reset")
    cluster.produce("confluent", topic, records)
    # Seek far past the end: the broker answers OFFSET_OUT_OF_RANGE and the client's
    # auto.offset.reset=earliest takes it back to offset 0.
    got = cluster.consume(client, topic, offset=1_000, auto_offset_reset="earliest", max_records=5,
                          timeout_s=10)
    assert [r["offset"] for r in got] == [0, 1, 2, 3, 4]
    assert [r["value"] for r in got] == [r["value"] for r in records]


def test_out_of_range_fetch_resets_to_latest(cluster):
    topic = cluster.create_topic("reset-latest")
    cluster.produce("confluent", topic, simple_records(5, prefix="old"))
    # With auto.offset.reset=latest the consumer jumps to the end: nothing old is delivered and
    # its position is the log end offset.
    got = cluster.run("java", "consume", topic=topic, offset=1_000, auto_offset_reset="latest",
                      end_offset=5, timeout_s=20)
    assert got["records"] == []
    assert got["position"] == 5, got


@pytest.mark.parametrize("client,policy", [("confluent", "error"), ("java", "none")])
def test_out_of_range_fetch_without_reset_policy_is_an_error(cluster, client, policy):
    topic = cluster.create_topic("reset-none")
    cluster.produce("confluent", topic, simple_records(3, prefix="n"))
    answer = cluster.driver(client, "consume", topic=topic, partition=0, offset=1_000,
                            auto_offset_reset=policy, max_records=1, timeout_s=10)
    assert not answer["ok"], f"expected an out-of-range error, got {answer.get('result')}"
    text = f"{answer['error']['name']} {answer['error']['message']}".lower()
    assert "out of range" in text or "offset_out_of_range" in text or "outofrange" in text, answer["error"]
