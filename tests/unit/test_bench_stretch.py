"""benchmarks/stretch.py's arithmetic and table (the run itself needs root and network sites)."""

from __future__ import annotations

from benchmarks import stretch


def entry(mb: float, p99: float) -> dict:
    return {"throughput": {"mb_s": mb, "msgs_s": mb * 1000}, "latency": {"p50_ms": p99 / 2, "p99_ms": p99}}


def test_medians_per_broker_and_delay_and_ratios_against_the_first_broker():
    runs = {"kafkapy": {"5.0ms": [entry(10, 40), entry(14, 60), entry(12, 50)]},
            "apache-kafka": {"5.0ms": [entry(24, 25), entry(24, 25)]}}
    summary = stretch.summarize(runs)
    assert summary["kafkapy"]["5.0ms"]["mb_per_s"] == 12
    assert summary["kafkapy"]["5.0ms"]["p99_ms"] == 50
    table = stretch.markdown({"summary": summary, "git": {"commit": "abc"},
                              "args": {"delays": [5.0], "records": 10, "size": 1024, "latency_rate": 300}})
    assert "| 5.0ms | apache-kafka | 24.0 | 12.5 | 25.0 | 0.50 | 2.00 |" in table


def test_every_leader_is_in_the_first_site():
    assert all(replicas[0] == 1 for replicas in stretch.ASSIGNMENT)
    assert all(sorted(replicas) == [1, 2, 3] for replicas in stretch.ASSIGNMENT)
