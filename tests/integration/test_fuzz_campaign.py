"""CI's short fuzz campaign: 20,000 mutated frames with a fixed seed against a live node.

The node must not crash, log no traceback, answer the liveness probe within 1 s throughout, and
keep every acknowledged record and committed offset of the data ledger, before and after a clean
restart. The long campaign is `make fuzz` (docs/fuzzing.md). A failure names the reproducer file:
each failing frame as hex, to replay with `python -m kafkapy.testing.fuzz frame` or a raw socket.
"""

from __future__ import annotations

import json
import os

from kafkapy.testing.fuzz.campaign import CampaignConfig, run_campaign

FRAMES = int(os.environ.get("KAFKAPY_FUZZ_FRAMES", "20000"))
SEED = int(os.environ.get("KAFKAPY_FUZZ_SEED", "20261125"))


def test_short_campaign_finds_nothing(tmp_path):
    cfg = CampaignConfig(frames=FRAMES, seed=SEED, workers=8, time_budget_s=150.0,
                         replay_budget_s=15.0, out_dir=tmp_path / "fuzz", workdir=tmp_path / "node")
    summary = run_campaign(cfg, log=lambda line: None)
    where = f"summary {tmp_path / 'fuzz' / 'summary.json'}, reproducers {tmp_path / 'fuzz' / 'repro'}"
    brief = json.dumps({k: summary[k] for k in (
        "frames_sent", "frames_per_s", "crashes", "tracebacks", "max_stall_s", "unexpected_errors",
        "stalls_confirmed_by_replay", "ledger_after_campaign", "ledger_after_restart")},
        default=str)[:4000]
    assert summary["frames_sent"] >= FRAMES, f"sent only {summary['frames_sent']}: {brief}; {where}"
    assert summary["crashes"] == 0, f"{brief}; {where}"
    assert summary["tracebacks"] == 0, f"{brief}; {where}"
    assert summary["max_stall_s"] < 1.0, f"{brief}; {where}"
    assert summary["ledger_intact"], f"{brief}; {where}"
    assert summary["rss_flat"] and summary["fds_flat"], f"{brief}; {where}"
