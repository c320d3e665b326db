"""benchmarks/links.py's arithmetic and table (the run itself starts two clusters and MM2)."""

from __future__ import annotations

import argparse

from benchmarks import links


def run(kind: str, copy: float, p99: float, first: float) -> dict:
    return {"replicator": kind, "first_record_s": first, "copy_records_s": copy, "copy_mb_s": copy / 2000,
            "lag_p50": p99 / 4, "lag_p99": p99, "lag_max": p99 * 2, "lag_p50_ms": p99 / 8, "lag_p99_ms": p99 / 2,
            "catch_up_s": 0.1}


def test_medians_per_replicator_and_the_ratios_of_link_to_mm2():
    runs = [run("link", 40000, 30, 0.5), run("link", 60000, 50, 0.7), run("mm2", 10000, 600, 15),
            run("mm2", 10000, 400, 17)]
    summary = links.summarize(runs)
    assert summary["link"]["copy_records_s"] == 50000 and summary["mm2"]["lag_p99"] == 500
    args = argparse.Namespace(records=10, size=512, partitions=4, rate=2000, seconds=5, reps=2)
    table = links.table(summary, args)
    assert "| link | 0.6 | 50000 |" in table
    assert "link / MM2: copy rate x5.00" in table


def test_percentiles_of_lag_samples():
    samples = [float(x) for x in range(100)]
    assert links.percentile(samples, 0.5) == 50 and links.percentile(samples, 0.99) == 99
    assert links.percentile([], 0.5) != links.percentile([], 0.5)  # NaN: no samples


def test_the_copy_rate_is_the_slope_between_ten_and_ninety_percent():
    progress = [(1.0, 5), (2.0, 100), (3.0, 500), (4.0, 950), (5.0, 1000)]
    assert links.copy_slope(progress, 1000) == (950 - 100) / (4.0 - 2.0)
    assert links.copy_slope([(1.0, 1000)], 1000) != links.copy_slope([(1.0, 1000)], 1000)  # NaN: one sample
