"""Transactions workloads: transactional against idempotent produce of the same records on the same
broker, and the latency of committing a transaction (issue 21).

Each runs `clients/txn_bench.py` in its own process with a deadline. A broker that cannot do
transactions gets an "unsupported: <error>" status within `init_timeout_s` rather than an error or
a hang, and the other brokers' runs go on.
"""

from __future__ import annotations

import json
from typing import Any

from benchmarks.workloads import (
    BENCH_DIR,
    KIB,
    RunContext,
    Workload,
    _answer,
    _deadline,
    create_topic,
    delete_topics,
    topic_name,
)
from kafkapy.testing.clients import run_process
from kafkapy.testing.node import _venv_python

TXN_CLIENT = BENCH_DIR / "clients" / "txn_bench.py"
# How long init_transactions() may take before a broker counts as unable to do transactions:
# Kafka creates __transaction_state on the first InitProducerId, which takes a second or two here.
INIT_TIMEOUT_S = 10.0
RECORDS_PER_TXN = 1000
LATENCY_RECORDS_PER_TXN = 10


def run_txn_client(job: dict, *, timeout: float) -> dict:
    """Run one job of the transactions client in its own process group; kill it at the deadline."""
    done = run_process([_venv_python(), str(TXN_CLIENT), json.dumps(job)], timeout=timeout,
                       cwd=BENCH_DIR / "clients")
    return _answer(done, f"txn client {job['op']}")


def _topic_workload(name: str, kind: str, description: str, partitions: int,
                    job: Any) -> Workload:
    """A workload on a fresh topic of `partitions` partitions; `job(ctx, topic)` -> (job, timeout)."""
    state: dict[str, str] = {}

    def setup(ctx: RunContext) -> None:
        state.clear()  # the same Workload object runs on every broker in turn
        state["topic"] = topic_name(ctx, name)
        create_topic(ctx, state["topic"], partitions)

    def run(ctx: RunContext) -> dict:
        spec, timeout = job(ctx, state["topic"])
        return run_txn_client({"bootstrap": ctx.broker.bootstrap, "topic": state["topic"],
                               "partitions": partitions, "init_timeout_s": INIT_TIMEOUT_S, **spec},
                              timeout=timeout)

    def teardown(ctx: RunContext) -> None:
        if "topic" in state:
            delete_topics(ctx, [state["topic"]])

    return Workload(name, kind, description, run, setup, teardown, size=KIB, partitions=partitions,
                    acks="all")


def txn_workloads(partitions: int = 1) -> list[Workload]:
    """In run order: idempotent produce, then the same records in transactions, then commit latency."""

    def throughput(op: str):
        def job(ctx: RunContext, topic: str) -> tuple[dict, float]:
            n = ctx.volumes.txn_records
            # Transactions add round trips per 1,000 records: a deadline twice the plain one.
            limit = 2 * _deadline(n, KIB) + INIT_TIMEOUT_S
            return ({"op": op, "count": n, "size": KIB, "per_txn": RECORDS_PER_TXN,
                     "timeout_s": limit}, limit + 30)
        return job

    def latency(ctx: RunContext, topic: str) -> tuple[dict, float]:
        n = ctx.volumes.txn_commits
        limit = 60.0 + n * 0.5 + INIT_TIMEOUT_S  # 500 ms per small transaction: far beyond healthy
        return ({"op": "txn-latency", "transactions": n, "per_txn": LATENCY_RECORDS_PER_TXN,
                 "size": KIB, "timeout_s": limit}, limit + 30)

    return [
        _topic_workload(f"txn-idempotent-produce-1k-p{partitions}", "idempotent-produce",
                        f"confluent-kafka idempotent produce (no transactions), 1 KiB values, "
                        f"acks=all, {partitions} partition(s)", partitions, throughput("idempotent")),
        _topic_workload(f"txn-produce-1k-p{partitions}", "txn-produce",
                        f"confluent-kafka transactional produce, {RECORDS_PER_TXN:,} records of 1 KiB "
                        f"per transaction, {partitions} partition(s)", partitions, throughput("txn")),
        _topic_workload("txn-commit-latency", "txn-latency",
                        f"small transactions (begin, {LATENCY_RECORDS_PER_TXN} × 1 KiB, commit), "
                        f"linger.ms=0: commit_transaction() and whole-transaction time",
                        partitions, latency),
    ]
