"""kcat (the librdkafka CLI) against the broker: metadata listing and round trips."""

from __future__ import annotations

import json

from kafkapy.testing.clients import kcat_consume, kcat_produce, run_kcat
from kafkapy.testing.recordsets import BASE_TS, assert_same_records, b64, record, simple_records


def test_kcat_lists_metadata(cluster):
    topic = cluster.create_topic("kcat-meta", partitions=3)
    done = run_kcat(["-b", cluster.bootstrap, "-L", "-J", "-t", topic], timeout=30)
    assert done.returncode == 0, done.describe()
    md = json.loads(done.text)
    # Every broker, named by the address it advertises (one for a single node).
    assert sorted(b["name"] for b in md["brokers"]) == sorted(cluster.bootstrap.split(",")), md["brokers"]
    broker_ids = {b["id"] for b in md["brokers"]}
    (t,) = [t for t in md["topics"] if t["topic"] == topic]
    assert "error" not in t, t
    assert [p["partition"] for p in sorted(t["partitions"], key=lambda p: p["partition"])] == [0, 1, 2]
    for p in t["partitions"]:
        assert p["leader"] in broker_ids, p
        assert [r["id"] for r in p["replicas"]] == [p["leader"]], p
        assert [r["id"] for r in p["isrs"]] == [p["leader"]], p


def test_kcat_lists_all_topics(cluster):
    topics = {cluster.create_topic("kcat-all-a"), cluster.create_topic("kcat-all-b", partitions=2)}
    done = run_kcat(["-b", cluster.bootstrap, "-L", "-J"], timeout=30)
    assert done.returncode == 0, done.describe()
    listed = {t["topic"]: len(t["partitions"]) for t in json.loads(done.text)["topics"]}
    assert topics <= set(listed), (topics, sorted(listed))
    assert sorted(listed[t] for t in topics) == [1, 2]


def test_kcat_round_trip_with_keys_and_headers(cluster):
    topic = cluster.create_topic("kcat-rt")
    lines = [("k1", "hello"), ("k2", "wörld"), (None, "no key here"), ("k4", "tab-free value 4")]
    kcat_produce(cluster.bootstrap, topic, lines, headers=[("app", "kcat"), ("empty", "")])
    got = kcat_consume(cluster.bootstrap, topic, offset="beginning", count=len(lines))
    want = [record(None if k is None else k.encode(), v.encode(), headers=[("app", b"kcat"), ("empty", b"")])
            for k, v in lines]
    assert_same_records(want, got, first_offset=0, with_timestamp=False)
    # And another client sees the same bytes.
    assert_same_records(want, cluster.consume("kafka_python", topic, offset=0, end_offset=len(lines)),
                        first_offset=0, with_timestamp=False)


def test_kcat_reads_what_java_wrote(cluster):
    topic = cluster.create_topic("kcat-java")
    records = [record(f"j{i}".encode(), f"java value {i}".encode(), headers=[("n", str(i).encode())],
                      timestamp=1_600_000_000_000 + i) for i in range(20)]
    cluster.produce("java", topic, records, compression="gzip")
    got = kcat_consume(cluster.bootstrap, topic, offset=5, count=15)
    assert_same_records(records[5:], got, first_offset=5)
    assert [g["timestamp"] for g in got] == [r["timestamp"] for r in records[5:]]


def test_kcat_offset_flags(cluster):
    topic = cluster.create_topic("kcat-offsets")
    kcat_produce(cluster.bootstrap, topic, [(f"k{i}", f"v{i}") for i in range(10)])
    # -o -3: the last three records; -o end with -e: nothing.
    tail = kcat_consume(cluster.bootstrap, topic, offset=-3)
    assert [r["offset"] for r in tail] == [7, 8, 9]
    assert [r["value"] for r in tail] == [b64(f"v{i}".encode()) for i in (7, 8, 9)]
    assert kcat_consume(cluster.bootstrap, topic, offset="end") == []


def test_kcat_query_offset_by_timestamp(cluster):
    topic = cluster.create_topic("kcat-q")
    cluster.produce("confluent", topic, simple_records(10, prefix="q", ts_step=1000))
    done = run_kcat(["-b", cluster.bootstrap, "-Q", "-t", f"{topic}:0:{BASE_TS + 4500}"], timeout=30)
    assert done.returncode == 0, done.describe()
    assert f"{topic} [0] offset 5" in done.text, done.text
