"""The replication benchmark's table: kafkapy against Apache Kafka (and Tansu, which has no
replication) from the medians of interleaved runs."""

from benchmarks import replication as r


def _runs(rf1: list[float], rf3: list[float] | None) -> dict:
    out = {r.RF1: [{"mb_s": v} for v in rf1]}
    out[r.RF3] = [{"mb_s": v} for v in rf3] if rf3 is not None else []
    return out


def _latency(p50: float, replicated: bool = True) -> dict:
    lat = {r.RF1: {"p50_ms": p50 / 2, "p99_ms": p50}}
    if replicated:
        lat[r.RF3] = {"p50_ms": p50, "p99_ms": 10 * p50}
        lat[f"{r.RF3}-unloaded"] = {"p50_ms": p50 / 4, "p99_ms": p50}
    return lat


def test_medians_and_the_cost_of_replication_per_broker():
    summary = r.summarize({"kafkapy": _runs([100, 300, 200], [50, 70, 60])}, {"kafkapy": _latency(4.0)})
    s = summary["kafkapy"]
    assert (s["rf1_acks1_mb_s"], s["rf3_acksall_mb_s"]) == (200, 60)
    assert s["rf3_acksall_over_rf1_acks1"] == 0.3
    assert (s["acksall_p50_ms"], s["acksall_p99_ms"], s["acksall_unloaded_p50_ms"]) == (4.0, 40.0, 1.0)


def test_table_has_a_kafka_column_and_ratios_and_says_why_tansu_rows_are_empty():
    names = ["kafkapy", "apache-kafka", "tansu"]
    summary = r.summarize(
        {"kafkapy": _runs([200], [60]), "apache-kafka": _runs([100], [120]), "tansu": _runs([400], None)},
        {"kafkapy": _latency(4.0), "apache-kafka": _latency(2.0), "tansu": _latency(1.0, replicated=False)})
    lines = r.table(summary, names, 1000)
    assert lines[0] == "| metric | kafkapy | apache-kafka | tansu | kafkapy/apache-kafka | kafkapy/tansu |"
    assert "| RF=1, acks=1: produce MB/s | 200 | 100 | 400 | 2.00× | 0.50× |" in lines
    assert "| RF=3, acks=all: produce MB/s | 60.00 | 120 | n/a (no replication) | 0.50× | – |" in lines
    assert "| acks=all, idempotent, 1,000/s: p99 ms | 40.00 | 20.00 | n/a (no replication) | 2.00× | – |" in lines
    assert "| acks=1 RF=1, 1,000/s: p99 ms | 4.00 | 2.00 | 1.00 | 2.00× | 4.00× |" in lines


def test_a_broker_whose_runs_failed_shows_a_dash_not_a_ratio():
    summary = r.summarize({"kafkapy": _runs([200], [60]), "apache-kafka": _runs([], [])},
                          {"kafkapy": _latency(4.0), "apache-kafka": {}})
    lines = r.table(summary, ["kafkapy", "apache-kafka"], 1000)
    assert "| RF=3, acks=all: produce MB/s | 60.00 | – | – |" in lines
