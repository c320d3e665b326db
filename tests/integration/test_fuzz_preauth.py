"""CI's short pre-authentication campaign on SASL_SSL: seeded SASL conversations (real and
mutated PLAIN, SCRAM and OAUTHBEARER logins, made-up mechanisms, raw v0 tokens, requests before
logging in) and TLS garbage (random and corrupted ClientHellos, garbage records, plaintext Kafka
frames, stalled handshakes).

The node must serve no request but ApiVersions/SaslHandshake/SaslAuthenticate to a connection that
did not log in with a real user's credentials, log no traceback, keep answering the liveness
probe, keep RSS and descriptors flat, close every stalled handshake, and let a stock client log in
afterwards. The long run is `python -m kafkapy.testing.fuzz run --listener sasl_ssl` (docs/fuzzing.md).
"""

from __future__ import annotations

import json
import os

import pytest

from kafkapy.testing.fuzz.preauth import PreauthConfig, run_preauth_campaign

pytest.importorskip("confluent_kafka")
pytest.importorskip("trustme")

FRAMES = int(os.environ.get("KAFKAPY_FUZZ_PREAUTH_FRAMES", "2500"))
SEED = int(os.environ.get("KAFKAPY_FUZZ_PREAUTH_SEED", "20261127"))


def test_short_preauth_campaign_authenticates_no_one(tmp_path):
    cfg = PreauthConfig(frames=FRAMES, seed=SEED, listener="sasl_ssl", workers=8, time_budget_s=90.0,
                        out_dir=tmp_path / "fuzz", workdir=tmp_path / "node")
    summary = run_preauth_campaign(cfg, log=lambda line: None)
    brief = json.dumps({k: summary[k] for k in (
        "frames_sent", "frames_per_s", "problems", "findings", "controls", "crashes", "tracebacks",
        "unexpected_errors", "max_stall_s", "stalled_handshakes_closed_after_s",
        "stock_client_logins", "fuzzer_errors")}, default=str)[:4000]
    assert summary["frames_sent"] >= FRAMES, brief
    assert summary["problems"] == [], f"{brief}; summary {tmp_path / 'fuzz' / 'summary.json'}"
    # the campaign reached past the handshake: real logins were served, mutated ones refused
    assert summary["controls"].get("served", 0) > 0 and summary["answers"].get("authenticate", 0) > 0
    assert sum(n for case, n in summary["tls_garbage"].items()) > 0
