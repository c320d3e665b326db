"""The transactions benchmark: its workloads run as a set, its report reads transactional against
idempotent per broker, and a broker without transactions shows why instead of hanging the run."""

import socket

from benchmarks import report
from benchmarks.txn import run_txn_client
from benchmarks.workloads import Volumes, all_workloads, select

BROKERS = ["kafkapy", "apache-kafka", "tansu"]
UNSUPPORTED = "unsupported: init_transactions() _TIMED_OUT after 10.0 s (limit 10 s): Timed out"


def _result(kafkapy_txn: dict) -> dict:
    idem = {"kafkapy": 200.0, "apache-kafka": 100.0, "tansu": 80.0}
    txn = {"apache-kafka": 50.0, "tansu": 60.0}
    runs = []
    for broker in BROKERS:
        runs.append({"workload": "txn-idempotent-produce-1k-p1", "broker": broker, "rep": 0,
                     "metrics": {"mb_s": idem[broker], "msgs_s": idem[broker] * 1000, "status": "ok"}})
        metrics = kafkapy_txn if broker == "kafkapy" else {
            "mb_s": txn[broker], "msgs_s": txn[broker] * 1000, "commit_p50_ms": 4.0,
            "commit_p99_ms": 8.0, "status": "ok"}
        runs.append({"workload": "txn-produce-1k-p1", "broker": broker, "rep": 0, "metrics": metrics})
        runs.append({"workload": "txn-commit-latency", "broker": broker, "rep": 0,
                     "metrics": {k: v for k, v in metrics.items() if k.startswith(("commit", "status"))}})
    summary = report.summarize(runs, BROKERS)
    for name, kind in (("txn-idempotent-produce-1k-p1", "idempotent-produce"),
                       ("txn-produce-1k-p1", "txn-produce"), ("txn-commit-latency", "txn-latency")):
        for slot in summary[name].values():
            slot["_meta"] = {"kind": kind, "size": 1024}
    return {"brokers_order": BROKERS, "summary": summary, "brokers": {b: "managed" for b in BROKERS},
            "meta": {"started": "now", "repetitions": 1, "quick": True, "git": {"commit": "abc"},
                     "host": {"cpus": 2}, "elapsed_s": 1.0}}


def test_only_txn_selects_the_idempotent_transactional_and_latency_workloads():
    names = [w.name for w in select(all_workloads(), "txn")]
    assert names == ["txn-idempotent-produce-1k-p1", "txn-produce-1k-p1", "txn-commit-latency"]


def test_quick_volumes_are_a_tenth_of_the_default():
    quick, full = Volumes.quick(), Volumes()
    assert quick.txn_records * 10 == full.txn_records
    assert quick.txn_commits < full.txn_commits
    assert quick.txn_records % 1000 == 0  # whole 1,000-record transactions


def test_report_gives_transactional_over_idempotent_per_broker_and_cross_broker_ratios():
    md = report.markdown(_result({"mb_s": 100.0, "msgs_s": 100_000.0, "commit_p50_ms": 2.0,
                                  "commit_p99_ms": 4.0, "status": "ok"}))
    assert "## Transactions: transactional against idempotent produce" in md
    assert "| idempotent, MB/s | 200 | 100 | 80.00 | 2.00× | 2.50× |" in md
    assert "| transactional, MB/s | 100 | 50.00 | 60.00 | 2.00× | 1.67× |" in md
    assert "| transactional / idempotent, MB/s | 0.50 | 0.50 | 0.75 | 1.00× | 0.67× |" in md
    assert "| commit_transaction() p50 ms | 2.00 | 4.00 | 4.00 | 0.50× | 0.50× |" in md


def test_a_broker_without_transactions_shows_why_once_and_gets_no_ratio():
    md = report.markdown(_result({"status": UNSUPPORTED}))
    assert f"| transactional, MB/s | {UNSUPPORTED} | 50.00 | 60.00 | – | – |" in md
    assert "| transactional / idempotent, MB/s | unsupported | 0.50 | 0.75 | – | – |" in md
    assert f"| commit_transaction() p50 ms | {UNSUPPORTED} | 4.00 | 4.00 | – | – |" in md
    # The idempotent figures of the same broker are still there.
    assert "| idempotent, MB/s | 200 | 100 | 80.00 | 2.00× | 2.50× |" in md
    assert "## Errors" not in md


def test_report_without_transactions_workloads_has_no_transactions_section():
    result = _result({"status": "ok"})
    result["summary"] = {}
    assert "Transactions" not in report.markdown(result)


def test_init_transactions_against_no_broker_answers_unsupported_within_its_limit():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = run_txn_client({"op": "txn-latency", "bootstrap": f"127.0.0.1:{port}", "topic": "t",
                          "partitions": 1, "size": 16, "transactions": 1, "init_timeout_s": 1.0,
                          "timeout_s": 20}, timeout=60)
    assert res["status"].startswith("unsupported: init_transactions()")
