"""The benchmark report reads against every broker: a column each, and the first broker's ratio to
each of the others (kafkapy/apache-kafka and kafkapy/tansu)."""

from benchmarks import report


def _result(brokers):
    runs = []
    for rep in range(2):
        for broker, mb_s, p99 in zip(brokers, (100.0, 50.0, 200.0), (2.0, 4.0, 1.0)):
            runs.append({"workload": "produce-1k", "broker": broker, "rep": rep,
                         "metrics": {"mb_s": mb_s, "msgs_s": mb_s * 1000, "cpu_s_per_gb": 1.0,
                                     "peak_rss_mb": 100.0}})
            runs.append({"workload": "latency", "broker": broker, "rep": rep,
                         "metrics": {"p50_ms": p99 / 2, "p99_ms": p99}})
    summary = report.summarize(runs, brokers)
    for name, kind in (("produce-1k", "produce"), ("latency", "latency")):
        for slot in summary[name].values():
            slot["_meta"] = {"kind": kind, "size": 1024}
    return {"brokers_order": brokers, "summary": summary, "brokers": {b: "managed" for b in brokers},
            "meta": {"started": "now", "repetitions": 2, "quick": True, "git": {"commit": "abc"},
                     "host": {"cpus": 2}, "elapsed_s": 1.0}}


def test_three_brokers_get_a_column_each_and_two_ratio_columns():
    md = report.markdown(_result(["kafkapy", "apache-kafka", "tansu"]))
    assert "| workload | kafkapy | apache-kafka | tansu | kafkapy/apache-kafka | kafkapy/tansu |" in md
    assert "| produce-1k | 100 | 50.0 | 200 | 2.00× | 0.50× |" in md
    assert "| p99 ms | 2.00 | 4.00 | 1.00 | 0.50× | 2.00× |" in md


def test_one_broker_has_no_ratio_columns():
    md = report.markdown(_result(["kafkapy"]))
    assert "(one broker only: no ratios)" in md
    assert "| workload | kafkapy |" in md


def test_comparison_gives_ratios_only_where_both_brokers_have_a_number():
    lines = report.broker_comparison([
        ("RF=1 acks=1, MB/s", {"kafkapy": 120.0, "apache-kafka": 60.0, "tansu": 240.0}),
        ("RF=3 acks=all, MB/s", {"kafkapy": 40.0, "apache-kafka": 50.0, "tansu": "n/a: no replication"}),
        ("broker restart, ms", {"kafkapy": 640.0}),
    ], ["kafkapy", "apache-kafka", "tansu"])
    assert lines[0] == "| metric | kafkapy | apache-kafka | tansu | kafkapy/apache-kafka | kafkapy/tansu |"
    assert lines[1] == "|---|---:|---:|---:|---:|---:|"
    assert lines[2] == "| RF=1 acks=1, MB/s | 120 | 60.00 | 240 | 2.00× | 0.50× |"
    assert lines[3] == "| RF=3 acks=all, MB/s | 40.00 | 50.00 | n/a: no replication | 0.80× | – |"
    assert lines[4] == "| broker restart, ms | 640 | – | – | – | – |"


def test_load_range_of_no_samples_is_unknown():
    assert report.load_range([]) == "?"
    assert report.load_range([2.51, 0.3, 1.0]) == "0.3–2.5"
